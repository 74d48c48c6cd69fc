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
from dbt.adapters.hudilite.table.format.lsm_history import (HISTORY_DIR, HistoryEntry, history_files, history_version,
                                                            read_history)
from dbt.adapters.hudilite.table.storage.filesystem import Storage

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
