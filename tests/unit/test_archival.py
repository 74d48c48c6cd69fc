"""Which instants archival moves, and the view they leave behind: pure, no Spark."""

import pytest

from dbt.adapters.hudilite.table.archival import ArchivedView, java_archive_files, plan_archive
from dbt.adapters.hudilite.table.commit import SPARK_SCHEMA_KEY, CommitMetadata, WriteStat
from dbt.adapters.hudilite.table.errors import ConfigurationError
from dbt.adapters.hudilite.table.file_group import FileSystemView
from dbt.adapters.hudilite.table.instant import COMPLETED, Instant

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


def test_only_javas_archive_files_are_foreign():
    assert java_archive_files([".commits_.archive.1_1-0-1", "hudilite_1_2.archive.json", "x"]) == [
        ".commits_.archive.1_1-0-1"]
