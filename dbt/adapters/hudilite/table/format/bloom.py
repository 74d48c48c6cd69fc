"""Hudi's bloom filter of a base file's record keys, as its Java writer puts it in the parquet footer.

Hudi's BLOOM / GLOBAL_BLOOM indexes read four footer (key-value metadata) entries of every base
file: the serialized filter (`org.apache.hudi.bloomfilter`), its type code
(`hoodie_bloom_filter_type_code` = `DYNAMIC_V0`) and the smallest and largest record key.

DYNAMIC_V0 is a bounded "dynamic" bloom filter: a list of rows, each a plain bloom filter of
`vector_size` bits. Keys go to the last row until it holds `nr` (= hoodie.index.bloom.num_entries)
keys; then a new row is added, as long as rows * nr < max_entries
(hoodie.bloom.index.filter.dynamic.max.entries). Past that bound no row is added: the next key
goes to row 0 and the ones after it to rows 0, 1, ..., 0, 1, ... in turn. So the bytes depend on
key order only once a file holds more than `nr` keys.

Sizing: vector_size = ceil(nr * -ln(fpp) / ln(2)^2), nb_hash = ceil(ln(2) * vector_size / nr);
Hudi's defaults (60000 keys, fpp 1e-9, bound 100000) give 2587966 bits, 30 hashes and at most 2 rows.
Hudi's writer always uses nr = 60000: 316 KiB of bits (431 KB of base64) in every file, whatever it
holds. Ours (`FileKeys`) takes nr = the file's key count, between MIN_SIZED_ENTRIES and 60000
(`sized_entries`): a file of fewer than 60000 keys gets one row at fpp 1e-9 for its own keys; a file
of 60000 keys or more gets Hudi's filter exactly. Java's readers take nr, nb_hash and vector_size
from the serialized bytes, so they read any size.

A key's bit positions: its UTF-8 bytes hashed with MurmurHash2 (32 bit, Hadoop's variant: the
1-3 trailing bytes enter as *signed* Java bytes), chained: seed_0 = 0, h_i = murmur(bytes, h_{i-1}),
position_i = |h_i as int32| mod vector_size, for i < nb_hash.

Serialized bytes (Java DataOutput: big-endian), then standard base64 with padding:

    filter header:  int32 -1 (format version), int32 nb_hash, int8 hash type (1 = murmur),
                    int32 vector_size
    int32 nr, int32 current_nb_record (keys added since the last row was added), int32 rows
    per row:        the filter header again, then ceil(vector_size / 8) bytes of bits,
                    bit i in byte i // 8 at value 1 << (i % 8)

Hashing is vectorised with numpy: keys of one UTF-8 length are hashed together, one array
operation per 4-byte word and hash round, on chunks that fit in the CPU cache.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_RECORD_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY = "hoodie_max_record_key"
TYPE_CODE = "DYNAMIC_V0"

NUM_ENTRIES = 60000  # hoodie.index.bloom.num_entries
FPP = 0.000000001  # hoodie.index.bloom.fpp
MAX_ENTRIES = 100000  # hoodie.bloom.index.filter.dynamic.max.entries
# Smallest nr of a filter sized to its file's keys. The sizing formula gives fpp only on average
# over many bits: with few keys the share of bits set varies a lot, and as a key hits when all of
# its 30 bits are set, the expected false-positive rate rises above fpp (11x at 1 key, 1.3x at 10,
# 1.03x at 100). Below 100 keys the bits saved are under 540 bytes a file, small next to the
# Parquet footer itself, so 100 keeps Hudi's rate for a negligible cost.
MIN_SIZED_ENTRIES = 100

_VERSION = -1
_MURMUR = 1
_HEADER = struct.Struct(">iibi")  # version, nb_hash, hash type, vector_size
_DYNAMIC = struct.Struct(">iii")  # nr, current_nb_record, rows
_M = np.uint32(0x5BD1E995)  # MurmurHash2 multiplier
_CHUNK = 32768  # keys hashed at once: each round works on 128 KiB arrays that stay in cache

Keys = Union[pa.Array, pa.ChunkedArray, Sequence[str]]


def bit_size(num_entries: int, fpp: float) -> int:
    return int(math.ceil(num_entries * (-math.log(fpp) / (math.log(2) * math.log(2)))))


def num_hashes(vector_size: int, num_entries: int) -> int:
    return int(math.ceil(math.log(2) * vector_size / num_entries))


def sized_entries(key_count: int, num_entries: int = NUM_ENTRIES) -> int:
    """nr of the filter of a file holding key_count keys: its count, at least MIN_SIZED_ENTRIES and
    at most num_entries (Hudi's, whose row bookkeeping then applies to larger files)."""
    return min(num_entries, max(key_count, MIN_SIZED_ENTRIES))


def _as_large_strings(keys: Keys) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array(list(keys), type=pa.large_string())
    if keys.null_count:
        raise ValueError("record keys must not be null")
    # int64 offsets whatever came in, so one code path reads the buffers
    keys = keys.cast(pa.large_string())
    if len(keys) and pc.min(pc.binary_length(keys)).as_py() == 0:
        raise ValueError("record keys must not be empty")  # Hudi's hash refuses them too
    return keys


def _by_length(keys: pa.Array) -> Iterator[Tuple[np.ndarray, int, np.ndarray]]:
    """(indices into keys, UTF-8 length, bytes as an (n, length) uint8 matrix) per key length."""
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64)[keys.offset: keys.offset + len(keys) + 1]
    lengths = np.diff(offsets)
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    starts = np.flatnonzero(np.r_[True, sorted_lengths[1:] != sorted_lengths[:-1]]) if len(order) else []
    bounds = list(starts) + [len(order)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx = order[lo:hi]
        length = int(sorted_lengths[lo])
        # take() packs the group's bytes contiguously: n keys of one length are an (n, length) matrix
        group = keys.take(pa.array(idx)) if hi - lo < len(keys) else keys
        goff = np.frombuffer(group.buffers()[1], dtype=np.int64)[group.offset]
        data = np.frombuffer(group.buffers()[2], dtype=np.uint8)[goff: goff + (hi - lo) * length]
        yield idx, length, data.reshape(hi - lo, length)


def _positions(matrix: np.ndarray, nb_hash: int, vector_size: int) -> np.ndarray:
    """Bit positions (nb_hash, n) of n keys of one length, given as an (n, length) byte matrix."""
    n, length = matrix.shape
    len4 = length // 4
    # Body words (little-endian) are mixed the same way in every round, so mix them once.
    words = np.ascontiguousarray(matrix[:, : len4 * 4]).view("<u4").T.copy()  # (len4, n)
    words *= _M
    words ^= words >> np.uint32(24)
    words *= _M
    # Trailing bytes are Java (signed) bytes, sign-extended before the shift.
    tail = None
    left = length - len4 * 4
    if left:
        signed = matrix[:, len4 * 4:].view(np.int8).astype(np.int32).view(np.uint32)
        tail = signed[:, left - 1].copy()
        if left >= 2:
            tail ^= signed[:, left - 2] << 8
        if left == 3:
            tail ^= signed[:, 0] << 16
    hashes = np.empty((nb_hash, n), dtype=np.uint32)
    tmp = np.empty(n, dtype=np.uint32)
    for i in range(nb_hash):
        h = hashes[i]
        # seed ^ length, the seed being the previous round's hash (0 for the first)
        if i:
            np.bitwise_xor(hashes[i - 1], np.uint32(length), out=h)
        else:
            h.fill(length)
        for w in words:
            h *= _M
            h ^= w
        if tail is not None:
            h ^= tail
            h *= _M
        np.right_shift(h, 13, out=tmp)
        h ^= tmp
        h *= _M
        np.right_shift(h, 15, out=tmp)
        h ^= tmp
    # Java: Math.abs(h % vector_size) on int32, which is |h| mod vector_size; abs(MIN_INT) wraps
    # to MIN_INT, read as uint32 that is 2^31, its true absolute value.
    np.abs(hashes.view(np.int32), out=hashes.view(np.int32))
    out = np.empty((nb_hash, n), dtype=np.intp)  # intp: numpy indexes with it without a copy
    np.remainder(hashes, np.uint32(vector_size), out=out, casting="unsafe")
    return out


class DynamicBloomFilter:
    """Hudi's DYNAMIC_V0 filter (HoodieDynamicBoundedBloomFilter), built and read byte-for-byte."""

    def __init__(self, num_entries: int = NUM_ENTRIES, fpp: float = FPP, max_entries: int = MAX_ENTRIES):
        self.vector_size = bit_size(num_entries, fpp)
        self.nb_hash = num_hashes(self.vector_size, num_entries)
        self.nr = num_entries
        self.max_entries = max_entries
        self.current_nb_record = 0
        self.bits = np.zeros((1, self.vector_size), dtype=np.bool_)  # (rows, vector_size)
        # Not serialized (as in Java): a deserialized filter starts with them reset.
        self._reached_max = False
        self._next_row = 0

    def _assign_rows(self, n: int) -> np.ndarray:
        """Row of each of n keys added next, following Java's row bookkeeping key by key."""
        rows = np.empty(n, dtype=np.intp)
        n_rows = len(self.bits)
        i = 0
        while i < n:
            if self._reached_max:  # round robin over all rows
                rows[i:] = (self._next_row + np.arange(n - i)) % n_rows
                self._next_row += n - i
                self.current_nb_record += n - i
                break
            if self.current_nb_record >= self.nr:
                if n_rows * self.nr < self.max_entries:
                    n_rows += 1
                    self.current_nb_record = 0
                else:  # the key that hits the bound goes to row 0, then round robin from row 0
                    self._reached_max = True
                    rows[i] = 0
                    self.current_nb_record += 1
                    i += 1
                continue
            take = min(n - i, self.nr - self.current_nb_record)
            rows[i: i + take] = n_rows - 1
            self.current_nb_record += take
            i += take
        if n_rows > len(self.bits):
            grown = np.zeros((n_rows, self.vector_size), dtype=np.bool_)
            grown[: len(self.bits)] = self.bits
            self.bits = grown
        return rows

    def _chunks(self, keys: pa.Array) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """(key indices, positions (nb_hash, n)) per chunk of same-length keys."""
        for idx, _length, matrix in _by_length(keys):
            for lo in range(0, len(idx), _CHUNK):
                yield idx[lo: lo + _CHUNK], _positions(matrix[lo: lo + _CHUNK], self.nb_hash, self.vector_size)

    def add_all(self, keys: Keys) -> "DynamicBloomFilter":
        """Add keys in this order (the order of the file's rows, as Hudi's writer adds them)."""
        keys = _as_large_strings(keys)
        rows = self._assign_rows(len(keys))
        flat = self.bits.reshape(-1)
        for idx, pos in self._chunks(keys):
            key_rows = rows[idx]
            if (key_rows == key_rows[0]).all():
                self.bits[key_rows[0]][pos] = True
            else:  # keys of several rows: index all rows as one flat bit array
                pos += key_rows * self.vector_size
                flat[pos] = True
        return self

    def might_contain_all(self, keys: Keys) -> np.ndarray:
        """Membership of each key: True when every bit of the key is set in some row."""
        keys = _as_large_strings(keys)
        found = np.zeros(len(keys), dtype=np.bool_)
        for idx, pos in self._chunks(keys):
            for row in self.bits:
                found[idx] |= row[pos].all(axis=0)
        return found

    def might_contain(self, key: str) -> bool:
        return bool(self.might_contain_all([key])[0])

    def _header(self) -> bytes:
        return _HEADER.pack(_VERSION, self.nb_hash, _MURMUR, self.vector_size)

    def serialize(self) -> str:
        parts = [self._header(), _DYNAMIC.pack(self.nr, self.current_nb_record, len(self.bits))]
        for row in np.packbits(self.bits, axis=1, bitorder="little"):
            parts.append(self._header())
            parts.append(row.tobytes())
        return base64.b64encode(b"".join(parts)).decode("ascii")

    @classmethod
    def deserialize(cls, text: str) -> "DynamicBloomFilter":
        data = base64.b64decode(text, validate=True)
        version, nb_hash, hash_type, vector_size = _HEADER.unpack_from(data, 0)
        if version != _VERSION or hash_type != _MURMUR:
            raise ValueError(f"unsupported bloom filter: version {version}, hash type {hash_type}")
        nr, current, n_rows = _DYNAMIC.unpack_from(data, _HEADER.size)
        self = cls.__new__(cls)
        self.vector_size, self.nb_hash, self.nr = vector_size, nb_hash, nr
        self.max_entries = 0  # not serialized: Java reads it back as 0, so no rows get added
        self.current_nb_record = current
        self._reached_max, self._next_row = False, 0
        n_bytes = (vector_size + 7) // 8
        pos = _HEADER.size + _DYNAMIC.size
        self.bits = np.zeros((n_rows, vector_size), dtype=np.bool_)
        for r in range(n_rows):
            if _HEADER.unpack_from(data, pos) != (_VERSION, nb_hash, _MURMUR, vector_size):
                raise ValueError("bloom filter rows disagree with the filter header")
            pos += _HEADER.size
            bits = np.frombuffer(data, dtype=np.uint8, count=n_bytes, offset=pos)
            self.bits[r] = np.unpackbits(bits, bitorder="little", count=vector_size).view(np.bool_)
            pos += n_bytes
        if pos != len(data):
            raise ValueError("trailing bytes after the bloom filter")
        return self


class FileKeys:
    """A base file's footer entries, built batch by batch in the order its rows are written.

    sized (the default): the filter's nr is the file's key count (`sized_entries`), so keys are
    held until the file is closed, or until num_entries of them came: from there the filter is
    Hudi's own (nr = num_entries), fed as they come. Not sized: Hudi's filter whatever the count."""

    def __init__(self, num_entries: int = NUM_ENTRIES, fpp: float = FPP, max_entries: int = MAX_ENTRIES,
                 sized: bool = True):
        self.num_entries, self.fpp, self.max_entries = num_entries, fpp, max_entries
        self.bloom: Optional[DynamicBloomFilter] = None if sized else DynamicBloomFilter(num_entries, fpp, max_entries)
        self.pending: List[pa.Array] = []  # keys not in the filter yet (fewer than num_entries)
        self.count = 0
        self.min_key: Optional[str] = None
        self.max_key: Optional[str] = None

    def _start_filter(self) -> DynamicBloomFilter:
        nr = sized_entries(self.count, self.num_entries)
        self.bloom = DynamicBloomFilter(nr, self.fpp, self.max_entries)
        for keys in self.pending:  # in file order: past nr keys, the rows depend on it
            self.bloom.add_all(keys)
        self.pending = []
        return self.bloom

    def add(self, keys: Keys) -> "FileKeys":
        keys = _as_large_strings(keys)
        if len(keys):
            self.count += len(keys)
            if self.bloom is not None:
                self.bloom.add_all(keys)
            else:
                self.pending.append(keys)
                if self.count >= self.num_entries:
                    self._start_filter()
            # Python and Spark's UTF8String both order by code point. Hudi's Avro path compares
            # Java Strings (UTF-16 units): differs only for keys mixing chars above U+FFFF with
            # U+E000..U+FFFF.
            lo_hi = pc.min_max(keys)
            lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
            self.min_key = lo if self.min_key is None else min(self.min_key, lo)
            self.max_key = hi if self.max_key is None else max(self.max_key, hi)
        return self

    def footer(self) -> Dict[str, str]:
        bloom = self.bloom if self.bloom is not None else self._start_filter()
        meta = {BLOOM_FILTER_KEY: bloom.serialize(), TYPE_CODE_KEY: TYPE_CODE}
        if self.min_key is not None:
            meta[MIN_RECORD_KEY], meta[MAX_RECORD_KEY] = self.min_key, self.max_key
        return meta


def filter_shape(text: str) -> Tuple[int, int, int, int]:
    """(nr, vector_size, nb_hash, keys added) of a serialized filter, from its first bytes. Keys
    added: every row before the last took nr keys, then the count since the last row was added
    (which keeps counting once keys go round robin)."""
    head = base64.b64decode(text[:36], validate=True)  # 27 bytes: the headers take 25
    version, nb_hash, hash_type, vector_size = _HEADER.unpack_from(head, 0)
    if version != _VERSION or hash_type != _MURMUR:
        raise ValueError(f"unsupported bloom filter: version {version}, hash type {hash_type}")
    nr, current, n_rows = _DYNAMIC.unpack_from(head, _HEADER.size)
    return nr, vector_size, nb_hash, (n_rows - 1) * nr + current


def stored_footer(metadata: Optional[Dict[bytes, bytes]], num_keys: Optional[int] = None) -> Optional[Dict[str, str]]:
    """The footer entries a base file holds (its parquet key-value metadata), None if it lacks
    a DYNAMIC_V0 filter. A new slice holding the same keys in the same order takes them as
    they are: rebuilding them would give the same bytes.

    With num_keys (the file's row count): None too unless the filter holds that many keys and
    is sized as `FileKeys` sizes it now, so a filter of Hudi's fixed size on a small file (from
    Java's writer or an older one) is rebuilt at the file's next slice, to its keys' size."""
    entries = {k.decode(): v.decode() for k, v in (metadata or {}).items()
               if k.decode() in (BLOOM_FILTER_KEY, TYPE_CODE_KEY, MIN_RECORD_KEY, MAX_RECORD_KEY)}
    if entries.get(TYPE_CODE_KEY) != TYPE_CODE or BLOOM_FILTER_KEY not in entries:
        return None
    if num_keys is not None:
        try:
            shape = filter_shape(entries[BLOOM_FILTER_KEY])
        except (ValueError, struct.error):  # (binascii.Error is a ValueError)
            return None
        nr = sized_entries(num_keys)
        vector_size = bit_size(nr, FPP)
        if shape != (nr, vector_size, num_hashes(vector_size, nr), num_keys):
            return None
    return entries


def footer_metadata(keys: Keys, num_entries: int = NUM_ENTRIES, fpp: float = FPP,
                    max_entries: int = MAX_ENTRIES, sized: bool = True) -> Dict[str, str]:
    """The footer entries of a base file holding these record keys (in file order): ours
    (`FileKeys`), or with sized=False the ones Hudi's writer gives it."""
    return FileKeys(num_entries, fpp, max_entries, sized).add(keys).footer()
