"""Small-file handling on insert: new rows top up a partition's small file groups (a new slice
of each) before new file groups are made, so a table appended to every hour keeps a few files
per partition. Time travel to before a top-up still reads the older slice."""


import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import ConcurrentWriteError, DataError, HudiTable
from dbt.adapters.hudilite.table.format.file_group import FileGroup, BaseFile
from dbt.adapters.hudilite.table.spark.file_sizing import FileSizing, TopUp, average_record_bytes, plan_top_ups
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.core.test_concurrency import while_writing
from tests.core.test_writes import committed_files, parquet_files_on_disk


def group(partition, file_id, size, instant="1"):
    return FileGroup(partition, file_id, [BaseFile(partition, file_id, instant, f"{partition}/{file_id}.parquet", 10, size)])


def test_plan_offers_small_groups_smallest_first_with_the_rows_that_fit():
    sizing = FileSizing(small_file_limit=100, max_file_size=120)
    plan = plan_top_ups([group("a", "f1", 90), group("a", "f2", 10), group("a", "big", 100), group("b", "f3", 115),
                         group("c", "f4", 120)], sizing, record_bytes=10)
    assert plan == {"a": [TopUp("f2", "1", "a/f2.parquet", 11), TopUp("f1", "1", "a/f1.parquet", 3)]}
    # b, c and big are not small (at or above the limit)
    assert plan_top_ups([group("a", "f1", 1)], FileSizing(small_file_limit=0), 10) == {}


def test_average_record_size_comes_from_recent_commits(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    assert average_record_bytes([]) == 1024  # Hudi's estimate before any commit
    table.insert(spark.range(1000).select("id"))
    stats = table.commit_metadata(table.timeline()[-1]).write_stats
    assert average_record_bytes(table.context.timeline.commits()) == sum(s.fileSizeInBytes for s in stats) // 1000


def hourly(spark, hour, rows=50):
    return spark.range(hour * rows, (hour + 1) * rows, numPartitions=2).select(
        "id", F.lit(f"2026-11-{1 + hour % 2:02d}").alias("day"), F.lit(hour).alias("hour"))


def test_hourly_appends_keep_a_few_file_groups_per_partition(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="day")
    instants = [table.insert(hourly(spark, hour)) for hour in range(8)]
    files = table.latest_base_files()
    per_day = {}
    for f in files:
        per_day.setdefault(f.partition, set()).add(f.file_id)
    assert {p: len(ids) for p, ids in per_day.items()} == {"day=2026-11-01": 2, "day=2026-11-02": 2}  # one per task
    later = table.commit_metadata(instants[-1]).write_stats
    assert all(s.prevCommit and s.numInserts == 50 // 2 and s.numUpdateWrites == 0 for s in later)
    rows = table.read()
    assert rows.count() == 400 and rows.select("_hoodie_record_key").distinct().count() == 400
    assert sorted(r.id for r in rows.collect()) == list(range(400))
    # Stored rows keep their commit time and key; time travel to before a top-up reads the older slice.
    assert rows.where("hour = 0").select("_hoodie_commit_time").distinct().collect()[0][0] == instants[0]
    assert table.read(as_of=instants[3]).count() == 200
    assert sorted(r.hour for r in table.read_changes(instants[6], instants[7]).select("hour").distinct().collect()) == [7]
    assert table.validate() == []
    assert parquet_files_on_disk(table.path) == committed_files(table)
    assert_hudi_rs_agrees(table)
    assert table.delete(table.read().where("hour = 3").select("_hoodie_record_key"))  # the key runs find them
    assert table.read().where("hour = 3").count() == 0 and table.validate() == []


def test_a_full_small_file_takes_what_fits_and_the_rest_goes_to_new_file_groups(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    table.insert(spark.range(100, numPartitions=1))
    (small,) = table.latest_base_files()
    record = average_record_bytes(table.context.timeline.commits())
    table.file_sizing = FileSizing(small_file_limit=small.size + 1, max_file_size=small.size + 30 * record)
    instant = table.insert(spark.range(100, 200, numPartitions=1))
    stats = table.commit_metadata(instant).write_stats
    topped = [s for s in stats if s.prevCommit]
    assert [(s.fileId, s.numInserts, s.numWrites) for s in topped] == [(small.file_id, 30, 130)]
    assert sum(s.numInserts for s in stats if not s.prevCommit) == 70
    assert sorted(r.id for r in table.read().collect()) == list(range(200))
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_keyed_inserts_top_up_and_still_refuse_stored_keys(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="p")
    rows = lambda lo, hi: spark.range(lo, hi, numPartitions=1).select("id", F.lit("a").alias("p"))  # noqa: E731
    table.insert(rows(0, 10))
    instant = table.insert(rows(10, 20))
    (stat,) = table.commit_metadata(instant).write_stats
    assert stat.prevCommit and stat.numInserts == 10 and stat.numWrites == 20
    with pytest.raises(DataError, match="record keys the table holds already"):
        table.insert(rows(15, 25))
    assert table.read().count() == 20 and table.validate() == []  # the index holds each key once
    table.upsert(rows(5, 6).withColumn("p", F.lit("b")))
    assert table.read().where("p = 'b'").count() == 1 and table.validate() == []
    assert_hudi_rs_agrees(table)


def test_an_insert_whose_small_file_another_writer_topped_up_meanwhile_is_written_as_new_file_groups(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    rows = lambda lo, hi: spark.range(lo, hi, numPartitions=1).select("id", F.lit("a").alias("p"))  # noqa: E731
    table.insert(rows(0, 10))
    other = HudiTable.open(spark, table.path)
    theirs = while_writing(table, lambda: other.insert(rows(10, 20)))
    mine = table.insert(rows(20, 30))
    assert theirs[0] < mine
    assert table.commit_metadata(theirs[0]).write_stats[0].prevCommit  # they topped it up first
    assert [s.prevCommit for s in table.commit_metadata(mine).write_stats] == [None]  # we wrote a new group
    assert sorted(r.id for r in table.read().collect()) == list(range(30))
    assert table.validate() == [] and parquet_files_on_disk(table.path) == committed_files(table)
    assert_hudi_rs_agrees(table)


def test_a_conflict_that_is_not_a_top_up_is_not_written_again(spark, tmp_path):
    """Only an insert that topped up a small file is written again after a conflict; any other
    conflict (here the same new key from a concurrent writer) fails, leaving nothing behind."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="p")
    rows = lambda lo, hi: spark.range(lo, hi, numPartitions=1).select("id", F.lit("a").alias("p"))  # noqa: E731
    table.insert(rows(0, 10))
    table.file_sizing = FileSizing(small_file_limit=0)
    other = HudiTable.open(spark, table.path)
    other.file_sizing = FileSizing(small_file_limit=0)
    theirs = while_writing(table, lambda: other.insert(rows(10, 11)))
    with pytest.raises(ConcurrentWriteError, match="also inserted record key '10'"):
        table.insert(rows(10, 12))
    assert [i.state for i in table.timeline()] == ["COMPLETED", "COMPLETED"] and theirs
    assert sorted(r.id for r in table.read().collect()) == list(range(11))
    assert table.validate() == [] and parquet_files_on_disk(table.path) == committed_files(table)


def test_on_a_table_of_many_file_groups_an_insert_offers_the_small_files_of_its_own_partitions_only(
        spark, tmp_path, monkeypatch):
    """Issue 33: what an insert's tasks are sent does not grow with the table's partitions. Past
    TOP_UP_ALL_UP_TO live file groups the offer holds the partitions the rows hold, which still
    get topped up (a date partition: a path the writing task formats itself)."""
    from dbt.adapters.hudilite.table.operations import insert as inserting

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="day")
    days = F.date_add(F.lit("2026-11-01").cast("date"), (F.col("id") % 6).cast("int"))
    table.insert(spark.range(60, numPartitions=2).select("id", days.alias("day")))
    monkeypatch.setattr(inserting, "TOP_UP_ALL_UP_TO", 3)
    offered, persisted = [], []
    real = inserting.run_write_job
    monkeypatch.setattr(inserting, "run_write_job", lambda df, spec, *a: (
        offered.append(dict(spec.top_ups)), persisted.append(spark.sparkContext._jsc.getPersistentRDDs().size()),
        real(df, spec, *a))[2])
    instant = table.insert(spark.range(100, 110, numPartitions=1).select(
        "id", F.when(F.col("id") < 105, F.lit("2026-11-02")).otherwise(F.lit("2026-12-25")).cast("date").alias("day")))
    assert set(offered[0]) == {"day=2026-11-02"}
    stats = table.commit_metadata(instant).write_stats
    assert {(s.partitionPath, bool(s.prevCommit), s.numInserts) for s in stats} == {
        ("day=2026-11-02", True, 5), ("day=2026-12-25", False, 5)}
    assert sorted(r.id for r in table.read().collect()) == list(range(60)) + list(range(100, 110))
    # Rows Spark estimates as large are kept (cached) for the write, and let go after it.
    monkeypatch.setattr(inserting, "KEEP_ROWS_ABOVE_BYTES", -1)
    cached = spark.sparkContext._jsc.getPersistentRDDs().size()
    instant = table.insert(spark.range(200, 203, numPartitions=1).select("id", F.lit("2026-11-03").cast("date").alias("day")))
    assert set(offered[1]) == {"day=2026-11-03"}
    assert [(s.partitionPath, bool(s.prevCommit), s.numInserts) for s in table.commit_metadata(instant).write_stats] == [
        ("day=2026-11-03", True, 3)]
    assert persisted[1] == cached + 1 and spark.sparkContext._jsc.getPersistentRDDs().size() == cached
    assert table.read().count() == 73
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
