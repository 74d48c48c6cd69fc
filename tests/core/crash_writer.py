"""One write in its own process, killed where HUDILITE_KILL_AT says (`table/storage/faults.py`).

    crash_writer.py PATH OPERATION    append | insert_overwrite | table | merge | merge_parallel | delete | cluster

Then it cleans with `retain_commits=1` and archives down to one instant; index compaction is
due after every commit."""

import os
import sys

from pyspark.sql import SparkSession

from dbt.adapters.hudilite.table import FileSizing, HudiTable
from dbt.adapters.hudilite.table.index import files as index_files
from tests.core.crash_cases import batch_for

os.environ["HUDILITE_KILL_PID"] = str(os.getpid())  # before Spark starts: the executors inherit it
index_files.COMPACT_AFTER_DELTAS = 0
path, operation = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2").getOrCreate())
table = HudiTable.open(spark, path)
batch = batch_for(spark, operation)
if operation == "cluster":
    table.cluster(cluster_by=["v"])
elif operation == "append":
    table.insert(batch)
elif operation == "insert_overwrite":
    table.insert_overwrite(batch)
elif operation == "table":
    table.insert_overwrite_table(batch)
elif operation in ("merge", "merge_parallel"):
    if operation == "merge_parallel":  # packed rewrite tasks, then an insert job
        table.file_sizing = FileSizing(small_write_bytes=0)
    table.upsert(batch)
else:
    table.delete(batch)
table.clean(retain_commits=1)
table.archive(keep_min_commits=1, keep_max_commits=2)
print("NOT KILLED", flush=True)
