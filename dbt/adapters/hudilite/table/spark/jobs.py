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
        try:
            return list(task(iter(inputs[i])))
        finally:
            del _driver_task.partition

    with ThreadPoolExecutor(max_workers=max(1, len(inputs)), thread_name_prefix="hudilite-task") as pool:
        futures = [pool.submit(run, i) for i in range(len(inputs))]
        wait(futures)
    out = [batch for future in futures for batch in future.result()]
    return pa.Table.from_batches(out).cast(schema) if out else schema.empty_table()


def rows_on_driver(df, zone: str) -> Optional[pa.Table]:
    """`df`'s rows brought to the driver in Arrow, labelled as Spark labels the rows it hands
    to tasks (zoned timestamps in the session's `zone`; `toArrow` labels them UTC: the same
    instants); None when they outgrow `spark.driver.maxResultSize` (the caller runs tasks)."""
    try:
        rows = df.toArrow()
    except Exception as err:  # noqa: BLE001 - only this one is a reason to take Spark's tasks instead
        if "maxResultSize" in str(err):
            return None
        raise
    schema = pa.schema([f.with_type(_zoned(f.type, zone)) for f in rows.schema])
    return rows if schema.equals(rows.schema) else rows.cast(schema)


def _zoned(kind: pa.DataType, zone: str) -> pa.DataType:
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return pa.timestamp(kind.unit, zone)
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_zoned(f.type, zone)) for f in kind])
    if pa.types.is_map(kind):
        return pa.map_(kind.key_field.with_type(_zoned(kind.key_type, zone)),
                       kind.item_field.with_type(_zoned(kind.item_type, zone)))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        make = pa.list_ if pa.types.is_list(kind) else pa.large_list
        return make(kind.value_field.with_type(_zoned(kind.value_type, zone)))
    return kind


_driver_task = threading.local()


def driver_task_partition() -> Optional[int]:
    """The task number `run_on_driver` gave the thread running this; None outside its tasks."""
    return getattr(_driver_task, "partition", None)


MAX_DRIVER_THREADS = 4  # each holds the whole (small) batch; a container may show the host's cores


def driver_threads() -> int:
    """Tasks the driver runs side by side."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_DRIVER_THREADS, cores))


# The plan nodes whose size Spark knows rather than guesses: rows held in memory (cached and
# materialized, or local), and projections and filters of them. Elsewhere a computed string
# counts 20 bytes whatever its length (420 rows of 1 MB were estimated at 15 KB), a file scan
# counts its compressed bytes, and explodes and Python code multiply rows.
TRUSTED_NODES = ("InMemoryRelation", "LocalRelation", "Project", "Filter")


def estimated_bytes(df) -> Optional[int]:
    """Spark's estimate of `df`'s size in bytes, from its optimized plan's statistics (no job),
    or None where it is not to be trusted: a plan with a node outside `TRUSTED_NODES`, a Spark
    Connect client (no plan to ask), a DataFrame without `toArrow` (pyspark 3.5)."""
    if is_connect(df.sparkSession) or not hasattr(df, "toArrow"):
        return None
    try:
        execution = df._jdf.queryExecution()
        # Judged on the analyzed plan with its cached parts (no optimizer run): a batch that
        # stays on Spark's tasks is optimized once, by its job.
        if any(name not in TRUSTED_NODES for name in _node_names(execution.withCachedData())):
            return None
        return int(str(execution.optimizedPlan().stats().sizeInBytes()))  # a Scala BigInt, maybe a Python int
    except Exception:  # noqa: BLE001 - no estimate: the work stays on Spark's tasks
        return None


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
