"""How a write's Spark jobs run, on the driver: a task function over a DataFrame's partitions
in Arrow (`run_task_job`), with Arrow batches bounded by rows and bytes, and after a failure a
wait until every sibling task stopped (`settled`), so the rollback that follows finds every
file they wrote."""

from __future__ import annotations

import functools
import os
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, TypeVar

import pyarrow as pa

from .sessions import is_connect

T = TypeVar("T")


ARROW_BATCH_ROWS = 100_000


# An Arrow batch crossing between Python and the JVM is one direct-memory buffer there (capped
# at the JVM's heap size, 1 GiB by default): rows of a few KB make 100k rows too many, and the
# JVM dies. Batches are cut by bytes as well as rows.
ARROW_BATCH_BYTES = 64 << 20


def shuffle_partitions(spark) -> int:
    """The session's shuffle partitions: how many tasks its user wants a shuffle to have."""
    try:
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    except ValueError:  # "auto" on some platforms
        return 200


@functools.lru_cache(maxsize=8)
def arrow_schema_of(ddl: str) -> pa.Schema:
    """The Arrow schema of a flat `name type, ...` DDL of the types task results use."""
    types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "boolean": pa.bool_()}
    fields = [part.strip().split(" ") for part in ddl.split(",")]
    return pa.schema([pa.field(name, types[kind]) for name, kind in fields])


def run_task_job(df, task, ddl: str, as_arrow: bool = False):
    """The rows the successful attempts of `task` (over `df`'s partitions, in Arrow) return:
    dicts, or one Arrow table."""
    spark = df.sparkSession
    # Larger Arrow batches halve the transfer cost (10k rows is Spark's default), bounded by
    # bytes too (see ARROW_BATCH_BYTES). Set, not restored: writes may run on several threads.
    if int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")) < ARROW_BATCH_ROWS:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    if _byte_size(spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch", None)) > ARROW_BATCH_BYTES:
        spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", str(ARROW_BATCH_BYTES))
    out = df.mapInArrow(task, ddl)

    def run():
        if as_arrow and hasattr(out, "toArrow"):  # pyspark 4
            return out.toArrow().cast(arrow_schema_of(ddl))
        rows = [r.asDict() for r in out.collect()]
        return pa.Table.from_pylist(rows, schema=arrow_schema_of(ddl)) if as_arrow else rows

    return settled(spark, run)


def run_on_driver(task, inputs: Sequence[Iterable[pa.RecordBatch]], ddl: str) -> pa.Table:
    """What `run_task_job(..., as_arrow=True)` returns, of `task` run here on the driver, as
    task i over `inputs[i]`, each on a thread of its own (Arrow's work releases the GIL): no
    Spark job, no Python worker. A failed task fails the run once every task has stopped, so
    that the rollback that follows finds every file they wrote."""
    schema = arrow_schema_of(ddl)

    def run(i: int) -> List[pa.RecordBatch]:
        _driver_task.partition = i
        return list(task(iter(inputs[i])))

    with ThreadPoolExecutor(max_workers=max(1, len(inputs)), thread_name_prefix="hudilite-task") as pool:
        futures = [pool.submit(run, i) for i in range(len(inputs))]
        wait(futures)
    out = [batch for future in futures for batch in future.result()]
    return pa.Table.from_batches(out).cast(schema) if out else schema.empty_table()


_driver_task = threading.local()


def driver_task_partition() -> int:
    """The task number `run_on_driver` gave the thread running this."""
    return getattr(_driver_task, "partition", 0)


def driver_threads() -> int:
    """Tasks the driver runs side by side."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


# Plan nodes whose output Spark's size estimate does not bound: rows made from a row (explode,
# Python table functions), Python code mapping whole partitions.
UNBOUNDED_NODES = ("Generate", "MapInPandas", "MapInArrow", "PythonMapInArrow", "FlatMapGroupsInPandas",
                   "FlatMapGroupsInArrow", "FlatMapCoGroupsInPandas", "FlatMapCoGroupsInArrow")


def estimated_bytes(df) -> Optional[int]:
    """Spark's estimate of `df`'s size in bytes, from its optimized plan's statistics (no job),
    or None where there is none to trust: a plan with an `UNBOUNDED_NODES` node, a Spark
    Connect client (no plan to ask)."""
    if is_connect(df.sparkSession):
        return None
    plan = df._jdf.queryExecution().optimizedPlan()
    if any(name in UNBOUNDED_NODES for name in _node_names(plan)):
        return None
    return int(str(plan.stats().sizeInBytes()))  # a Scala BigInt, which Py4J may hand over as an int


def _node_names(plan) -> Iterator[str]:
    """The node names of a logical plan's tree (a cached relation is a leaf: its size is known)."""
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node.nodeName()
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))


def _byte_size(text: Optional[str]) -> float:
    """A Spark byte size ('268435456', '256m', '1g'); unset or unreadable: unbounded."""
    found = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", (text or "").lower())
    if not found:
        return float("inf")
    return int(found.group(1)) * 1024 ** "_kmgt".index(found.group(2) or "_")


SETTLE_TIMEOUT_S = 60.0


def settled(spark, run: Callable[[], T]) -> T:
    """`run()`, Spark jobs whose tasks write files. When one fails, Spark returns at once while
    its sibling tasks may still be writing: wait until every task of those jobs has stopped,
    so that the rollback that follows finds every file they wrote. (A Spark Connect client
    has no view of the tasks: it does not wait.)"""
    if is_connect(spark):
        return run()
    context = spark.sparkContext
    tag = f"hudilite-write-{uuid.uuid4().hex}"
    context.addJobTag(tag)
    try:
        return run()
    except BaseException:
        _wait_for_tasks(context, tag)
        raise
    finally:
        context.removeJobTag(tag)


def _wait_for_tasks(context, tag: str) -> None:
    tracker = context._jsc.sc().statusTracker()
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        running = 0
        for job in tracker.getJobIdsForTag(tag):
            info = tracker.getJobInfo(job)
            for stage in (info.get().stageIds() if info.isDefined() else []):
                stage_info = tracker.getStageInfo(stage)
                running += stage_info.get().numActiveTasks() if stage_info.isDefined() else 0
        if not running:
            return
        time.sleep(0.05)
