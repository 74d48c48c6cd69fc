"""Which instants archival moves, the view they leave behind, and Hudi's archive format they
are written in (log blocks of HoodieArchivedMetaEntry records): pure, no Spark."""

import json
import struct

import pytest

from dbt.adapters.hudilite.table.format import archived_timeline
from dbt.adapters.hudilite.table.format import log_format
from dbt.adapters.hudilite.table.format.archived_timeline import ArchivedView, java_archive_files
from dbt.adapters.hudilite.table.services.archival import plan_archive
from dbt.adapters.hudilite.table.format.commit import SPARK_SCHEMA_KEY, CommitMetadata, WriteStat
from dbt.adapters.hudilite.table.errors import ConfigurationError, CorruptTableError
from dbt.adapters.hudilite.table.format.file_group import FileSystemView
from dbt.adapters.hudilite.table.format.instant import COMPLETED, Instant
from dbt.adapters.hudilite.table.storage.layout import archived_dir
from dbt.adapters.hudilite.table.format.properties import TableConfig

T = [f"202611240000{i:05d}" for i in range(40)]


def test_nothing_moves_until_the_maximum_is_passed():
    assert plan_archive(T[:30], 20, 30, archivable_before=T[29], index_base=None) == []
    assert plan_archive(T[:31], 20, 30, archivable_before=T[30], index_base=None) == T[:11]


def test_the_cleaner_and_the_index_bound_what_moves():
    assert plan_archive(T[:31], 20, 30, archivable_before=T[5], index_base=None) == T[:5]  # before, not at
    assert plan_archive(T[:31], 20, 30, archivable_before=T[30], index_base=T[3]) == T[:4]  # at or before
    assert plan_archive(T[:31], 20, 30, archivable_before=None, index_base=None) == []


@pytest.mark.parametrize("keep_min, keep_max", [(0, 5), (5, 5), (6, 5)])
def test_keep_limits_are_checked(keep_min, keep_max):
    with pytest.raises(ConfigurationError, match="1 <= keep_min_commits < keep_max_commits"):
        plan_archive(T, keep_min, keep_max, T[-1], None)


def _stat(partition, file_id, instant, rows=1):
    return WriteStat(fileId=file_id, path=f"{partition}/{file_id}_0-1-0_{instant}.parquet", partitionPath=partition,
                     numWrites=rows, fileSizeInBytes=100 * rows)


def _commit(instant, stats, replaced=None, schema=None):
    extra = {SPARK_SCHEMA_KEY: schema} if schema else {}
    return Instant(instant, "replacecommit" if replaced else "commit", COMPLETED), \
        CommitMetadata("X", stats, replaced or {}, extra)


def test_the_archived_view_keeps_the_newest_slice_of_each_live_group_and_its_schema():
    commits = [
        _commit(T[0], [_stat("a", "f1", T[0]), _stat("a", "f2", T[0])], schema="s0"),
        _commit(T[1], [_stat("a", "f1", T[1], rows=2)], schema="s1"),  # a new slice of f1
        _commit(T[2], [_stat("a", "f3", T[2])], replaced={"a": ["f2"]}, schema="s2"),
    ]
    archived = ArchivedView().folded(commits[:2]).folded(commits[2:])
    assert (archived.first, archived.through, archived.count) == (T[0], T[2], 3)
    assert [(f.file_id, f.instant, f.num_records) for f in archived.files] == [("f1", T[1], 2), ("f3", T[2], 1)]
    assert archived.schemas == {T[1]: "s1", T[2]: "s2"}  # s0's slices are all gone
    assert ArchivedView.from_json(archived.to_json()) == archived

    # Later commits build on it as on the full history.
    later = [_commit(T[3], [_stat("a", "f1", T[3])], replaced={"a": ["f3"]})]
    full = FileSystemView(commits + later)
    folded = FileSystemView(later, archived=archived.files)
    assert folded.latest_base_files() == full.latest_base_files()
    assert [f.file_id for f in folded.latest_base_files()] == ["f1"]


def test_only_hudis_archive_files_are_hudis():
    assert java_archive_files([".commits_.archive.1_1-0-1", "hudilite_1_2.archive.json", "x"]) == [
        ".commits_.archive.1_1-0-1"]


# ---- Hudi's archive format: log blocks of HoodieArchivedMetaEntry records -----------------------


def _completed_text(stats, replaced=None, operation="UPSERT"):
    body = {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {"schema": "{}"}, "operationType": operation}
    for s in stats:
        body["partitionToWriteStats"].setdefault(s.partitionPath, []).append(s.to_json())
    if replaced is not None:
        body["partitionToReplaceFileIds"] = replaced
    return json.dumps(body)


def _archived_commits():
    return [
        (Instant(T[0], "commit", COMPLETED), _completed_text([_stat("a", "f1", T[0], rows=3), _stat("b", "f2", T[0])])),
        (Instant(T[1], "replacecommit", COMPLETED),
         _completed_text([_stat("a", "f3", T[1], rows=2)], replaced={"a": ["f1"]}, operation="INSERT_OVERWRITE")),
    ]


def test_a_log_block_is_laid_out_as_hudis_writer_lays_it_out():
    block = log_format.LogBlock(log_format.AVRO_DATA_BLOCK, {log_format.SCHEMA: "s"}, b"xyz")
    data = log_format.encode_block(block)
    assert data[:6] == b"#HUDI#"
    size, version, block_type = struct.unpack(">qii", data[6:22])
    assert (version, block_type) == (1, 3)
    assert size == len(data) - 6 - 8  # everything after the size field
    assert struct.unpack(">q", data[-8:])[0] == len(data) - 8  # magic included, not itself
    # header: one entry, key SCHEMA (2), "s"; then the content's length and the content
    assert data[22:35] == struct.pack(">iii", 1, 2, 1) + b"s"
    assert data[35:46] == struct.pack(">q", 3) + b"xyz"
    assert data[46:50] == struct.pack(">i", 0)  # an empty footer
    assert list(log_format.decode_blocks(data + data)) == [block, block]


def test_a_block_cut_short_at_the_end_is_skipped_and_damage_is_an_error():
    one = log_format.encode_block(log_format.LogBlock(log_format.AVRO_DATA_BLOCK, {}, b"abc"))
    for cut in (3, 10, len(one) - 1):  # a writer that died mid-append
        assert [b.content for b in log_format.decode_blocks(one + one[:cut])] == [b"abc"]
    with pytest.raises(log_format.LogFormatError, match="no block starts"):
        list(log_format.decode_blocks(one + b"garbage!"))
    bad_total = one[:-8] + struct.pack(">q", 1)
    with pytest.raises(log_format.LogFormatError, match="lengths disagree"):
        list(log_format.decode_blocks(bad_total))


def test_archived_instants_round_trip_through_hudis_format():
    commits = _archived_commits()
    data = archived_timeline.archive_body(commits)
    blocks = list(log_format.decode_blocks(data))
    assert len(blocks) == 1 and blocks[0].block_type == log_format.AVRO_DATA_BLOCK
    schema = json.loads(blocks[0].header[log_format.SCHEMA])
    assert (schema["namespace"], schema["name"]) == ("org.apache.hudi.avro.model", "HoodieArchivedMetaEntry")
    assert struct.unpack(">ii", blocks[0].content[:8]) == (3, 6)  # data block version, records

    entries = archived_timeline.read_hudi_archive(data)
    assert [(e.timestamp, e.action, e.state) for e in entries] == [
        (T[0], "commit", "REQUESTED"), (T[0], "commit", "INFLIGHT"), (T[0], "commit", "COMPLETED"),
        (T[1], "replacecommit", "REQUESTED"), (T[1], "replacecommit", "INFLIGHT"), (T[1], "replacecommit", "COMPLETED")]
    assert [e.metadata is None for e in entries] == [True, True, False, True, True, False]
    first, second = entries[2].commit_metadata(), entries[5].commit_metadata()
    assert first == CommitMetadata.from_json(commits[0][1])
    assert second == CommitMetadata.from_json(commits[1][1])
    assert second.replaced_file_ids == {"a": ["f1"]} and second.operation == "INSERT_OVERWRITE"
    assert [(s.fileId, s.numWrites, s.fileSizeInBytes, s.prevCommit) for s in first.write_stats] == [
        ("f1", 3, 300, None), ("f2", 1, 100, None)]


def test_each_archival_writes_the_next_log_file_version():
    assert archived_timeline.next_archive_name([]) == ".commits_.archive.1_1-0-1"
    assert archived_timeline.next_archive_name([".commits_.archive.1_1-0-1", "..commits_.archive.1_1-0-1.crc",
                                       ".commits_.archive.9_1-0-1", "hudilite_1_2.archive.json"]) == \
        ".commits_.archive.10_1-0-1"
    assert archived_timeline.archive_files([".commits_.archive.10_1-0-1", ".commits_.archive.2_1-0-1", "x"]) == [
        ".commits_.archive.2_1-0-1", ".commits_.archive.10_1-0-1"]


class _Storage:
    """The archived folder in memory: what archival reads and writes of a table's storage."""

    def __init__(self):
        self.base_path = "mem://t"
        self.files = {}

    def list_names(self, rel):
        return [p.rsplit("/", 1)[1] for p in self.files if p.startswith(rel + "/")]

    def list_files_with_sizes(self, rel):
        return [(p[len(rel) + 1:], len(d)) for p, d in self.files.items() if p.startswith(rel + "/")]

    def write_atomic(self, rel, data, tmp_dir):
        self.files[rel] = bytes(data)

    def read_bytes(self, rel):
        return self.files[rel]

    def read_text(self, rel):
        return self.files[rel].decode()


def test_commits_archived_past_our_view_are_found_in_any_archive_file():
    storage = _Storage()
    commits = _archived_commits()
    assert archived_timeline.write_archive(storage, commits[:1]).endswith("/.commits_.archive.1_1-0-1")
    assert archived_timeline.write_archive(storage, commits[1:]).endswith("/.commits_.archive.2_1-0-1")
    files = sorted(storage.list_files_with_sizes(".hoodie/archived"))
    found = archived_timeline.archived_commits(storage, files, None)
    assert [(i.timestamp, i.action) for i, _ in found] == [(T[0], "commit"), (T[1], "replacecommit")]
    assert [i.timestamp for i, _ in archived_timeline.archived_commits(storage, files, T[0])] == [T[1]]
    view = ArchivedView().folded(found)  # the replacecommit replaced f1: f2 and f3 are live
    assert sorted(f.file_id for f in view.files) == ["f2", "f3"] and view.through == T[1]

    # Our JSON archives of before read as well; a damaged Hudi archive is refused by name.
    legacy_name = f"hudilite_{T[0]}_{T[1]}.archive.json"
    storage.files[".hoodie/archived/" + legacy_name] = archived_timeline.archive_file_body(commits)
    legacy = archived_timeline.read_archive_file(storage, legacy_name)
    assert [(e.timestamp, e.commit_metadata()) for e in legacy] == [
        (i.timestamp, CommitMetadata.from_json(text)) for i, text in commits]
    storage.files[".hoodie/archived/.commits_.archive.3_1-0-1"] = b"#HUDI#" + b"\x00" * 40
    with pytest.raises(CorruptTableError, match=r"\.commits_\.archive\.3_1-0-1 is unreadable"):
        archived_timeline.archived_commits(storage, sorted(storage.list_files_with_sizes(".hoodie/archived")), None)


def test_the_archive_lives_in_the_folder_the_table_names():
    """hoodie.archivelog.folder: Hudi 1.x makes version 6 tables with `history`; the archive is
    written and read there, and nothing is looked for in `archived`."""
    config = TableConfig.from_properties({"hoodie.table.name": "t", "hoodie.archivelog.folder": "history"})
    assert config.archive_folder == "history" and config.to_properties()["hoodie.archivelog.folder"] == "history"
    assert TableConfig.from_properties({"hoodie.table.name": "t"}).archive_folder == "archived"
    assert archived_dir("history") == ".hoodie/history" and archived_dir("") == ".hoodie"

    storage = _Storage()
    commits = _archived_commits()
    folder = archived_dir(config.archive_folder)
    assert archived_timeline.write_archive(storage, commits, folder) == ".hoodie/history/.commits_.archive.1_1-0-1"
    storage.files[".hoodie/archived/.commits_.archive.7_1-0-1"] = b"#HUDI#" + b"\x00" * 40  # not the table's
    files = sorted(storage.list_files_with_sizes(folder))
    found = archived_timeline.archived_commits(storage, files, None, folder)
    assert [i.timestamp for i, _ in found] == [T[0], T[1]]
