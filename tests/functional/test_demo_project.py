"""The demo project end to end through a real standalone cluster (the profile's spark.master)."""

import os
import subprocess
import sys

from dbt.adapters.hudilite.table import HudiTable
from tests.cluster import standalone_cluster
from tests.core.hudi_rs import assert_hudi_rs_agrees

PROJECT = os.path.join(os.path.dirname(__file__), "..", "..", "integration_projects", "web_analytics")


def dbt_build(tmp_path, env, run_date):
    command = [os.path.join(os.path.dirname(sys.executable), "dbt"), "build", "--project-dir", PROJECT,
               "--profiles-dir", PROJECT, "--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs"),
               "--vars", f"{{run_date: '{run_date}'}}"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)


def test_demo_project_builds_twice_on_a_standalone_cluster(spark, tmp_path):
    lakehouse = tmp_path / "lakehouse"
    with standalone_cluster() as master:
        env = dict(os.environ, HUDILITE_SPARK_MASTER=master, HUDILITE_LOCATION_ROOT=str(lakehouse),
                   PYSPARK_PYTHON=sys.executable)
        for run_date in ("2026-11-20", "2026-11-21"):
            build = dbt_build(tmp_path, env, run_date)
            assert build.returncode == 0, build.stdout[-5000:]
            assert "PASS=20" in build.stdout
            console = build.stdout + build.stderr  # dbt's lines only: the JVM's go to dbt's log folder
            jvm_lines = [line for line in console.splitlines()
                         if "WARNING: Using incubator" in line or " WARN " in line or "log4j" in line]
            assert jvm_lines == [], jvm_lines
            assert os.path.exists(tmp_path / "logs" / "spark.log")
        assert master.applications() == ["dbt-hudilite", "dbt-hudilite"]  # both builds ran on the cluster
    page_views = HudiTable.open(spark, str(lakehouse / "analytics" / "page_views"))
    assert [i.action for i in page_views.timeline()] == ["commit", "commit"]
    assert page_views.read().count() == 660
    daily = HudiTable.open(spark, str(lakehouse / "analytics" / "daily_page_stats"))
    assert [i.action for i in daily.timeline()] == ["commit", "replacecommit"]
    assert set(daily.commit_metadata(daily.timeline()[-1]).replaced_file_ids) == {"event_date=2026-11-20"}
    for name in ("page_views", "daily_page_stats", "customers"):
        assert_hudi_rs_agrees(HudiTable.open(spark, str(lakehouse / "analytics" / name)))
