"""`format.lsm_history`: Hudi 1.x's timeline history (`.hoodie/timeline/history/`), read without
Spark. First a table Hudi 1.0.2's own writer archived (tests/fixtures/hudi-1x-tables/
make_archived_v8.py made it, and saved what Hudi's Java API reports of it), then small histories
written here for the cases a real archival rarely leaves behind."""

import io
import json
import zipfile
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.hudilite.table.errors import CorruptTableError
from dbt.adapters.hudilite.table.format.lsm_history import (HISTORY_DIR, HistoryEntry, clean_history, compact_history,
                                                            history_files, history_version, manifest_json,
                                                            read_history, write_history)
from dbt.adapters.hudilite.table.storage.filesystem import Storage
from dbt.adapters.hudilite.table.storage.layout import TMP_DIR

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hudi-1x-tables"
ARCHIVED_V8 = "v8_archived_history"
METADATA_HISTORY = ".hoodie/metadata/" + HISTORY_DIR


@pytest.fixture(scope="module")
def archived_v8(tmp_path_factory):
    """(Storage of the unzipped table, what Hudi reported of it)."""
    root = tmp_path_factory.mktemp("lsm")
    with zipfile.ZipFile(FIXTURES / f"{ARCHIVED_V8}.zip") as archive:
        archive.extractall(root)
    expected = json.loads((FIXTURES / f"{ARCHIVED_V8}.expected.json").read_text())
    return Storage(str(root / ARCHIVED_V8)), expected


def as_hudi_reports(entries):
    return [{"instant": e.instant, "completion": e.completion, "action": e.action} for e in entries]


def reported(instants):
    return [{k: i[k] for k in ("instant", "completion", "action")} for i in instants]


# ---- the table Hudi 1.0.2 archived -----------------------------------------------------------

def test_hudis_history_reads_as_hudis_archived_timeline(archived_v8):
    storage, expected = archived_v8
    assert (expected["hudi_version"], expected["table_version"], expected["timeline_layout_version"]) == ("1.0.2", 8, 2)
    assert all(i["state"] == "COMPLETED" for i in expected["archived"])
    entries = read_history(storage, HISTORY_DIR)
    assert as_hudi_reports(entries) == reported(expected["archived"])
    # Archival left the active timeline starting right after the history.
    assert entries[-1].instant < min(i["instant"] for i in expected["active"])


def test_hudis_metadata_table_history_reads_as_its_archived_timeline(archived_v8):
    storage, expected = archived_v8
    assert as_hudi_reports(read_history(storage, METADATA_HISTORY)) == reported(expected["metadata_table_archived"])


def test_hudis_history_has_both_layers_and_the_manifest_gives_their_lengths(archived_v8):
    storage, _ = archived_v8
    files = history_files(storage, HISTORY_DIR)
    assert {name.rsplit("_", 1)[1] for name, _ in files} == {"0.parquet", "1.parquet"}
    assert all(storage.size(f"{HISTORY_DIR}/{name}") == length for name, length in files)
    assert history_version(storage, HISTORY_DIR) == int(storage.read_text(f"{HISTORY_DIR}/_version_"))


def test_hudis_archived_rows_carry_the_avro_of_their_completed_and_plan_files(archived_v8):
    storage, _ = archived_v8
    for entry in read_history(storage, HISTORY_DIR):
        (body,) = fastavro.reader(io.BytesIO(entry.metadata))
        if entry.action == "commit":
            assert "partitionToWriteStats" in body and entry.plan is None
        else:
            assert entry.action == "clean"
            assert "partitionMetadata" in body
            (plan,) = fastavro.reader(io.BytesIO(entry.plan))
            assert "filePathsToBeDeletedPerPartition" in plan


def test_hudis_history_after_and_actions(archived_v8):
    storage, expected = archived_v8
    archived = reported(expected["archived"])
    cut = archived[len(archived) // 2]["instant"]
    assert as_hudi_reports(read_history(storage, HISTORY_DIR, after=cut)) == [i for i in archived if i["instant"] > cut]
    assert as_hudi_reports(read_history(storage, HISTORY_DIR, actions=["clean"])) == [
        i for i in archived if i["action"] == "clean"]
    assert read_history(storage, HISTORY_DIR, after=archived[-1]["instant"]) == []


# ---- histories written here ------------------------------------------------------------------

# HoodieLSMTimelineInstant as Hudi's Avro parquet writer lays it out.
LSM_INSTANT = pa.schema([pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
                         pa.field("action", pa.string()), pa.field("metadata", pa.binary()),
                         pa.field("plan", pa.binary()), pa.field("version", pa.int32(), nullable=False)],
                        metadata={"writer.model.name": "avro"})


def ts(n):
    return f"202601010000{n:05d}"


def write_history_file(storage, name, instants, action="commit", metadata=b"meta", folder=HISTORY_DIR):
    """A history parquet file as Hudi writes one (its columns, types and footer)."""
    table = pa.table({
        "instantTime": [ts(i) for i in instants],
        "completionTime": [ts(i + 1000) for i in instants],
        "action": [action] * len(instants),
        "metadata": [metadata] * len(instants),
        "plan": [None] * len(instants),
        "version": [1] * len(instants),
    }, schema=LSM_INSTANT)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    storage.write_bytes(f"{folder}/{name}", sink.getvalue().to_pybytes())
    return name


def file_name(first, last, layer):
    return f"{ts(first)}_{ts(last)}_{layer}.parquet"


def write_manifest(storage, version, names, folder=HISTORY_DIR, version_file=True):
    files = [{"fileName": n, "fileLen": storage.size(f"{folder}/{n}")} for n in names]
    storage.write_text(f"{folder}/manifest_{version}", json.dumps({"files": files}, indent=2))
    if version_file:
        storage.write_text(f"{folder}/_version_", str(version))


@pytest.fixture
def storage(tmp_path):
    return Storage(str(tmp_path))


def instants(entries):
    return [e.instant for e in entries]


def test_no_history_folder_is_an_empty_history(storage):
    assert history_version(storage, HISTORY_DIR) is None
    assert history_files(storage, HISTORY_DIR) == []
    assert read_history(storage, HISTORY_DIR) == []
    storage.make_dirs(HISTORY_DIR)  # a folder with nothing in it yet
    assert read_history(storage, HISTORY_DIR, after=ts(1)) == []


def test_without_version_file_the_highest_manifest_counts(storage):
    a = write_history_file(storage, file_name(1, 2, 0), [1, 2])
    b = write_history_file(storage, file_name(3, 4, 0), [3, 4])
    write_manifest(storage, 1, [a], version_file=False)
    write_manifest(storage, 2, [a, b], version_file=False)
    assert history_version(storage, HISTORY_DIR) == 2
    assert instants(read_history(storage, HISTORY_DIR)) == [ts(1), ts(2), ts(3), ts(4)]
    storage.write_text(f"{HISTORY_DIR}/_version_", "")  # left empty by a crash: unreadable, same fallback
    assert history_version(storage, HISTORY_DIR) == 2
    storage.write_text(f"{HISTORY_DIR}/_version_", "1")  # a readable one wins, as in Hudi
    assert history_files(storage, HISTORY_DIR) == [(a, storage.size(f"{HISTORY_DIR}/{a}"))]


def test_a_parquet_the_manifest_does_not_list_is_ignored(storage):
    a = write_history_file(storage, file_name(1, 2, 0), [1, 2])
    write_history_file(storage, file_name(3, 4, 0), [3, 4])  # archival died before its manifest
    storage.write_bytes(f"{HISTORY_DIR}/{file_name(5, 6, 0)}", b"half a parquet")
    write_manifest(storage, 1, [a])
    assert instants(read_history(storage, HISTORY_DIR)) == [ts(1), ts(2)]


def test_overlapping_layers_give_each_instant_once(storage):
    # Compaction wrote the layer 1 file; a manifest may still list the layer 0 files it merged.
    l0 = [write_history_file(storage, file_name(1, 2, 0), [1, 2]),
          write_history_file(storage, file_name(3, 4, 0), [3, 4])]
    l1 = write_history_file(storage, file_name(1, 4, 1), [1, 2, 3, 4], metadata=b"compacted")
    newer = write_history_file(storage, file_name(5, 6, 0), [5, 6])
    write_manifest(storage, 3, l0 + [l1, newer])
    entries = read_history(storage, HISTORY_DIR)
    assert instants(entries) == [ts(i) for i in range(1, 7)]
    assert [e.metadata for e in entries[:4]] == [b"compacted"] * 4  # the copy the tree keeps
    assert entries[0] == HistoryEntry(ts(1), ts(1001), "commit", b"compacted", None)


def test_after_skips_files_wholly_before_it_without_opening_them(storage):
    old = file_name(1, 3, 0)
    storage.write_bytes(f"{HISTORY_DIR}/{old}", b"not a parquet")  # would fail if it were read
    middle = write_history_file(storage, file_name(4, 6, 0), [4, 5, 6])
    new = write_history_file(storage, file_name(7, 8, 0), [7, 8], action="clean")
    write_manifest(storage, 1, [old, middle, new])
    assert instants(read_history(storage, HISTORY_DIR, after=ts(3))) == [ts(i) for i in range(4, 9)]
    assert instants(read_history(storage, HISTORY_DIR, after=ts(5))) == [ts(6), ts(7), ts(8)]
    assert instants(read_history(storage, HISTORY_DIR, after=ts(5), actions={"clean"})) == [ts(7), ts(8)]
    assert read_history(storage, HISTORY_DIR, after=ts(8)) == []
    with pytest.raises(CorruptTableError, match=old):
        read_history(storage, HISTORY_DIR)


def test_an_unreadable_manifest_names_its_file(storage):
    a = write_history_file(storage, file_name(1, 2, 0), [1, 2])
    write_manifest(storage, 1, [a])
    storage.write_text(f"{HISTORY_DIR}/manifest_1", '{"files": [{"fileName": ')
    with pytest.raises(CorruptTableError, match="manifest_1"):
        read_history(storage, HISTORY_DIR)
    storage.write_text(f"{HISTORY_DIR}/manifest_1", json.dumps({"files": [{"fileName": "x.parquet", "fileLen": 1}]}))
    with pytest.raises(CorruptTableError, match="manifest_1"):
        history_files(storage, HISTORY_DIR)
    storage.write_text(f"{HISTORY_DIR}/_version_", "2")  # names a manifest that is not there
    with pytest.raises(CorruptTableError, match="manifest_2"):
        history_files(storage, HISTORY_DIR)


def test_a_listed_file_that_is_gone_is_corruption(storage):
    a = write_history_file(storage, file_name(1, 2, 0), [1, 2])
    write_manifest(storage, 1, [a])
    storage.delete_file(f"{HISTORY_DIR}/{a}")
    with pytest.raises(CorruptTableError, match=a):
        read_history(storage, HISTORY_DIR)


# ---- the writer ------------------------------------------------------------------------------

def entry(n, action="commit", metadata=None, plan=None, completion=True):
    return HistoryEntry(ts(n), ts(n + 1000) if completion else None, action,
                        metadata if metadata is not None else f"meta {n}".encode(), plan)


def entries_of(numbers, **kwargs):
    return [entry(n, **kwargs) for n in numbers]


class RecordingStorage(Storage):
    """A local Storage that records each atomic write and can crash before a chosen one."""

    def __init__(self, base_path, crash_before=None):
        super().__init__(base_path)
        self.atomic = []
        self.crash_before = crash_before  # called with the path; True: raise instead of writing

    def write_atomic(self, rel, data, tmp_dir):
        if self.crash_before and self.crash_before(rel):
            raise RuntimeError(f"crash before writing {rel}")
        self.atomic.append((rel, tmp_dir))
        super().write_atomic(rel, data, tmp_dir)

    def write_bytes(self, rel, data):  # the writer never writes in place
        raise AssertionError(f"{rel} written in place")


def manifest_of(storage, version, folder=HISTORY_DIR):
    return json.loads(storage.read_text(f"{folder}/manifest_{version}"))


def folder_names(storage, folder=HISTORY_DIR):
    return sorted(storage.list_names(folder))


def test_write_history_round_trips_through_the_reader(tmp_path):
    storage = RecordingStorage(str(tmp_path))
    first = [entry(3), entry(1, "clean", plan=b"plan 1"), entry(2, "rollback", metadata=b"")]
    assert write_history(storage, HISTORY_DIR, first) == file_name(1, 3, 0)
    # Oldest first; an empty completed file is archived as null, as Hudi does.
    assert read_history(storage, HISTORY_DIR) == [entry(1, "clean", plan=b"plan 1"),
                                                  HistoryEntry(ts(2), ts(1002), "rollback", None, None), entry(3)]
    assert history_version(storage, HISTORY_DIR) == 1 and storage.read_text(f"{HISTORY_DIR}/_version_") == "1"
    assert write_history(storage, HISTORY_DIR, entries_of([4, 5], completion=False)) == file_name(4, 5, 0)
    assert history_version(storage, HISTORY_DIR) == 2
    assert [e.completion for e in read_history(storage, HISTORY_DIR)] == [ts(1001), ts(1002), ts(1003), None, None]
    # manifest_2: manifest_1's files, then the new one, each with its length.
    assert manifest_of(storage, 1) == {"files": [{"fileName": file_name(1, 3, 0),
                                                  "fileLen": storage.size(f"{HISTORY_DIR}/{file_name(1, 3, 0)}")}]}
    assert history_files(storage, HISTORY_DIR) == [(n, storage.size(f"{HISTORY_DIR}/{n}"))
                                                   for n in (file_name(1, 3, 0), file_name(4, 5, 0))]
    assert folder_names(storage) == sorted(["_version_", "manifest_1", "manifest_2", file_name(1, 3, 0),
                                            file_name(4, 5, 0)])
    # Every file went through an atomic write, by way of the table's temporary folder: the
    # parquet, then the manifest, then the version.
    assert [rel.rsplit("/", 1)[1] for rel, _ in storage.atomic] == [
        file_name(1, 3, 0), "manifest_1", "_version_", file_name(4, 5, 0), "manifest_2", "_version_"]
    assert {tmp for _, tmp in storage.atomic} == {TMP_DIR}
    assert storage.list_names(TMP_DIR) == []


def test_write_history_refuses_what_is_no_archived_action(storage):
    with pytest.raises(ValueError, match="no entries"):
        write_history(storage, HISTORY_DIR, [])
    with pytest.raises(ValueError, match="twice"):
        write_history(storage, HISTORY_DIR, [entry(1), entry(1, "clean")])
    with pytest.raises(ValueError, match="instant time"):
        write_history(storage, HISTORY_DIR, [HistoryEntry("2026-01-01", None, "commit", None, None)])
    with pytest.raises(ValueError, match="instant time"):
        write_history(storage, HISTORY_DIR, [HistoryEntry(ts(1), ts(2), "", None, None)])
    assert storage.list_names(HISTORY_DIR) == []


def test_the_manifest_is_written_as_hudi_writes_it(archived_v8):
    hudis, _ = archived_v8
    for version in (4, 5, 6):
        text = hudis.read_text(f"{HISTORY_DIR}/manifest_{version}")
        files = [(f["fileName"], f["fileLen"]) for f in json.loads(text)["files"]]
        assert manifest_json(files) == text
    assert json.loads(manifest_json([])) == {"files": []}


@pytest.fixture
def v8_copy(tmp_path):
    """A fresh copy of the table Hudi 1.0.2 archived (its history gets written to), and what Hudi
    reported of it."""
    with zipfile.ZipFile(FIXTURES / f"{ARCHIVED_V8}.zip") as archive:
        archive.extractall(tmp_path)
    expected = json.loads((FIXTURES / f"{ARCHIVED_V8}.expected.json").read_text())
    return RecordingStorage(str(tmp_path / ARCHIVED_V8)), expected


def test_appending_to_hudis_history_keeps_every_entry_and_adds_ours(v8_copy):
    storage, expected = v8_copy
    before = read_history(storage, HISTORY_DIR)
    hudis_files = history_files(storage, HISTORY_DIR)
    assert history_version(storage, HISTORY_DIR) == 6
    # The next actions archival would move: the active timeline's oldest ones.
    active = expected["active"][:3]
    new = [HistoryEntry(i["instant"], i["completion"], i["action"], b"completed " + i["instant"].encode(),
                        b"plan" if i["action"] == "clean" else None) for i in active]
    name = write_history(storage, HISTORY_DIR, new)
    assert name == f"{active[0]['instant']}_{active[-1]['instant']}_0.parquet"
    assert history_version(storage, HISTORY_DIR) == 7
    assert history_files(storage, HISTORY_DIR) == hudis_files + [(name, storage.size(f"{HISTORY_DIR}/{name}"))]
    after = read_history(storage, HISTORY_DIR)
    assert after == before + new
    assert as_hudi_reports(after) == reported(expected["archived"] + active)
    # Hudi's manifests and files are untouched.
    assert manifest_of(storage, 6) == {"files": [{"fileName": n, "fileLen": n_len} for n, n_len in hudis_files]}


def test_a_file_already_listed_is_not_written_again(storage):
    name = write_history(storage, HISTORY_DIR, entries_of([1, 2]))
    before = storage.read_bytes(f"{HISTORY_DIR}/{name}")
    # The archival ran again after a crash that came after its commit (the instants were not yet
    # removed from the active timeline): the history already has them.
    assert write_history(storage, HISTORY_DIR, entries_of([1, 2], metadata=b"other")) == name
    assert history_version(storage, HISTORY_DIR) == 1 and folder_names(storage) == sorted(
        ["_version_", "manifest_1", name])
    assert storage.read_bytes(f"{HISTORY_DIR}/{name}") == before


def test_crash_after_the_parquet_before_the_manifest(tmp_path):
    storage = RecordingStorage(str(tmp_path))
    write_history(storage, HISTORY_DIR, entries_of([1, 2]))
    storage.crash_before = lambda rel: "manifest_" in rel
    with pytest.raises(RuntimeError, match="manifest_2"):
        write_history(storage, HISTORY_DIR, entries_of([3, 4], metadata=b"first try"))
    # The parquet is there, whole, but no manifest lists it: readers see snapshot 1.
    assert storage.exists(f"{HISTORY_DIR}/{file_name(3, 4, 0)}")
    assert history_version(storage, HISTORY_DIR) == 1
    assert instants(read_history(storage, HISTORY_DIR)) == [ts(1), ts(2)]
    # A half-written file can't be left by an atomic write, but a corrupt leftover is replaced too.
    storage.crash_before = None
    Storage.write_bytes(storage, f"{HISTORY_DIR}/{file_name(3, 4, 0)}", b"PAR1 left over")
    assert write_history(storage, HISTORY_DIR, entries_of([3, 4])) == file_name(3, 4, 0)
    assert read_history(storage, HISTORY_DIR) == entries_of([1, 2, 3, 4])
    assert history_version(storage, HISTORY_DIR) == 2


def test_crash_after_the_manifest_before_the_version(tmp_path):
    storage = RecordingStorage(str(tmp_path))
    write_history(storage, HISTORY_DIR, entries_of([1, 2]))
    storage.crash_before = lambda rel: rel.endswith("_version_")
    with pytest.raises(RuntimeError, match="_version_"):
        write_history(storage, HISTORY_DIR, entries_of([3, 4], metadata=b"first try"))
    # `_version_` still says 1: readers see snapshot 1, whole, though manifest_2 is there.
    assert storage.exists(f"{HISTORY_DIR}/manifest_2")
    assert history_version(storage, HISTORY_DIR) == 1
    assert instants(read_history(storage, HISTORY_DIR)) == [ts(1), ts(2)]
    # Had `_version_` gone missing (Hudi rewrites it by delete and create), the highest manifest
    # counts, and it is whole too.
    storage.delete_file(f"{HISTORY_DIR}/_version_")
    assert instants(read_history(storage, HISTORY_DIR)) == [ts(i) for i in (1, 2, 3, 4)]
    storage.crash_before = None
    Storage.write_bytes(storage, f"{HISTORY_DIR}/_version_", b"1")
    # The next archival (here: of the same actions) replaces the leftover manifest_2 and commits.
    assert write_history(storage, HISTORY_DIR, entries_of([3, 4])) == file_name(3, 4, 0)
    assert history_version(storage, HISTORY_DIR) == 2
    assert read_history(storage, HISTORY_DIR) == entries_of([1, 2, 3, 4])
    assert [f["fileName"] for f in manifest_of(storage, 2)["files"]] == [file_name(1, 2, 0), file_name(3, 4, 0)]
    # A different next archival after such a crash recovers the same way.
    storage.crash_before = lambda rel: rel.endswith("_version_")
    with pytest.raises(RuntimeError):
        write_history(storage, HISTORY_DIR, entries_of([5, 6]))
    storage.crash_before = None
    write_history(storage, HISTORY_DIR, entries_of([7, 8]))
    assert history_version(storage, HISTORY_DIR) == 3
    assert instants(read_history(storage, HISTORY_DIR)) == [ts(i) for i in (1, 2, 3, 4, 7, 8)]
    assert clean_history(storage, HISTORY_DIR) == [file_name(5, 6, 0)]  # the leftover no manifest lists


def archive_files(storage, count, per_file=2, batch_size=None, start=1):
    """`count` archivals of `per_file` actions each; with `batch_size`, a compaction after each."""
    written = []
    for i in range(count):
        first = start + i * per_file
        written.append(write_history(storage, HISTORY_DIR, entries_of(range(first, first + per_file))))
        if batch_size:
            compact_history(storage, HISTORY_DIR, batch_size=batch_size)
    return written


def layers(storage):
    return sorted((int(n[:-len(".parquet")].rsplit("_", 1)[1]), n) for n, _ in history_files(storage, HISTORY_DIR))


def test_compaction_at_ten_files(storage):
    written = archive_files(storage, 9, batch_size=10)
    assert [layer for layer, _ in layers(storage)] == [0] * 9  # nine: not yet
    assert compact_history(storage, HISTORY_DIR) == []
    assert history_version(storage, HISTORY_DIR) == 9
    assert [n for n in folder_names(storage) if n.startswith("manifest_")] == ["manifest_7", "manifest_8", "manifest_9"]
    written.append(write_history(storage, HISTORY_DIR, entries_of([19, 20])))
    assert compact_history(storage, HISTORY_DIR) == [file_name(1, 20, 1)]
    assert layers(storage) == [(1, file_name(1, 20, 1))]
    assert history_version(storage, HISTORY_DIR) == 11  # the archival's, then the compaction's
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 21))
    # The compacted file is one of Hudi's: its rows by instant, the same bytes.
    rows = pq.read_table(storage.full_path(f"{HISTORY_DIR}/{file_name(1, 20, 1)}")).to_pydict()
    assert rows["instantTime"] == [ts(i) for i in range(1, 21)] and rows["version"] == [1] * 20
    # The clean after it kept 3 + 1 manifests, and with them the layer-0 files they list.
    assert [n for n in folder_names(storage) if n.startswith("manifest_")] == [
        "manifest_10", "manifest_11", "manifest_8", "manifest_9"]
    assert set(written) < set(folder_names(storage))
    # Three archivals on, no kept manifest lists them any more: gone.
    newer = archive_files(storage, 3, batch_size=10, start=21)
    assert folder_names(storage) == sorted(newer + [file_name(1, 20, 1), "_version_", "manifest_12", "manifest_13",
                                                    "manifest_14"])
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 27))


def test_compaction_merges_the_oldest_batches_and_climbs_the_layers(storage):
    archive_files(storage, 4, batch_size=2)
    # L0 a+b -> L1 ab, then L0 c+d -> L1 cd, then L1 ab+cd -> L2.
    assert layers(storage) == [(2, file_name(1, 8, 2))]
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 9))
    archive_files(storage, 5, start=9)  # five layer-0 files, no compaction yet
    version = history_version(storage, HISTORY_DIR)
    assert compact_history(storage, HISTORY_DIR, batch_size=2, clean=False) == [
        file_name(9, 12, 1), file_name(13, 16, 1), file_name(9, 16, 2), file_name(1, 16, 3)]
    assert history_version(storage, HISTORY_DIR) == version + 4  # one snapshot per merge
    assert layers(storage) == [(0, file_name(17, 18, 0)), (3, file_name(1, 16, 3))]
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 19))
    rows = pq.read_table(storage.full_path(f"{HISTORY_DIR}/{file_name(1, 16, 3)}")).to_pydict()
    assert rows["instantTime"] == [ts(i) for i in range(1, 17)]


def test_compaction_dedupes_rows_by_instant(storage):
    write_history(storage, HISTORY_DIR, entries_of([1, 2]))
    write_history(storage, HISTORY_DIR, entries_of([2, 3], metadata=b"again"))  # the same instant twice
    assert compact_history(storage, HISTORY_DIR, batch_size=2) == [file_name(1, 3, 1)]
    rows = pq.read_table(storage.full_path(f"{HISTORY_DIR}/{file_name(1, 3, 1)}")).to_pydict()
    assert rows["instantTime"] == [ts(1), ts(2), ts(3)]
    assert read_history(storage, HISTORY_DIR) == [entry(1), entry(2), entry(3, metadata=b"again")]


def test_crash_in_compaction_leaves_the_snapshot_before_it(tmp_path):
    storage = RecordingStorage(str(tmp_path))
    archive_files(storage, 3)
    storage.crash_before = lambda rel: "manifest_" in rel
    with pytest.raises(RuntimeError):
        compact_history(storage, HISTORY_DIR, batch_size=3)
    assert storage.exists(f"{HISTORY_DIR}/{file_name(1, 6, 1)}")  # written, never listed
    assert [layer for layer, _ in layers(storage)] == [0, 0, 0]
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 7))
    storage.crash_before = None
    assert compact_history(storage, HISTORY_DIR, batch_size=3) == [file_name(1, 6, 1)]
    assert layers(storage) == [(1, file_name(1, 6, 1))]
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 7))


def test_clean_keeps_what_the_latest_manifest_lists(storage):
    written = archive_files(storage, 6)
    assert history_version(storage, HISTORY_DIR) == 6
    leftover = write_history_file(storage, file_name(50, 51, 0), [50, 51])  # an archival that never committed
    assert clean_history(storage, HISTORY_DIR, keep=2) == ["manifest_1", "manifest_2", "manifest_3", "manifest_4",
                                                           leftover]
    assert folder_names(storage) == sorted(written + ["_version_", "manifest_5", "manifest_6"])
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 13))
    assert clean_history(storage, HISTORY_DIR) == []
    # A manifest a crash left above `_version_` counts as one of the newest; the latest
    # snapshot's files stay whatever `keep` says.
    Storage.write_text(storage, f"{HISTORY_DIR}/manifest_7", manifest_json([]))
    assert clean_history(storage, HISTORY_DIR, keep=1) == ["manifest_5"]
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 13))
    assert folder_names(storage) == sorted(written + ["_version_", "manifest_6", "manifest_7"])


def test_clean_deletes_nothing_when_a_kept_manifest_is_unreadable(storage):
    written = archive_files(storage, 4)
    compact_history(storage, HISTORY_DIR, batch_size=2, clean=False)
    Storage.write_text(storage, f"{HISTORY_DIR}/manifest_5", "{")
    assert clean_history(storage, HISTORY_DIR, keep=3) == []
    assert set(written) <= set(folder_names(storage))
    assert clean_history(storage, HISTORY_DIR, keep=2)[:4] == ["manifest_1", "manifest_2", "manifest_3", "manifest_4"]


def test_clean_without_history_does_nothing(storage):
    assert clean_history(storage, HISTORY_DIR) == []
    assert compact_history(storage, HISTORY_DIR) == []


def physical(parquet):
    return [(c.name, c.physical_type, c.logical_type.type, c.converted_type, c.max_definition_level,
             c.max_repetition_level) for c in (parquet.schema.column(i) for i in range(len(parquet.schema)))]


def printed(parquet):
    return str(parquet.schema).split(">", 1)[1].strip()  # after the Python object's address


def test_the_written_parquet_is_laid_out_as_hudis(archived_v8, storage):
    hudis, _ = archived_v8
    name = write_history(storage, HISTORY_DIR, [entry(1), entry(2, "clean", plan=b"p")])
    ours = pq.ParquetFile(storage.full_path(f"{HISTORY_DIR}/{name}"))
    for hudi_name, _ in history_files(hudis, HISTORY_DIR):
        theirs = pq.ParquetFile(hudis.full_path(f"{HISTORY_DIR}/{hudi_name}"))
        # The same schema, root name included (the printed schema names it) ...
        assert printed(ours) == printed(theirs)
        assert printed(ours).splitlines()[0] == (
            "required group field_id=-1 org.apache.hudi.avro.model.HoodieLSMTimelineInstant {")
        assert physical(ours) == physical(theirs)
        assert ours.schema_arrow == theirs.schema_arrow
        # ... the same footer keys and the same Avro schema in it ...
        assert set(ours.metadata.metadata) == set(theirs.metadata.metadata) == {b"writer.model.name",
                                                                                b"parquet.avro.schema"}
        assert ours.metadata.metadata[b"writer.model.name"] == b"avro"
        avro = json.loads(ours.metadata.metadata[b"parquet.avro.schema"])
        assert avro == json.loads(theirs.metadata.metadata[b"parquet.avro.schema"])
        assert ours.metadata.metadata[b"parquet.avro.schema"] == theirs.metadata.metadata[b"parquet.avro.schema"]
        # ... the same codec and parquet format version.
        assert ours.metadata.format_version == theirs.metadata.format_version == "1.0"
        codecs = {theirs.metadata.row_group(0).column(i).compression for i in range(6)}
        assert codecs == {ours.metadata.row_group(0).column(i).compression for i in range(6)} == {"GZIP"}
    assert physical(ours) == [
        ("instantTime", "BYTE_ARRAY", "STRING", "UTF8", 1, 0), ("completionTime", "BYTE_ARRAY", "STRING", "UTF8", 1, 0),
        ("action", "BYTE_ARRAY", "STRING", "UTF8", 1, 0), ("metadata", "BYTE_ARRAY", "NONE", "NONE", 1, 0),
        ("plan", "BYTE_ARRAY", "NONE", "NONE", 1, 0), ("version", "INT32", "NONE", "NONE", 0, 0)]
    assert avro == {"type": "record", "name": "HoodieLSMTimelineInstant", "namespace": "org.apache.hudi.avro.model",
                    "fields": [{"name": n, "type": ["null", {"type": "string", "avro.java.string": "String"}],
                                "default": None} for n in ("instantTime", "completionTime", "action")]
                    + [{"name": n, "type": ["null", "bytes"], "default": None} for n in ("metadata", "plan")]
                    + [{"name": "version", "type": "int", "default": 1}]}
    fastavro.parse_schema(avro)
    # Rows as Hudi's Avro reader takes them: the footer's schema read by name.
    assert ours.read().to_pylist() == [
        {"instantTime": ts(1), "completionTime": ts(1001), "action": "commit", "metadata": b"meta 1", "plan": None,
         "version": 1},
        {"instantTime": ts(2), "completionTime": ts(1002), "action": "clean", "metadata": b"meta 2", "plan": b"p",
         "version": 1}]


def test_hudis_rows_written_again_read_the_same(archived_v8, storage):
    hudis, _ = archived_v8
    rows = read_history(hudis, HISTORY_DIR)
    for start in range(0, len(rows), 6):
        write_history(storage, HISTORY_DIR, rows[start:start + 6])
    assert read_history(storage, HISTORY_DIR) == rows
    assert len(compact_history(storage, HISTORY_DIR, batch_size=2)) == 1  # the first two files
    assert [layer for layer, _ in layers(storage)] == [0, 1]
    assert read_history(storage, HISTORY_DIR) == rows


def test_writes_within_a_pinned_picture_see_their_own_versions(storage):
    # `_version_` is a state file, read once per pinned picture: each write replaces the pinned copy.
    with storage.pinned():
        assert history_version(storage, HISTORY_DIR) is None
        archive_files(storage, 4, batch_size=2)
        assert history_version(storage, HISTORY_DIR) == 7
        assert layers(storage) == [(2, file_name(1, 8, 2))]
    assert history_version(storage, HISTORY_DIR) == 7
    assert read_history(storage, HISTORY_DIR) == entries_of(range(1, 9))
