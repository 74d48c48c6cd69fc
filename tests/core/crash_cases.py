"""The tables and batches of the crash tests, the rows each write leaves, and the killed
writer's launch (`start_writer`)."""

import os
import sys
from typing import Dict, List, Tuple

from dbt.adapters.hudilite.table.storage.faults import KILL_AT
from tests.core.process_groups import run_in_own_group

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Row = Tuple[int, str, str]  # id, value, day

START: List[Row] = [(i, "v0", f"d{i % 3}") for i in range(30)]


def batch_rows(operation: str) -> List[Tuple]:
    operation = kind_of(operation)
    if operation == "append":
        return [(100 + i, "new", "d1") for i in range(5)]
    if operation == "insert_overwrite":
        return [(200, "over", "d1")]
    if operation == "table":
        return [(300, "all", "d0"), (301, "all", "d2")]
    if operation == "merge":
        return [(1, "merged", "d1"), (2, "merged", "d2"), (400, "merged", "d0")]
    if operation == "cluster":
        return []  # clustering moves rows, it changes none
    return [(4,), (5,)]  # delete: keys


def batch_for(spark, operation: str):
    schema = "id long" if operation == "delete" else "id long, v string, day string"
    return spark.createDataFrame(batch_rows(operation), schema)


def kind_of(operation: str) -> str:
    """`merge_parallel` is a merge on the parallel path (`small_write_bytes=0`)."""
    return "merge" if operation == "merge_parallel" else operation


def rows_after(operation: str, before: List[Row]) -> List[Row]:
    batch = batch_rows(operation)
    operation = kind_of(operation)
    if operation == "cluster":
        return sorted(before)
    if operation == "append":
        return sorted(before + batch)
    if operation == "insert_overwrite":
        return sorted([r for r in before if r[2] != "d1"] + batch)
    if operation == "table":
        return sorted(batch)
    if operation == "merge":
        by_id: Dict[int, Row] = {r[0]: r for r in before}
        by_id.update({r[0]: r for r in batch})
        return sorted(by_id.values())
    gone = {r[0] for r in batch}
    return sorted(r for r in before if r[0] not in gone)


def start_writer(path: str, operation: str, phase: str):
    """`crash_writer.py` on the table at `path` in its own process group, killed at `phase`:
    (return code, stdout, stderr)."""
    env = dict(os.environ, **{KILL_AT: phase}, PYTHONPATH=ROOT)
    return run_in_own_group([sys.executable, os.path.join(ROOT, "tests", "core", "crash_writer.py"), path, operation],
                            300, env=env)
