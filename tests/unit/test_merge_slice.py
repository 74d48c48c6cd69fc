"""The Arrow side of an upsert: one row per key, and a file group's slice merged with the
batch's rows for it (no Spark)."""

import pyarrow as pa

from dbt.adapters.hudilite.table.upsert import IS_DELETED, merge_slice, one_row_per_key

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
    from dbt.adapters.hudilite.table.upsert import DUPLICATE, OLD_FILE_ID, OLD_PARTITION, SHARD

    return pa.table({"_hoodie_record_key": ["a", "b", "c", "x", "n", "d", "d"],
                     "_hoodie_partition_path": ["p1", "p2", "p1", "p1", "p3", "p1", "p1"],
                     IS_DELETED: [False, False, True, True, False, False, False],
                     "id": [1, 2, 3, 9, 5, 4, 4],
                     OLD_PARTITION: ["p1", "p1", "p1", None, None, "p1", "p1"],
                     OLD_FILE_ID: ["f1", "f1", "f1", None, None, "f2", "f2"],
                     DUPLICATE: [False, False, False, False, False, True, True],
                     SHARD: pa.array([0] * 7, pa.int32())})


def test_the_summary_of_a_tagged_batch_counts_what_leaves_and_arrives():
    from dbt.adapters.hudilite.table.upsert import partial_summary, summary_of

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
    from dbt.adapters.hudilite.table.upsert import arriving_mask, insert_rows

    rows = tagged_rows()
    arriving = rows.filter(arriving_mask(rows))
    assert insert_rows(arriving, ["id"], partitioned=False).column_names == ["_hoodie_record_key", "id"]
    layout = insert_rows(arriving, ["id"], partitioned=True)
    assert layout.column_names == ["_hudilite_row_index", "_hoodie_record_key", "_hoodie_partition_path", "id"]
    assert layout.to_pylist() == [{"_hudilite_row_index": 0, "_hoodie_record_key": "b", "_hoodie_partition_path": "p2", "id": 2},
                                  {"_hudilite_row_index": 1, "_hoodie_record_key": "n", "_hoodie_partition_path": "p3", "id": 5}]


def test_an_upsert_is_small_by_its_batch():
    from dbt.adapters.hudilite.table.upsert import is_small

    assert is_small(batch_bytes=10 << 20, limit=32 << 20)  # however much it rewrites: tasks share that
    assert not is_small(batch_bytes=40 << 20, limit=32 << 20)  # each task holds the whole batch
    assert not is_small(batch_bytes=0, limit=0)  # 0: always the shuffle