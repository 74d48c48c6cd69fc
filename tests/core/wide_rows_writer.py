"""Inserts, upserts, deletes, the index build and a changes read over rows too wide for 100k-row Arrow batches, in a JVM whose direct
memory (its heap size) is small enough that such a batch would kill it.

    wide_rows_writer.py PATH ROWS WIDTH    a table of ROWS rows of about WIDTH bytes each

Prints one line per step: `<step> <rows read back>`; a dead JVM ends it early."""

import os
import sys

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable

path, rows, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", os.environ.get("WIDE_DRIVER_MEMORY", "512m"))
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


def batch(first, count, tag):
    """Rows whose payload is `width` bytes of text, different in each row and tagged."""
    return spark.range(first, first + count, numPartitions=2).select(
        F.col("id"), (F.col("id") % 3).alias("p"),
        F.concat(F.lit(tag), F.expr(f"repeat(uuid(), {max(1, width // 36)})")).alias("payload"))


def report(step, table):
    """Rows and the payloads' tags of the latest snapshot: ids through Spark, payloads read
    file by file with pyarrow (Spark's vectorized reader holds 4096 rows of a column at once,
    more than a 1 GiB heap for 1 MB values: a limit of Spark's reader, not of the table)."""
    ids = table.read().select("id")
    tags = set()
    for f in table.latest_base_files():
        parquet = pq.ParquetFile(os.path.join(table.path, f.path))
        for group in range(parquet.num_row_groups):
            payload = parquet.read_row_group(group, columns=["payload"]).column("payload")
            tags.update(pc.utf8_slice_codeunits(payload, 0, 2).unique().to_pylist())
    print(step, ids.count(), ids.distinct().count(), ",".join(sorted(tags)), flush=True)


keyed = HudiTable.create(spark, os.path.join(path, "keyed"), "keyed", record_key="id", partition_by="p")
keyed.insert(batch(0, rows, "i:"))
report("insert", keyed)
keyed.upsert(batch(rows // 2, rows, "u:"))  # half updates, half new keys
report("upsert", keyed)
keyed.delete(spark.range(0, rows // 4))
report("delete", keyed)
keyed.build_index()
report("build_index", keyed)
first = keyed.timeline()[0].timestamp
print("changes", keyed.read_changes(first).select("id").count(), flush=True)

print("DONE", flush=True)
