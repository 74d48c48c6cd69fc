"""The core on a real standalone cluster: executors are other processes."""

import json
import os
import subprocess
import sys

from dbt.adapters.hudilite.table import HudiTable
from tests.cluster import standalone_cluster
from tests.core.hudi_rs import assert_hudi_rs_agrees


def test_write_and_read_through_a_standalone_cluster(spark, tmp_path):
    path = str(tmp_path / "on_cluster")
    with standalone_cluster() as master:
        job = subprocess.run(
            [sys.executable, os.path.join(os.path.dirname(__file__), "cluster_job.py"), master, path],
            capture_output=True, text=True, timeout=600,
        )
        assert master.applications() == ["hudilite-cluster-test"]
    assert job.returncode == 0, job.stderr[-4000:]
    report = json.loads(next(l for l in job.stdout.splitlines() if l.startswith("REPORT "))[len("REPORT "):])
    # Every task ran in a Python worker started by an executor JVM (CoarseGrainedExecutorBackend,
    # which local mode never starts), the driver under none: the executors are remote processes.
    assert report["tasks_in_executor_backends"] and not report["driver_is_executor_backend"]
    assert report["driver_pid"] not in report["executor_pids"]
    assert report["count_t1"] == 20000
    assert report["count"] == 20000 - 20000 // 3 - (1 if 20000 % 3 else 0) + 10  # bucket 0 replaced by 10 rows
    assert len(report["task_writers"]) == 4  # four tasks wrote their own files
    table = HudiTable.open(spark, path)
    assert [i.timestamp for i in table.timeline()] == report["instants"]
    assert_hudi_rs_agrees(table)
