"""Checkpoints of consumed changes (`HudiTable.checkpoints`): kept in the consuming table's
commit like Hudi's streamer checkpoint; a write publishes only while the checkpoint it read
from is still the latest, so two runs of one consumer never add the same changes twice."""

import pytest

from dbt.adapters.hudilite.table import ConcurrentWriteError, HudiTable
from tests.core.hudi_rs import assert_hudi_rs_agrees


def test_a_consumer_publishes_only_while_its_checkpoint_is_the_latest(spark, tmp_path):
    upstream = HudiTable.create(spark, str(tmp_path / "up"), "up")
    first = upstream.insert(spark.createDataFrame([(1,)], "n int"))
    log = HudiTable.create(spark, str(tmp_path / "log"), "log")

    def consume(consumer, start):
        start_instant, end = upstream.changes_range(start)
        consumer.checkpoints = {"s.up": (start, end)}
        try:
            return consumer.insert(upstream.read_changes(start_instant, end).select("n"))
        finally:
            consumer.checkpoints = {}

    consume(log, None)
    assert log.checkpoint("s.up") == first
    assert log.commit_metadata(log.timeline()[-1]).extra["hudilite.checkpoint.s.up"] == first
    second = upstream.insert(spark.createDataFrame([(2,)], "n int"))

    # Two runs of the consumer both read from `first`: the second to commit is refused.
    run_a, run_b = HudiTable.open(spark, log.path), HudiTable.open(spark, log.path)
    consume(run_a, first)
    with pytest.raises(ConcurrentWriteError, match="another write consumed the changes of s.up since this one read"):
        consume(run_b, first)
    assert sorted(r.n for r in log.read().collect()) == [1, 2]
    assert log.checkpoint("s.up") == second
    assert len(log.timeline()) == 2 and log.validate() == []
    assert_hudi_rs_agrees(log)


def test_changes_of_a_table_without_a_final_commit_are_empty(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", schema=spark.createDataFrame([], "n int").schema)
    assert table.read_changes(None).count() == 0
