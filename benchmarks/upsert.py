"""Benchmark: upserts through the record index vs a full-rewrite merge, and the index's size.

    python benchmarks/upsert.py [--sizes 1000000 10000000] [--batch 10000] [--repeat 3]

For each table size: a table of N rows keyed by a random UUID, partitioned by day (10k rows a
day, so a day's file groups are the same size at every N); then upserts of `batch` rows, half
updates of keys from the last two days, half new keys (median of `repeat` fresh batches). The
peer, in the same run, merges the same kind of batch by rewriting the whole table (join
everything, INSERT_OVERWRITE_TABLE). Also prints the record index's bytes per entry, the time
to look up 100k keys, and, for an auto-keyed table of the largest size, the index as runs of
keys next to a per-key index of the same keys.
"""

import argparse
import glob
import os
import shutil
import statistics
import tempfile
import time

from pyspark.sql import functions as F

from dbt.adapters.hudilite.session import spark_session
from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.record_index import RecordIndex

ROWS_PER_DAY = 10_000


def table_rows(spark, n):
    return spark.range(0, n, numPartitions=max(2, n // 500_000)).select(
        F.expr("uuid()").alias("id"),
        F.date_add(F.lit("2020-01-01").cast("date"), (F.col("id") / ROWS_PER_DAY).cast("int")).alias("day"),
        (F.col("id") * 0.5).alias("amount"),
        F.lit(1).alias("version"),
    )


def make_batch(spark, table, n, size, run):
    """Half updates of keys from the last two days, half new keys on a new day."""
    recent = table.read().where(F.col("day") >= F.date_add(F.lit("2020-01-01").cast("date"), n // ROWS_PER_DAY - 2))
    updates = recent.orderBy(F.rand(run)).limit(size // 2).select(
        "id", "day", (F.col("amount") + 1).alias("amount"), F.lit(2 + run).alias("version"))
    new_day = F.date_add(F.lit("2020-01-01").cast("date"), n // ROWS_PER_DAY + run)
    batch = updates.unionByName(table_rows(spark, size // 2).withColumn("day", new_day)).cache()
    batch.count()
    return batch


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def index_bytes(path):
    files = glob.glob(os.path.join(path, ".hoodie/.hudilite/record_index/shard=*/*.parquet"))
    return sum(os.path.getsize(f) for f in files)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(conf={"spark.master": "local[2]", "spark.driver.memory": "6g"})
    work = tempfile.mkdtemp(prefix="hudilite-upsert-")
    results = []
    for n in args.sizes:
        path = f"{work}/t{n}"
        table = HudiTable.create(spark, path, "bench", record_key="id", partition_by="day", precombine="version")
        table.insert(table_rows(spark, n))
        build_s, entries = timed(lambda: table.build_index())
        size = index_bytes(path)  # the base files: one entry per key
        upsert_runs, touched = [], 0
        for run in range(args.repeat):  # fresh batches; the median is reported
            batch = make_batch(spark, table, n, args.batch, run)
            upsert_s, instant = timed(lambda: table.upsert(batch))
            upsert_runs.append(upsert_s)
            touched = sum(1 for s in table.commit_metadata(instant).write_stats if s.prevCommit)

        peer = HudiTable.create(spark, f"{work}/p{n}", "peer", record_key="id", partition_by="day")
        peer.insert(table_rows(spark, n))
        rewrite_runs = []
        for run in range(args.repeat):
            batch = make_batch(spark, peer, n, args.batch, run)

            def full_rewrite():
                current = peer.read().drop(*[c for c in peer.read().columns if c.startswith("_hoodie")])
                merged = current.join(batch.select("id"), "id", "left_anti").unionByName(batch.select(*current.columns))
                return peer.insert_overwrite_table(merged)

            rewrite_runs.append(timed(full_rewrite)[0])
        upsert_s, rewrite_s = statistics.median(upsert_runs), statistics.median(rewrite_runs)
        lookup_keys = table.read().select("id").limit(100_000).cache()
        lookup_keys.count()
        index = table.index
        lookup_s, found = timed(lambda: index.lookup(table.context.timeline.completed(), table.context.timeline.view(), lookup_keys).count())
        results.append((n, build_s, entries, size, upsert_s, touched, rewrite_s, lookup_s, found))
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(f"{work}/p{n}", ignore_errors=True)

    print(f"\nUpsert of {args.batch:,} rows (half updates in the last two days, half new keys), local[2], "
          f"median of {args.repeat} runs each")
    print("| table rows | upsert s | file groups rewritten | full-rewrite merge s (peer) | speed-up |")
    print("|---|---|---|---|---|")
    for n, _, _, _, upsert_s, touched, rewrite_s, _, _ in results:
        print(f"| {n:,} | {upsert_s:.1f} | {touched} | {rewrite_s:.1f} | {rewrite_s / upsert_s:.1f}x |")
    if len(results) > 1:
        print(f"\nUpsert time ratio {results[-1][0]:,} vs {results[0][0]:,} rows: {results[-1][4] / results[0][4]:.2f}x")
    print("\n| index entries | build s | bytes on disk | bytes per entry (UUID keys) | look up 100k keys s |")
    print("|---|---|---|---|---|")
    for n, build_s, entries, size, _, _, _, lookup_s, found in results:
        print(f"| {entries:,} | {build_s:.1f} | {size:,} | {size / entries:.1f} | {lookup_s:.1f} ({found:,} found) |")
    auto_keyed_index_sizes(spark, work, args.sizes[-1])
    shutil.rmtree(work, ignore_errors=True)


def auto_keyed_index_sizes(spark, work, n):
    """An auto-keyed table's index as runs of keys, next to a per-key index of the same keys."""
    table = HudiTable.create(spark, f"{work}/auto", "auto", partition_by="day")
    table.insert(table_rows(spark, n).drop("id"))
    runs_s, runs = timed(lambda: table.build_index())
    runs_bytes = sum(os.path.getsize(f) for f in glob.glob(f"{work}/auto/.hoodie/.hudilite/key_ranges/*.parquet"))
    per_key = RecordIndex(spark, table.storage).build(table.read(), table.timeline()[-1].timestamp)  # the same keys, one entry each
    per_key_bytes = index_bytes(f"{work}/auto")
    print(f"\nAuto-keyed table of {n:,} rows ({len(table.latest_base_files()):,} file groups): index as runs of keys")
    print("| index | entries | bytes on disk | bytes per key | build s |")
    print("|---|---|---|---|---|")
    print(f"| runs of keys | {runs:,} runs | {runs_bytes:,} | {runs_bytes / n:.4f} | {runs_s:.1f} |")
    print(f"| one entry per key (same keys) | {per_key:,} | {per_key_bytes:,} | {per_key_bytes / n:.2f} | |")


if __name__ == "__main__":
    main()
