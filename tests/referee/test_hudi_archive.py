"""Hudi's archived timeline, both ways: Hudi's Spark reader reads a table after our archival
(snapshots, and incremental queries that start in the archived range), and we open, read and
continue a table whose timeline Hudi's own writer archived."""

import os
import posixpath
import shutil
from types import SimpleNamespace

import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.format import archived_timeline
from dbt.adapters.hudilite.table.format.instant import COMPLETED
from dbt.adapters.hudilite.table.storage.layout import HOODIE_DIR
from dbt.adapters.hudilite.table.format.properties import TableConfig
from tests.referee.hudi_spark import changes_options
from tests.referee.test_hudi_spark_reads import compare
from tests.referee.test_hudi_spark_writes import SCHEMA, agree, hudi_options

FALLBACK = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
# Hudi's archiver merges small archive files when asked: it reads ours record by record.
MERGE_ARCHIVES = {"hoodie.archive.merge.enable": "true", "hoodie.archive.merge.files.batch.size": "2",
                  "hoodie.archive.merge.small.file.limit.bytes": str(100 * 1024 * 1024)}
ARCHIVE_EARLY = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                 "hoodie.cleaner.commits.retained": "1"}


def hudi_archived_commits(hudi_spark, path: str) -> list:
    """Hudi's `show_archived_commits` of the table at `path`, in the referee's session."""
    return hudi_spark.request("archived_commits", path=path)["rows"]


def _archive_entries(table: HudiTable):
    folder = table.context.timeline.archived_dir
    names = archived_timeline.archive_files(os.listdir(os.path.join(table.path, folder)))
    entries = [e for name in names for e in archived_timeline.read_archive_file(table.storage, name, folder)]
    return names, entries


def _rows(spark, n):
    return spark.createDataFrame([(n % 3, "eu", n, f"w{n}"), (10 + n, "us", n, f"n{n}")], SCHEMA)


def changes_agree(table: HudiTable, hudi_spark, begin: str, end: str, archived_through: str, all_rows: bool) -> None:
    """An incremental query from `begin`, before or inside the archived range. No Hudi version
    opens the archive for it on table version 6. Hudi 0.15 and 1.0 filter on commit times from
    the first active commit in range: the rows of the active commits. Hudi 1.1 reads the file
    groups the active commits in range wrote and keeps rows committed after `begin`: on a table
    its own writer grew (one file group per partition, topped up by every commit) that is every
    row changed after `begin` (`all_rows`), as we return; on ours (new keys go to new file
    groups) it is the active commits' rows, as it is on Hudi's own tables with
    hoodie.parquet.small.file.limit=0 (measured). A full table scan (Hudi's fallback) returns
    what we return."""
    label = f"changes ({begin}, {end}] with instants to {archived_through} archived"
    ours = table.read_changes(begin, end)
    theirs = hudi_spark.read(table.path, **changes_options(begin, end))
    if all_rows:
        compare(label, ours, theirs)
    else:
        compare(label + ", Hudi: active commits", ours.where(F.col("_hoodie_commit_time") > archived_through), theirs)
    compare(label + ", Hudi: full table scan", ours, hudi_spark.read(table.path, **changes_options(begin, end), **FALLBACK))


@pytest.fixture(scope="session")
def we_archived(spark, tmp_path_factory):
    """Our part of `test_hudi_reads_a_table_we_archived`, the same for every Hudi version, made
    once: seven upserts, a clean and an archival. (Its folder, the instants it completed, the
    instants it archived.)"""
    path = str(tmp_path_factory.mktemp("we_archived") / "t")
    table = HudiTable.create(spark, path, "events", partition_by=["region"], record_key=["id"], precombine="ts")
    for n in range(7):
        table.upsert(_rows(spark, n))
    everything = [i.timestamp for i in table.context.timeline.completed()]
    table.clean(retain_commits=2)
    return path, everything, table.archive(keep_min_commits=2, keep_max_commits=3)


def test_hudi_reads_a_table_we_archived(spark, hudi_spark, tmp_path, we_archived):
    built, everything, archived = we_archived
    shutil.copytree(built, tmp_path / "t")  # each version's writer continues a copy of its own
    table = HudiTable.open(spark, str(tmp_path / "t"))
    assert archived

    # Hudi's format: one log file, each archived instant's three states, commits in full.
    names, entries = _archive_entries(table)
    assert names == [".commits_.archive.1_1-0-1"]
    assert [e.timestamp for e in entries if e.state == COMPLETED] == archived
    assert all(e.metadata["partitionToWriteStats"] for e in entries if e.state == COMPLETED)
    assert table.context.timeline.archived().through == archived[-1]
    # Hudi's archived timeline reads it: the archived commits, with what they wrote.
    shown = hudi_archived_commits(hudi_spark, table.path)
    print(f"Hudi {hudi_spark.version} show_archived_commits:", shown[:2])
    assert sorted({r["commit_time"] for r in shown}) == archived, shown

    compare("snapshot after our archival", table.read(), hudi_spark.snapshot(table.path))
    for begin in ("000", archived[0]):
        changes_agree(table, hudi_spark, begin, everything[-1], archived[-1], all_rows=False)

    # Hudi's writer goes on and archives too, merging the small archive files: it reads ours.
    for n in range(7, 11):
        hudi_spark.write(table.path, [r.asDict() for r in _rows(spark, n).collect()], SCHEMA,
                         {**hudi_options(table, "upsert", "default"), **ARCHIVE_EARLY, **MERGE_ARCHIVES})
    table = HudiTable.open(spark, table.path)
    names, entries = _archive_entries(table)
    print("archive files after Hudi's archival:", names)
    done = sorted({e.timestamp for e in entries if e.state == COMPLETED and e.action in ("commit", "replacecommit")})
    assert done[:len(archived)] == archived and len(done) > len(archived)
    assert table.context.timeline.archived().through == done[-1]
    agree(table, hudi_spark, "after Hudi's writer archived behind our archive")


def test_we_continue_a_table_hudi_archived(spark, hudi_spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by=["region"], record_key=["id"],
                             precombine="ts")
    table.upsert(_rows(spark, 0))
    for n in range(1, 5):  # keep.max 3: the fifth commit archives (suite time: the fewest that do)
        hudi_spark.write(table.path, [r.asDict() for r in _rows(spark, n).collect()], SCHEMA,
                         {**hudi_options(table, "upsert", "default"), **ARCHIVE_EARLY})
    table = HudiTable.open(spark, table.path)  # refused before: Java's archive was unreadable to us
    names, entries = _archive_entries(table)
    assert names, "Hudi's writer archived nothing"
    java_archived = sorted({e.timestamp for e in entries if e.state == COMPLETED and e.action == "commit"})
    timeline = table.context.timeline
    assert timeline.archived().through == java_archived[-1]
    assert all(i.timestamp > java_archived[-1] for i in timeline.completed())
    agree(table, hudi_spark, "a table Hudi's writer archived")

    for begin in ("000", java_archived[0]):
        changes_agree(table, hudi_spark, begin, timeline.completed()[-1].timestamp, java_archived[-1],
                      all_rows=not hudi_spark.version.startswith(("0.", "1.0.")))

    # We continue it: upserts over files the archived commits wrote, then our own archival on
    # top of Java's archive files.
    for n in range(8, 13):
        table.upsert(_rows(spark, n))
    agree(table, hudi_spark, "our upserts after Hudi's archival")
    table.clean(retain_commits=1)
    ours = table.archive(keep_min_commits=2, keep_max_commits=3)
    assert ours and ours[0] > java_archived[-1]
    after, _ = _archive_entries(table)
    assert after[:len(names)] == names and len(after) == len(names) + 1
    assert archived_timeline.archive_version(after[-1]) == archived_timeline.archive_version(names[-1]) + 1
    table = HudiTable.open(spark, table.path)
    agree(table, hudi_spark, "after our archival behind Hudi's")
    hudi_spark.write(table.path, [r.asDict() for r in _rows(spark, 20).collect()], SCHEMA,
                     {**hudi_options(table, "upsert", "default"), **ARCHIVE_EARLY})
    agree(HudiTable.open(spark, table.path), hudi_spark, "Hudi's upsert after our archival")


def test_we_continue_a_table_hudi_made_and_archived_in_its_own_folder(spark, hudi_spark, tmp_path):
    """Hudi 1.x makes a version 6 table with hoodie.archivelog.folder=history (0.x: archived):
    we read its archive there, and archive there too."""
    path = str(tmp_path / "t")
    config = SimpleNamespace(config=TableConfig("events", ["region"], ["id"], precombine_field="ts"))
    for n in range(5):  # keep.max 3: the fifth commit archives (suite time: the fewest that do)
        hudi_spark.write(path, [r.asDict() for r in _rows(spark, n).collect()], SCHEMA,
                         {**hudi_options(config, "upsert", "default"), **ARCHIVE_EARLY})
    table = HudiTable.open(spark, path)
    folder = posixpath.join(HOODIE_DIR, table.config.archive_folder)
    assert table.context.timeline.archived_dir == folder
    if not hudi_spark.version.startswith(("0.", "1.0.")):
        assert folder == ".hoodie/history"
    names, entries = _archive_entries(table)
    assert names, f"Hudi's writer archived nothing into {folder}"
    java_archived = max(e.timestamp for e in entries if e.state == COMPLETED and e.action == "commit")
    assert table.context.timeline.archived().through == java_archived
    agree(table, hudi_spark, f"a table Hudi made, archived into {folder}")

    for n in range(8, 13):
        table.upsert(_rows(spark, n))
    table.clean(retain_commits=1)
    assert table.archive(keep_min_commits=2, keep_max_commits=3)
    after, _ = _archive_entries(table)
    assert len(after) == len(names) + 1, (names, after)
    agree(HudiTable.open(spark, path), hudi_spark, f"after our archival into {folder}")
    shown = hudi_archived_commits(hudi_spark, path)
    assert max(r["commit_time"] for r in shown) == HudiTable.open(spark, path).context.timeline.archived().through
