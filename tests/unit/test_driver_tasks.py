"""The driver's side of a small upsert without Spark: tasks run as threads with their own task
numbers, rows labelled as Spark hands them to tasks, whole shards per tagging thread."""

import pyarrow as pa
import pytest

from dbt.adapters.hudilite.table.operations.upsert import SHARD, by_shard
from dbt.adapters.hudilite.table.spark.jobs import _zoned, run_on_driver
from dbt.adapters.hudilite.table.spark.writer import WriteSpec, task_context


def test_each_driver_task_runs_as_its_own_task_number_and_a_failure_waits_for_the_others():
    spec = WriteSpec(base_path="/nowhere", instant="20261129000000000", partitioned=False, partition_depth=0,
                     auto_keys=False)

    def task(batches):
        number, attempt, token = task_context(spec)
        rows = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pylist([{"n": number, "rows": rows, "token": token}])

    inputs = [[pa.record_batch([pa.array([1, 2])], names=["x"])], [], [pa.record_batch([pa.array([3])], names=["x"])]]
    out = run_on_driver(task, inputs, "n int, rows long, token string")
    assert out.to_pylist() == [{"n": 0, "rows": 2, "token": "0-0-0"}, {"n": 1, "rows": 0, "token": "1-0-0"},
                               {"n": 2, "rows": 1, "token": "2-0-0"}]
    finished = []

    def fails_first(batches):
        number, _, _ = task_context(spec)
        if number == 0:
            raise RuntimeError("task 0 failed")
        import time
        time.sleep(0.2)
        finished.append(number)
        yield from ()

    with pytest.raises(RuntimeError, match="task 0 failed"):
        run_on_driver(fails_first, [[], [], []], "n int")
    assert sorted(finished) == [1, 2]  # the others ran to their end before the failure was raised
    with pytest.raises(RuntimeError, match="outside a Spark task"):
        task_context(spec)


def test_zoned_timestamps_take_the_sessions_zone_wherever_they_nest():
    utc = pa.timestamp("us", "UTC")
    kind = pa.struct([pa.field("at", utc), pa.field("days", pa.list_(utc)), pa.field("m", pa.map_(pa.string(), utc)),
                      pa.field("plain", pa.timestamp("us")), pa.field("n", pa.int64())])
    zoned = _zoned(kind, "Europe/Paris")
    paris = pa.timestamp("us", "Europe/Paris")
    assert zoned.field("at").type == paris and zoned.field("days").type.value_type == paris
    assert zoned.field("m").type.item_type == paris and zoned.field("plain").type == pa.timestamp("us")
    assert zoned.field("n").type == pa.int64()


def test_tagging_threads_get_whole_shards():
    rows = pa.table({"k": [f"k{i}" for i in range(10)], SHARD: pa.array([i % 5 for i in range(10)], pa.int32())})
    parts = [pa.Table.from_batches(p, schema=rows.schema) for p in by_shard(rows, 2)]
    assert sum(p.num_rows for p in parts) == 10
    shard_sets = [set(p.column(SHARD).to_pylist()) for p in parts]
    assert shard_sets[0].isdisjoint(shard_sets[1]) and shard_sets[0] | shard_sets[1] == {0, 1, 2, 3, 4}
    assert [pa.Table.from_batches(p, schema=rows.schema).num_rows for p in by_shard(rows, 1)] == [10]
    assert by_shard(rows.slice(0, 0), 2) == [[]]
