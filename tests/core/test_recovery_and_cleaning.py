"""Dead writers, concurrent writers and the cleaner."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import ConcurrentWriteError, HudiTable, TimelineError
from dbt.adapters.hudilite.table.layout import marker_path, writer_path
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.core.test_writes import committed_files, parquet_files_on_disk


def _leave_a_dead_write(table, instant, pid, partition="p=a"):
    """What a writer killed between its tasks and its commit leaves behind."""
    hoodie = os.path.join(table.path, ".hoodie")
    open(os.path.join(hoodie, f"{instant}.commit.requested"), "w").close()
    open(os.path.join(hoodie, f"{instant}.inflight"), "w").close()
    claim = os.path.join(table.path, writer_path(instant))
    os.makedirs(os.path.dirname(claim), exist_ok=True)
    with open(claim, "w") as f:
        json.dump({"host": os.uname().nodename, "pid": pid, "state": "writing"}, f)
    orphan = f"{partition}/00000000-0000-0000-0000-000000000000-0_0-9-0_{instant}.parquet"
    marker = os.path.join(table.path, marker_path(instant, orphan))
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    open(marker, "w").close()
    os.makedirs(os.path.join(table.path, partition), exist_ok=True)
    with open(os.path.join(table.path, orphan), "wb") as f:
        f.write(b"PAR1 half a file")
    return orphan


def _dead_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_a_dead_writers_inflight_instant_is_rolled_back_before_the_next_write(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    t1 = table.insert(spark.range(10).select("id", F.lit("a").alias("p")))
    dead = str(int(t1) + 5)
    orphan = _leave_a_dead_write(table, dead, _dead_pid())

    assert table.read().count() == 10  # the pending instant is invisible
    assert_hudi_rs_agrees(table)  # hudi-rs skips it too (the orphan is not a committed file)

    t2 = table.insert(spark.range(10, 15).select("id", F.lit("a").alias("p")))
    assert t2 > dead  # the dead instant's time is never handed out again
    assert not os.path.exists(os.path.join(table.path, orphan))
    assert [i.timestamp for i in table.timeline()] == [t1, t2]
    assert parquet_files_on_disk(table.path) == committed_files(table)
    assert table.read().count() == 15
    assert_hudi_rs_agrees(table)


def test_a_live_concurrent_writer_is_refused_and_nothing_changes(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    t1 = table.insert(spark.range(10).select("id", F.lit("a").alias("p")))
    busy = str(int(t1) + 5)
    orphan = _leave_a_dead_write(table, busy, os.getppid())  # a live process
    with pytest.raises(ConcurrentWriteError, match=busy):
        table.insert(spark.range(3).select("id", F.lit("a").alias("p")))
    assert os.path.exists(os.path.join(table.path, orphan))  # the other writer's file is untouched
    assert table.read().count() == 10
    assert_hudi_rs_agrees(table)


def test_cleaner_keeps_what_retained_instants_read_and_deletes_the_rest(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    t1 = table.insert(spark.range(10).select("id", F.lit("a").alias("p")))
    t2 = table.insert(spark.range(10, 20).select("id", F.lit("b").alias("p")))
    t3 = table.insert_overwrite(spark.range(100, 105).select("id", F.lit("a").alias("p")))
    t4 = table.insert_overwrite_table(spark.range(200, 202).select("id", F.lit("c").alias("p")))

    plan = table.clean(retain_commits=2)  # keep everything as of t3 and t4 readable
    assert plan.earliest_retained == t3
    assert {f.instant for f in plan.files_to_delete} == {t1}  # p=a's first group, replaced at t3
    assert table.read(as_of=t3).count() == 15
    assert table.read().count() == 2
    with pytest.raises(TimelineError, match=f"instant {t2} was cleaned; the earliest readable instant is {t3}"):
        table.read(as_of=t2)
    assert_hudi_rs_agrees(table)  # the retained instants, through hudi-rs too

    plan = table.clean(retain_commits=1)
    assert plan.earliest_retained == t4
    on_disk = parquet_files_on_disk(table.path)
    assert on_disk == sorted(f.path for f in table.latest_base_files())
    assert sorted(r.id for r in table.read().collect()) == [200, 201]
    assert table.clean(retain_commits=1).files_to_delete == []
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_killed_writer_leaves_no_visible_commit_and_is_rolled_back(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    t1 = table.insert(spark.range(0, 10))
    writer = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "killed_writer.py"), table.path],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        committed = len(committed_files(table))
        deadline = time.time() + 180
        while time.time() < deadline and len(parquet_files_on_disk(table.path)) <= committed:
            time.sleep(0.5)  # until task 0 has written its base file
        assert len(parquet_files_on_disk(table.path)) == committed + 1, "the writer never wrote its first file"
    finally:
        os.killpg(writer.pid, signal.SIGKILL)
        writer.wait()

    pending = [i for i in table.timeline() if not i.is_completed]
    assert len(pending) == 1 and pending[0].state == "INFLIGHT"
    assert table.validate() == [f"instant {pending[0].timestamp} (commit) is inflight: a write did not finish; "
                                "the next write rolls it back"]
    assert table.read().count() == 10  # the half-written instant is invisible
    assert_hudi_rs_agrees(table)

    t2 = table.insert(spark.range(10, 15))  # rolls the dead write back first
    assert [i.timestamp for i in table.timeline()] == [t1, t2]
    assert parquet_files_on_disk(table.path) == committed_files(table)
    assert sorted(r.id for r in table.read().collect()) == list(range(15))
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
