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

from dbt.adapters.hudilite.table.bloom import (
    BLOOM_FILTER_KEY, MAX_RECORD_KEY, MIN_RECORD_KEY, TYPE_CODE_KEY, DynamicBloomFilter, footer_metadata)

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
        got = footer_metadata(keys)
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
    assert empty[BLOOM_FILTER_KEY] == DynamicBloomFilter().serialize()


def test_null_and_empty_keys_are_refused():
    with pytest.raises(ValueError):
        DynamicBloomFilter().add_all(pa.array(["a", None]))
    with pytest.raises(ValueError):
        DynamicBloomFilter().add_all(["a", ""])
    assert np.array_equal(DynamicBloomFilter().might_contain_all([]), np.zeros(0, bool))
