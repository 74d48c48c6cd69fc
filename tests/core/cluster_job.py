"""Run in its own process against a standalone master: write and read a table, print a report."""

import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable

master, path = sys.argv[1], sys.argv[2]
spark = (
    SparkSession.builder.master(master).appName("hudilite-cluster-test")
    .config("spark.ui.enabled", "false").config("spark.executor.memory", "1g")
    .config("spark.sql.session.timeZone", "UTC").getOrCreate()
)
table = HudiTable.create(spark, path, "on_cluster", partition_by="bucket")
rows = spark.range(0, 20000, numPartitions=4).select("id", (F.col("id") % 3).alias("bucket"))
t1 = table.insert(rows)
t2 = table.insert_overwrite(spark.range(50000, 50010, numPartitions=2).select("id", F.lit(0).cast("long").alias("bucket")))
executor_pids = (
    spark.range(0, 4, numPartitions=4).mapInArrow(
        lambda batches: (__import__("pyarrow").RecordBatch.from_pylist([{"pid": os.getpid()}]) for _ in batches),
        "pid long",
    ).collect()
)
report = {
    "instants": [t1, t2],
    "count": table.read().count(),
    "count_t1": table.read(as_of=t1).count(),
    "driver_pid": os.getpid(),
    "executor_pids": sorted({r.pid for r in executor_pids}),
    "task_writers": sorted({s.path.split("_")[1] for s in table.commit_metadata(t1).write_stats}),
}
print("REPORT " + json.dumps(report))
spark.stop()
