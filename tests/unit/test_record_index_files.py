"""Index lookups read only the row groups that can hold a key, newest entry wins (no Spark)."""

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.hudilite.table.index.record_index import (DIGESTS, ENTRY_SCHEMA, RECORD_KEYS, compact_task,
                                                            entry_schema, key_digests, keys_by_row_group,
                                                            latest_entries, _may_hold_tombstones, live_holders,
                                                            write_shards)
from dbt.adapters.hudilite.table.storage.filesystem import Storage

both_kinds = pytest.mark.parametrize("entry_key", [DIGESTS, RECORD_KEYS])


def write_entries(storage, path, entries, row_group_size, entry_key=RECORD_KEYS):
    """Entries (record key, file_id, deleted) as an index of `entry_key` entries stores them:
    sorted by the stored key."""
    table = pa.Table.from_pylist([dict(key=k, file_id=f, deleted=d) for k, f, d in entries], schema=ENTRY_SCHEMA)
    if entry_key == DIGESTS:
        table = table.set_column(0, "key", key_digests(table.column("key")))
    with storage.open_output(path) as sink:
        pq.write_table(table.sort_by("key").cast(entry_schema(entry_key)), sink, row_group_size=row_group_size)


def by_key(entries: pa.Table) -> dict:
    assert entries.schema == ENTRY_SCHEMA
    keys = entries.column("key").to_pylist()
    assert keys == sorted(set(keys))  # one entry per key
    return {k: (f, d) for k, f, d in zip(keys, entries.column("file_id").to_pylist(), entries.column("deleted").to_pylist())}


def test_row_groups_by_key_range(tmp_path):
    storage = Storage(str(tmp_path))
    write_entries(storage, "base.parquet", [(f"k{i:03d}", "f1", False) for i in range(100)], row_group_size=10)
    with storage.open_input("base.parquet") as source:
        metadata = pq.ParquetFile(source).metadata
    wanted = ["k005", "k007", "k009", "k055"]
    assert keys_by_row_group(metadata, wanted) == [(0, 0, 3), (5, 3, 4)]  # group, then wanted[start:end]
    assert keys_by_row_group(metadata, ["a", "k0995", "z"]) == []  # between groups or outside all


@both_kinds
def test_latest_entry_wins_and_tombstones_show(tmp_path, entry_key):
    storage = Storage(str(tmp_path))
    write_entries(storage, "1.base.parquet", [("a", "f1", False), ("b", "f1", False), ("c", "f1", False)], 2, entry_key)
    write_entries(storage, "2.delta.parquet", [("a", "f2", False), ("b", "f1", True)], 2, entry_key)
    files = [("20260101000000002", "2.delta.parquet"), ("20260101000000001", "1.base.parquet")]
    assert by_key(latest_entries(storage, files, ["a", "b", "c", "zz"], entry_key)) == {
        "a": ("f2", False), "b": ("f1", True), "c": ("f1", False)}


@both_kinds
def test_lookup_over_many_row_groups_equals_a_plain_scan(tmp_path, entry_key):
    """Each row group has its own fileId dictionary; matches come from the first, middle and
    last rows of groups, and keys between or beyond the stored ones find nothing. Tombstones
    sit in some row groups only: the others' statistics spare reading the column, and a file
    without statistics is read whole."""
    storage = Storage(str(tmp_path))
    entries = [(f"k{i:05d}", f"fg-{(i * 7) % 13}-{i // 100}", i % 11 == 0 and (i < 500 or i > 1500))
               for i in range(0, 2000, 2)]
    write_entries(storage, "1.base.parquet", entries, 64, entry_key)
    with storage.open_input("1.base.parquet") as source:
        metadata = pq.ParquetFile(source).metadata
    assert metadata.num_row_groups == 16
    with_tombstones = [_may_hold_tombstones(metadata, g) for g in range(16)]
    assert any(with_tombstones) and not all(with_tombstones)
    wanted = [f"k{i:05d}" for i in (0, 126, 128, 130, 990, 1000, 1001, 1540, 1562, 1998, 1999, 5000)] + ["a", "zz"]
    stored = {k: (f, d) for k, f, d in entries}
    expected = {k: stored[k] for k in wanted if k in stored}
    assert {k: d for k, (_, d) in expected.items()} == {
        "k00000": True, "k00126": False, "k00128": False, "k00130": False, "k00990": False, "k01000": False,
        "k01540": True, "k01562": True, "k01998": False}
    assert by_key(latest_entries(storage, [("20260101000000001", "1.base.parquet")], wanted, entry_key)) == expected
    table = pq.read_table(storage.full_path("1.base.parquet"))
    with storage.open_output("2.base.parquet") as sink:
        pq.write_table(table, sink, row_group_size=64, write_statistics=False)
    with storage.open_input("2.base.parquet") as source:
        assert _may_hold_tombstones(pq.ParquetFile(source).metadata, 0)
    assert by_key(latest_entries(storage, [("20260101000000001", "2.base.parquet")], wanted, entry_key)) == expected


@both_kinds
def test_no_files_or_no_match_finds_nothing(tmp_path, entry_key):
    storage = Storage(str(tmp_path))
    assert latest_entries(storage, [], ["a"], entry_key).num_rows == 0
    write_entries(storage, "1.base.parquet", [("b", "f1", False)], 2, entry_key)
    assert latest_entries(storage, [("20260101000000001", "1.base.parquet")], ["a", "c"], entry_key).num_rows == 0


STRANGE_KEYS = ["a", "", "ключ-1", "a,b", "x y", "😀", "é/e", "tab\there", "k" + "x" * 5000, "0", "00"]


def test_a_digest_is_the_first_16_bytes_of_the_keys_sha256():
    digests = key_digests(pa.array(STRANGE_KEYS + [None]))
    assert digests.type == pa.binary(16)
    assert digests.to_pylist() == [hashlib.sha256(k.encode("utf-8")).digest()[:16] for k in STRANGE_KEYS] + [None]
    assert len(set(digests.to_pylist()[:-1])) == len(STRANGE_KEYS)


@both_kinds
def test_written_shards_are_found_again_by_record_key(tmp_path, entry_key):
    """`write_shards`, as a Spark task runs it: one file per shard of rows sorted by shard,
    digests sorted and stored uncompressed; every key is found again, strange ones too."""
    storage = Storage(str(tmp_path))
    keys = STRANGE_KEYS + [f"k{i}" for i in range(300)]
    rows = sorted(((i % 3, k, f"fg-{i % 7}", i % 5 == 0) for i, k in enumerate(keys)), key=lambda r: (r[0], r[1]))
    batch = pa.RecordBatch.from_pylist([dict(shard=s, key=k, file_id=f, deleted=d) for s, k, f, d in rows])
    written = [r for b in write_shards(str(tmp_path), "20260101000000001", "base", entry_key, iter([batch]))
               for r in b.to_pylist()]
    assert [(r["path"].split("/")[-2], r["entries"]) for r in written] == [
        (f"shard={s}", sum(1 for r in rows if r[0] == s)) for s in range(3)]
    for shard, result in enumerate(written):
        with storage.open_input(result["path"]) as source:
            parquet = pq.ParquetFile(source)
            stored = parquet.read()
            assert stored.schema == entry_schema(entry_key)
            assert stored.column("key").to_pylist() == sorted(stored.column("key").to_pylist())
            if entry_key == DIGESTS:
                assert parquet.metadata.row_group(0).column(0).compression == "UNCOMPRESSED"
        mine = [r for r in rows if r[0] == shard]
        found = latest_entries(storage, [("20260101000000001", result["path"])], [k for _, k, _, _ in mine] + ["nope"],
                               entry_key)
        assert by_key(found) == {k: (f, d) for _, k, f, d in mine}


def test_live_holders_skip_deleted_replaced_and_missing_keys():
    found = pa.table({"key": ["deleted", "live", "replaced"], "file_id": ["f1", "f2", "f-old"],
                      "deleted": [True, False, False]}, schema=ENTRY_SCHEMA)
    keys = pa.array(["live", "missing", "replaced", "deleted", "live"])
    file_ids, partitions = live_holders(found, keys, {"f1": "p=1", "f2": "p=2"})
    assert file_ids.to_pylist() == ["f2", None, None, None, "f2"]
    assert partitions.to_pylist() == ["p=2", None, None, None, "p=2"]
    assert live_holders(found, keys, {})[0].null_count == 5


def test_row_groups_without_statistics_and_keys_too_long_for_them(tmp_path):
    """Row groups written without statistics, or holding a key over pyarrow's 4 KB statistics
    limit, have no key range: every wanted key is probed there."""
    storage = Storage(str(tmp_path))
    long_key = "k" + "x" * 5000
    entries = [("a", "f1", False), ("b", "f1", False), (long_key, "f2", False), ("l", "f3", True)]
    table = pa.Table.from_pylist([dict(key=k, file_id=f, deleted=d) for k, f, d in entries], schema=ENTRY_SCHEMA)
    with storage.open_output("long.parquet") as sink:
        pq.write_table(table, sink, row_group_size=2)
    with storage.open_output("bare.parquet") as sink:
        pq.write_table(table, sink, row_group_size=2, write_statistics=False)
    for path in ("long.parquet", "bare.parquet"):
        with storage.open_input(path) as source:
            metadata = pq.ParquetFile(source).metadata
        wanted = sorted(["b", long_key, "l", "zz"])
        assert (1, 0, len(wanted)) in keys_by_row_group(metadata, wanted)  # the long key's group: no range
        assert by_key(latest_entries(storage, [("20260101000000001", path)], wanted, RECORD_KEYS)) == {
            "b": ("f1", False), long_key: ("f2", False), "l": ("f3", True)}


def test_a_shard_compacts_to_the_newest_live_entry_of_each_key(tmp_path):
    """`compact_task` over a base and two deltas: a later delta's entry wins over the base's
    and an earlier delta's, tombstones and entries of file groups no longer live go, the new
    base is sorted by digest; a shard whose entries all went gets no file."""
    storage = Storage(str(tmp_path))
    base = [(f"k{i}", "f1" if i % 2 else "f2", False) for i in range(100)]
    write_entries(storage, "s0/1.base.parquet", base, 16, DIGESTS)
    write_entries(storage, "s0/2.delta.parquet", [("k1", "f3", False), ("k3", "f1", True), ("new", "f3", False)], 16, DIGESTS)
    write_entries(storage, "s0/3.delta.parquet", [("k1", "f4", False), ("new2", "gone", False)], 16, DIGESTS)
    write_entries(storage, "s1/1.base.parquet", [("only", "gone", False)], 16, DIGESTS)
    write_entries(storage, "s2/2.delta.parquet", [("d1", "f1", False), ("d2", "f1", False)], 16, DIGESTS)
    write_entries(storage, "s2/3.delta.parquet", [("d1", "f3", True)], 16, DIGESTS)
    files = {0: [("20260101000000003", "s0/3.delta.parquet"), ("20260101000000001", "s0/1.base.parquet"),
                 ("20260101000000002", "s0/2.delta.parquet")],
             1: [("20260101000000001", "s1/1.base.parquet")],
             2: [("20260101000000003", "s2/3.delta.parquet"), ("20260101000000002", "s2/2.delta.parquet")]}
    numbers = pa.RecordBatch.from_pylist([{"id": 0}, {"id": 1}, {"id": 2}, {"id": 3}])
    written = [r for b in compact_task(str(tmp_path), files, ["f1", "f3", "f4"], "20260101000000003", iter([numbers]))
               for r in b.to_pylist()]
    path = ".hoodie/.hudilite/record_index/shard=0/20260101000000003.base.parquet"
    only_deltas = ".hoodie/.hudilite/record_index/shard=2/20260101000000003.base.parquet"
    assert written[1:] == [{"path": only_deltas, "entries": 1}]  # shard 1 kept nothing: no file; shard 3 has none
    assert by_key(latest_entries(storage, [("20260101000000003", only_deltas)], ["d1", "d2"], DIGESTS)) == {
        "d2": ("f1", False)}
    written = written[:1]
    expected = {k: f for k, f, _ in base if f == "f1"}  # f2 is no longer live
    expected.update({"k1": "f4", "new": "f3"})  # k1: the latest delta's; k3: deleted by a tombstone
    del expected["k3"]
    assert written == [{"path": path, "entries": len(expected)}]
    with storage.open_input(path) as source:
        stored = pq.read_table(source)
    assert stored.schema == entry_schema(DIGESTS)
    assert stored.column("key").to_pylist() == sorted(stored.column("key").to_pylist())
    assert not any(stored.column("deleted").to_pylist())
    files = [("20260101000000003", path)]
    assert by_key(latest_entries(storage, files, [k for k, _, _ in base] + ["new", "new2", "only"], DIGESTS)) == {
        k: (f, False) for k, f in expected.items()}


def digests_of(*pairs):
    """16-byte digests made of (first word, second word) bytes, to force ties in the first 8."""
    return pa.array([bytes([a] * 8 + [b] * 8) for a, b in pairs], pa.binary(16))


def test_digests_are_found_by_binary_search_through_ties_and_by_hashing_out_of_order():
    from dbt.adapters.hudilite.table.index.record_index import _positions

    stored = digests_of((0, 1), (0, 2), (0, 3), (1, 0), (2, 2), (2, 2), (255, 0))
    wanted = digests_of((0, 3), (0, 9), (2, 2), (255, 0), (7, 7))
    assert _positions(stored, wanted).to_pylist() == [2, 4, 5, 6]  # a stored duplicate is found twice
    assert _positions(stored.slice(3), wanted.slice(2, 2)).to_pylist() == [1, 2, 3]  # offsets of slices
    assert _positions(stored, wanted.slice(0, 0)).to_pylist() == []
    assert _positions(stored.slice(0, 0), wanted).to_pylist() == []
    shuffled = stored.take(pa.array([6, 0, 5, 1, 4, 2, 3]))  # not in digest order: hashed, still exact
    assert _positions(shuffled, wanted).to_pylist() == [0, 2, 4, 5]
    assert _positions(pa.array(["a", "b", "c"]), pa.array(["c", "a", "z"])).to_pylist() == [0, 2]
