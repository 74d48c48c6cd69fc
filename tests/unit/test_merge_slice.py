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
