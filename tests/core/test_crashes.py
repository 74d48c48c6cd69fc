"""The fault-injection harness: every write kind killed (SIGKILL) at every phase. After each
kill a new writer succeeds, the table holds exactly the rows before or after the killed write
(after, once it was published), keys are unique, `validate()` is clean and hudi-rs agrees.

The default suite kills each write kind and reaches each phase at least once (DEFAULT_CASES);
the other pairs are marked `crash`: `python -m pytest -m "crash or not crash" tests` runs
everything, `-m crash` the marked ones alone."""

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.storage.faults import PHASES
from dbt.adapters.hudilite.table.storage.layout import MARKERS_DIR
from tests.core.crash_cases import START, rows_after, start_writer
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.selection import selected_cases

OPERATIONS = ("append", "insert_overwrite", "table", "merge", "merge_parallel", "delete", "cluster")
PUBLISHED = ("after_publish", "clean", "compaction", "archive")  # the write is committed when these are reached


def start_table(spark, path, keyed, version=6):
    table = HudiTable.create(spark, path, "crash", partition_by="day", record_key="id" if keyed else None,
                             table_version=version)
    rows = spark.createDataFrame(START, "id long, v string, day string")
    table.insert(rows.where("id < 15"))
    (table.upsert if keyed else table.insert)(rows.where("id >= 15"))
    table.build_index()
    return table


def contents(table):
    return sorted((r.id, r.v, r.day) for r in table.read().collect())


# Each write kind and each phase once (seven kills, a Spark start-up each): the suite's time.
DEFAULT_CASES = {("append", "requested"), ("insert_overwrite", "archive"), ("table", "before_publish"),
                 ("merge", "metadata_deltacommit"),
                 ("merge", "compaction"), ("merge", "after_publish"), ("merge_parallel", "task"),
                 ("delete", "clean"), ("cluster", "task")}
CASES = [pytest.param(operation, phase, 6, id=f"{operation}-{phase}",
                      marks=() if (operation, phase) in DEFAULT_CASES else pytest.mark.crash)
         for operation in OPERATIONS for phase in PHASES]
# At table version 9 (timeline layout 2: completion times taken and published under the lock, the
# metadata table's deltacommit named by its completion time, its compaction at a reserved time).
V9_DEFAULT_CASES = {("merge", "metadata_deltacommit"), ("cluster", "after_publish")}  # the rest: -m crash
CASES += [pytest.param(operation, phase, 9, id=f"v9-{operation}-{phase}",
                       marks=() if (operation, phase) in V9_DEFAULT_CASES else pytest.mark.crash)
          for operation in OPERATIONS for phase in PHASES]


# Killed writers running side by side: each is a Spark start-up, mostly waiting on one core.
WRITERS_AT_ONCE = 3


@pytest.fixture(scope="module")
def killed_writes(request, spark, tmp_path_factory):
    """case id -> (table, rows before, the writer's future) of every selected case, started as the
    module starts: each start table is made in this session, then its writer is queued, and
    WRITERS_AT_ONCE writers run side by side (each in a process and a JVM of its own, its table
    its own), so the cases wait for their writers together instead of one after another."""
    params = {p.id: p.values for p in CASES}
    started = {}
    with ThreadPoolExecutor(max_workers=WRITERS_AT_ONCE) as pool:
        try:
            for case in selected_cases(request, "test_a_killed_write_leaves_the_table_before_or_after_it"):
                operation, phase, version = params[case]
                keyed = operation in ("merge", "merge_parallel", "delete")
                table = start_table(spark, str(tmp_path_factory.mktemp(case) / "t"), keyed, version)
                before = contents(table)
                started[case] = (table, before, pool.submit(start_writer, table.path, operation, phase))
            yield started
        finally:
            for _, _, writer in started.values():
                writer.cancel()


@pytest.mark.parametrize("operation, phase, version", CASES)
def test_a_killed_write_leaves_the_table_before_or_after_it(spark, killed_writes, request, operation, phase, version):
    keyed = operation in ("merge", "merge_parallel", "delete")
    table, before, writer = killed_writes[request.node.callspec.id]
    returncode, out, err = writer.result()
    killed = returncode == -signal.SIGKILL
    reachable = not (phase == "clean" and operation == "append")  # an append leaves nothing to clean
    assert killed or not reachable, f"{operation} was not killed at {phase}: {returncode}\n{out}\n{err[-3000:]}"

    after = rows_after(operation, before)
    now = contents(table)
    assert now == (after if phase in PUBLISHED else before), f"{operation} killed at {phase}"
    if operation == "append" and phase in PUBLISHED:  # the killed append topped up a small file of d1
        stats = table.commit_metadata(table.timeline()[-1]).write_stats
        assert stats and all(s.prevCommit and s.partitionPath == "day=d1" for s in stats)
    marker = [(999, "next", "d0")]
    table = HudiTable.open(spark, table.path)  # a new writer, as a later dbt run would be
    next_rows = spark.createDataFrame(marker, "id long, v string, day string")
    (table.upsert if keyed else table.insert)(next_rows)
    assert contents(table) == sorted(now + marker)
    keys = [r[0] for r in table.read().select("_hoodie_record_key").collect()]
    assert len(keys) == len(set(keys))
    assert table.validate() == []
    markers = os.path.join(table.path, MARKERS_DIR)  # the killed write's markers and staged files went with it
    assert [os.path.join(d, f) for d, _, files in os.walk(markers) for f in files] == []
    assert table.config.table_version == version
    assert_hudi_rs_agrees(table)
