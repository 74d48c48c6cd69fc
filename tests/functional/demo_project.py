"""The demo project (integration_projects/web_analytics) run by the tests: `dbt build` of a day,
and what its tables hold after two days. Its runs: over Spark Connect (test_spark_connect.py),
on a standalone cluster with its tables on S3 (tests/core/test_object_storage.py)."""

import os
import subprocess
import sys
from collections import Counter

from dbt.adapters.hudilite.table import HudiTable
from tests.core.hudi_rs import assert_hudi_rs_agrees

PROJECT = os.path.join(os.path.dirname(__file__), "..", "..", "integration_projects", "web_analytics")


def dbt_build(tmp_path, env, run_date, *extra):
    command = [os.path.join(os.path.dirname(sys.executable), "dbt"), "build", "--project-dir", PROJECT,
               "--profiles-dir", PROJECT, "--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs"),
               "--vars", f"{{run_date: '{run_date}'}}", *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)


def assert_two_demo_days(spark, lakehouse, rows=None):
    """What the demo's tables hold after 2026-11-20 and 2026-11-21, wherever Spark ran and
    wherever the tables are (`lakehouse`: a folder or an object-store URI). `rows(name)` reads a
    table's rows as dicts: by default through our reader, which hudi-rs must then agree with."""
    def table(name):
        return HudiTable.open(spark, f"{lakehouse}/analytics/{name}")

    checked_by_hudi_rs = rows is None
    rows = rows or (lambda name: [r.asDict() for r in table(name).read().collect()])
    page_views = table("page_views")
    assert [i.action for i in page_views.timeline()] == ["commit"] * 2
    assert len(rows("page_views")) == 660
    daily = table("daily_page_stats")
    assert [i.action for i in daily.timeline()] == ["commit", "replacecommit"]
    assert set(daily.commit_metadata(daily.timeline()[-1]).replaced_file_ids) == {"event_date=2026-11-20"}

    # The last day's merge: customer 20 deleted, 33 changed twice (the later version wins), 12
    # changed, 41 and 42 new; only the file groups of US and IN were rewritten.
    accounts = table("customer_accounts")
    plans = {r["customer_id"]: r["plan"] for r in rows("customer_accounts")}
    assert len(plans) == 41 and 20 not in plans and plans[33] == "enterprise" and plans[12] == "team"
    last = accounts.commit_metadata(accounts.timeline()[-1])
    assert last.operation == "UPSERT"
    assert {s.partitionPath for s in last.write_stats} == {"country_code=US", "country_code=IN"}
    assert sum(s.numDeletes for s in last.write_stats) == 1
    # The changes model read only what each merge wrote (40 rows, then 4), from its checkpoint.
    changes = table("customer_changes")
    appended = Counter(r["_hoodie_commit_time"] for r in rows("customer_changes"))
    assert [appended[i.timestamp] for i in changes.timeline()] == [40, 4]
    assert changes.checkpoint("analytics.customer_accounts") == accounts.timeline()[-1].timestamp
    plan_changes = {(r["customer_id"], r["change"]) for r in rows("plan_changes")}
    assert plan_changes == {(12, "plan changed"), (20, "deleted"), (33, "plan changed"), (41, "new"), (42, "new")}
    history = [r for r in rows("customer_history") if r["customer_id"] in (20, 33)]
    assert sorted((r["customer_id"], r["plan"], r["dbt_valid_to"] is None) for r in history) == [
        (20, "enterprise", False), (33, "enterprise", True), (33, "team", False)]
    if checked_by_hudi_rs:
        for name in ("page_views", "daily_page_stats", "customers", "customer_accounts", "customer_history",
                     "customer_changes"):
            assert_hudi_rs_agrees(table(name))
