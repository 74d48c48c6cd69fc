"""One benchmark command: every figure of the performance goals, each next to a peer measured in
the same run, as a markdown table, a raw JSON log and PNG charts in benchmarks/results/.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/run.py            # the default sizes: under 20 minutes on 2 cores
    .venv/bin/python benchmarks/run.py --quick    # small sizes, no dbt demo: under 2 minutes
    .venv/bin/python benchmarks/run.py --only appends merges
    .venv/bin/python benchmarks/run.py --scale    # the scale workload alone (issue 33), not in the default run
    .venv/bin/python benchmarks/run.py --only hudi  # Hudi's own Spark writer as the peer (`hudi_peer.py`)
    .venv/bin/python benchmarks/run.py --only s3  # a local S3 server against local disk, requests per commit (`s3.py`)
    .venv/bin/python benchmarks/run.py --only dbt_hudi  # the demo against dbt-spark with file_format hudi
    .venv/bin/python benchmarks/run.py --only catalog  # catalog sync into a Hive metastore at 10,000 partitions
    .venv/bin/python benchmarks/run.py --only small  # `dbt run` of the demo's merge model with nothing to change
    .venv/bin/python benchmarks/run.py --check  # the README's rows at small sizes: exit 1 if a ratio is 25% worse

Workloads: appends, merges (delta-rs, Spark full rewrite), scaling (upsert and index lookup
against table size), overwrite (one partition), dbt (the demo against dbt-spark parquet, and
start-up over many tables); scale (`scale.py`: wide-row upserts, a keyed table's bytes against
plain parquet, a small write plus services by the table's file count, a skewed upsert's worker
memory; run alone, in a session of the embedded session's own settings); hudi (`hudi_peer.py`: Hudi
1.0.2's writer in a pyspark 3.5 process of its own, on the same rows and settings). All run in
one local[2] session with hudilite's Spark settings;
the peers use the same session (or, for dbt, the same settings).
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import catalog_sync as catalog_run  # noqa: E402
import check as readme_check  # noqa: E402
import charts  # noqa: E402
import dbt_runs  # noqa: E402
import hudi_peer  # noqa: E402
import s3 as s3_run  # noqa: E402
import scale as scale_run  # noqa: E402
from measure import markdown_table  # noqa: E402
from workloads import QUICK, Scale, Workloads  # noqa: E402

from dbt.adapters.hudilite.session import spark_session  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
ALL = ("appends", "merges", "scaling", "overwrite", "dbt")
SCALE = "scale"  # not in the default run: `--scale` or `--only scale`
HUDI = "hudi"  # Hudi's own writer (a second JVM, the referee's pyspark 3.5): `--only hudi`
S3 = "s3"  # a local S3 server (moto) against local disk, S3A in the session: `--only s3`
DBT_HUDI = "dbt_hudi"  # the demo against dbt-spark with file_format hudi (pyspark 3.5): `--only dbt_hudi`
CATALOG = "catalog"  # catalog sync into a Hive metastore server (a JVM of its own): `--only catalog`
SMALL = "small"  # small runs through dbt: the demo's merge model with nothing to change (also in `dbt`)


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes and no dbt demo (under 2 minutes)")
    parser.add_argument("--check", action="store_true",
                        help="the README's rows at small sizes; exit 1 when a ratio is more than 25%% worse than published")
    parser.add_argument("--only", nargs="+", choices=ALL + (SCALE, HUDI, DBT_HUDI, S3, CATALOG, SMALL), default=list(ALL))
    parser.add_argument("--rounds", type=int, help="measured rounds of every comparison but the upserts (default 3, appends 5, insert_overwrite 11; quick 2); the scaling upserts run scaling_rounds (7)")
    parser.add_argument("--scale", type=float, nargs="?", const=0.0, default=1.0,
                        help="multiply every row count by this; alone (no number): run the scale workload only")
    args = parser.parse_args()
    if args.scale == 0.0:
        args.only, args.scale = [SCALE], 1.0
    if args.check:
        args.quick, args.only = True, readme_check.workloads()
    scale = QUICK if args.quick else Scale()
    if args.rounds:
        scale.rounds = scale.append_rounds = scale.overwrite_rounds = args.rounds
    if args.scale != 1.0:
        for name in ("wide_rows", "narrow_rows", "merge_rows", "overwrite_rows"):
            setattr(scale, name, int(getattr(scale, name) * args.scale))
        scale.scaling_rows = tuple(int(n * args.scale) for n in scale.scaling_rows)

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%MZ")
    os.makedirs(RESULTS, exist_ok=True)
    log_lines = []
    started = time.perf_counter()

    def log(line: str) -> None:
        line = f"[{time.perf_counter() - started:7.1f}s] {line}"
        log_lines.append(line)
        print(line, flush=True)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers: this interpreter
    s3_server = None
    if args.only == [SCALE]:  # the embedded session's own settings (its default heap, 1 GiB)
        spark = spark_session(conf={"spark.master": "local[2]"})
    elif S3 in args.only:  # the server first: the session's tasks inherit its environment
        s3_server, endpoint = s3_run.start_server()
        spark = spark_session(conf={"spark.master": "local[2]", "spark.driver.memory": "8g",
                                    **s3_run.spark_conf(endpoint)})
    else:
        spark = spark_session(conf={"spark.master": "local[2]", "spark.driver.memory": "8g"})
    work = tempfile.mkdtemp(prefix="hudilite-bench-")
    bench = Workloads(spark, work, scale, log)
    try:
        if "appends" in args.only:
            bench.appends()
            bench.auto_key_index()
        if "merges" in args.only:
            bench.merges()
        if "scaling" in args.only:
            bench.scaling()
        if "overwrite" in args.only:
            bench.overwrite()
        if HUDI in args.only:
            for result in hudi_peer.run(spark, work, log, quick=args.quick):
                bench.add(result)
        if SCALE in args.only:
            scale_run.ScaleWorkloads(bench, scale_run.ScaleSizes(quick=args.quick)).run()
        if "dbt" in args.only:
            if scale.startup_tables:
                for result in dbt_runs.startup(spark, work, scale.startup_tables, log, scale.rounds):
                    bench.add(result)
            if scale.dbt_demo:
                for result in dbt_runs.demo_builds(work, log):
                    bench.add(result)
        if SMALL in args.only or ("dbt" in args.only and scale.dbt_demo):
            for result in dbt_runs.small_merge_runs(work, log, scale.rounds):
                bench.add(result)
        if DBT_HUDI in args.only:
            for result in dbt_runs.demo_builds(work, log, peer="hudi"):
                bench.add(result)
        if CATALOG in args.only:
            for result in catalog_run.run(spark, work, log, quick=args.quick, rounds=args.rounds or 5):
                bench.add(result)
        if S3 in args.only:
            for result in s3_run.run(spark, work, log, quick=args.quick, rounds=args.rounds or 3):
                bench.add(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if s3_server is not None:
            s3_server.terminate()

    total = time.perf_counter() - started
    sizes = "--scale" if args.only == [SCALE] else "default sizes"
    head = (f"Benchmark run {stamp}, commit {commit()}, {'--quick' if args.quick else sizes}, "
            f"local[2] on {os.cpu_count()} cores, {total / 60:.1f} min. Figures are medians of {scale.rounds} "
            f"rounds (appends: {scale.append_rounds}; upserts into the delta-rs table: {scale.upsert_rounds}; "
            f"the scaling upserts: {scale.scaling_rounds}; insert_overwrite: {scale.overwrite_rounds}) with the order of the sides "
            "reversed every round, after one warm-up round of each; peers ran in the same run.")
    table = markdown_table(bench.results)
    try:
        pictures = charts.draw(bench, RESULTS, stamp)
    except ImportError as err:  # matplotlib is in the `bench` extra
        print(f"no charts: {err}")
        pictures = []
    markdown = "\n\n".join([head, table] + [f"![{name}]({os.path.basename(path)})" for name, path in pictures])
    with open(os.path.join(RESULTS, f"run-{stamp}.md"), "w") as f:
        f.write(markdown + "\n")
    with open(os.path.join(RESULTS, f"run-{stamp}.json"), "w") as f:
        json.dump({"stamp": stamp, "commit": commit(), "args": vars(args), "scale": vars(scale),
                   "results": [r.as_dict() for r in bench.results], "curves": bench.curves, "log": log_lines}, f, indent=1)
    print("\n" + head + "\n\n" + table)
    print(f"\nwritten: benchmarks/results/run-{stamp}.md, .json" + "".join(f", {os.path.basename(p)}" for _, p in pictures))
    if args.check:
        print("\nthe README's rows at small sizes (--check):")
        if not readme_check.check(bench.results, print):
            sys.exit(1)


if __name__ == "__main__":
    main()
