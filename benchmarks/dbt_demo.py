"""Benchmark: the demo project's two `dbt build`s with hudilite, next to dbt-spark writing
plain parquet (`file_format: parquet`, its default Hive-metastore session) in the same run.

    python benchmarks/dbt_demo.py

Each side starts from nothing: build one is the first day (every table created), build two
the next day (incremental models take their incremental paths). Prints wall times.
"""

import os
import subprocess
import sys
import tempfile
import time

PROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration_projects", "web_analytics")
DBT = os.path.join(os.path.dirname(sys.executable), "dbt")


def build(target, run_date, work):
    command = [DBT, "build", "--project-dir", PROJECT, "--profiles-dir", PROJECT, "--target", target,
               "--target-path", os.path.join(work, "target"), "--log-path", os.path.join(work, "logs"),
               "--vars", f"{{run_date: '{run_date}'}}"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, HUDILITE_LOCATION_ROOT=os.path.join(work, "lakehouse"),
               DBT_SPARK_WAREHOUSE=os.path.join(work, "spark-warehouse"))
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{target} build for {run_date} failed:\n{done.stdout[-4000:]}")
    summary = next((line.split("Done. ", 1)[1] for line in done.stdout.splitlines() if "Done. " in line), "")
    return elapsed, summary


def main():
    rows = []
    for label, target in (("dbt-spark, file_format parquet (peer)", "spark_parquet"), ("dbt-hudilite", "dev")):
        work = tempfile.mkdtemp(prefix=f"bench-{target}-")
        for step, run_date in (("1st build (create)", "2026-11-20"), ("2nd build (incremental)", "2026-11-21")):
            elapsed, summary = build(target, run_date, work)
            rows.append((label, step, elapsed, summary))
    print("\nDemo project (integration_projects/web_analytics), local[2], wall time per `dbt build`")
    print("| adapter | build | wall s | dbt summary |")
    print("|---|---|---|---|")
    for label, step, elapsed, summary in rows:
        print(f"| {label} | {step} | {elapsed:.1f} | {summary} |")


if __name__ == "__main__":
    main()
