"""Every write path over rows too wide for 100k-row Arrow batches and for Spark's 4096-row parquet
reader batches, in a JVM whose heap (and direct memory) is small enough that such a batch kills it.

    wide_rows_writer.py PATH ROWS WIDTH    tables of ROWS rows of about WIDTH bytes each

A keyed table takes an insert, an upsert, a delete, the index build, a changes read, an update
and an overwrite of one partition; an auto-keyed one two inserts, a delete+insert and a
clustering. Prints one line per step: `<step> <rows> <distinct ids> <tag:rows,...> <files>`,
then `DONE`; a dead JVM ends it early."""

import collections
import os
import sys
import time

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.spark.file_sizing import FileSizing

path, rows, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", os.environ.get("WIDE_DRIVER_MEMORY", "512m"))
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


def batch(first, count, tag, where=None):
    """Rows whose payload is `width` bytes of text, different in each row and tagged."""
    ids = spark.range(first, first + count, numPartitions=2)
    if where:
        ids = ids.where(where)
    return ids.select(F.col("id"), (F.col("id") % 3).alias("p"),
                      F.concat(F.lit(tag), F.expr(f"repeat(uuid(), {max(1, width // 36)})")).alias("payload"))


def report(step, table, started):
    """Rows, distinct ids and rows per payload tag of the latest snapshot: ids through Spark,
    payloads read file by file with pyarrow (this checks the table, not Spark's reader)."""
    ids = table.read().select("id")
    tags = collections.Counter()
    files = table.latest_base_files()
    for f in files:
        parquet = pq.ParquetFile(os.path.join(table.path, f.path))
        for group in range(parquet.num_row_groups):
            payload = parquet.read_row_group(group, columns=["payload"]).column("payload")
            tags.update(pc.utf8_slice_codeunits(payload, 0, 2).to_pylist())
    shown = ",".join(f"{t}{n}" for t, n in sorted(tags.items()))
    print(step, ids.count(), ids.distinct().count(), shown, len(files), flush=True)
    print("seconds", step, round(time.time() - started, 1), file=sys.stderr, flush=True)


keyed = HudiTable.create(spark, os.path.join(path, "keyed"), "keyed", record_key="id", partition_by="p")
t = time.time()
keyed.insert(batch(0, rows, "i:"))
report("insert", keyed, t)
t = time.time()
keyed.upsert(batch(rows // 2, rows, "u:"))  # half updates, half new keys
report("upsert", keyed, t)
t = time.time()
keyed.delete(spark.range(0, rows // 4))
report("delete", keyed, t)
t = time.time()
keyed.build_index()
report("build_index", keyed, t)
first = keyed.timeline()[0].timestamp
print("changes", keyed.read_changes(first).select("id").count(), flush=True)
t = time.time()
keyed.update({"payload": "concat('v:', substr(payload, 3))"}, "id % 2 = 0")
report("update", keyed, t)
t = time.time()
keyed.insert_overwrite(batch(0, rows, "o:", where="id % 3 = 0 and id % 4 = 0"))  # partition p=0 only
report("overwrite", keyed, t)

auto = HudiTable.create(spark, os.path.join(path, "auto"), "auto", partition_by="p")
auto.file_sizing = FileSizing(small_file_limit=0)  # two file groups per partition, for the clustering
t = time.time()
auto.insert(batch(0, rows // 2, "i:"))
auto.insert(batch(rows // 2, rows - rows // 2, "j:"))
report("auto_insert", auto, t)
t = time.time()
auto.delete_insert(batch(0, rows // 4, "d:"), ["id"])
report("delete_insert", auto, t)
auto.file_sizing = FileSizing()
t = time.time()
auto.cluster()
report("clustering", auto, t)

print("DONE", flush=True)
