"""The index of an auto-keyed table: runs of keys per file group, kept in step with commits."""

import glob

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import ConfigurationError, HudiTable
from dbt.adapters.hudilite.table.index.key_ranges import holder
from tests.core.hudi_rs import assert_hudi_rs_agrees


def events(spark, first, count):
    # Two input partitions whose rows alternate between days: a task's rows of one day are
    # not consecutive in its input, yet each file group gets one run.
    return spark.range(first, first + count, numPartitions=2).select(
        F.col("id"), F.concat(F.lit("d"), (F.col("id") % 3).cast("string")).alias("day"))


def test_runs_cover_exactly_the_keys_and_follow_every_commit(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "e"), "events", partition_by="day")
    table.insert(events(spark, 0, 3000))
    assert table.build_index() == len(table.latest_base_files()) == 6  # one run per file group
    ranges = table.index
    table.insert(events(spark, 3000, 300))  # a delta with the new groups' runs
    by_id = {r.id: r._hoodie_record_key for r in table.read().collect()}
    doomed = [by_id[i] for i in (5, 6, 7, 3001)]
    groups_before = {f.file_id: f.instant for f in table.latest_base_files()}
    t3 = table.delete(spark.createDataFrame([(k,) for k in doomed + ["20990101000000000_0_1"]], "k string"))
    stats = table.commit_metadata(t3).write_stats
    holders = {f.file_id for f in table.latest_base_files() if f.instant == t3}
    assert {s.fileId for s in stats} == holders and len(holders) == 4  # only the holders were read and rewritten
    assert all(groups_before[s.fileId] == s.prevCommit for s in stats)
    assert set(by_id) - {r.id for r in table.read().collect()} == {5, 6, 7, 3001}
    runs = ranges.runs(table.context.timeline.completed(), table.context.timeline.view())
    # ids 5, 6 and 7 (days 2, 0, 1) sat inside runs of three groups, each split in two; 3001
    # began its run, which just got shorter
    assert sum(len(r) for r in runs.values()) == 12 + 3
    table.update({"id": "id * 10"}, where="id = 8")
    table.insert_overwrite(events(spark, 9000, 3).where("day = 'd0'"))  # replaced groups drop out
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_broken_run_is_reported(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "e"), "events")
    table.insert(events(spark, 0, 10))
    table.build_index()
    (path,) = glob.glob(str(tmp_path / "e" / ".hoodie/.hudilite/key_ranges/*.base.parquet"))
    runs = pq.read_table(path)
    pq.write_table(runs.set_column(3, "last", pc.subtract(runs.column("last"), 1)), path)  # each run one key short
    problems = table.validate()
    assert len(problems) == runs.num_rows == 2 and all(p.startswith("record index lacks key") for p in problems)


def test_holder_finds_the_run():
    runs = {"T_0": [(0, 9, "f1"), (12, 20, "f2")], "T_1": [(0, 4, "f3")]}
    assert [holder(runs, k) for k in ("T_0_0", "T_0_10", "T_0_20", "T_1_4", "T_1_5", "X_0_1", "nokey")] == [
        "f1", None, "f2", "f3", None, None, None]


def test_delete_on_an_auto_keyed_table_takes_one_key_column(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "e"), "events")
    table.insert(events(spark, 0, 10))
    with pytest.raises(ConfigurationError, match="delete takes one column of _hoodie_record_key"):
        table.delete(spark.createDataFrame([(1, 2)], "a long, b long"))
