"""Apache Hudi's own Spark writer as the benchmark's peer (issue 28, section 4).

hudilite writes in this process's Spark session; Hudi's writer (Hudi 1.0.2's Spark 3.5 bundle)
writes in the referee's (`tests/referee/hudi_spark.py`), a second local[2] JVM given this
session's driver memory and shuffle partitions. Neither side ships rows to the other: both make
them from the generators of `peer_rows.py` (the referee loads that file by its path), cache and
count them before the clock starts, and compare fingerprints (row count and a sum of row hashes)
so that a round on different rows fails loudly. Each round times only the write on each side;
the order of the sides is reversed every round, after one warm-up round of each.

Hudi's writer runs with its own defaults unless a row says otherwise: table version 8 (1.0.2's
default, not v6), the metadata table on (files, column_stats and partition_stats partitions),
COMMIT_TIME_ORDERING (no precombine field, as on our side), hive-style partition paths as ours.

    .venv/bin/python benchmarks/hudi_peer.py            # 1M-row keyed table: tens of minutes on 2 cores
    .venv/bin/python benchmarks/hudi_peer.py --quick    # small sizes
    .venv/bin/python benchmarks/hudi_peer.py --scaling  # also: upsert into 10M rows against into 1M rows

From run.py: `hudi_peer.run(spark, work, log, quick=args.quick)` returns measure.Result rows.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.append(ROOT)  # tests.referee

import peer_rows  # noqa: E402
from measure import Result, Sample, Side, timed  # noqa: E402

HUDI = "1.0.2"
PEER = f"Hudi {HUDI} writer"
RESULTS = os.path.join(HERE, "results")
ROWS_MODULE = os.path.join(HERE, "peer_rows.py")


@dataclass
class PeerSizes:
    append_rows: int = 1_000_000
    keyed_rows: int = 1_000_000
    days: int = 50
    batch: int = 10_000
    overwrite_rows: int = 2_000_000
    overwrite_days: int = 100
    rounds: int = 3  # measured rounds a side, after one warm-up round
    scaling_rows: Tuple[int, ...] = ()  # e.g. (1_000_000, 10_000_000): upsert into the larger against the smaller


QUICK = PeerSizes(append_rows=100_000, keyed_rows=200_000, batch=2_000, overwrite_rows=200_000, rounds=2)


def hudi_options(name: str, operation: str, **extra: str) -> Dict[str, str]:
    return {"hoodie.table.name": name, "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
            "hoodie.datasource.write.operation": operation, **extra}


KEYED = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "day",
         "hoodie.datasource.write.hive_style_partitioning": "true"}
DAY_PARTITIONS = {"hoodie.datasource.write.partitionpath.field": "day",
                  "hoodie.datasource.write.hive_style_partitioning": "true"}  # auto keys
INDEXES = {  # Hudi's index variants for the upserts
    "default index": {},  # hoodie.index.type unset: SIMPLE, Hudi's default for Spark
    "record level index": {"hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true",
                           "hoodie.index.type": "RECORD_INDEX"},
}


class HudiPeer:
    def __init__(self, spark, work: str, sizes: PeerSizes, log: Callable[[str], None], hudi=None):
        from tests.referee.hudi_spark import HudiSpark

        self.spark, self.work, self.sizes, self.log = spark, work, sizes, log
        self.shuffle = int(spark.conf.get("spark.sql.shuffle.partitions"))
        memory = spark.sparkContext.getConf().get("spark.driver.memory", "1g")
        self.settings = f"local[2] both, driver memory {memory} both, spark.sql.shuffle.partitions={self.shuffle} both"
        if hudi is None:
            log(f"starting Hudi {HUDI}'s Spark (pyspark 3.5) with driver memory {memory}")
            hudi = HudiSpark(HUDI, conf={"spark.driver.memory": memory, "spark.sql.shuffle.partitions": str(self.shuffle)},
                             log_name=f"hudi-{HUDI}-bench.log")
            self._owned = True
        else:
            self._owned = False
        self.hudi = hudi
        self.results: List[Result] = []
        self._paths = 0

    def close(self) -> None:
        if self._owned:
            self.hudi.close()

    def path(self, name: str) -> str:
        self._paths += 1
        return os.path.join(self.work, f"{name}-{self._paths}")

    def add(self, result: Result) -> None:
        self.results.append(result)
        self.log(f"  {result.operation}: hudilite {result.ours_figure:.2f} s, {result.peer.name} "
                 f"{result.peer_figure:.2f} s, ratio {result.ratio:.2f}x")

    # ---- the two sides of a round ---------------------------------------------------------------
    def ours(self, rows: str, args: dict, write: Callable) -> Tuple[Sample, list]:
        """hudilite's `write(df)` timed on the rows `rows(**args)`, made and cached first."""
        df, fingerprint = peer_rows.cached(self.spark, rows, args)
        try:
            return timed(self.spark, lambda: write(df)), fingerprint
        finally:
            df.unpersist()

    def peer(self, rows: str, args: dict, path: str, options: Dict[str, str]) -> Tuple[Sample, list]:
        [reply] = self.hudi.bench(ROWS_MODULE, [{"rows": rows, "args": args, "path": path, "options": options}],
                                  self.shuffle)
        return Sample(reply["seconds"], reply["jobs"]), reply["fingerprint"]

    def rounds(self, sides: Dict[str, Callable[[int], Tuple[Sample, list]]], rounds: int) -> Dict[str, Side]:
        """Every side once a round (warm-up round -1 not kept), the order reversed every round;
        every side of a round must have written the same rows."""
        names = list(sides)
        kept = {name: Side(name) for name in names}
        for r in range(-1, rounds):
            prints = {}
            for name in (names if r % 2 == 0 else names[::-1]):
                sample, prints[name] = sides[name](r)
                if r >= 0:
                    kept[name].samples.append(sample)
            if len({tuple(p) for p in prints.values()}) != 1:
                raise AssertionError(f"round {r}: the sides wrote different rows: {prints}")
        return kept

    # ---- workloads --------------------------------------------------------------------------------
    def appends(self) -> None:
        from dbt.adapters.hudilite.table import HudiTable

        n = self.sizes.append_rows
        args = {"n": n}
        self.log(f"append {n:,} 14-column event rows to a new table: hudilite insert (auto keys) against Hudi's "
                 "bulk_insert (sort mode NONE) and insert (auto keys)")

        def ours(r):
            table = HudiTable.create(self.spark, self.path("ours-append"), "events")
            return self.ours("events", args, table.insert)

        def peer(operation, **extra):
            return lambda r: self.peer("events", args, self.path(f"hudi-{operation}"),
                                       hudi_options("events", operation, **extra))

        sides = self.rounds({"hudilite": ours,
                             "bulk_insert": peer("bulk_insert", **{"hoodie.bulkinsert.sort.mode": "NONE"}),
                             "insert": peer("insert")}, self.sizes.rounds)
        for label, name in (("bulk_insert, sort mode NONE", "bulk_insert"), ("insert", "insert")):
            self.add(Result(f"append {n:,} event rows to a new table, auto keys; Hudi {label}", sides["hudilite"],
                            Side(f"{PEER}: {label}", sides[name].samples), 1.0))

    def keyed_tables(self, n: int, variants) -> Tuple[object, Dict[str, str]]:
        """Our keyed table of `n` rows (with its record index built) and Hudi's, one per index
        variant, all from the same rows; built outside the timing, Hudi's with its insert."""
        from dbt.adapters.hudilite.table import HudiTable

        days = self.sizes.days
        args = {"n": n, "days": days}
        started = time.perf_counter()
        table = HudiTable.create(self.spark, self.path(f"ours-keyed-{n}"), "keyed", record_key="id", partition_by="day")
        _, ours_print = self.ours("keyed_table", args, table.insert)
        table.build_index()
        self.log(f"built our keyed table of {n:,} rows in {time.perf_counter() - started:.0f} s")
        paths = {}
        for variant in variants:
            started = time.perf_counter()
            paths[variant] = self.path(f"hudi-keyed-{n}")
            _, peer_print = self.peer("keyed_table", args, paths[variant],
                                      hudi_options("keyed", "insert", **KEYED, **INDEXES[variant]))
            if peer_print != ours_print:
                raise AssertionError(f"the keyed tables differ: {ours_print} vs {peer_print}")
            self.log(f"built Hudi's keyed table of {n:,} rows ({variant}) in {time.perf_counter() - started:.0f} s")
        return table, paths

    def upsert_rounds(self, n: int, kind: str, table, paths: Dict[str, str], rounds: int) -> Dict[str, Side]:
        size, days = self.sizes.batch, self.sizes.days

        def args(r):
            if kind == "recent":  # half updates of the last 2 days, half new keys
                return {"n": n, "days": days, "size": size, "seed": r + 1, "recent_days": 2, "new_share": 0.5}
            return {"n": n, "days": days, "size": size, "seed": 1_000 + r, "recent_days": 0, "new_share": 0.0}

        sides = {"hudilite": lambda r: self.ours("keyed_batch", args(r), table.upsert)}
        for variant, path in paths.items():
            options = hudi_options("keyed", "upsert", **KEYED, **INDEXES[variant])
            sides[variant] = lambda r, path=path, options=options: self.peer("keyed_batch", args(r), path, options)
        return self.rounds(sides, rounds)

    def upserts(self) -> None:
        n, size, days = self.sizes.keyed_rows, self.sizes.batch, self.sizes.days
        table, paths = self.keyed_tables(n, INDEXES)
        for kind, what in (("recent", f"half updates in the last 2 of {days} day partitions, half new keys"),
                           ("random", f"random updates over all {days} day partitions")):
            self.log(f"upsert {size:,} rows ({what}) into {n:,} rows")
            sides = self.upsert_rounds(n, kind, table, paths, self.sizes.rounds)
            for variant in INDEXES:
                self.add(Result(f"upsert {size:,} rows ({what}) into {n:,} rows; Hudi {variant}", sides["hudilite"],
                                Side(f"{PEER}: upsert, {variant}", sides[variant].samples), 0.5))

    def overwrite(self) -> None:
        from dbt.adapters.hudilite.table import HudiTable

        n, days = self.sizes.overwrite_rows, self.sizes.overwrite_days
        base = {"n": n, "days": days}
        table = HudiTable.create(self.spark, self.path("ours-overwrite"), "overwrite", partition_by="day")
        _, ours_print = self.ours("day_rows", base, table.insert)
        path = self.path("hudi-overwrite")
        _, peer_print = self.peer("day_rows", base, path, hudi_options("overwrite", "insert", **DAY_PARTITIONS))
        assert ours_print == peer_print, (ours_print, peer_print)
        self.log(f"insert_overwrite of 1 of {days} partitions of {n:,} rows (auto keys)")
        day = lambda r: dict(base, day=10 + r)  # noqa: E731 - another day every round
        options = hudi_options("overwrite", "insert_overwrite", **DAY_PARTITIONS)
        sides = self.rounds({"hudilite": lambda r: self.ours("day_rows", day(r), table.insert_overwrite),
                             "hudi": lambda r: self.peer("day_rows", day(r), path, options)}, self.sizes.rounds)
        self.add(Result(f"insert_overwrite of 1 of {days} day partitions of {n:,} rows, auto keys", sides["hudilite"],
                        Side(f"{PEER}: insert_overwrite", sides["hudi"].samples), 1.0))

    def scaling(self) -> None:
        """Upserts of the recent-days batches into the larger table against into the smaller,
        on each side (Hudi with its default index): how each grows with the table."""
        small, large = min(self.sizes.scaling_rows), max(self.sizes.scaling_rows)
        medians = {}
        for n in (small, large):
            table, paths = self.keyed_tables(n, ["default index"])
            self.log(f"upsert {self.sizes.batch:,} rows into {n:,} rows (scaling)")
            medians[n] = self.upsert_rounds(n, "recent", table, paths, self.sizes.rounds)
        ours = medians[large]["hudilite"].median / medians[small]["hudilite"].median
        theirs = medians[large]["default index"].median / medians[small]["default index"].median
        self.results.append(Result(
            f"upsert {self.sizes.batch:,} rows into {large:,} rows / into {small:,} rows (growth)", Side("hudilite"),
            Side(f"{PEER}: default index"), our_value=ours, peer_value=theirs, unit="x",
            note=f"hudilite {medians[large]['hudilite'].median:.2f} s vs {medians[small]['hudilite'].median:.2f} s, "
                 f"Hudi {medians[large]['default index'].median:.2f} s vs {medians[small]['default index'].median:.2f} s"))
        self.log(f"  growth 10x rows: hudilite {ours:.2f}x, Hudi {theirs:.2f}x")

    def run(self) -> List[Result]:
        self.appends()
        self.upserts()
        self.overwrite()
        if self.sizes.scaling_rows:
            self.scaling()
        return self.results


def run(spark, work: str, log: Callable[[str], None], quick: bool = False,
        sizes: Optional[PeerSizes] = None) -> List[Result]:
    """The workload for run.py (`--only hudi`): every comparison with Hudi's writer, in `spark`'s
    settings, on tables under `work`."""
    peer = HudiPeer(spark, work, sizes or (QUICK if quick else PeerSizes()), log)
    try:
        return peer.run()
    finally:
        peer.close()


# ---- standalone ------------------------------------------------------------------------------------

def table(results: List[Result]) -> str:
    lines = [f"| operation | hudilite | {PEER} | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for r in results:
        if r.unit == "x":
            figures = f"{r.ours_figure:.2f}x | {r.peer_figure:.2f}x"
        else:
            figures = f"{r.ours_figure:.2f} s (jobs {r.ours.jobs}) | {r.peer_figure:.2f} s ({r.peer.name.split(': ', 1)[-1]})"
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None and r.unit != "x" else ""
        goal = f"<= {r.goal:g}x" if r.goal is not None else ""
        met = {None: "", True: "yes", False: "**no**"}[r.met]
        note = f" ({r.note})" if r.note else ""
        lines.append(f"| {r.operation}{note} | {figures} | {ratio} | {goal} | {met} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--rounds", type=int, help="measured rounds a side (default 3, quick 2)")
    parser.add_argument("--rows", type=float, default=1.0, help="multiply every row count by this")
    parser.add_argument("--scaling", action="store_true", help="also upsert into 10M rows against into 1M rows")
    args = parser.parse_args()
    sizes = replace(QUICK if args.quick else PeerSizes())
    if args.rounds:
        sizes.rounds = args.rounds
    for name in ("append_rows", "keyed_rows", "overwrite_rows"):
        setattr(sizes, name, int(getattr(sizes, name) * args.rows))
    if args.scaling:
        sizes.scaling_rows = (1_000_000, 10_000_000)

    from dbt.adapters.hudilite.session import spark_session

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%MZ")
    started = time.perf_counter()
    loads = [os.getloadavg()[0]]

    def log(line: str) -> None:
        loads.append(os.getloadavg()[0])
        print(f"[{time.perf_counter() - started:7.1f}s] {line}", flush=True)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = spark_session(conf={"spark.master": "local[2]", "spark.driver.memory": "8g"})  # run.py's session
    work = tempfile.mkdtemp(prefix="hudilite-hudi-peer-")
    peer = HudiPeer(spark, work, sizes, log)
    try:
        results = peer.run()
    finally:
        peer.close()
        shutil.rmtree(work, ignore_errors=True)
    minutes = (time.perf_counter() - started) / 60
    head = (f"hudilite against Hudi {HUDI}'s Spark writer (pyspark 3.5.7, hudi-spark3.5-bundle_2.12:{HUDI}), {stamp}, "
            f"{'--quick' if args.quick else 'default sizes'}{'' if args.rows == 1 else f' x{args.rows:g} rows'}, "
            f"{minutes:.1f} min on {os.cpu_count()} cores, 1-minute load average {min(loads):.1f}-{max(loads):.1f} "
            f"(median {statistics.median(loads):.1f}) during the run. {peer.settings}; each side in its own JVM, "
            f"one at a time. Figures: medians of {sizes.rounds} round(s) a side after one warm-up round, the order of "
            "the sides reversed every round, same generated rows on both sides (checked by fingerprint). Hudi: "
            "table version 8 (its default), metadata table on (its default), COMMIT_TIME_ORDERING, "
            "hive-style partitions; its record level index variant adds hoodie.metadata.record.index.enable=true "
            "and hoodie.index.type=RECORD_INDEX. Ratio: hudilite / Hudi, met when at or below the goal.")
    markdown = head + "\n\n" + table(results)
    os.makedirs(RESULTS, exist_ok=True)
    out = os.path.join(RESULTS, f"hudi_peer-{stamp}.md")
    with open(out, "w") as f:
        f.write(markdown + "\n")
    print("\n" + markdown + f"\n\nwritten: {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
