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


def jvm_ancestor(pid: int) -> str:
    """The command line of the nearest Java process above `pid`: the JVM that started it."""
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode()
        if "java" in cmdline.split(" ", 1)[0]:
            return cmdline
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return ""


def task_report(batches):
    import pyarrow as pa

    for _ in batches:
        launcher = jvm_ancestor(os.getpid())
        yield pa.RecordBatch.from_pylist([{"pid": os.getpid(), "jvm": launcher.split(" -cp ")[0][:40],
                                           "executor_backend": "CoarseGrainedExecutorBackend" in launcher}])


executor_pids = spark.range(0, 4, numPartitions=4).mapInArrow(task_report, "pid long, jvm string, executor_backend boolean").collect()
report = {
    "instants": [t1, t2],
    "count": table.read().count(),
    "count_t1": table.read(as_of=t1).count(),
    "driver_pid": os.getpid(),
    "executor_pids": sorted({r.pid for r in executor_pids}),
    "tasks_in_executor_backends": all(r.executor_backend for r in executor_pids),
    "driver_is_executor_backend": "CoarseGrainedExecutorBackend" in jvm_ancestor(os.getpid()),
    "task_writers": sorted({s.path.split("_")[1] for s in table.commit_metadata(t1).write_stats}),
}
print("REPORT " + json.dumps(report))
spark.stop()
