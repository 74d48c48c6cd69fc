"""Dead writers, concurrent writers and the cleaner."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable, TimelineError
from dbt.adapters.hudilite.table.storage.layout import MARKERS_DIR, TMP_DIR, marker_path, staged_path, writer_path
from dbt.adapters.hudilite.table.services.maintenance import TMP_FILE_LIFETIME_S
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


def test_a_live_concurrent_writers_pending_instant_is_left_alone(spark, tmp_path):
    """Writers run side by side: a live writer's pending instant and files are not touched, and
    a write that does not conflict with it commits beside it."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    t1 = table.insert(spark.range(10).select("id", F.lit("a").alias("p")))
    busy = str(int(t1) + 5)
    orphan = _leave_a_dead_write(table, busy, os.getppid())  # a live process, heartbeat fresh
    t2 = table.insert(spark.range(3).select("id", F.lit("a").alias("p")))
    assert t2 > busy and os.path.exists(os.path.join(table.path, orphan))  # the other writer's file is untouched
    assert [(i.timestamp, i.state) for i in table.timeline()] == [(t1, "COMPLETED"), (busy, "INFLIGHT"), (t2, "COMPLETED")]
    assert table.read().count() == 13
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


def test_an_interrupt_after_publish_keeps_the_commit(spark, tmp_path, monkeypatch):
    """The completed instant file is the commit: a failure between publishing it and the
    writer noting so must not roll the published instant back (issue 12, defect 9)."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    table.insert(spark.range(3).select("id", F.lit("a").alias("p")))
    timeline = table.context.timeline
    publish = timeline.complete

    def publish_then_interrupt(*args, **kwargs):
        publish(*args, **kwargs)
        raise KeyboardInterrupt("after the rename")

    monkeypatch.setattr(timeline, "complete", publish_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        table.insert(spark.range(3, 5).select("id", F.lit("b").alias("p")))
    monkeypatch.undo()
    assert [i.state for i in table.timeline()] == ["COMPLETED", "COMPLETED"]
    assert sorted(r.id for r in table.read().collect()) == [0, 1, 2, 3, 4]
    assert parquet_files_on_disk(table.path) == committed_files(table)
    assert table.validate() == []
    table.insert(spark.range(5, 6).select("id", F.lit("a").alias("p")))  # the next writer finds nothing to undo
    assert table.read().count() == 6
    assert_hudi_rs_agrees(table)


def test_the_cleaner_records_the_earliest_readable_instant_before_it_deletes(spark, tmp_path, monkeypatch):
    """A cleaner killed after its first deletion leaves time travel refusing the cleaned range
    with a clear error, not failing on a missing file (issue 12, defect 10)."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    t1 = table.insert(spark.range(3))
    table.insert_overwrite_table(spark.range(3, 6))
    table.insert_overwrite_table(spark.range(6, 9))
    storage = table.storage
    delete = storage.delete_file
    deleted = []

    def delete_once_then_die(path):
        if deleted:
            raise KeyboardInterrupt("cleaner killed")
        deleted.append(path)
        delete(path)

    monkeypatch.setattr(storage, "delete_file", delete_once_then_die)
    with pytest.raises(KeyboardInterrupt):
        table.clean(retain_commits=1)
    monkeypatch.undo()
    assert deleted
    with pytest.raises(TimelineError, match="was cleaned"):
        table.read(as_of=t1)
    assert sorted(r.id for r in table.read().collect()) == [6, 7, 8]
    table.clean(retain_commits=1)  # run again, it finishes the job
    assert parquet_files_on_disk(table.path) == sorted(f.path for f in table.latest_base_files())
    assert table.validate() == []


def test_a_failed_index_compaction_after_the_commit_does_not_fail_the_write(spark, tmp_path, monkeypatch):
    """Work after the commit is published cannot make a published write look failed (a rerun
    would write it twice); the next write compacts instead (issue 12, defect 5)."""
    from dbt.adapters.hudilite.table.index import files as index_files

    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    table = HudiTable.create(spark, str(tmp_path / "c"), "c", record_key="id")
    table.upsert(spark.createDataFrame([(1, "a")], "id long, v string"))
    table.upsert(spark.createDataFrame([(2, "b")], "id long, v string"))

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(type(table.index), "compact", broken)
    t3 = table.upsert(spark.createDataFrame([(3, "c"), (1, "a2")], "id long, v string"))  # compaction due
    assert table.timeline()[-1].timestamp == t3 and table.timeline()[-1].state == "COMPLETED"
    monkeypatch.undo()
    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    t4 = table.upsert(spark.createDataFrame([(4, "d")], "id long, v string"))
    assert table.index.state()["base_instant"] == t4  # the next write compacted
    assert sorted((r.id, r.v) for r in table.read().collect()) == [(1, "a2"), (2, "b"), (3, "c"), (4, "d")]
    assert table.validate() == []


def test_the_cleaner_removes_zombie_files_and_leaves_writers_in_flight_alone(spark, tmp_path):
    """A task attempt that wrote after its driver reconciled (speculation, a killed driver's
    executors) leaves a file with a completed instant's time; a rolled-back instant's late
    task leaves one too. Readers listing partitions may trip on them (issue 12, defect 8)."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    t1 = table.insert(spark.range(5).select("id", F.lit("a").alias("p")))
    t2 = table.insert(spark.range(5, 8).select("id", F.lit("a").alias("p")))
    part = os.path.join(table.path, "p=a")

    def file_of(instant, tag, marked=True):
        """A late task attempt's file, after its marker as every task writes it (`marked`)."""
        path = os.path.join(part, f"00000000-0000-0000-0000-00000000000{tag}-0_1-9-1_{instant}.parquet")
        relative = os.path.relpath(path, table.path)
        if marked:
            marker = os.path.join(table.path, marker_path(instant, relative))
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            open(marker, "wb").close()
        with open(path, "wb") as f:
            f.write(b"PAR1 a late attempt")
        return relative

    speculative = file_of(t2, 1)                     # completed instant, not in its write stats
    rolled_back = str(int(t1) + 1)
    _leave_a_dead_write(table, rolled_back, _dead_pid())
    table.insert(spark.range(8, 9).select("id", F.lit("b").alias("p")))  # rolls the dead write back
    late = file_of(rolled_back, 2)                   # its task wrote after the rollback
    in_flight = str(int(table.timeline()[-1].timestamp) + 10)
    pending_file = _leave_a_dead_write(table, in_flight, os.getppid())  # a live writer, still going

    def staged_file_of(instant):  # an upsert's tagged rows, kept between its jobs
        path = os.path.join(table.path, staged_path(instant, "tagged-0-x.arrow"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"ARROW1")
        return path

    left_by_kill = staged_file_of(t2)  # its driver was killed after publishing, before deleting them
    left_late, still_used = staged_file_of(rolled_back), staged_file_of(in_flight)
    tmp_dir = os.path.join(table.path, TMP_DIR)  # an atomic write's file before its rename
    os.makedirs(tmp_dir, exist_ok=True)
    left_by_killed_task = os.path.join(tmp_dir, f"{t2}.base.parquet.0a1b.tmp")
    being_written = os.path.join(tmp_dir, "index.json.2c3d.tmp")
    for path in (left_by_killed_task, being_written):
        with open(path, "wb") as f:
            f.write(b"PAR1")
    long_ago = time.time() - TMP_FILE_LIFETIME_S - 60
    os.utime(left_by_killed_task, (long_ago, long_ago))
    assert sum("stray file" in p for p in table.validate()) == 2

    table.clean(retain_commits=10)
    assert not os.path.exists(os.path.join(table.path, speculative))
    assert not os.path.exists(os.path.join(table.path, late))
    assert os.path.exists(os.path.join(table.path, pending_file))  # the live writer's file stays
    assert not os.path.exists(os.path.dirname(left_by_kill)) and not os.path.exists(os.path.dirname(left_late))
    assert os.path.exists(still_used)
    assert not os.path.exists(left_by_killed_task) and os.path.exists(being_written)  # the table's first sweep
    assert not any("stray file" in p for p in table.validate())
    assert sorted(r.id for r in table.read().collect()) == list(range(9))
    assert_hudi_rs_agrees(table)
    assert sorted(os.listdir(os.path.join(table.path, MARKERS_DIR))) == [in_flight]  # the others were looked at

    # A file no marker announced (copied in by hand, say) is found by a sweep of the whole table only.
    # So is an old temporary file: nothing reads those, so they are looked for as rarely.
    unmarked = file_of(t2, 3, marked=False)
    with open(left_by_killed_task, "wb") as f:
        f.write(b"PAR1")
    os.utime(left_by_killed_task, (long_ago, long_ago))
    table.clean(retain_commits=10)
    assert os.path.exists(os.path.join(table.path, unmarked)) and os.path.exists(left_by_killed_task)
    table.clean(retain_commits=10, sweep=True)
    assert not os.path.exists(os.path.join(table.path, unmarked)) and not os.path.exists(left_by_killed_task)
    assert os.path.exists(os.path.join(table.path, pending_file))
    assert not any("stray file" in p for p in table.validate())
