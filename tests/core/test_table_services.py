"""Table services that keep a long-lived table fast: timeline archival (with the cleaner it
waits for) and clustering. Each test checks the timeline, the files on disk, the rows, and
hudi-rs."""

import json
import os

import pytest

from dbt.adapters.hudilite.table import ConfigurationError, HudiTable, TableServices, TimelineError
from dbt.adapters.hudilite.table.format import archived_timeline
from dbt.adapters.hudilite.table.format import avro_metadata
from dbt.adapters.hudilite.table.storage import faults
from dbt.adapters.hudilite.table.spark.file_sizing import FileSizing
from dbt.adapters.hudilite.table.storage.layout import ARCHIVED_DIR, ARCHIVED_VIEW
from tests.core.hudi_rs import assert_hudi_rs_agrees, hudi_rs_snapshot, rows_of_arrow
from tests.core.test_concurrency import while_writing

SMALL = TableServices(retain_commits=2, keep_min_commits=3, keep_max_commits=5)


def customers(spark, rows):
    return spark.createDataFrame(rows, "id int, name string, region string")


def active_completed(table):
    return [i.timestamp for i in table.timeline() if i.is_completed]


def rows(table, as_of=None):
    return sorted((r.id, r.name, r.region) for r in table.read(as_of).collect())


def keyed_history(spark, tmp_path, writes=12, services=SMALL):
    """A keyed, partitioned table through upserts, deletes and an overwrite, with the services
    run after each write as dbt runs them; returns the table, the instants and the expected rows."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    expected, instants = {}, []
    for n in range(writes):
        if n == 6:  # a replacecommit: region eu is rewritten
            batch = [(100 + n, f"eu{n}", "eu")]
            instants.append(table.insert_overwrite(customers(spark, batch)))
            expected = {k: v for k, v in expected.items() if v[1] != "eu"}
        else:
            batch = [(n, f"new{n}", "eu" if n % 2 else "us"), (n - 1, f"upd{n}", "us")] if n else [(0, "a", "us")]
            instants.append(table.upsert(customers(spark, batch)))
        for r in batch:
            expected[r[0]] = (r[1], r[2])
        table.run_services(services)
        assert len(active_completed(table)) <= services.keep_max_commits
    return table, instants, sorted((k, *v) for k, v in expected.items())


def test_archival_keeps_the_active_timeline_short_and_the_table_unchanged(spark, tmp_path):
    table, instants, expected = keyed_history(spark, tmp_path)
    active = active_completed(table)
    assert 3 <= len(active) <= 5 and active == instants[-len(active):]
    archived = table.context.timeline.archived()
    assert (archived.first, archived.through, archived.count) == (instants[0], instants[-len(active) - 1], 12 - len(active))
    # Nothing of the archived instants is left on the active timeline; their files went to the archive.
    hoodie = os.listdir(os.path.join(table.path, ".hoodie"))
    assert not [n for n in hoodie if n[:17] <= archived.through and n[:1].isdigit()]
    archive_files = sorted(os.listdir(os.path.join(table.path, ARCHIVED_DIR)))
    kept = [e.timestamp for f in archive_files for e in archived_timeline.read_archive_file(table.storage, f) if e.state == "COMPLETED"]
    assert kept == instants[:archived.count] and archive_files == archived_timeline.archive_files(archive_files)

    # The table reads as before, through us and hudi-rs; the index and the files agree.
    assert rows(table) == expected
    assert rows(HudiTable.open(spark, table.path)) == expected
    assert rows_of_arrow(hudi_rs_snapshot(table.path), ["id", "name", "region"]) == expected
    assert_hudi_rs_agrees(table)
    assert table.validate() == []
    assert table.history()[0]["action"] == "archived"

    # Time travel reaches the retained instants; an archived one is refused, naming the range.
    assert rows(table, as_of=table.earliest_readable_instant())
    with pytest.raises(TimelineError, match=f"archived part of the timeline .*{archived.count} instants from "
                                            f"{instants[0]} to {archived.through}"):
        table.read(as_of=instants[1])
    # A changes read may start inside the archived range: what changed since is in live slices.
    since = instants[3]
    changed = {r.id for r in table.read_changes(since).collect()}
    assert changed == {r[0] for r in expected if r[0] >= 3 or r[0] == 100 + 6}


def test_writes_after_archival_build_on_the_archived_view(spark, tmp_path):
    table, instants, expected = keyed_history(spark, tmp_path)
    # An upsert of a key last written by an archived instant, an overwrite of a partition whose
    # file groups archived instants wrote, and an insert that tops up an archived slice.
    table.upsert(customers(spark, [(0, "again", "us")]))
    table.insert_overwrite(customers(spark, [(200, "eu-new", "eu")]))
    want = {r[0]: r[1:] for r in expected if r[2] != "eu"}
    want.update({0: ("again", "us"), 200: ("eu-new", "eu")})
    assert rows(table) == sorted((k, *v) for k, v in want.items())
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_archival_waits_for_the_cleaner_and_for_writers_in_flight(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    for n in range(8):  # every upsert rewrites the one file group: older slices wait for the cleaner
        table.upsert(customers(spark, [(1, f"v{n}", "us")]))
    assert table.archive(3, 5) == [] and len(active_completed(table)) == 8

    other = HudiTable.open(spark, table.path)
    table.clean(retain_commits=2)
    archived_meanwhile = while_writing(table, lambda: other.archive(3, 5))
    table.upsert(customers(spark, [(1, "v8", "us")]))
    assert archived_meanwhile == [[]]  # a writer was in flight: its conflict check needs the recent instants
    assert len(table.archive(3, 5)) > 0 and len(active_completed(table)) == 3
    assert rows(table) == [(1, "v8", "us")]
    assert_hudi_rs_agrees(table)


def test_a_replaced_file_group_is_never_archived_while_its_files_remain(spark, tmp_path):
    """Archiving the replacecommit before the cleaner removed the replaced files would make
    Hudi's readers read them again (they only know replacements from the active timeline)."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region")
    table.file_sizing = FileSizing(small_file_limit=0)
    table.insert(customers(spark, [(1, "a", "eu")]))
    table.insert_overwrite(customers(spark, [(2, "b", "eu")]))
    for n in range(6):
        table.insert(customers(spark, [(10 + n, "c", "us")]))
    assert table.archive(3, 5) == []
    table.clean(retain_commits=2)
    assert table.archive(3, 5)
    assert sorted(r.id for r in table.read().collect()) == [2] + list(range(10, 16))
    assert sorted(r["id"] for r in hudi_rs_snapshot(table.path).to_pylist()) == [2] + list(range(10, 16))


def test_an_append_only_table_is_archived_without_a_clean(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    table.file_sizing = FileSizing(small_file_limit=0)  # every append a new file group: nothing to clean
    for n in range(7):
        table.insert(customers(spark, [(n, "x", "us")]))
    assert len(table.archive(3, 5)) == 4
    assert sorted(r.id for r in table.read().collect()) == list(range(7))
    assert table.validate() == []  # the archived instants' files are committed, not stray
    assert_hudi_rs_agrees(table)


def test_an_archival_that_dies_is_finished_by_the_next(spark, tmp_path, monkeypatch):
    table, instants, expected = keyed_history(spark, tmp_path, writes=5, services=TableServices(2, 3, 10))
    assert table.context.timeline.archived().through is None

    def die(phase):
        if phase == "archive":
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(faults, "reach", die)
    with pytest.raises(KeyboardInterrupt):
        HudiTable.open(spark, table.path).archive(2, 4)
    monkeypatch.undo()
    # The archived view is written, the instant files are still there: readers skip them.
    through = table.context.timeline.archived().through
    assert through == instants[2]
    assert any(n.startswith(instants[0]) for n in os.listdir(os.path.join(table.path, ".hoodie")))
    assert active_completed(table) == instants[3:] and rows(table) == expected
    table.upsert(customers(spark, [(50, "after", "us")]))
    assert table.archive(2, 4) == []  # nothing more is due, but the leftovers go
    assert not any(n[:17] <= through for n in os.listdir(os.path.join(table.path, ".hoodie")) if n[:1].isdigit())
    assert rows(table) == sorted(expected + [(50, "after", "us")])
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_keep_limits_must_leave_the_cleaners_instants_active(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    with pytest.raises(ConfigurationError, match=r"keep_min_commits \(10\) must be greater than retain_commits \(10\)"):
        table.run_services(TableServices(retain_commits=10, keep_min_commits=10, keep_max_commits=12))
    with pytest.raises(ConfigurationError, match="1 <= keep_min_commits < keep_max_commits"):
        table.archive(5, 5)
    assert not os.path.exists(os.path.join(table.path, ARCHIVED_VIEW))


def test_the_cli_shows_the_archived_range_and_the_tables_health(spark, tmp_path, capsys):
    from dbt.adapters.hudilite import cli

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region")
    table.file_sizing = FileSizing(small_file_limit=0)
    for n in range(7):
        table.insert(customers(spark, [(n, "x", "us" if n % 2 else "eu")]))
    assert cli.main(["archive", table.path, "--keep-min", "3", "--keep-max", "5"]) == 0
    assert "archived 4 instants" in capsys.readouterr().out
    assert cli.main(["timeline", table.path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "archived" in lines[1] and "4 instants to" in lines[1] and len(lines) == 2 + 3
    assert cli.main(["stats", table.path, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["rows"], stats["files"], stats["active_instants"], stats["archived_instants"]) == (7, 7, 3, 4)
    assert stats["partitions"]["region=us"]["files"] == 3 and stats["file_sizes"]["<1 MB"] == 7
    assert cli.main(["stats", table.path]) == 0
    assert "3 active instants (0 pending), 4 archived" in capsys.readouterr().out


def scattered(spark, tmp_path, auto_keys=False, appends=4):
    """A table whose partitions each hold one small file group per append (top-ups off)."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region",
                             record_key=None if auto_keys else "id")
    table.file_sizing = FileSizing(small_file_limit=0)
    instants = []
    for n in range(appends):
        batch = [(n * 10 + i, f"n{(7 * n + i) % 10}", "eu" if i % 2 else "us") for i in range(6)]
        instants.append(table.insert(customers(spark, batch)))
    table.file_sizing = FileSizing()
    return table, instants


def test_clustering_rewrites_small_file_groups_into_one_sorted_file_per_partition(spark, tmp_path):
    table, instants = scattered(spark, tmp_path)
    before = table.read().collect()
    scattered_files = len(table.latest_base_files())
    assert scattered_files >= 8  # at least one per partition and append
    instant = table.cluster(cluster_by=["name"])
    metadata = table.commit_metadata(instant)
    assert [i.action for i in table.timeline()][-1] == "replacecommit" and metadata.operation == "CLUSTER"
    assert {p: sorted(ids) for p, ids in metadata.replaced_file_ids.items()} == {
        p: sorted(ids) for p, ids in table.context.timeline.view(instants[-1]).live_file_ids().items()}
    files = table.latest_base_files()
    assert len(files) == 2 and all(f.instant == instant for f in files)
    # The requested instant holds Hudi's Avro clustering plan: every replaced slice, the sort column.
    with open(os.path.join(table.path, ".hoodie", f"{instant}.replacecommit.requested"), "rb") as f:
        requested = avro_metadata.decode(f.read())
    plan = requested["clusteringPlan"]
    assert requested["operationType"] == "CLUSTER"
    assert plan["strategy"]["strategyParams"] == {"hoodie.clustering.plan.strategy.sort.columns": "name"}
    assert sorted(s["fileId"] for g in plan["inputGroups"] for s in g["slices"]) == \
        sorted(i for ids in metadata.replaced_file_ids.values() for i in ids)
    assert [g["numOutputFileGroups"] for g in plan["inputGroups"]] == [1, 1]
    # The rows are the same, meta columns and all, but for the file name; within a file they are sorted.
    def by_key(rows):
        return sorted((r.asDict() for r in rows), key=lambda r: r["id"])
    after = table.read().collect()
    strip = lambda rs: [{k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in by_key(rs)]
    assert strip(after) == strip(before)
    for f in files:
        names = [r.name for r in table.spark.read.parquet(os.path.join(table.path, f.path)).collect()]
        assert names == sorted(names)
    # No row changed: a changes read across the clustering sees nothing new.
    assert table.read_changes(instants[-1]).count() == 0
    # Time travel to before it reads the old file groups until the cleaner removes them.
    assert len(table.latest_base_files(instants[-1])) == scattered_files and table.read(as_of=instants[-1]).count() == 24
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
    assert table.cluster() is None  # one file group per partition: nothing to do


def test_an_auto_keyed_table_is_clustered_and_its_key_runs_stay_right(spark, tmp_path):
    table, instants = scattered(spark, tmp_path, auto_keys=True)
    keys = sorted(r._hoodie_record_key for r in table.read().collect())
    table.cluster()
    assert sorted(r._hoodie_record_key for r in table.read().collect()) == keys
    assert table.validate() == []  # the key-run index agrees with the snapshot
    table.delete(table.spark.createDataFrame([(keys[0],)], "_hoodie_record_key string"))
    assert table.read().count() == 23
    assert_hudi_rs_agrees(table)


def test_clustering_gives_way_to_a_concurrent_upsert_of_its_file_groups(spark, tmp_path):
    from dbt.adapters.hudilite.table import ConcurrentWriteError

    table, instants = scattered(spark, tmp_path)
    scattered_files = len(table.latest_base_files())
    other = HudiTable.open(spark, table.path)
    while_writing(table, lambda: other.upsert(customers(spark, [(0, "changed", "us")])))
    with pytest.raises(ConcurrentWriteError):
        table.cluster()
    assert [r.name for r in table.read().where("id = 0").collect()] == ["changed"]
    assert len(table.latest_base_files()) == scattered_files and table.validate() == []


def test_services_cluster_every_n_commits(spark, tmp_path):
    table, instants = scattered(spark, tmp_path)
    services = TableServices(retain_commits=5, keep_min_commits=6, keep_max_commits=8, cluster_every=3)
    table.run_services(services)  # four commits since the start: due
    clustered = [i for i, m in table.context.timeline.commits() if m.operation == "CLUSTER"]
    assert len(clustered) == 1 and len(table.latest_base_files()) == 2
    table.file_sizing = FileSizing(small_file_limit=0)
    table.insert(customers(spark, [(100, "z", "us")]))
    table.run_services(services)  # one commit since: not due
    assert len([i for i, m in table.context.timeline.commits() if m.operation == "CLUSTER"]) == 1
    assert table.read().count() == 25


def test_the_cli_clusters_on_demand(spark, tmp_path, capsys):
    from dbt.adapters.hudilite import cli

    table, instants = scattered(spark, tmp_path)
    before = rows(table)
    assert cli.main(["cluster", table.path, "--by", "name, id"]) == 0
    out = capsys.readouterr().out
    reopened = HudiTable.open(spark, table.path)
    (instant,) = [i.timestamp for i, m in reopened.context.timeline.commits() if m.operation == "CLUSTER"]
    assert f"clustered at {instant}" in out
    assert len(reopened.latest_base_files()) == 2 and rows(reopened) == before
    for f in reopened.latest_base_files():
        names = [(r.name, r.id) for r in spark.read.parquet(os.path.join(table.path, f.path)).collect()]
        assert names == sorted(names)
    assert cli.main(["cluster", table.path]) == 0
    assert "nothing to cluster" in capsys.readouterr().out
