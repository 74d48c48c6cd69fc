import datetime as dt
import json

import pytest

from dbt.adapters.hudilite.table.services.cleaner import (KEEP_LATEST_BY_HOURS, KEEP_LATEST_COMMITS,
                                                          KEEP_LATEST_FILE_VERSIONS, CleanPolicy, plan_clean)
from dbt.adapters.hudilite.table.format.commit import CommitMetadata, WriteStat
from dbt.adapters.hudilite.table.format.file_group import (FileSystemView, base_file_name, parse_base_file_name,
                                                           relative_file_path)
from dbt.adapters.hudilite.table.format.instant import COMMIT, COMPLETED, REPLACE_COMMIT, Instant


def stat(partition, file_id, instant, rows=10, prev=None):
    name = base_file_name(file_id, "0-1-0", instant)
    return WriteStat(fileId=file_id, path=relative_file_path(partition, name), partitionPath=partition,
                     prevCommit=prev, numWrites=rows, numInserts=rows, fileSizeInBytes=100, totalWriteBytes=100)


def commit(ts, stats, replaced=None, action=COMMIT):
    return Instant(ts, action, COMPLETED), CommitMetadata("INSERT", stats, replaced or {})


def test_commit_metadata_json_has_hudis_shape():
    m = CommitMetadata("INSERT_OVERWRITE", [stat("p=a", "f1-0", "20260101000000000")], {"p=a": ["f0-0"]},
                       {"schema": "{}"})
    body = json.loads(m.to_json(is_replace=True))
    assert set(body) == {"partitionToWriteStats", "partitionToReplaceFileIds", "compacted", "extraMetadata", "operationType"}
    (s,) = body["partitionToWriteStats"]["p=a"]
    assert s["prevCommit"] == "null" and s["path"].startswith("p=a/f1-0_0-1-0_")
    assert body["partitionToReplaceFileIds"] == {"p=a": ["f0-0"]}
    assert "partitionToReplaceFileIds" not in json.loads(m.to_json(is_replace=False))
    back = CommitMetadata.from_json(m.to_json(is_replace=True))
    assert back == m


def test_base_file_names():
    name = base_file_name("8f0e-1-0", "3-12-1", "20260101000000000")
    assert name == "8f0e-1-0_3-12-1_20260101000000000.parquet"
    parsed = parse_base_file_name("p=a/" + name)
    assert (parsed.file_id, parsed.write_token, parsed.instant) == ("8f0e-1-0", "3-12-1", "20260101000000000")
    assert parse_base_file_name("part-0000.snappy.parquet") is None
    assert relative_file_path("", name) == name


def test_view_as_of_instants_with_replacements():
    commits = [
        commit("1", [stat("a", "f1", "1"), stat("b", "f2", "1")]),
        commit("2", [stat("a", "f1", "2", prev="1")]),
        commit("3", [stat("a", "f3", "3")], {"a": ["f1"]}, REPLACE_COMMIT),
    ]
    assert [f.path for f in FileSystemView(commits, "1").latest_base_files()] == ["a/f1_0-1-0_1.parquet", "b/f2_0-1-0_1.parquet"]
    assert [f.instant for f in FileSystemView(commits, "2").latest_base_files()] == ["2", "1"]
    latest = FileSystemView(commits).latest_base_files()
    assert [(f.file_id, f.instant) for f in latest] == [("f3", "3"), ("f2", "1")]
    assert FileSystemView(commits).live_file_ids(["a"]) == {"a": ["f3"]}
    assert FileSystemView(commits).live_file_ids() == {"a": ["f3"], "b": ["f2"]}


def test_cleaner_plan():
    commits = [
        commit("1", [stat("a", "f1", "1"), stat("b", "f2", "1")]),
        commit("2", [stat("a", "f1", "2", prev="1"), stat("b", "f2", "2", prev="1")]),
        commit("3", [stat("a", "f3", "3")], {"a": ["f1"]}, REPLACE_COMMIT),
        commit("4", [stat("b", "f2", "4", prev="2")]),
    ]
    view = FileSystemView(commits)
    completed = ["1", "2", "3", "4"]
    assert plan_clean(view, completed, commits_policy(4)).files_to_delete == []
    plan = plan_clean(view, completed, commits_policy(2))  # keep as of 3 and 4
    assert plan.earliest_retained == "3"
    assert [f.path for f in plan.files_to_delete] == [
        "a/f1_0-1-0_1.parquet", "a/f1_0-1-0_2.parquet", "b/f2_0-1-0_1.parquet"]
    later = plan_clean(view, completed, commits_policy(1), cleaned_before="3")
    assert [f.path for f in later.files_to_delete] == ["b/f2_0-1-0_2.parquet"]
    assert plan_clean(view, completed, commits_policy(2), cleaned_before="3").files_to_delete == []
    kept = plan_clean(view, completed, commits_policy(2), kept={"a/f1_0-1-0_2.parquet"})  # a savepoint's file
    assert [f.path for f in kept.files_to_delete] == ["a/f1_0-1-0_1.parquet", "b/f2_0-1-0_1.parquet"]
    with pytest.raises(ValueError):
        plan_clean(view, completed, commits_policy(0))
    with pytest.raises(ValueError, match="unknown cleaner policy"):
        plan_clean(view, completed, CleanPolicy("KEEP_EVERYTHING"))


def commits_policy(retain):
    return CleanPolicy(KEEP_LATEST_COMMITS, retain_commits=retain)


def test_cleaner_keeping_file_versions_reports_the_oldest_intact_snapshot():
    commits = [
        commit("1", [stat("a", "f1", "1"), stat("b", "f2", "1")]),
        commit("2", [stat("a", "f1", "2", prev="1"), stat("b", "f2", "2", prev="1")]),
        commit("3", [stat("a", "f1", "3", prev="2")]),
        commit("4", [stat("b", "f2", "4", prev="2")]),
    ]
    view = FileSystemView(commits)
    plan = plan_clean(view, ["1", "2", "3", "4"], CleanPolicy(KEEP_LATEST_FILE_VERSIONS, retain_file_versions=2))
    assert [f.path for f in plan.files_to_delete] == ["a/f1_0-1-0_1.parquet", "b/f2_0-1-0_1.parquet"]
    assert plan.earliest_retained == "2"  # a snapshot as of 1 read both deleted slices
    one = plan_clean(view, ["1", "2", "3", "4"], CleanPolicy(KEEP_LATEST_FILE_VERSIONS, retain_file_versions=1))
    assert len(one.files_to_delete) == 4
    assert one.earliest_retained == "4"  # f2's slice 2 is read as of 3


def test_cleaner_keeping_hours_retains_every_instant_of_the_window():
    commits = [commit(t, [stat("a", "f1", t, prev=p)]) for t, p in
               [("20261101000000000", None), ("20261101100000000", "20261101000000000"),
                ("20261102000000000", "20261101100000000")]]
    view = FileSystemView(commits)
    completed = [i.timestamp for i, _ in commits]
    now = dt.datetime(2026, 11, 2, 6, tzinfo=dt.timezone.utc)
    plan = plan_clean(view, completed, CleanPolicy(KEEP_LATEST_BY_HOURS, retain_hours=24), now=now)
    assert plan.earliest_retained == "20261101100000000"  # the oldest instant after 2026-11-01 06:00
    assert [f.path for f in plan.files_to_delete] == ["a/f1_0-1-0_20261101000000000.parquet"]
    assert plan_clean(view, completed, CleanPolicy(KEEP_LATEST_BY_HOURS, retain_hours=48), now=now).files_to_delete == []
    everything_old = plan_clean(view, completed, CleanPolicy(KEEP_LATEST_BY_HOURS, retain_hours=1), now=now)
    assert everything_old.earliest_retained == "20261102000000000"  # the latest snapshot always stays


def test_extended_view_is_the_view_of_all_commits_and_leaves_the_older_view_alone():
    first = [commit("1", [stat("a", "f1", "1"), stat("b", "f2", "1")])]
    later = [commit("2", [stat("a", "f1", "2", prev="1")]), commit("3", [stat("c", "f3", "3")], {"b": ["f2"]}, REPLACE_COMMIT)]
    older = FileSystemView(first)
    extended = older.extended(later)
    fresh = FileSystemView(first + later)
    assert [(g.partition, g.file_id, g.slices, g.replaced_at) for g in extended.groups.values()] == [
        (g.partition, g.file_id, g.slices, g.replaced_at) for g in fresh.groups.values()]
    assert [f.path for f in older.latest_base_files()] == ["a/f1_0-1-0_1.parquet", "b/f2_0-1-0_1.parquet"]
    assert older.groups[("b", "f2")].replaced_at is None
    assert [f.path for f in older.extended(later, "2").latest_base_files()] == [
        "a/f1_0-1-0_2.parquet", "b/f2_0-1-0_1.parquet"]


def test_timeline_view_after_a_commit_reads_only_the_new_commit(tmp_path, monkeypatch):
    """A write's view, then the view after its commit: the second is the first extended by the
    new commit, not a build over every file group of the table again (issue 33)."""
    from dbt.adapters.hudilite.table.format import file_group
    from dbt.adapters.hudilite.table.storage.filesystem import Storage
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    storage.make_dirs(".hoodie/.temp")
    timeline = Timeline(storage)
    many = [stat(f"p{i}", f"f{i}", "20260101000000001") for i in range(500)]
    timeline.complete("20260101000000001", COMMIT, CommitMetadata("INSERT", many, {}))
    built = []
    real_init = file_group.FileSystemView.__init__
    monkeypatch.setattr(file_group.FileSystemView, "__init__",
                        lambda self, commits, *a, **k: (built.append(len(list(commits))), real_init(self, commits, *a, **k))[1])
    added = []
    real_apply = file_group.FileSystemView._apply
    monkeypatch.setattr(file_group.FileSystemView, "_apply",
                        lambda self, commits, copied: (added.append(sum(len(m.write_stats) for _, m in commits)),
                                                       real_apply(self, commits, copied))[1])
    before = timeline.view()
    timeline.complete("20260101000000002", COMMIT,
                      CommitMetadata("INSERT", [stat("p7", "f7", "20260101000000002", prev="20260101000000001")], {}))
    after = timeline.view()
    assert built == [1]  # one full build, for the first view
    assert added == [500, 1]  # then the new commit's one write stat
    assert len(before.groups[("p7", "f7")].slices) == 1 and len(after.groups[("p7", "f7")].slices) == 2
    built.clear()
    # A commit that completed behind a newer one (a concurrent writer's) is not an extension.
    timeline.complete("20260101000000004", COMMIT, CommitMetadata("INSERT", [stat("p8", "g8", "20260101000000004")], {}))
    timeline.view()
    timeline.complete("20260101000000003", COMMIT, CommitMetadata("INSERT", [stat("p9", "g9", "20260101000000003")], {}))
    latest = timeline.view()
    assert built == [4]
    assert after.latest_base_files() == FileSystemView(timeline.commits("20260101000000002")).latest_base_files()
    assert latest.latest_base_files() == FileSystemView(timeline.commits()).latest_base_files()
    assert {("p8", "g8"), ("p9", "g9")} <= set(latest.groups)
