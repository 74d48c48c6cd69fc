"""Benchmark: a table appended to every hour for weeks, with Hudi's default table services on
(small-file top-ups, cleaning, archival, as dbt runs them after every build) and off.

    python benchmarks/table_services.py [--appends 1000] [--rows 2000] [--quick]

Two tables, partitioned by day, take the same hourly appends in alternating order. Early is
the median of appends 2-11, late of the last ten. A read is a snapshot read of the newest
complete day (a fixed amount of data: what grows is only what the table carries along) and a
count of the whole table per million rows. Prints a markdown table, and keeps it with the
raw timings in `benchmarks/results/`.
"""

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from pyspark.sql import functions as F

from dbt.adapters.hudilite.session import spark_session
from dbt.adapters.hudilite.table import FileSizing, HudiTable, TableServices

HOURS_PER_DAY = 24
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def hour_rows(spark, hour, rows):
    day = dt.date(2026, 1, 1) + dt.timedelta(days=hour // HOURS_PER_DAY)
    return spark.range(hour * rows, (hour + 1) * rows, numPartitions=2).select(
        F.col("id").alias("event_id"), F.lit(day.isoformat()).alias("day"), F.lit(hour).alias("hour"),
        (F.col("id") % 1000).alias("user_id"), F.concat(F.lit("/page/"), (F.col("id") % 97).cast("string")).alias("url"))


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def read_day(table, day):
    return table.read().where(F.col("day") == day).agg(F.count("*"), F.sum("user_id")).collect()


def files_per_partition(table):
    counts = {}
    for f in table.latest_base_files():
        counts[f.partition] = counts.get(f.partition, 0) + 1
    return counts


def hoodie_files(table):
    return sum(len(files) for _, _, files in os.walk(os.path.join(table.path, ".hoodie")))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="100 appends")
    args = parser.parse_args()
    appends = 100 if args.quick else args.appends
    spark = spark_session(conf={"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"})
    root = tempfile.mkdtemp(prefix="hudilite-services-")
    tables = {
        "on": HudiTable.create(spark, os.path.join(root, "on"), "on", partition_by="day"),
        "off": HudiTable.create(spark, os.path.join(root, "off"), "off", partition_by="day"),
    }
    tables["off"].file_sizing = FileSizing(small_file_limit=0)
    services = TableServices()
    append_s = {name: [] for name in tables}
    read_s = {name: [] for name in tables}
    count_s = {name: [] for name in tables}
    try:
        for hour in range(appends):
            for name in (("on", "off") if hour % 2 == 0 else ("off", "on")):
                table = tables[name]
                spent, _ = timed(lambda: table.insert(hour_rows(spark, hour, args.rows)))
                if name == "on":
                    spent += timed(lambda: table.run_services(services))[0]
                append_s[name].append(spent)
            if HOURS_PER_DAY <= hour < HOURS_PER_DAY + 10 or hour >= appends - 10:  # early: the first full day
                day = (dt.date(2026, 1, 1) + dt.timedelta(days=hour // HOURS_PER_DAY - 1)).isoformat()
                for name, table in tables.items():
                    read_s[name].append((hour, timed(lambda: read_day(table, day))[0]))
                    rows = (hour + 1) * args.rows
                    count_s[name].append((hour, timed(lambda: table.read().count())[0] / rows * 1e6))
            if hour % 50 == 0:
                print(f"hour {hour}: on {append_s['on'][-1]:.2f}s off {append_s['off'][-1]:.2f}s", flush=True)
        report = summarize(tables, append_s, read_s, count_s, appends, args.rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(report)
    os.makedirs(RESULTS, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    with open(os.path.join(RESULTS, f"table_services-{stamp}.md"), "w") as out:
        out.write(report + "\n")
    with open(os.path.join(RESULTS, f"table_services-{stamp}.json"), "w") as out:
        json.dump({"append_s": append_s, "read_s": read_s, "count_s_per_million": count_s}, out)


def summarize(tables, append_s, read_s, count_s, appends, rows):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    early, late = slice(1, 11), slice(-10, None)
    lines = [f"{appends} hourly appends of {rows} rows, partitioned by day (commit {commit})", "",
             "| services | append early | append late | late/early | day read early | day read late | late/early "
             "| count per 1M rows late | max files per partition | active instants | files under .hoodie |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, table in tables.items():
        a_early, a_late = statistics.median(append_s[name][early]), statistics.median(append_s[name][late])
        r_early = statistics.median([t for h, t in read_s[name] if h < HOURS_PER_DAY + 10])
        r_late = statistics.median([t for h, t in read_s[name] if h >= appends - 10])
        counts = [t for h, t in count_s[name]]
        active = len(table.timeline())
        lines.append(f"| {name} | {a_early:.2f} s | {a_late:.2f} s | {a_late / a_early:.2f}x | {r_early:.3f} s | "
                     f"{r_late:.3f} s | {r_late / r_early:.2f}x | {statistics.median(counts[-3:]) if counts else 0:.2f} s "
                     f"| {max(files_per_partition(table).values())} | {active} | {hoodie_files(table)} |")
    lines += ["", "Goals (issue 8, services on): late/early <= 1.3x for appends and reads, at most 4 base files per "
              "partition under 120 MB, at most 60 active instants."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
