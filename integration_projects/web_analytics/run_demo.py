"""Run the demo: `dbt build` for three days in turn (the first creates every table, the next two
take the incremental paths: appends, partition overwrites, merges through the record index, a
snapshot, changes since a checkpoint, time travel), then show what the tables hold.

    python integration_projects/web_analytics/run_demo.py

Starts from an empty lakehouse/ beside the project each time; Spark runs embedded (local[2]).
"""

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)
LAKEHOUSE = os.path.join(HERE, "lakehouse")
DAYS = ("2026-11-19", "2026-11-20", "2026-11-21")


def main() -> int:
    shutil.rmtree(LAKEHOUSE, ignore_errors=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    for run_date in DAYS:
        command = [os.path.join(BIN, "dbt"), "build", "--project-dir", HERE, "--profiles-dir", HERE,
                   "--vars", f"{{run_date: '{run_date}'}}"]
        print(f"\n$ dbt build --vars '{{run_date: {run_date}}}'", flush=True)
        started = time.perf_counter()
        if subprocess.run(command, env=env).returncode != 0:
            return 1
        print(f"dbt build for {run_date} took {time.perf_counter() - started:.1f} s", flush=True)
    print("\n$ hudilite tables lakehouse   (read from storage: no Spark)", flush=True)
    if subprocess.run([os.path.join(BIN, "hudilite"), "tables", LAKEHOUSE], env=env).returncode != 0:
        return 1
    report()
    closing_note()
    return 0


def closing_note() -> None:
    """Three lines: what just happened, and where to look next."""
    def shown(path: str) -> str:  # relative to where the demo was started from, when that is shorter
        rel = os.path.relpath(path)
        return rel if len(rel) < len(path) else path

    docs = os.path.normpath(os.path.join(HERE, "..", "..", "docs", "operations.md"))
    print(f"\nWhat just happened: three days of `dbt build` wrote the Hudi tables listed above to "
          f"{shown(os.path.join(LAKEHOUSE, 'analytics'))}/")
    print(f"List them again (rows, files, last commit; no Spark): {shown(os.path.join(BIN, 'hudilite'))} tables "
          f"{shown(LAKEHOUSE)}")
    print(f"Where to look next: {shown(docs)} (the hudilite CLI, table services, savepoints); "
          "README.md links every page")


def report() -> None:
    """What the merges did, read back through the core in one local Spark session."""
    from dbt.adapters.hudilite.cli import format_timeline
    from dbt.adapters.hudilite.session import spark_session
    from dbt.adapters.hudilite.table import HudiTable

    spark = spark_session(conf={"spark.master": "local[2]"})
    accounts = HudiTable.open(spark, os.path.join(LAKEHOUSE, "analytics", "customer_accounts"))
    history = [h for h in accounts.history() if h["state"] == "COMPLETED" and h["action"] == "commit"]
    print("\ncustomer_accounts: one merge per day through the record index (customer_id -> file group)")
    print(f"{'instant':<19}{'inserts':>8}{'updates':>8}{'deletes':>8}   file groups: rewritten / left alone / new")
    for before, h in zip([None] + history, history):
        groups_before = len(accounts.latest_base_files(as_of=before["instant"])) if before else 0
        rewritten = h["file_groups_rewritten"]
        print(f"{h['instant']:<19}{h['inserts']:>8}{h['updates']:>8}{h['deletes']:>8}   "
              f"{rewritten:>23} / {groups_before - rewritten:>10} / {h['files_written'] - rewritten:>3}")
    stats = accounts.stats()
    print(f"record index: {stats['rows']} keys in {stats['index_bytes']} bytes; the table: {stats['files']} files "
          f"in {len(stats['partitions'])} partitions")

    last, previous = history[-1]["instant"], history[-2]["instant"]
    print(f"\nThe rows the last merge ({last}) wrote, read as changes since {previous}:")
    accounts.read_changes(previous).select("_hoodie_commit_time", "customer_id", "country_code", "plan",
                                           "updated_at").orderBy("customer_id").show(truncate=False)
    print("Customer 20 was deleted (_hoodie_is_deleted), customer 33 changed twice that day: its later "
          "version won (precombine_field: updated_at).")

    def table(name):
        return HudiTable.open(spark, os.path.join(LAKEHOUSE, "analytics", name)).read()

    print("\nplan_changes (customer_accounts now against its previous instant, by time travel):")
    table("plan_changes").select("customer_id", "change", "plan_before", "plan_now").orderBy("customer_id").show()
    print("customer_history (the snapshot, SCD type 2) for customers 20 and 33:")
    table("customer_history").where("customer_id in (20, 33)").select(
        "customer_id", "plan", "dbt_valid_from", "dbt_valid_to").orderBy("customer_id", "dbt_valid_from").show(truncate=False)
    print("Timeline of customer_accounts:")
    print(format_timeline(accounts.history()))


if __name__ == "__main__":
    sys.exit(main())
