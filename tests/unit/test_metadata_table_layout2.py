"""The metadata table of a version 9 table (timeline layout 2), written by our writer on a data
timeline written by hand: Hudi 1.x's names (`<T>_<C>.deltacommit`, initializations at
`00000000000000000`, one log per deltacommit named after it), Avro metadata, slices by
completion time, compactions at reserved times, archival into the LSM history."""

from dbt.adapters.hudilite.table.format import avro_metadata, lsm_history
from dbt.adapters.hudilite.table.format import properties as props
from dbt.adapters.hudilite.table.format.instant import next_instant_time
from dbt.adapters.hudilite.table.metadata import record_index
from dbt.adapters.hudilite.table.metadata.reader import FILES
from dbt.adapters.hudilite.table.metadata.table import MetadataTable
from dbt.adapters.hudilite.table.metadata.timeline import HISTORY_DIR, instant_files
from dbt.adapters.hudilite.table.metadata.writer import (FILES_GROUP, MAX_DELTA_COMMITS, MetadataTableWriter,
                                                         files_records, metadata_properties)
from dbt.adapters.hudilite.table.storage.filesystem import Storage
from tests.unit.test_metadata_table_reader import reader

T = [f"202611280800{i:05d}" for i in range(60)]  # 17-digit instant times, ascending


def data_instant(tmp_path, instant, state):
    """A data instant on the version 9 table's timeline (`.hoodie/timeline`)."""
    timeline = tmp_path / ".hoodie" / "timeline"
    timeline.mkdir(parents=True, exist_ok=True)
    (timeline / f"{instant}.commit.requested").write_text("")
    if state != "requested":
        (timeline / f"{instant}.inflight").write_text("")
    if state == "completed":  # completed now
        (timeline / f"{instant}_{next_instant_time(None)}.commit").write_bytes(b"")


def mdt_timeline(tmp_path):
    return sorted(p.name for p in (tmp_path / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir() if p.is_file())


def new_table(tmp_path, reserved=None):
    storage = Storage(str(tmp_path))
    (tmp_path / ".hoodie" / "timeline").mkdir(parents=True)
    (tmp_path / ".hoodie" / "hoodie.properties").write_text(
        "hoodie.table.name=t\nhoodie.table.version=9\nhoodie.timeline.layout.version=2\n"
        "hoodie.table.metadata.partitions=files\n")
    writer = MetadataTableWriter(storage, reserved)
    writer.create("t", {"d1": {"a_1-0-0_x.parquet": 10}})
    return storage, writer


def test_the_bootstrap_and_deltacommits_carry_hudi_1x_names_and_avro_metadata(tmp_path):
    storage, writer = new_table(tmp_path)
    names = mdt_timeline(tmp_path)
    assert names[:2] == ["00000000000000000.deltacommit.inflight", "00000000000000000.deltacommit.requested"]
    assert names[2].startswith("00000000000000000_") and names[2].endswith(".deltacommit")
    properties = props.loads((tmp_path / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").read_text())
    assert properties == metadata_properties("t", 9) and properties["hoodie.table.version"] == "9"
    assert properties["hoodie.timeline.layout.version"] == "2" and properties["hoodie.archivelog.folder"] == "history"
    data_instant(tmp_path, T[1], "completed")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    data_instant(tmp_path, T[2], "inflight")  # its writer is still at work
    writer.deltacommit(T[2], files_records({"d2": {"c": 30}}, {}, ["d2"]))
    logs = sorted(p.name for p in (tmp_path / ".hoodie" / "metadata" / "files").iterdir() if ".log." in p.name)
    assert logs == [f".{FILES_GROUP}_{T[1]}.log.1_0-0-0", f".{FILES_GROUP}_{T[2]}.log.1_0-0-0"]
    done = [n for n in mdt_timeline(tmp_path) if n.startswith(T[1] + "_")]
    assert len(done) == 1
    completion = done[0].split("_")[1].split(".")[0]
    assert completion > T[1] and completion > names[2].split("_")[1].split(".")[0]
    body = avro_metadata.decode((tmp_path / ".hoodie" / "metadata" / ".hoodie" / "timeline" / done[0]).read_bytes())
    assert [s["path"] for s in body["partitionToWriteStats"][FILES]] == [f"files/{logs[0]}"]
    assert reader(storage).files() == {"d1": {"a_1-0-0_x.parquet": 10, "b": 20}}


def now():
    return next_instant_time(None)


def test_a_compaction_takes_a_reserved_time_and_a_log_that_completed_after_it_stays_in_the_new_slice(tmp_path):
    storage, writer = new_table(tmp_path, now)
    expected = {"a_1-0-0_x.parquet": 10}
    for i in range(1, MAX_DELTA_COMMITS + 1):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
        expected[f"f{i}"] = i
    first = writer.compact_if_due(reader(storage), data_in_flight=False)
    assert first > T[MAX_DELTA_COMMITS] and any(n.startswith(first + "_") and n.endswith(".commit")
                                                for n in mdt_timeline(tmp_path))
    base = f"{FILES_GROUP}_0-0-0_{first}.hfile"
    assert (tmp_path / ".hoodie" / "metadata" / "files" / base).exists()
    # Requested before the compaction, completed after it: its log belongs to the compaction's slice.
    data_instant(tmp_path, T[30], "completed")
    writer.deltacommit(T[30], files_records({"d1": {"late": 1}}, {}, ["d1"]))
    expected["late"] = 1
    piece = reader(storage).slices(FILES)[FILES_GROUP]
    assert (piece.base, piece.logs) == (base, [f".{FILES_GROUP}_{T[30]}.log.1_0-0-0"])
    assert reader(storage).files() == {"d1": expected}
    for i in range(41, 41 + MAX_DELTA_COMMITS):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
        expected[f"f{i}"] = i
    assert writer.compact_if_due(reader(storage), data_in_flight=False) > first
    files = sorted(p.name for p in (tmp_path / ".hoodie" / "metadata" / "files").iterdir())
    # The bootstrap's slice and the logs folded by the first compaction are cleaned; the late log
    # was folded by the second and stays with the slice it kept.
    assert not [n for n in files if "00000000000000000" in n or f"_{T[1]}." in n]
    assert f".{FILES_GROUP}_{T[30]}.log.1_0-0-0" in files
    assert reader(storage).files() == {"d1": expected}
    # What completed before the kept slice went into the LSM history, with its completion time.
    archived = lsm_history.read_history(storage, HISTORY_DIR)
    assert {e.instant for e in archived} == {"00000000000000000", *T[1:MAX_DELTA_COMMITS + 1]}
    assert all(e.completion and e.completion > e.instant for e in archived)
    assert not [n for n in mdt_timeline(tmp_path) if n.split("_")[0].split(".")[0] in {e.instant for e in archived}]
    assert reader(storage).files() == {"d1": expected}


def test_no_compaction_without_a_reserved_time_nor_while_a_write_is_in_flight(tmp_path):
    storage, writer = new_table(tmp_path)
    for i in range(1, MAX_DELTA_COMMITS + 1):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
    assert writer.compact_if_due(reader(storage), data_in_flight=False) is None
    writer.reserve_time = lambda: T[40]  # behind the timeline's times (a clock gone back)
    assert writer.compact_if_due(reader(storage), data_in_flight=False) is None
    writer.reserve_time = now
    assert writer.compact_if_due(reader(storage), data_in_flight=True) is None
    assert writer.compact_if_due(reader(storage), data_in_flight=False) is not None


def test_data_archival_waits_for_the_deltacommits_a_compaction_folded(tmp_path):
    storage, _ = new_table(tmp_path)
    table = MetadataTable(storage, now)
    data_instant(tmp_path, T[1], "completed")
    table.writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    assert table.archivable_through() == ""  # no compaction yet: no data instant may go
    data_instant(tmp_path, T[2], "inflight")
    assert table.compact_now() is None  # not while a write is in flight
    data_instant(tmp_path, T[2], "completed")
    table.writer.deltacommit(T[2], files_records({"d1": {"c": 30}}, {}, ["d1"]))
    assert table.compact_now() > T[2]
    assert table.archivable_through() == T[2]
    data_instant(tmp_path, T[3], "completed")  # requested before the compaction, completed after
    table.writer.deltacommit(T[3], files_records({"d1": {"e": 1}}, {}, ["d1"]))
    assert table.archivable_through() == T[2]


def test_a_marker_of_a_deltacommit_stands_for_its_completed_file_whatever_its_completion_time(tmp_path):
    storage, writer = new_table(tmp_path)
    marked = []
    data_instant(tmp_path, T[1], "inflight")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]), on_file=marked.append)
    files = [f for path in marked for f in instant_files(storage, path)]
    assert sorted(p.rsplit("/", 1)[1] for p in files if "/timeline/" in p) == sorted(
        n for n in mdt_timeline(tmp_path) if n.startswith(T[1]))
    assert any(p.endswith(f".{FILES_GROUP}_{T[1]}.log.1_0-0-0") for p in files)
    for path in files:
        storage.delete_file(path)
    assert not [n for n in mdt_timeline(tmp_path) if n.startswith(T[1])]


def test_record_index_logs_are_named_after_their_instant_and_its_bootstrap_takes_the_next_init_instant(tmp_path):
    _, writer = new_table(tmp_path)
    assert writer.record_index_init_instant(T[1]) == "00000000000000001"
    paths = record_index.log_paths(T[2], {}, 2, own_log=True)
    assert [p.rsplit("/", 1)[1].rsplit("_", 1)[0] for p in paths] == [
        f".record-index-0000-0_{T[2]}.log.1", f".record-index-0001-0_{T[2]}.log.1"]


def test_archived_instants_are_valid_and_a_dead_bootstrap_holds_back_neither_reads_nor_a_new_bootstrap(tmp_path):
    from dbt.adapters.hudilite.table.metadata.reader import Validity

    # An archived compaction at layout 2 has a time like a data instant's: older than the oldest
    # completed active instant, it is valid whatever the data table holds.
    valid = Validity(frozenset({T[20]}), frozenset({"00000000000000001"}), T[20], frozenset(), T[25])
    assert valid(T[10]) and not valid("00000000000000001") and not valid(T[30])
    storage, writer = new_table(tmp_path, now)
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (timeline / "00000000000000001.deltacommit.requested").write_text("")  # a record_index bootstrap that died
    for i in range(1, 2 * MAX_DELTA_COMMITS + 1):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
        writer.compact_if_due(reader(storage), data_in_flight=False)
    # Nothing archived past the pending instant (the files' bootstrap before it went); every file still listed.
    assert [e.instant for e in lsm_history.read_history(storage, HISTORY_DIR)] == ["00000000000000000"]
    assert reader(storage).files() == {"d1": {"a_1-0-0_x.parquet": 10, **{f"f{i}": i for i in range(1, 2 * MAX_DELTA_COMMITS + 1)}}}
    # The next bootstrap removes the dead one's files first, then takes the first free instant
    # (the archived one, as Hudi takes it).
    assert writer.record_index_init_instant(T[30]) == "00000000000000000"
    assert "00000000000000001.deltacommit.requested" not in mdt_timeline(tmp_path)


def test_an_archived_initialization_instant_is_taken_again_as_hudi_does(tmp_path):
    storage, writer = new_table(tmp_path, now)
    for i in range(1, 2 * MAX_DELTA_COMMITS + 1):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
        writer.compact_if_due(reader(storage), data_in_flight=False)
    assert "00000000000000000" in {e.instant for e in lsm_history.read_history(storage, HISTORY_DIR)}
    assert writer.record_index_init_instant(T[30]) == "00000000000000000"


def test_a_pending_compaction_over_partitions_we_do_not_keep_is_finished_for_ours(tmp_path):
    from dbt.adapters.hudilite.table.metadata.writer import COMPACTION_PLAN

    storage, writer = new_table(tmp_path, now)
    data_instant(tmp_path, T[1], "completed")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    log = f".{FILES_GROUP}_{T[1]}.log.1_0-0-0"
    plan = {"operations": [
        {"baseInstantTime": "00000000000000000", "deltaFilePaths": [log], "fileId": FILES_GROUP,
         "dataFilePath": f"{FILES_GROUP}_0-0-0_00000000000000000.hfile", "partitionPath": FILES, "metrics": None,
         "bootstrapFilePath": None},
        {"baseInstantTime": "00000000000000001", "deltaFilePaths": [".col-stats-0000-0_x.log.1_0-0-0"],
         "fileId": "col-stats-0000-0", "dataFilePath": None, "partitionPath": "column_stats", "metrics": None,
         "bootstrapFilePath": None}]}
    compaction = now()
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (timeline / f"{compaction}.compaction.requested").write_bytes(avro_metadata.encode(COMPACTION_PLAN, plan))
    assert writer.compact_if_due(reader(storage), data_in_flight=False) == compaction
    done = [n for n in mdt_timeline(tmp_path) if n.startswith(compaction + "_")]
    assert done and list(avro_metadata.decode((timeline / done[0]).read_bytes())["partitionToWriteStats"]) == [FILES]
    assert reader(storage).files() == {"d1": {"a_1-0-0_x.parquet": 10, "b": 20}}
