"""Rewrite tasks get exactly the file groups `placement.pack` gives them, through Spark's own
hash partitioning."""

from pyspark.sql import functions as F

from dbt.adapters.hudilite.table.spark.placement import pack, routing_values
from dbt.adapters.hudilite.table.spark.writer import by_rewrite_task


def test_spark_hashes_ints_as_the_port_does(spark):
    values = routing_values(64)
    df = spark.createDataFrame([(v,) for v in values], "v int")
    assert [r[0] for r in df.select(F.pmod(F.hash("v"), F.lit(64))).collect()] == list(range(64))


def test_each_rewrite_task_gets_the_file_groups_packed_for_it(spark):
    sizes = {f"fg-{i}": (i % 5 + 1) * 100 for i in range(23)}
    rows = spark.createDataFrame([(f, k, f"v{k}") for f in sizes for k in range(3)], "file_id string, k int, v string")
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "8")  # the cap on rewrite tasks
    try:
        out, tasks = by_rewrite_task(rows, "file_id", sizes)
        assert tasks == 8 and out.columns == rows.columns
        placed = {(r.file_id, r.task) for r in out.select("file_id", F.spark_partition_id().alias("task")).collect()}
        assert placed == set(pack(sizes, 8).items())
        assert sorted(tuple(r) for r in out.collect()) == sorted(tuple(r) for r in rows.collect())
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
