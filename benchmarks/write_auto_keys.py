"""Benchmark: appending with auto-generated record keys vs a plain Spark parquet write.

    python benchmarks/write_auto_keys.py [--rows 10000000] [--runs 3]

Prints two tables: the wall time to append N rows (5 data columns) as a hudilite insert with
RFC-76 auto keys next to `df.write.parquet` of the same rows in the same session, and the
on-disk bytes per key of 100k auto keys as hudilite writes them next to Spark's default
parquet writer (snappy, dictionary) writing the same key strings.
"""

import argparse
import glob
import os
import shutil
import statistics
import tempfile
import time

import pyarrow.parquet as pq
from pyspark.sql import functions as F

from dbt.adapters.hudilite.session import spark_session
from dbt.adapters.hudilite.table import HudiTable


def rows(spark, n, partitions):
    return spark.range(0, n, numPartitions=partitions).select(
        F.col("id").alias("event_id"),
        (F.col("id") % 1000).alias("user_id"),
        (F.col("id") * 0.25).alias("amount"),
        F.concat(F.lit("page-"), (F.col("id") % 97).cast("string")).alias("page"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"),
    )


def column_bytes(files, column):
    total = 0
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                if meta.row_group(g).column(c).path_in_schema == column:
                    total += meta.row_group(g).column(c).total_compressed_size
    return total


def count_rows(batches):
    import pyarrow as pa

    yield pa.RecordBatch.from_pylist([{"n": sum(b.num_rows for b in batches)}])


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=10)
    args = parser.parse_args()
    spark = spark_session(conf={"spark.master": "local[2]", "spark.driver.memory": "4g"})
    work = tempfile.mkdtemp(prefix="hudilite-bench-")
    df = rows(spark, args.rows, args.partitions)

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
    hudi_times, parquet_times, transfer_times = [], [], []
    for run in range(args.runs + 1):  # the first round warms up the JVM and Python workers
        table_path, parquet_path = f"{work}/hudi_{run}", f"{work}/parquet_{run}"
        table = HudiTable.create(spark, table_path, "bench")
        h = timed(lambda: table.insert(df))
        p = timed(lambda: df.write.parquet(parquet_path))
        a = timed(lambda: df.mapInArrow(count_rows, "n long").collect())
        if run:
            hudi_times.append(h)
            parquet_times.append(p)
            transfer_times.append(a)
        shutil.rmtree(table_path)
        shutil.rmtree(parquet_path)

    keys = 100_000
    table = HudiTable.create(spark, f"{work}/keys", "keys")
    table.insert(spark.range(0, keys, numPartitions=1).select(F.col("id").alias("value")))
    ours = column_bytes([os.path.join(table.path, f.path) for f in table.latest_base_files()], "_hoodie_record_key")
    table.read().select("_hoodie_record_key").coalesce(1).write.parquet(f"{work}/spark_keys")
    spark_default = column_bytes(glob.glob(f"{work}/spark_keys/*.parquet"), "_hoodie_record_key")

    h, p = statistics.median(hudi_times), statistics.median(parquet_times)
    print(f"\nAppend {args.rows:,} rows x 5 columns, local[2], median of {args.runs} runs")
    print("| writer | median s | runs (s) | vs parquet |")
    print("|---|---|---|---|")
    print(f"| df.write.parquet (peer) | {p:.2f} | {', '.join(f'{t:.2f}' for t in parquet_times)} | 1.00x |")
    a = statistics.median(transfer_times)
    print(f"| rows to Python as Arrow, no write (floor of any task-side writer) | {a:.2f} | "
          f"{', '.join(f'{t:.2f}' for t in transfer_times)} | {a / p:.2f}x |")
    print(f"| hudilite insert, auto keys | {h:.2f} | {', '.join(f'{t:.2f}' for t in hudi_times)} | {h / p:.2f}x |")
    print(f"\nOn-disk bytes per auto key, {keys:,} keys")
    print("| writer | bytes | bytes per key |")
    print("|---|---|---|")
    print(f"| Spark parquet default (snappy, dictionary) (peer) | {spark_default:,} | {spark_default / keys:.3f} |")
    print(f"| hudilite (DELTA_BYTE_ARRAY, zstd) | {ours:,} | {ours / keys:.3f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
