"""The `--scale` workload (issue 33): real table shapes at scale, each figure beside a peer measured
in the same run.

- wide-row upsert: rows of 1 MB values and of 20 KB rows upserted into a keyed table, against a
  plain parquet write of the same batch;
- bytes on disk of a keyed table with 100 rows per partition in many partitions, against plain
  parquet of the same rows (goal: within 2x);
- a small write plus the table services on tables of 1k, 10k and 30k files, against the same on
  a table of 100 files (goal: flat in the file count). 100k files are not built here: one insert
  of N one-row partitions costs about 15 ms per file on 2 cores (the insert's new-key check
  reads every new file back through Spark; 30k files took 7.6 minutes), and the first write after
  it builds the record index from every file (2 minutes at 30k), so 100k files take 30-40
  minutes; `ScaleSizes.file_counts` takes more when there is time;
- peak memory of a Python worker for a skewed upsert (95% of the batch into one file group),
  against the file group's bytes in Arrow.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from typing import Callable, Dict, List, Optional

import pyarrow as pa

from pyspark.sql import functions as F


def worker_peaks(spark, tasks: int = 64) -> Dict[int, int]:
    """pid -> peak resident bytes of the Python workers alive (Spark reuses them, so a worker's
    peak covers every task it ran)."""
    def probe(batches):
        for _ in batches:
            pass
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "peak": [peak]})

    rows = spark.range(tasks, numPartitions=tasks).mapInArrow(probe, "pid long, peak long").collect()
    out: Dict[int, int] = {}
    for r in rows:
        out[r.pid] = max(out.get(r.pid, 0), r.peak)
    return out


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


class ScaleWorkloads:
    """The rows of the `--scale` workload, added to `bench` (a `workloads.Workloads`)."""

    def __init__(self, bench, sizes: "ScaleSizes"):
        self.bench, self.spark, self.sizes = bench, bench.spark, sizes

    def run(self) -> None:
        self.wide_upserts()
        self.keyed_bytes()
        self.small_writes()
        self.skewed_upsert_memory()
        self.skewed_upsert_memory(*self.sizes.skew_largest)

    # wide rows --------------------------------------------------------------------------------
    def wide_upserts(self) -> None:
        from measure import Result, Side, timed

        from dbt.adapters.hudilite.table import HudiTable
        from dbt.adapters.hudilite.table.spark.reader import jvm_heap_bytes

        for label, rows, width in (("1 MB values", self.sizes.wide_mb_rows, 1_000_000),
                                   ("20 KB rows", self.sizes.wide_kb_rows, 20_000)):
            self.bench.log(f"wide-row upsert, {label}, {rows:,} rows")

            def batch(first, count, tag):
                return self.spark.range(first, first + count, numPartitions=2).select(
                    F.col("id"), (F.col("id") % 3).alias("p"),
                    F.concat(F.lit(tag), F.expr(f"repeat(uuid(), {max(1, width // 36)})")).alias("payload"))

            path = self.bench.path(f"wide-{width}")
            table = HudiTable.create(self.spark, path, "wide", record_key="id", partition_by="p")
            table.insert(batch(0, rows, "i:"))
            ours = timed(self.spark, lambda: table.upsert(batch(rows // 2, rows, "u:")))  # half updates, half new
            peer_path = self.bench.path(f"wide-parquet-{width}")
            peer = timed(self.spark, lambda: batch(rows // 2, rows, "u:").write.parquet(peer_path))
            heap = jvm_heap_bytes(self.spark) or 0
            self.bench.add(Result(f"upsert {rows:,} rows of {label} into {rows:,} (half updates), JVM heap "
                                  f"{heap / 2**30:.1f} GiB",
                                  Side("hudilite", [ours]), Side("df.write.parquet of the batch", [peer]),
                                  note="one round"))
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(peer_path, ignore_errors=True)

    # bytes on disk ----------------------------------------------------------------------------
    def keyed_bytes(self) -> None:
        from measure import Result, Side

        from dbt.adapters.hudilite.table import HudiTable

        partitions, per = self.sizes.byte_partitions, 100
        self.bench.log(f"keyed table bytes, {partitions:,} partitions of {per} rows")
        df = self.spark.range(partitions * per, numPartitions=2).select(
            F.col("id"), (F.col("id") % partitions).alias("p"), (F.col("id") * 7 % 1000).alias("amount"),
            F.concat(F.lit("customer-"), (F.col("id") % 5000).cast("string")).alias("name"),
            F.expr("timestamp_seconds(1767225600 + id)").alias("ts")).repartition(2, "p").localCheckpoint(eager=True)
        path = self.bench.path("keyed-bytes")
        table = HudiTable.create(self.spark, path, "keyed_bytes", record_key="id", partition_by="p")
        table.insert(df)
        data = sum(f.size for f in table.latest_base_files())
        everything = dir_bytes(path)
        peer_path = self.bench.path("keyed-bytes-parquet")
        df.write.partitionBy("p").parquet(peer_path)  # the same tasks: one file per partition on both sides
        peer = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(peer_path)
                   for f in files if f.endswith(".parquet"))
        self.bench.add(Result(f"bytes on disk, keyed table, {partitions:,} partitions x {per} rows (base files)",
                              Side("hudilite"), Side("Spark parquet, one file per partition"), goal=2.0, unit=" MiB",
                              our_value=data / 2**20, peer_value=peer / 2**20,
                              note=f"with .hoodie and partition metadata: {everything / 2**20:.2f} MiB"))
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(peer_path, ignore_errors=True)

    # a small write and the services, by the table's file count ----------------------------------
    def many_files_table(self, files: int):
        """A keyed table of `files` base files, built in one insert: one row in each of `files`
        partitions (one file group each), written by two tasks."""
        from dbt.adapters.hudilite.table import HudiTable

        path = self.bench.path(f"files-{files}")
        table = HudiTable.create(self.spark, path, f"files_{files}", record_key="id", partition_by="p")
        started = time.perf_counter()
        table.insert(self.spark.range(files, numPartitions=2).select(
            F.col("id"), F.col("id").alias("p"), F.lit("x").alias("v")))
        self.bench.log(f"  built a table of {len(table.latest_base_files()):,} files in "
                       f"{time.perf_counter() - started:.0f} s")
        return table

    def small_writes(self) -> None:
        from measure import Result, Side, alternate

        from dbt.adapters.hudilite.table import TableServices

        base = self.many_files_table(self.sizes.base_files)
        rounds = self.sizes.rounds
        next_id = [10**9]

        def small_write(table):
            def run():
                first = next_id[0]
                next_id[0] += 100
                table.insert(self.spark.range(first, first + 100, numPartitions=1).select(
                    F.col("id"), F.lit(7).alias("p"), F.lit("y").alias("v")))  # 100 new keys into one partition
                table.run_services(TableServices())
            return run

        for files in self.sizes.file_counts:
            self.bench.log(f"small write + services, {files:,} files")
            table = self.many_files_table(files)
            sides = alternate(self.spark, {"hudilite": lambda r: small_write(table),
                                           "base": lambda r: small_write(base)}, rounds)
            self.bench.add(Result(f"insert 100 rows into 1 partition + run_services, table of {files:,} files",
                                  sides["hudilite"], Side(f"same on {self.sizes.base_files} files", sides["base"].samples),
                                  goal=1.5, note="flat in file count: ratio"))
            shutil.rmtree(table.path, ignore_errors=True)

    # memory of a skewed upsert ----------------------------------------------------------------------
    def skewed_upsert_memory(self, rows: int = 0, batch: int = 0, payload: int = 0) -> None:
        """In a process of its own (a fresh Spark, so the workers' peaks are the upsert's).
        `payload`: hex characters of incompressible text a row carries (the largest file group:
        rows wide enough to fill one near `max_file_size`)."""
        import json
        import subprocess
        import sys

        from measure import Result, Side

        rows, batch = rows or self.sizes.skew_rows, batch or self.sizes.skew_batch
        self.bench.log(f"skewed upsert: {batch:,} rows, 95% into one file group of {rows:,} rows"
                       + (f" of {payload} more hex characters" if payload else ""))
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "skewed", self.bench.path("skewed"),
                              str(rows), str(batch), str(payload)], capture_output=True, text=True, timeout=3600)
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if not lines:
            self.bench.log(f"  skewed upsert failed: {out.stderr[-2000:]}")
            return
        figures = json.loads(lines[-1])
        wide = f", {payload}-character payload" if payload else ""
        self.bench.add(Result(f"peak Python worker memory, upsert of {batch:,} rows, 95% into one file group of "
                              f"{rows:,} rows{wide} ({figures['file_mib']:.1f} MiB on disk)", Side("hudilite"),
                              Side("the file group + batch in Arrow"), unit=" MiB",
                              our_value=figures["peak_mib"], peer_value=figures["arrow_mib"],
                              note=f"upsert {figures['seconds']:.0f} s"))


class ScaleSizes:
    def __init__(self, quick: bool = False):
        self.wide_mb_rows = 60 if quick else 300
        self.wide_kb_rows = 3_000 if quick else 15_000
        self.byte_partitions = 100 if quick else 1_000
        self.base_files = 100
        self.file_counts = (1_000,) if quick else (1_000, 10_000, 30_000, 100_000)
        self.rounds = 2 if quick else 3
        self.skew_rows = 200_000 if quick else 2_600_000
        self.skew_batch = 100_000 if quick else 1_000_000
        # (rows, batch, payload): one file group near the 120 MB max_file_size, the largest the sizing allows
        self.skew_largest = (50_000, 20_000, 256) if quick else (750_000, 400_000, 256)


def _skewed_upsert(path: str, rows: int, batch: int, payload: int = 0) -> None:
    """A keyed table of one file group of `rows` rows, then (in a fresh Spark) an upsert of
    `batch` rows, 95% of them into that file group; prints the workers' peak as JSON."""
    import json

    from dbt.adapters.hudilite.session import spark_session
    from dbt.adapters.hudilite.table import HudiTable

    conf = {"spark.master": "local[2]", "spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "2"}
    spark = spark_session(conf=conf)

    def data(first, count, tag, partition):
        df = spark.range(first, first + count, numPartitions=2).select(
            "id", F.lit(partition).alias("p"), (F.col("id") * 3).alias("amount"),
            F.concat(F.lit(tag), F.col("id").cast("string"), F.lit("-customer-name")).alias("name"),
            F.expr("timestamp_seconds(1767225600 + id)").alias("ts"))
        if payload:  # hashes of the row's own text: no two rows share it, zstd cannot shrink it much
            hashes = [F.sha2(F.concat(F.lit(f"{tag}{i}-"), F.col("id").cast("string")), 256)
                      for i in range(-(-payload // 64))]
            df = df.withColumn("payload", F.substring(F.concat(*hashes), 1, payload))
        return df

    table = HudiTable.create(spark, path, "skewed", record_key="id", partition_by="p")
    table.insert(data(0, rows, "i", 0).coalesce(1))
    stored = table.latest_base_files()[0]
    import pyarrow.parquet as pq

    arrow = pq.read_table(os.path.join(path, stored.path)).nbytes
    spark.stop()
    spark = spark_session(conf=conf)
    table = HudiTable.open(spark, path)
    skew = int(batch * 0.95)
    upsert = data(rows - skew, skew, "u", 0).unionByName(data(rows * 10, batch - skew, "n", 1))
    started = time.perf_counter()
    table.upsert(upsert)
    seconds = time.perf_counter() - started
    peak = max(worker_peaks(spark).values())
    batch_arrow = arrow * batch / rows
    print(json.dumps({"peak_mib": peak / 2**20, "arrow_mib": (arrow + batch_arrow) / 2**20, "seconds": seconds,
                      "file_mib": stored.size / 2**20}), flush=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1] == "skewed":
        _skewed_upsert(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 0)
