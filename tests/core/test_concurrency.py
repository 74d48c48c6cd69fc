"""Writers side by side (optimistic concurrency): a second writer commits while the first one's
Spark jobs run. Disjoint writes both commit; overlapping ones fail the later publisher with a
ConcurrentWriteError naming the other instant, leaving nothing of it behind."""

import pytest

from dbt.adapters.hudilite.table import ConcurrentWriteError, FileSizing, HudiTable
from dbt.adapters.hudilite.table.index import files as index_files
from dbt.adapters.hudilite.table.format.instant import INFLIGHT, Instant
from dbt.adapters.hudilite.table import transaction
from dbt.adapters.hudilite.table.transaction import rollback
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.core.test_writes import committed_files, parquet_files_on_disk


def customers(spark, rows):
    return spark.createDataFrame(rows, "id long, name string, region string")


def keyed_table(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.upsert(customers(spark, [(1, "ann", "eu"), (2, "bob", "eu"), (3, "cy", "us")]))
    return table


def while_writing(table, other_write):
    """Run `other_write` (through another handle) after `table`'s next write wrote its files
    and before it publishes: the window optimistic concurrency must guard."""
    ctx = table.context
    publish = ctx.commit
    instants = []

    def commit_after_the_other(txn, *args, **kwargs):
        ctx.commit = publish  # once
        instants.append(other_write())
        return publish(txn, *args, **kwargs)

    ctx.commit = commit_after_the_other
    return instants


def rows(table):
    return sorted((r.id, r.name, r.region) for r in table.read().collect())


def test_writers_touching_different_file_groups_both_commit(spark, tmp_path):
    table = keyed_table(spark, tmp_path)
    other = HudiTable.open(spark, table.path)
    theirs = while_writing(table, lambda: other.upsert(customers(spark, [(3, "cy2", "us"), (9, "new", "us")])))
    mine = table.upsert(customers(spark, [(1, "ann2", "eu"), (7, "eve", "apac")]))
    assert mine < theirs[0] and [i.state for i in table.timeline()[-2:]] == ["COMPLETED", "COMPLETED"]
    assert rows(table) == [(1, "ann2", "eu"), (2, "bob", "eu"), (3, "cy2", "us"), (7, "eve", "apac"), (9, "new", "us")]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


@pytest.mark.parametrize("small_write_bytes", [None, 0])  # the one-task path, the parallel path
def test_a_writer_rewriting_a_file_group_another_rewrote_meanwhile_fails_and_leaves_nothing(spark, tmp_path,
                                                                                           small_write_bytes, monkeypatch):
    # Begun with no other writer in flight, and brief: the commit skips the listing before its
    # lock, so the other writer's commit is found, and refused against, under the lock alone.
    alone = []
    commit = transaction.WriteTransaction.commit
    monkeypatch.setattr(transaction.WriteTransaction, "commit",
                        lambda txn, *a, **k: (alone.append(txn._began_alone), commit(txn, *a, **k))[1])
    table = keyed_table(spark, tmp_path)
    if small_write_bytes is not None:
        table.file_sizing = FileSizing(small_write_bytes=small_write_bytes)
    before = table.timeline()
    alone.clear()  # the setup's own writes
    other = HudiTable.open(spark, table.path)
    theirs = while_writing(table, lambda: other.upsert(customers(spark, [(2, "bob2", "eu")])))
    with pytest.raises(ConcurrentWriteError, match=r"conflicts: instant \d{17} \(UPSERT\) also rewrote file group"):
        table.upsert(customers(spark, [(1, "ann2", "eu")]))  # same file group (eu) as key 2
    assert alone == [False, True]  # the other writer's (ours was in flight), then ours
    assert [i.timestamp for i in table.timeline()] == [i.timestamp for i in before] + theirs
    assert rows(table) == [(1, "ann", "eu"), (2, "bob2", "eu"), (3, "cy", "us")]  # no lost update, no half write
    assert parquet_files_on_disk(table.path) == committed_files(table)
    assert table.validate() == []
    table.upsert(customers(spark, [(1, "ann2", "eu")]))  # a retry after the conflict succeeds
    assert rows(table)[:2] == [(1, "ann2", "eu"), (2, "bob2", "eu")]


def test_two_writers_inserting_the_same_new_key_do_not_both_commit(spark, tmp_path):
    table = keyed_table(spark, tmp_path)
    other = HudiTable.open(spark, table.path)
    while_writing(table, lambda: other.upsert(customers(spark, [(5, "theirs", "us")])))
    with pytest.raises(ConcurrentWriteError, match="also inserted record key '5'"):
        table.upsert(customers(spark, [(5, "mine", "eu")]))
    assert rows(table)[-1] == (5, "theirs", "us")
    assert table.read().where("id = 5").count() == 1
    assert table.validate() == []


def test_an_overwrite_conflicts_with_a_write_into_its_partitions_only(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "e"), "events", partition_by="day")
    table.insert(spark.createDataFrame([(1, "d1"), (2, "d2")], "id long, day string"))
    other = HudiTable.open(spark, table.path)
    while_writing(table, lambda: other.insert(spark.createDataFrame([(3, "d2")], "id long, day string")))
    table.insert_overwrite(spark.createDataFrame([(10, "d1")], "id long, day string"))  # d1 only: commits
    while_writing(table, lambda: other.insert(spark.createDataFrame([(4, "d1")], "id long, day string")))
    with pytest.raises(ConcurrentWriteError, match="wrote into partition 'day=d1', which this write overwrites"):
        table.insert_overwrite(spark.createDataFrame([(11, "d1")], "id long, day string"))
    assert sorted(r.id for r in table.read().collect()) == [2, 3, 4, 10]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_appends_never_conflict(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "e"), "events", partition_by="day")
    table.insert(spark.createDataFrame([(1, "d1")], "id long, day string"))
    other = HudiTable.open(spark, table.path)
    while_writing(table, lambda: other.insert(spark.createDataFrame([(2, "d1")], "id long, day string")))
    table.insert(spark.createDataFrame([(3, "d1")], "id long, day string"))
    assert sorted(r.id for r in table.read().collect()) == [1, 2, 3]
    assert table.validate() == []


def test_a_writer_judged_dead_and_rolled_back_never_publishes(spark, tmp_path):
    table = keyed_table(spark, tmp_path)
    ctx = table.context
    publish = ctx.commit

    def rolled_back_meanwhile(txn, *args, **kwargs):
        rollback(ctx.storage, ctx.timeline, Instant(txn.instant, "commit", INFLIGHT))  # what a second writer did
        return publish(txn, *args, **kwargs)

    ctx.commit = rolled_back_meanwhile
    with pytest.raises(ConcurrentWriteError, match="was rolled back by another writer"):
        table.upsert(customers(spark, [(1, "ann2", "eu")]))
    assert rows(table) == [(1, "ann", "eu"), (2, "bob", "eu"), (3, "cy", "us")]
    assert [i.state for i in table.timeline()] == ["COMPLETED"]
    assert table.validate() == []


def test_index_compaction_waits_for_an_older_pending_writer(spark, tmp_path, monkeypatch):
    """A base as of T would hide the delta of a writer that claimed an earlier instant and
    commits later: compaction is put off while one is pending, so no key is lost."""
    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    table = keyed_table(spark, tmp_path)
    table.upsert(customers(spark, [(4, "di", "us")]))
    slow = HudiTable.open(spark, table.path)
    fast = HudiTable.open(spark, table.path)
    # the slow writer claims first; the fast one commits and would compact meanwhile
    while_writing(slow, lambda: fast.upsert(customers(spark, [(5, "ed", "apac")])))
    slow.upsert(customers(spark, [(6, "flo", "apac2")]))
    # the fast writer's compaction was put off; the slow one's, once nothing was pending, went ahead
    assert table.index.state()["base_instant"] == max(i.timestamp for i in table.timeline())
    assert [r.id for r in table.read().orderBy("id").collect()] == [1, 2, 3, 4, 5, 6]
    assert table.validate() == []  # the index holds every key, the slow writer's too
    fast.upsert(customers(spark, [(6, "flo2", "apac2")]))
    assert table.read().where("id = 6").collect()[0].name == "flo2"  # found through the compacted index


def test_an_index_built_directly_publishes_only_as_of_the_latest_instant(spark, tmp_path):
    from dbt.adapters.hudilite.table import ConcurrentWriteError as Conflict

    table = keyed_table(spark, tmp_path)
    first = table.timeline()[-1].timestamp
    table.upsert(customers(spark, [(4, "di", "us")]))
    latest = table.timeline()[-1].timestamp
    with pytest.raises(Conflict, match="a commit completed while it was computed"):
        table.index.build(table.read(first), table.context.timeline.view(first), first)  # would miss key 4
    assert table.index.build(table.read(), table.context.timeline.view(latest), latest) == 4
    assert table.validate() == []


def test_changes_stop_before_a_write_in_flight_so_a_late_earlier_commit_is_not_missed(spark, tmp_path):
    """Writers publish out of order: B (later time) completes while A (earlier) still writes. A
    reader that took B as its checkpoint would never see A. Changes stop before A until it is
    done; a consumer that always starts from the last commit time it read gets every row once."""
    from dbt.adapters.hudilite.table import TimelineError

    table = keyed_table(spark, tmp_path)
    t1 = table.timeline()[-1].timestamp
    other, reader = HudiTable.open(spark, table.path), HudiTable.open(spark, table.path)
    seen = []

    def consume(start):
        rows = reader.read_changes(start).collect()
        seen.extend((r.id, r.name) for r in rows)
        return max([start] + [r._hoodie_commit_time for r in rows])

    def later_write_and_a_read():
        t_b = other.upsert(customers(spark, [(3, "cy2", "us")]))
        checkpoint = consume(t1)
        assert seen == [] and checkpoint == t1  # B is held back: A, earlier, may still publish
        with pytest.raises(TimelineError, match=r"instant \d+ is still being written and precedes " + t_b):
            reader.read_changes(t1, t_b)
        return t_b

    theirs = while_writing(table, later_write_and_a_read)
    t_a = table.upsert(customers(spark, [(1, "ann2", "eu")]))
    assert t_a < theirs[0]
    consume(consume(t1))
    assert sorted(seen) == [(1, "ann2"), (3, "cy2")]
    assert {r.id for r in reader.read_changes(t1, theirs[0]).collect()} == {1, 3}


def test_a_writer_pending_on_an_old_hash_index_keeps_its_keys_when_another_reshards(spark, tmp_path, monkeypatch):
    """An index sharded by the older hash is resharded at its next compaction. A writer that
    planned its lookups and delta with the old hash and commits after another writer's
    compaction was due must not leave its delta in the wrong shards: the compaction waits for
    it, then reshards everything, its keys too."""
    from dbt.adapters.hudilite.table.index.files import BASE
    from dbt.adapters.hudilite.table.index.record_index import (DIGESTS, MURMUR3, RECORD_KEYS, XXHASH64, Sharding,
                                                                entries_of)

    table = keyed_table(spark, tmp_path)
    table.upsert(customers(spark, [(i, f"n{i}", ["eu", "us"][i % 2]) for i in range(10, 60)]))
    index, latest = table.index, table.timeline()[-1].timestamp
    index._write(entries_of(table.read()), latest, BASE, Sharding(3, XXHASH64), RECORD_KEYS)
    index.files.write_state({"num_shards": 3, "base_instant": latest, "entries_at_build": 53})
    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    table.upsert(customers(spark, [(70, "x", "eu")]))  # one delta: no compaction yet
    slow = HudiTable.open(spark, table.path)
    fast = HudiTable.open(spark, table.path)
    while_writing(slow, lambda: fast.upsert(customers(spark, [(71, "y", "us")])))  # due, but slow is pending
    slow.upsert(customers(spark, [(72, "z", "apac"), (10, "moved", "apac")]))
    assert index.sharding == Sharding(3, MURMUR3) and index.entry_key() == DIGESTS  # compacted once nothing was pending
    assert table.read().count() == 56 and table.validate() == []
    fast.upsert(customers(spark, [(72, "z2", "apac"), (10, "again", "eu")]))  # found through the resharded index
    assert table.read().count() == 56 and table.validate() == []
    assert {(r.id, r.name, r.region) for r in table.read().where("id in (10, 72)").collect()} == {
        (10, "again", "eu"), (72, "z2", "apac")}


def test_a_writer_that_wrote_an_old_format_delta_does_not_publish_after_a_compaction_converted_the_index(spark, tmp_path):
    """A compaction rewrites an index of record keys as digests. A later writer that wrote its
    delta of record keys before that, and publishes after, would leave a delta of the wrong
    format after the digest base: it fails instead, the table as it was."""
    from dbt.adapters.hudilite.table.index.files import BASE
    from dbt.adapters.hudilite.table.index.record_index import DIGESTS, MURMUR3, RECORD_KEYS, Sharding, entries_of

    table = keyed_table(spark, tmp_path)
    table.upsert(customers(spark, [(i, f"n{i}", ["eu", "us"][i % 2]) for i in range(10, 30)]))
    index, latest = table.index, table.timeline()[-1].timestamp
    index._write(entries_of(table.read()), latest, BASE, Sharding(2), RECORD_KEYS)
    index.files.write_state({"shards": 2, "shard_hash": MURMUR3, "base_instant": latest, "entries_at_build": 23})
    assert index.entry_key() == RECORD_KEYS and table.validate() == []
    slow, other = HudiTable.open(spark, table.path), HudiTable.open(spark, table.path)
    while_writing(slow, lambda: other.context.compact_index())
    before = rows(table)
    with pytest.raises(ConcurrentWriteError, match="new format"):
        slow.upsert(customers(spark, [(40, "new", "apac"), (10, "moved", "apac")]))
    assert index.entry_key() == DIGESTS and rows(table) == before and table.validate() == []
    table.upsert(customers(spark, [(40, "new", "apac"), (10, "moved", "apac")]))  # run again: through the digests
    assert len(rows(table)) == 24 and (10, "moved", "apac") in rows(table) and table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_publish_whose_answer_was_lost_but_which_landed_is_a_commit(spark, tmp_path, monkeypatch):
    """The completed instant's put applied, its answer lost (an object store's timeout): the
    write is committed, not reported failed and not rolled back under its own instant."""
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    table = keyed_table(spark, tmp_path)
    real_complete = Timeline.complete

    def landed_then_failed(self, timestamp, action, metadata):
        real_complete(self, timestamp, action, metadata)
        raise OSError("connection reset by peer")

    monkeypatch.setattr(Timeline, "complete", landed_then_failed)
    instant = table.upsert(customers(spark, [(7, "eu", "new")]))
    monkeypatch.undo()
    assert instant in [i.timestamp for i in table.timeline() if i.is_completed]
    assert (7, "eu", "new") in rows(table)
    assert table.validate() == []
