"""Hudi's DYNAMIC_V0 bloom filter footer, byte-for-byte against files Hudi's Java writer wrote (no Spark)."""

import base64
import glob
import os
import random
import struct
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.hudilite.table.format.bloom import (BLOOM_FILTER_KEY, MAX_RECORD_KEY, MIN_RECORD_KEY,
                                                      MIN_SIZED_ENTRIES, NUM_ENTRIES, TYPE_CODE_KEY,
                                                      DynamicBloomFilter, FileKeys, filter_shape, footer_metadata,
                                                      stored_footer)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures", "hudi-java-tables")
FOOTER_KEYS = (BLOOM_FILTER_KEY, TYPE_CODE_KEY, MIN_RECORD_KEY, MAX_RECORD_KEY)


@pytest.fixture(scope="module")
def java_base_files(tmp_path_factory):
    """(path, record keys in file order, footer entries) of every base file of every fixture table."""
    root = tmp_path_factory.mktemp("hudi-java-tables")
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.zip"))):
        with zipfile.ZipFile(path) as archive:
            archive.extractall(root, [n for n in archive.namelist() if not n.startswith("__MACOSX/")])
    files = []
    for path in sorted(glob.glob(os.path.join(str(root), "**", "*.parquet"), recursive=True)):
        if os.sep + ".hoodie" + os.sep in path:
            continue
        footer = {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items()}
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
        files.append((path, keys, footer))
    assert len(files) == 10, [f[0] for f in files]  # 4 + 2 + 4 base files in the three non-empty tables
    return files


def test_footer_equals_java_writer_byte_for_byte(java_base_files):
    for path, keys, footer in java_base_files:
        got = footer_metadata(keys, sized=False)  # Hudi's fixed size, as Java's writer has it
        assert set(got) == set(FOOTER_KEYS), path
        for key in FOOTER_KEYS:
            assert got[key] == footer[key], (path, key)
        assert DynamicBloomFilter().add_all(keys.to_pylist()).serialize() == footer[BLOOM_FILTER_KEY]


def test_java_filters_read_back(java_base_files):
    rng = random.Random(7)
    others = [f"{rng.getrandbits(64):x}-{i}" for i in range(100_000)]
    for path, keys, footer in java_base_files:
        bloom = DynamicBloomFilter.deserialize(footer[BLOOM_FILTER_KEY])
        assert bloom.serialize() == footer[BLOOM_FILTER_KEY]
        assert all(bloom.might_contain(k) for k in keys.to_pylist()), path
        assert bloom.might_contain_all(keys).all()
        assert bloom.might_contain_all(others).sum() == 0, path  # 1-4 keys in 2.6M bits


def test_default_sizing_matches_java_header(java_base_files):
    raw = base64.b64decode(java_base_files[0][2][BLOOM_FILTER_KEY])
    assert struct.unpack_from(">iibi", raw) == (-1, 30, 1, 2587966)  # version, hashes, murmur, bits
    bloom = DynamicBloomFilter()
    assert (bloom.nb_hash, bloom.vector_size, bloom.nr, bloom.max_entries) == (30, 2587966, 60000, 100000)


# A literal scalar model of the Java classes, to check the vectorised code on what the fixtures
# lack: non-ASCII keys (signed trailing bytes), every key length, and files past num_entries.

MASK = 0xFFFFFFFF


def java_murmur(data: bytes, seed: int) -> int:
    m = 0x5BD1E995
    h = (seed ^ len(data)) & MASK
    len4 = len(data) // 4
    for i in range(len4):
        k = int.from_bytes(data[4 * i: 4 * i + 4], "little")
        k = (k * m) & MASK
        k ^= k >> 24
        k = (k * m) & MASK
        h = ((h * m) & MASK) ^ k
    left = len(data) - 4 * len4
    signed = [b - 256 if b > 127 else b for b in data[4 * len4:]]
    if left:
        if left >= 3:
            h ^= (signed[-3] << 16) & MASK
        if left >= 2:
            h ^= (signed[-2] << 8) & MASK
        h ^= signed[-1] & MASK
        h = (h * m) & MASK
    h ^= h >> 13
    h = (h * m) & MASK
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def java_positions(key: str, nb_hash: int, vector_size: int):
    data = key.encode("utf-8")
    out, initval = [], 0
    for _ in range(nb_hash):
        initval = java_murmur(data, initval)
        quotient = abs(initval) // vector_size * (1 if initval >= 0 else -1)  # Java's / truncates
        out.append(abs(initval - quotient * vector_size))
    return out


class JavaModel:
    """InternalDynamicBloomFilter, key by key."""

    def __init__(self, vector_size, nb_hash, nr, max_nr):
        self.vs, self.k, self.nr, self.max_nr = vector_size, nb_hash, nr, max_nr
        self.current, self.reached_max, self.cur_index = 0, False, 0
        self.matrix = [set()]

    def _active(self):
        if self.reached_max:
            row = self.matrix[self.cur_index % len(self.matrix)]
            self.cur_index += 1
            return row
        if self.current >= self.nr and len(self.matrix) * self.nr < self.max_nr:
            return None
        if self.current >= self.nr:
            self.reached_max = True
            return self.matrix[0]
        return self.matrix[-1]

    def add(self, key):
        row = self._active()
        if row is None:
            self.matrix.append(set())
            row = self.matrix[-1]
            self.current = 0
        row.update(java_positions(key, self.k, self.vs))
        self.current += 1

    def serialize(self):
        header = struct.pack(">iibi", -1, self.k, 1, self.vs)
        out = header + struct.pack(">iii", self.nr, self.current, len(self.matrix))
        for row in self.matrix:
            bits = bytearray((self.vs + 7) // 8)
            for i in row:
                bits[i >> 3] |= 1 << (i & 7)
            out += header + bytes(bits)
        return base64.b64encode(out).decode()


def random_keys(n, seed):
    rng = random.Random(seed)
    alphabet = "abcXYZ019_-:/,é日本ß€\U0001F600"  # 1- to 4-byte UTF-8 characters
    return [f"{i}|" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for i in range(n)]


def test_matches_java_model_across_lengths_rows_and_batches():
    keys = ["a", "é", "日", "\U0001F600", "ab", "aé"] + random_keys(694, seed=1)
    lengths = {len(k.encode()) for k in keys}
    assert set(range(1, 60)) <= lengths
    # 50 keys a row, rows added while rows * 50 < 120: three rows, then round robin
    bloom = DynamicBloomFilter(num_entries=50, fpp=0.01, max_entries=120)
    model = JavaModel(bloom.vector_size, bloom.nb_hash, 50, 120)
    for key in keys:
        model.add(key)
    for lo, hi in [(0, 1), (1, 37), (37, 149), (149, 151), (151, 152), (152, 700)]:
        bloom.add_all(pa.array(keys[lo:hi]))
    assert len(bloom.bits) == 3
    assert bloom.serialize() == model.serialize()
    assert bloom.might_contain_all(keys).all()
    again = DynamicBloomFilter.deserialize(bloom.serialize())
    assert again.serialize() == bloom.serialize() and again.might_contain_all(keys).all()


def test_row_bookkeeping_matches_hadoop_written_filter():
    # Hudi's test resource format/bloom-filter/hadoop/dynamic_200_000001_murmur_1000.bf.data,
    # written by Hadoop's DynamicBloomFilter from 10000 keys, starts with these fields.
    hadoop_fields = ((-1, 20, 1, 5752), (200, 9200, 5), (-1, 20, 1, 5752))
    keys = [f"{random.Random(i).getrandbits(128):032x}" for i in range(10000)]
    raw = base64.b64decode(DynamicBloomFilter(200, 0.000001, 1000).add_all(keys).serialize())
    ours = (struct.unpack_from(">iibi", raw), struct.unpack_from(">iii", raw, 13),
            struct.unpack_from(">iibi", raw, 25))
    assert ours == hadoop_fields
    assert len(raw) == 25 + 5 * (13 + 5752 // 8)


def test_key_order_matters_only_past_num_entries():
    keys = random_keys(300, seed=2)
    shuffled = random.Random(3).sample(keys, len(keys))
    def serialized(num_entries, order):
        return DynamicBloomFilter(num_entries=num_entries, fpp=0.01).add_all(order).serialize()

    assert serialized(300, keys) == serialized(300, shuffled)  # one row: a set of bits
    assert serialized(200, keys) != serialized(200, shuffled)  # two rows: which keys went where


def test_full_default_filter_has_near_zero_false_positives():
    keys = pa.array([f"20261124093000123_0_{i}" for i in range(60000)])
    bloom = DynamicBloomFilter.deserialize(DynamicBloomFilter().add_all(keys).serialize())
    assert len(bloom.bits) == 1 and bloom.might_contain_all(keys).all()
    others = pa.array([f"20261124093000123_1_{i}" for i in range(100_000)])
    assert bloom.might_contain_all(others).sum() <= 1  # fpp 1e-9
    assert not bloom.might_contain("20261124093000123_0_60000")


def test_input_kinds_agree():
    keys = random_keys(500, seed=4)
    expected = DynamicBloomFilter(num_entries=200, fpp=0.01).add_all(keys).serialize()
    padded = pa.array(["x"] * 3 + keys + ["y"])
    for given in (pa.array(keys), pa.array(keys, pa.large_string()), pa.chunked_array([keys[:123], keys[123:]]),
                  padded.slice(3, len(keys))):
        assert DynamicBloomFilter(num_entries=200, fpp=0.01).add_all(given).serialize() == expected


def test_min_max_are_byte_wise_and_absent_without_keys():
    meta = footer_metadata(pa.array(["b", "a10", "a9", "B", "é"]))
    assert (meta[MIN_RECORD_KEY], meta[MAX_RECORD_KEY]) == ("B", "é")
    empty = footer_metadata(pa.array([], pa.string()))
    assert set(empty) == {BLOOM_FILTER_KEY, TYPE_CODE_KEY}
    assert empty[BLOOM_FILTER_KEY] == DynamicBloomFilter(MIN_SIZED_ENTRIES).serialize()
    assert footer_metadata([], sized=False)[BLOOM_FILTER_KEY] == DynamicBloomFilter().serialize()


def test_null_and_empty_keys_are_refused():
    with pytest.raises(ValueError):
        DynamicBloomFilter().add_all(pa.array(["a", None]))
    with pytest.raises(ValueError):
        DynamicBloomFilter().add_all(["a", ""])
    assert np.array_equal(DynamicBloomFilter().might_contain_all([]), np.zeros(0, bool))


# Filters sized to their file's keys (`FileKeys`): fpp 1e-9 for the keys a file holds, Hudi's
# own filter from num_entries (60000) keys on.

def non_members(n, seed):
    rng = random.Random(seed)
    return pa.array([f"{rng.getrandbits(64):016x}-{rng.getrandbits(32)}" for _ in range(n)])


@pytest.mark.parametrize("n", [1, 99, 100, 101, 1000, 20000, 59999])
def test_a_sized_filter_holds_its_keys_at_hudis_false_positive_rate(n):
    keys = pa.array([f"20261124093000123_0_{i}" for i in range(n)])
    footer = footer_metadata(keys)
    nr, vector_size, nb_hash, added = filter_shape(footer[BLOOM_FILTER_KEY])
    assert (nr, added) == (max(n, MIN_SIZED_ENTRIES), n)
    bloom = DynamicBloomFilter.deserialize(footer[BLOOM_FILTER_KEY])
    assert (bloom.nr, bloom.vector_size, bloom.nb_hash) == (nr, vector_size, nb_hash)
    assert len(bloom.bits) == 1 and bloom.current_nb_record == n
    assert nb_hash == 30 and vector_size == DynamicBloomFilter(nr).vector_size
    assert bloom.might_contain_all(keys).all()
    # fpp 1e-9: 2e-4 false positives expected among 200000 keys
    assert bloom.might_contain_all(non_members(200_000, seed=n)).sum() == 0
    fill = bloom.bits.sum() / vector_size  # about 1/2 (at most 1/2 below nr keys): the size is not oversized
    assert 0.5 * n / nr - 0.05 < fill <= 0.5 + 0.02


def test_a_small_files_filter_is_small():
    keys = pa.array([f"20261124093000123_0_{i}" for i in range(100)])
    footer = footer_metadata(keys)
    assert len(footer[BLOOM_FILTER_KEY]) < 1024  # was 431380 characters
    assert len(base64.b64decode(footer[BLOOM_FILTER_KEY])) == 25 + 13 + (DynamicBloomFilter(100).vector_size + 7) // 8
    assert len(footer_metadata(keys[:1])[BLOOM_FILTER_KEY]) == len(footer[BLOOM_FILTER_KEY])  # the floor
    assert len(footer_metadata([f"k{i}" for i in range(1000)])[BLOOM_FILTER_KEY]) < 8 * 1024


@pytest.mark.parametrize("n", [60000, 60001, 100000, 130000])
def test_files_of_num_entries_keys_or_more_get_hudis_filter_byte_for_byte(n):
    rng = random.Random(n)
    keys = [f"{rng.getrandbits(48):x}_{i}" for i in range(n)]
    # batches crossing num_entries: held keys go into the filter first, in file order
    cuts = [c for c in (0, 7, 59_990, 60_005, 110_000) if c < n] + [n]
    file_keys = FileKeys()
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        file_keys.add(pa.array(keys[lo:hi]))
    expected = DynamicBloomFilter().add_all(keys)
    got = file_keys.footer()
    assert got[BLOOM_FILTER_KEY] == expected.serialize() == footer_metadata(keys, sized=False)[BLOOM_FILTER_KEY]
    assert got == footer_metadata(keys, sized=False)
    assert filter_shape(got[BLOOM_FILTER_KEY]) == (NUM_ENTRIES, 2587966, 30, n)
    assert len(expected.bits) == (1 if n == 60000 else 2)  # a second row past 60000 keys, round robin past 120000


def test_a_sized_filter_switching_to_num_entries_matches_the_java_model():
    keys = random_keys(400, seed=5)
    # num_entries 50 and bound 120: three rows, then round robin, as Hudi's filter of these settings
    model = JavaModel(DynamicBloomFilter(50, 0.01).vector_size, DynamicBloomFilter(50, 0.01).nb_hash, 50, 120)
    for key in keys:
        model.add(key)
    file_keys = FileKeys(num_entries=50, fpp=0.01, max_entries=120)
    for lo, hi in [(0, 1), (1, 49), (49, 51), (51, 52), (52, 400)]:
        file_keys.add(pa.array(keys[lo:hi]))
    assert file_keys.footer()[BLOOM_FILTER_KEY] == model.serialize()
    few = FileKeys(num_entries=50, fpp=0.01).add(keys[:3]).footer()  # the floor never passes num_entries
    assert filter_shape(few[BLOOM_FILTER_KEY]) == (50, model.vs, model.k, 3)


def test_a_stored_footer_is_reused_only_for_its_keys_at_the_current_size():
    def stored(footer):
        return {k.encode(): v.encode() for k, v in footer.items()}

    keys = [f"20261124093000123_0_{i}" for i in range(100)]
    ours = footer_metadata(keys)
    assert stored_footer(stored(ours)) == ours == stored_footer(stored(ours), 100)
    assert stored_footer(stored(ours), 101) is None  # a filter of 100 keys for a file of 101: rebuilt
    assert stored_footer(stored(ours), 99) is None
    # Hudi's fixed size (Java's writer, or ours before) on a small file: rebuilt to its keys' size
    fixed = footer_metadata(keys, sized=False)
    assert stored_footer(stored(fixed)) == fixed and stored_footer(stored(fixed), 100) is None
    tiny = footer_metadata(keys[:3])  # floored nr: 3 keys in a filter of MIN_SIZED_ENTRIES
    assert stored_footer(stored(tiny), 3) == tiny and stored_footer(stored(tiny), 4) is None
    empty = footer_metadata([])
    assert stored_footer(stored(empty), 0) == empty
    # From num_entries keys on, Hudi's filter is the one we build: reused as Java's writer left it
    big = [f"k{i}" for i in range(60001)]
    default = footer_metadata(big, sized=False)
    assert stored_footer(stored(default), 60001) == default
    assert stored_footer(stored(default), 60002) is None
    assert stored_footer({b"hoodie_bloom_filter_type_code": b"DYNAMIC_V0", b"org.apache.hudi.bloomfilter": b"AAAA"}, 1) is None


def test_a_keyed_file_of_100_rows_is_within_twice_a_plain_one(tmp_path):
    from dbt.adapters.hudilite.table.storage.filesystem import Storage
    from dbt.adapters.hudilite.table.spark.writer import WriteSpec, _OpenBaseFile

    n, instant = 101, "20261124093000123"
    sizes = {}
    for keyed in (False, True):
        spec = WriteSpec(str(tmp_path / str(keyed)), instant, partitioned=False, partition_depth=0,
                         auto_keys=not keyed, bloom_footers=keyed)
        out = _OpenBaseFile(spec, Storage(spec.base_path), "0-1-0", "", [pa.field("id", pa.int64()),
                                                                          pa.field("name", pa.string())])
        keys = pa.array([f"id:{i}" for i in range(n)])
        out.add(pa.array([instant] * n), pa.array([f"{instant}_0_{i}" for i in range(n)]), keys,
                pa.array([""] * n), [pa.array(range(n), pa.int64()), pa.array([f"name {i}" for i in range(n)])], n)
        stat = out.close()
        sizes[keyed] = stat["file_size"]
        footer = pq.read_metadata(os.path.join(spec.base_path, stat["path"])).metadata
        if keyed:
            assert stored_footer(footer, n) == footer_metadata(keys)
            assert DynamicBloomFilter.deserialize(footer[BLOOM_FILTER_KEY.encode()].decode()).might_contain_all(keys).all()
    assert sizes[True] < 2 * sizes[False], sizes
    print("file bytes, plain vs keyed:", sizes)


def test_keys_held_until_close_give_the_footer_built_as_they_came(monkeypatch):
    """A file merged in pieces holds its keys until it knows whether its stored footer holds
    them: the footer it builds when not is the one built batch by batch, whether the keys stayed
    held or passed the bound half way (then hashed from there on)."""
    import pyarrow as pa

    from dbt.adapters.hudilite.table.format.bloom import FileKeys
    from dbt.adapters.hudilite.table.spark import writer

    batches = [pa.array([f"key-{b}-{i}" for i in range(25_000)], pa.large_string()) for b in range(4)]
    expected = FileKeys()
    for keys in batches:
        expected.add(keys)
    for bound in (1 << 30, batches[0].nbytes + 1):
        monkeypatch.setattr(writer, "HELD_KEY_BYTES", bound)
        held = writer._KeysUntilClose()
        for keys in batches:
            held.add(keys)
        assert (held.keys is None) == (bound == 1 << 30)  # nothing hashed while held
        assert held.footer() == expected.footer()
