"""The Arrow side of an upsert: one row per key, and a file group's slice merged with the
batch's rows for it (no Spark)."""

import pyarrow as pa

from dbt.adapters.hudilite.table.format.schema import IS_DELETED
from dbt.adapters.hudilite.table.operations.merge import merge_slice
from dbt.adapters.hudilite.table.operations.upsert import one_row_per_key

META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]


def stored(rows):
    names = META + ["_hoodie_file_name", "id", "name", "version"]
    return pa.table(list(zip(*[("t1", f"t1_0_{i}", str(k), "p", "f1", k, n, v) for i, (k, n, v) in enumerate(rows)])),
                    names=names)


def incoming(rows, partition="p"):
    return pa.table({"_hoodie_record_key": [str(k) for k, *_ in rows], "_hoodie_partition_path": [partition] * len(rows),
                     IS_DELETED: [d for *_, d in rows], "id": [k for k, *_ in rows], "name": [n for _, n, _, _ in rows],
                     "version": [v for _, _, v, _ in rows]})


def as_rows(merged):
    return [(r["_hoodie_commit_time"], int(r["_hoodie_record_key"]), r["name"], r["version"]) for r in merged.to_pylist()]


def test_updates_deletes_and_unchanged_rows():
    merged, changed, removed = merge_slice(stored([(1, "a", 1), (2, "b", 1), (3, "c", 1)]),
                                           incoming([(2, "b2", 2, False), (3, None, None, True)]), "p",
                                           ["id", "name", "version"], None, None)
    assert as_rows(merged) == [("t1", 1, "a", 1), (None, 2, "b2", 2)]  # null commit time: changed now
    assert (changed, removed) == (1, 1)


def test_precombine_keeps_newer_stored_rows_and_update_columns_freeze_the_rest():
    base = stored([(1, "a", 5), (2, "b", 1)])
    merged, changed, _ = merge_slice(base, incoming([(1, "old", 4, False), (2, "new", 3, False)]), "p",
                                     ["id", "name", "version"], "version", None)
    assert as_rows(merged) == [("t1", 1, "a", 5), (None, 2, "new", 3)] and changed == 1
    merged, _, _ = merge_slice(base, incoming([(2, "new", 3, False)]), "p", ["id", "name", "version"], None, ["version"])
    assert as_rows(merged) == [("t1", 1, "a", 5), (None, 2, "b", 3)]


def test_a_key_moving_to_another_partition_leaves_the_slice():
    merged, changed, removed = merge_slice(stored([(1, "a", 1), (2, "b", 1)]), incoming([(2, "b", 2, False)], "q"),
                                           "p", ["id", "name", "version"], None, None)
    assert as_rows(merged) == [("t1", 1, "a", 1)] and (changed, removed) == (0, 1)


def test_one_row_per_key():
    rows = pa.table({"_hoodie_record_key": ["b", "a", "b", "c", "b"], "v": [1, 7, None, 2, 3]})
    kept, duplicate = one_row_per_key(rows, "v")
    assert list(zip(kept.column("_hoodie_record_key").to_pylist(), kept.column("v").to_pylist())) == [
        ("a", 7), ("b", 3), ("c", 2)] and not any(duplicate.to_pylist())
    every, duplicate = one_row_per_key(rows, None)
    assert every.num_rows == 5
    assert [k for k, d in zip(every.column("_hoodie_record_key").to_pylist(), duplicate.to_pylist()) if d] == ["b"] * 3


def tagged_rows():
    """Tagged batch rows: an update in place, a move (p1 to p2), a delete of a stored key, a
    delete of an unknown key, a new key, and two rows of a key flagged duplicate."""
    from dbt.adapters.hudilite.table.operations.upsert import DUPLICATE, OLD_FILE_ID, OLD_PARTITION, SHARD

    return pa.table({"_hoodie_record_key": ["a", "b", "c", "x", "n", "d", "d"],
                     "_hoodie_partition_path": ["p1", "p2", "p1", "p1", "p3", "p1", "p1"],
                     IS_DELETED: [False, False, True, True, False, False, False],
                     "id": [1, 2, 3, 9, 5, 4, 4],
                     OLD_PARTITION: ["p1", "p1", "p1", None, None, "p1", "p1"],
                     OLD_FILE_ID: ["f1", "f1", "f1", None, None, "f2", "f2"],
                     DUPLICATE: [False, False, False, False, False, True, True],
                     SHARD: pa.array([0] * 7, pa.int32())})


def test_the_summary_of_a_tagged_batch_counts_what_leaves_and_arrives():
    from dbt.adapters.hudilite.table.operations.upsert import partial_summary, summary_of

    rows = tagged_rows()
    whole = partial_summary(rows)
    by_group = {r["file_id"]: r for r in whole.to_pylist()}
    assert by_group["f1"] == {"file_id": "f1", "leaving": 2, "duplicate": None, "arriving": 1, "rows": 3}  # b moves, c goes
    assert by_group["f2"] == {"file_id": "f2", "leaving": 0, "duplicate": "d", "arriving": 0, "rows": 2}
    assert by_group[None] == {"file_id": None, "leaving": 0, "duplicate": None, "arriving": 1, "rows": 2}  # n arrives
    # Tasks summarize their own rows; the driver adds their parts up.
    def staged(part, size):  # as a tagging task returns it: the first row carries its rows' bytes
        summary = partial_summary(part)
        return summary.append_column("staged_bytes", pa.array([size] + [0] * (summary.num_rows - 1), pa.int64()))

    summary = summary_of(pa.concat_tables([staged(rows.slice(0, 3), 100), staged(rows.slice(3), 50)]))
    assert summary.touched == {"f1": 2, "f2": 0} and summary.duplicate == "d"
    assert (summary.arriving, summary.rows, summary.bytes) == (2, 7, 150)
    nothing = summary_of(partial_summary(rows.slice(0, 0)).append_column("staged_bytes", pa.array([], pa.int64())))
    assert (nothing.touched, nothing.duplicate, nothing.arriving, nothing.rows, nothing.bytes) == ({}, None, 0, 0, 0)


def test_new_rows_of_a_small_upsert_are_in_the_insert_layout_grouped_by_partition():
    from dbt.adapters.hudilite.table.operations.upsert import arriving_mask, insert_rows

    rows = tagged_rows()
    arriving = rows.filter(arriving_mask(rows))
    assert insert_rows(arriving, ["id"], partitioned=False).column_names == ["_hoodie_record_key", "id"]
    layout = insert_rows(arriving, ["id"], partitioned=True)
    assert layout.column_names == ["_hudilite_row_index", "_hoodie_record_key", "_hoodie_partition_path", "id"]
    assert layout.to_pylist() == [{"_hudilite_row_index": 0, "_hoodie_record_key": "b", "_hoodie_partition_path": "p2", "id": 2},
                                  {"_hudilite_row_index": 1, "_hoodie_record_key": "n", "_hoodie_partition_path": "p3", "id": 5}]


def test_an_upsert_is_small_by_its_batch():
    from dbt.adapters.hudilite.table.operations.upsert import is_small

    assert is_small(batch_bytes=10 << 20, limit=32 << 20)  # however much it rewrites: tasks share that
    assert not is_small(batch_bytes=40 << 20, limit=32 << 20)  # each task holds the whole batch
    assert not is_small(batch_bytes=0, limit=0)  # 0: always the shuffle

def reference_merge(stored_rows, incoming_rows, partition, precombine):
    """What `merge_slice` does, row by row: (commit time, key, name, version) of the new
    slice, rows changed, stored rows removed. Stored rows are (key, name, version); incoming
    (key, name, version, deleted, partition)."""
    first = {}
    for j, (key, *_) in enumerate(stored_rows):
        first.setdefault(key, j)
    gone = [r[0] for r in incoming_rows if r[3] or r[4] != partition]
    in_place = [r for r in incoming_rows if not r[3] and r[4] == partition]
    if precombine:
        in_place = [r for r in in_place if not (r[0] in first and r[2] is not None
                                                and stored_rows[first[r[0]]][2] is not None
                                                and r[2] < stored_rows[first[r[0]]][2])]
    replaced = {r[0] for r in in_place} | set(gone)
    at = {first[r[0]]: r for r in in_place if r[0] in first}
    out = []
    for j, (key, name, version) in enumerate(stored_rows):
        if j in at:
            out.append((None, key, at[j][1], at[j][2]))
        elif key not in replaced:
            out.append(("t1", key, name, version))
    out += [(None, r[0], r[1], r[2]) for r in in_place if r[0] not in first]
    return out, len(in_place), sum(1 for key, *_ in stored_rows if key in set(gone))


def test_merges_of_random_slices_equal_the_row_by_row_rule():
    """Keys stored twice, updates, deletes, moves out, new keys, older and null precombine
    values, in random mixes."""
    for seed in range(300):
        stored_rows, incoming_rows, precombine, _ = random_case(seed)
        base, batch = slice_tables(stored_rows, incoming_rows)
        merged, changed, removed = merge_slice(base, batch, "p", ["id", "name", "version"], precombine, None)
        expected, expected_changed, expected_removed = reference_merge(stored_rows, incoming_rows, "p", precombine)
        assert (as_rows(merged), changed, removed) == (expected, expected_changed, expected_removed), seed


def random_case(seed):
    """(stored rows, incoming rows, precombine field, the generator) of one random merge: keys
    stored twice, updates, deletes, moves out of the partition, new keys, older and null
    precombine values."""
    import random
    rng = random.Random(seed)
    stored_rows = [(rng.randrange(30), f"s{j}", rng.choice([None, 1, 2, 3])) for j in range(rng.randrange(0, 25))]
    keys = rng.sample(range(40), rng.randrange(0, 15))
    incoming_rows = [(k, f"i{k}", rng.choice([None, 1, 2, 3]), rng.random() < 0.2, rng.choice(["p", "p", "p", "q"]))
                     for k in keys]
    return stored_rows, incoming_rows, rng.choice([None, "version"]), rng


def slice_tables(stored_rows, incoming_rows):
    """A stored slice of (id, name, version) rows in partition p, and an incoming batch of
    (id, name, version, deleted, partition) rows, as Arrow tables the merge takes."""
    base = pa.table({**{m: pa.array(["t1"] * len(stored_rows) if m == META[0] else
                                    [f"t1_0_{j}" for j in range(len(stored_rows))] if m == META[1] else
                                    [str(k) for k, *_ in stored_rows] if m == META[2] else ["p"] * len(stored_rows),
                                    pa.string()) for m in META},
                     "_hoodie_file_name": pa.array(["f1"] * len(stored_rows), pa.string()),
                     "id": pa.array([k for k, *_ in stored_rows], pa.int64()),
                     "name": pa.array([n for _, n, _ in stored_rows], pa.string()),
                     "version": pa.array([v for *_, v in stored_rows], pa.int64())})
    batch = pa.table({"_hoodie_record_key": pa.array([str(r[0]) for r in incoming_rows], pa.string()),
                      "_hoodie_partition_path": pa.array([r[4] for r in incoming_rows], pa.string()),
                      IS_DELETED: pa.array([r[3] for r in incoming_rows], pa.bool_()),
                      "id": pa.array([r[0] for r in incoming_rows], pa.int64()),
                      "name": pa.array([r[1] for r in incoming_rows], pa.string()),
                      "version": pa.array([r[2] for r in incoming_rows], pa.int64())})
    return base, batch
