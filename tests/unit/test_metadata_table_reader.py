"""The metadata table as readers see it, built with our writer on a data timeline written by
hand: deltacommits of data instants still in flight or gone are skipped, a compaction folds
the valid ones, archived instants count as completed, deletions remove files."""

from dbt.adapters.hudilite.table.format import metadata_record
from dbt.adapters.hudilite.table.metadata.reader import FILES, MetadataTableReader
from dbt.adapters.hudilite.table.metadata.table import data_instants
from dbt.adapters.hudilite.table.format import avro_metadata
from dbt.adapters.hudilite.table.metadata.writer import (COMPACTION_PLAN, FILES_GROUP, INIT_INSTANT, MAX_DELTA_COMMITS,
                                                         MetadataTableWriter, files_records)
from dbt.adapters.hudilite.table.storage.filesystem import Storage

T = [f"202611280800{i:05d}" for i in range(30)]  # 17-digit instant times, ascending


def reader(storage):
    completed, pending = data_instants(storage)
    return MetadataTableReader.of_timelines(storage, completed, min(completed | pending, default=None))


def data_instant(tmp_path, instant, state):
    hoodie = tmp_path / ".hoodie"
    hoodie.mkdir(exist_ok=True)
    (hoodie / f"{instant}.commit.requested").write_text("")
    if state != "requested":
        (hoodie / f"{instant}.inflight").write_text("")
    if state == "completed":
        (hoodie / f"{instant}.commit").write_text("{}")


def new_table(tmp_path):
    storage = Storage(str(tmp_path))
    (tmp_path / ".hoodie").mkdir()
    writer = MetadataTableWriter(storage)
    writer.create("t", {"d1": {"a_1-0-0_x.parquet": 10}})
    return storage, writer


def test_only_deltacommits_of_completed_data_instants_are_read(tmp_path):
    storage, writer = new_table(tmp_path)
    data_instant(tmp_path, T[1], "completed")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    data_instant(tmp_path, T[2], "inflight")  # its writer is still at work
    writer.deltacommit(T[2], files_records({"d2": {"c": 30}}, {}, ["d2"]))
    writer.deltacommit(T[3], files_records({"d3": {"e": 1}}, {}, ["d3"]))  # its data instant is gone
    data_instant(tmp_path, T[4], "completed")
    writer.deltacommit(T[4], files_records({}, {"d1": ["a_1-0-0_x.parquet"]}))
    seen = reader(storage)
    assert seen.partitions() == ["d1"]
    assert seen.files() == {"d1": {"b": 20}}
    data_instant(tmp_path, T[2], "completed")  # it publishes after all
    assert reader(storage).files() == {"d1": {"b": 20}, "d2": {"c": 30}}


def test_a_compaction_folds_what_is_valid_and_waits_for_writes_in_flight(tmp_path):
    storage, writer = new_table(tmp_path)
    for i in range(1, MAX_DELTA_COMMITS + 1):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
    writer.deltacommit(T[20], files_records({"d9": {"zombie": 1}}, {}, ["d9"]))  # never completes
    expected = {"d1": {"a_1-0-0_x.parquet": 10, **{f"f{i}": i for i in range(1, MAX_DELTA_COMMITS + 1)}}}
    assert writer.compact_if_due(reader(storage), data_in_flight=True) is None
    compacted = writer.compact_if_due(reader(storage), data_in_flight=False)
    assert compacted == T[20] + "001"
    names = [p.name for p in (tmp_path / ".hoodie" / "metadata" / "files").iterdir()]
    assert f"{FILES_GROUP}_0-0-0_{compacted}.hfile" in names
    after = reader(storage)
    assert after.files() == expected
    assert after.slices(FILES)[FILES_GROUP].logs == []
    data_instant(tmp_path, T[21], "completed")
    writer.deltacommit(T[21], files_records({"d1": {"g": 7}}, {}, ["d1"]))
    assert [n.split(".log.")[0] for n in reader(storage).slices(FILES)[FILES_GROUP].logs] == [f".{FILES_GROUP}_{compacted}"]
    assert reader(storage).files() == {"d1": {**expected["d1"], "g": 7}}


def test_instants_archived_off_the_metadata_timeline_count_as_completed(tmp_path):
    storage, writer = new_table(tmp_path)
    data_instant(tmp_path, T[1], "completed")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie"
    for name in [p.name for p in timeline.iterdir() if p.name.startswith("00000000000000010")]:
        (timeline / name).unlink()  # the bootstrap's deltacommit archived
    assert reader(storage).files() == {"d1": {"a_1-0-0_x.parquet": 10, "b": 20}}


def test_a_files_record_keeps_the_larger_size_and_partitions_come_and_go():
    older = metadata_record.fold_files(None, metadata_record.partition_list(["a", "b"]))
    newer = metadata_record.fold_files(older, metadata_record.partition_list(["c"], deleted=["a"]))
    assert metadata_record.listed(newer) == {"b": 0, "c": 0}
    assert metadata_record.partition_key("") == "." and metadata_record.partition_of_key(".") == ""


def test_a_second_compaction_cleans_and_archives_what_the_first_left(tmp_path):
    storage, writer = new_table(tmp_path)
    expected = {"a_1-0-0_x.parquet": 10}
    compactions = []
    for i in range(1, 2 * MAX_DELTA_COMMITS + 1):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}, ["d1"]))
        expected[f"f{i}"] = i
        compacted = writer.compact_if_due(reader(storage), data_in_flight=False)
        if compacted:
            compactions.append(compacted)
    assert len(compactions) == 2
    files = sorted(p.name for p in (tmp_path / ".hoodie" / "metadata" / "files").iterdir())
    assert not [n for n in files if "00000000000000010" in n]  # the bootstrap's slice is gone
    timeline = sorted(p.name for p in (tmp_path / ".hoodie" / "metadata" / ".hoodie").iterdir() if p.is_file())
    assert min(timeline) >= compactions[0] and "00000000000000010.deltacommit" not in timeline
    archived = list((tmp_path / ".hoodie" / "metadata" / ".hoodie" / "archived").iterdir())
    assert [p.name for p in archived] == [".commits_.archive.1_1-0-1"]
    assert reader(storage).files() == {"d1": expected}


def test_data_archival_waits_for_a_compaction_of_the_metadata_table(tmp_path):
    from dbt.adapters.hudilite.table.metadata.table import MetadataTable

    storage, writer = new_table(tmp_path)
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\nhoodie.table.metadata.partitions=files\n")
    table = MetadataTable(storage)
    data_instant(tmp_path, T[1], "completed")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    assert table.archivable_through() == ""  # no compaction yet: no data instant may go
    data_instant(tmp_path, T[2], "inflight")
    assert table.compact_now() is None  # not while a write is in flight
    (tmp_path / ".hoodie" / f"{T[2]}.commit").write_text("{}")
    assert table.compact_now() == T[1] + "001"
    assert table.archivable_through() == T[1]
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")
    assert table.archivable_through() is None  # no metadata table in use: no limit


def test_delete_blocks_carry_keys_and_the_ordering_value_hudi_0_15_needs():
    import io
    import struct

    import fastavro

    from dbt.adapters.hudilite.table.metadata.reader import DELETE_RECORD_LIST, delete_block_content, deleted_keys

    content = delete_block_content([("k1", "p"), ("k2", "")])
    assert deleted_keys(content) == ["k1", "k2"]
    version, length = struct.unpack_from(">ii", content)
    records = fastavro.schemaless_reader(io.BytesIO(content[8:8 + length]), fastavro.parse_schema(DELETE_RECORD_LIST), None)
    assert (version, [r["orderingVal"] for r in records["deleteRecordList"]]) == (3, [{"value": 0}, {"value": 0}])


def test_a_rollback_leaves_a_log_another_writer_made_under_a_name_the_dead_one_marked(tmp_path):
    from dbt.adapters.hudilite.table.format.instant import INFLIGHT, Instant
    from dbt.adapters.hudilite.table.format.timeline import Timeline
    from dbt.adapters.hudilite.table.storage.layout import marker_path
    from dbt.adapters.hudilite.table.transaction import rollback

    storage, writer = new_table(tmp_path)
    dead = T[1]
    data_instant(tmp_path, dead, "inflight")
    name = ".hoodie/metadata/files/.files-0000-0_00000000000000010.log.1_0-0-0"
    storage.write_bytes(marker_path(dead, name), b"")  # marked, then killed before creating it
    data_instant(tmp_path, T[2], "completed")
    writer.deltacommit(T[2], files_records({"d1": {"b": 20}}, {}, ["d1"]))  # takes that very name
    assert (tmp_path / name).exists()
    rollback(storage, Timeline(storage), Instant(dead, "commit", INFLIGHT))
    assert (tmp_path / name).exists()
    assert reader(storage).files() == {"d1": {"a_1-0-0_x.parquet": 10, "b": 20}}


def test_new_logs_follow_a_compaction_still_pending_and_a_java_bootstrap_base(tmp_path):
    storage, writer = new_table(tmp_path)
    data_instant(tmp_path, T[1], "completed")
    writer.deltacommit(T[1], files_records({"d1": {"b": 20}}, {}, ["d1"]))
    timeline = tmp_path / ".hoodie" / "metadata" / ".hoodie"
    plan = {"operations": [{"baseInstantTime": INIT_INSTANT, "deltaFilePaths": [], "dataFilePath": None,
                            "fileId": FILES_GROUP, "partitionPath": FILES, "metrics": None, "bootstrapFilePath": None}]}
    # A compaction that died after its plan.
    (timeline / f"{T[1]}001.compaction.requested").write_bytes(avro_metadata.encode(COMPACTION_PLAN, plan))
    data_instant(tmp_path, T[2], "completed")
    writer.deltacommit(T[2], files_records({"d1": {"c": 30}}, {}, ["d1"]))
    logs = sorted(p.name for p in (tmp_path / ".hoodie" / "metadata" / "files").iterdir() if ".log." in p.name)
    assert logs[-1].startswith(f".files-0000-0_{T[1]}001.log.1_")
    assert reader(storage).files() == {"d1": {"a_1-0-0_x.parquet": 10, "b": 20, "c": 30}}
    # A base Hudi's writer made when it built the metadata table on a table with commits: <X>010.
    folder = tmp_path / ".hoodie" / "metadata" / "files"
    java_base = f"{T[2]}010"
    (folder / f"files-0000-0_0-0-0_{java_base}.hfile").write_bytes((folder / "files-0000-0_0-0-0_00000000000000010.hfile").read_bytes())
    for suffix in (".requested", ".inflight", ""):
        (timeline / f"{java_base}.deltacommit{suffix}").write_text("{}" if not suffix else "")
    (timeline / f"{T[1]}001.compaction.requested").unlink()
    data_instant(tmp_path, T[3], "completed")
    writer.deltacommit(T[3], files_records({"d1": {"e": 1}}, {}, ["d1"]))
    assert any(n.startswith(f".files-0000-0_{java_base}.log.1_") for n in (p.name for p in folder.iterdir()))


def test_a_compaction_a_dead_writer_left_pending_is_finished_from_its_plan(tmp_path, monkeypatch):
    storage, writer = new_table(tmp_path)
    for i in range(1, 1 + MAX_DELTA_COMMITS):
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}))

    def killed(*args):
        raise KeyboardInterrupt("killed during the compaction")
    monkeypatch.setattr(MetadataTableWriter, "_compact", killed)
    try:
        writer.compact_if_due(reader(storage), data_in_flight=False)
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    pending = T[MAX_DELTA_COMMITS] + "001"
    assert reader(storage).timeline.pending() == {pending: "compaction"}
    for i in range(11, 13):  # logs written meanwhile join the slice the pending compaction starts
        data_instant(tmp_path, T[i], "completed")
        writer.deltacommit(T[i], files_records({"d1": {f"f{i}": i}}, {}))
    expected = {"a_1-0-0_x.parquet": 10, **{f"f{i}": i for i in range(1, 13)}}
    assert reader(storage).files() == {"d1": expected}
    assert writer.compact_if_due(reader(storage), data_in_flight=False) == pending
    after = reader(storage)
    assert after.timeline.pending() == {}
    assert after.files() == {"d1": expected}
    piece = after.slices(FILES)[FILES_GROUP]
    assert piece.base_instant == pending and len(piece.logs) == 2
