"""HFile, version 3 (HBase's sorted key-value file), as Hudi's metadata table keeps it: the base
files of `.hoodie/metadata` and the content of its log files' HFile data blocks.

    data blocks        "DATABLK*" blocks of cells, sorted by row key (bytes)
    load-on-open       the root data index ("IDXROOT2": each data block's offset, on-disk size
                       and first key), the meta index (same form, for named meta blocks), the
                       file info ("FILEINF2": "PBUF" + a protobuf map of bytes to bytes)
    trailer            the last 4096 bytes: "TRABLK\"$", a length-prefixed protobuf
                       (FileTrailerProto: where the sections are, counts, comparator, codec),
                       zeros, and the version int (major 3 | minor 3 << 24)

A block is a 33-byte header (magic, on-disk size without header, uncompressed size without
header, previous block of its kind, checksum type, bytes per checksum, on-disk size of header and
data) then the data, compressed by the file's codec, then one checksum per `bytes per checksum`
chunk of header and data. A cell is int32 key length, int32 value length, the key (int16 row
length, row, int8 family length 0, timestamp Long.MAX_VALUE, type 4 = Put), the value, and the
write number as a Hadoop vlong (0): the file info's KEY_VALUE_VERSION 1 says it is there.
All integers are big-endian (Java's DataOutput). Hudi's writers compress with GZ and checksum
with CRC32C; this module writes GZ and CRC32 (HBase's checksum type 1, in the C library), and reads
NONE and GZ.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DATA_BLOCK = b"DATABLK*"
ROOT_INDEX = b"IDXROOT2"
FILE_INFO = b"FILEINF2"
META_BLOCK = b"METABLKc"
TRAILER_MAGIC = b'TRABLK"$'
PBUF_MAGIC = b"PBUF"
TRAILER_SIZE = 4096  # of an HFile of major version 3
MAJOR_VERSION = 3
MINOR_VERSION = 3
HEADER = struct.Struct(">8siiqbii")  # 33 bytes
NO_COMPRESSION, GZ = 2, 1  # Hadoop's Compression.Algorithm ordinals: LZO 0, GZ 1, NONE 2
CHECKSUM_CRC32 = 1
BYTES_PER_CHECKSUM = 16384
LATEST_TIMESTAMP = (1 << 63) - 1
PUT = 4
CELL_KEY_OVERHEAD = 12  # of a cell key beyond its row: row length, family length, timestamp, type
# What Hudi's writer names the comparator; the native readers of Hudi 0.15 and 1.x take either.
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
DEFAULT_BLOCK_SIZE = 64 * 1024


class HFileError(ValueError):
    """Bytes that are not an HFile this module reads."""


# -- protobuf wire format, as far as HBase's trailer and file info use it ---------------------

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise HFileError("a protobuf varint runs past its message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _proto(fields: Iterable[Tuple[int, object]]) -> bytes:
    """A message of (field number, int or bytes) pairs, in the order given."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
        else:
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


def _proto_fields(data: bytes) -> List[Tuple[int, object]]:
    fields, pos = [], 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = struct.unpack_from(">q", data, pos)[0], pos + 8
        elif wire == 5:
            value, pos = struct.unpack_from(">i", data, pos)[0], pos + 4
        else:
            raise HFileError(f"protobuf wire type {wire} is not used by HFile")
        fields.append((number, value))
    return fields


# -- Hadoop's variable-length integers (WritableUtils.writeVLong) -------------------------------

def _vlong(value: int) -> bytes:
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    length, rest = -112, value
    if rest < 0:
        rest, length = ~rest, -120
    size = (rest.bit_length() + 7) // 8
    return struct.pack(">b", length - size) + rest.to_bytes(size, "big")


def _read_vlong(data: bytes, pos: int) -> Tuple[int, int]:
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if not negative else (-127 - first)
    value = int.from_bytes(data[pos + 1:pos + 1 + size], "big")
    return (~value if negative else value), pos + 1 + size


# -- cells -------------------------------------------------------------------------------------

def cell_key(row: bytes) -> bytes:
    """The KeyValue key Hudi's writers give a row: no family, no qualifier, the latest time, Put."""
    return struct.pack(">h", len(row)) + row + b"\x00" + struct.pack(">qb", LATEST_TIMESTAMP, PUT)


def row_of(key: bytes) -> bytes:
    (length,) = struct.unpack_from(">h", key, 0)
    return key[2:2 + length]


def _encode_cell(row: bytes, value: bytes) -> bytes:
    key = cell_key(row)
    return struct.pack(">ii", len(key), len(value)) + key + value + b"\x00"


def _decode_cells(data: bytes, with_write_number: bool) -> Iterator[Tuple[bytes, bytes]]:
    pos = 0
    while pos < len(data):
        key_length, value_length = struct.unpack_from(">ii", data, pos)
        pos += 8
        key = data[pos:pos + key_length]
        pos += key_length
        value = data[pos:pos + value_length]
        pos += value_length
        if with_write_number:
            _, pos = _read_vlong(data, pos)
        yield row_of(key), value


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The byte ranges (`starts`, `lengths`) of `data` as one binary array, copied by numpy."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    picked = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data[picked].tobytes())])


def _be(array: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian signed integers of `width` bytes at offsets `at` of `array`."""
    value = np.zeros(len(at), dtype=np.int64)
    for i in range(width):
        value = (value << 8) | array[at + i]
    sign = np.int64(1) << (8 * width - 1)
    return np.where(value >= sign, value - (sign << 1), value)


def _cell_columns(payloads: List[bytes], with_write_number: bool) -> Tuple[pa.Array, pa.Array]:
    """The rows and values of the cells of data-block payloads: one pass over the cell headers in
    Python (a cell's place depends on the one before), the rest by numpy."""
    data = b"".join(payloads)
    heads = []
    pos, end = 0, len(data)
    unpack = struct.unpack_from
    while pos < end:
        heads.append(pos)
        key_length, value_length = unpack(">ii", data, pos)
        pos += 8 + key_length + value_length
        if with_write_number:  # a Hadoop vlong: one byte unless the number is large
            pos = pos + 1 if data[pos] < 0x80 or data[pos] >= 0x90 else _read_vlong(data, pos)[1]
    array = np.frombuffer(data, dtype=np.uint8)
    at = np.asarray(heads, dtype=np.int64)
    key_lengths, value_lengths, row_lengths = _be(array, at, 4), _be(array, at + 4, 4), _be(array, at + 8, 2)
    return _gather(array, at + 10, row_lengths), _gather(array, at + 8 + key_lengths, value_lengths)


# -- blocks ------------------------------------------------------------------------------------

def _compress(data: bytes, codec: int) -> bytes:
    if codec == NO_COMPRESSION:
        return data
    # wbits 31: a gzip stream, as Hadoop's GzipCodec. Level 1: a record_index compaction rewrites
    # millions of cells; level 6 took twice the time for a few percent fewer bytes.
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    return packer.compress(data) + packer.flush()


def _decompress(data: bytes, codec: int) -> bytes:
    if codec == NO_COMPRESSION:
        return data
    if codec == GZ:
        return zlib.decompress(data, 47)  # gzip or zlib header, whichever it has
    raise HFileError(f"HFile compression codec {codec} is not supported (NONE and GZ are)")


def _checksums(data: bytes) -> bytes:
    return b"".join(struct.pack(">I", zlib.crc32(data[i:i + BYTES_PER_CHECKSUM]))
                    for i in range(0, len(data), BYTES_PER_CHECKSUM))


def _block(magic: bytes, payload: bytes, codec: int, previous: int) -> bytes:
    data = _compress(payload, codec)
    with_header = HEADER.size + len(data)
    checksum_bytes = 4 * -(-with_header // BYTES_PER_CHECKSUM)
    header = HEADER.pack(magic, len(data) + checksum_bytes, len(payload), previous, CHECKSUM_CRC32,
                         BYTES_PER_CHECKSUM, with_header)
    return header + data + _checksums(header + data)


@dataclass
class BlockHeader:
    magic: bytes
    on_disk_size_without_header: int
    uncompressed_size: int
    data_size_with_header: int

    @property
    def on_disk_size(self) -> int:
        return HEADER.size + self.on_disk_size_without_header


def _header(data: bytes, pos: int = 0) -> BlockHeader:
    if len(data) - pos < HEADER.size:
        raise HFileError("an HFile block header is cut short")
    magic, on_disk, uncompressed, _, _, _, with_header = HEADER.unpack_from(data, pos)
    return BlockHeader(magic, on_disk, uncompressed, with_header)


def _payload(block: bytes, expected: bytes, codec: int) -> bytes:
    header = _header(block)
    if header.magic != expected:
        raise HFileError(f"expected an HFile {expected.decode()} block, found {header.magic!r}")
    return _decompress(block[HEADER.size:header.data_size_with_header], codec)


# -- writing -----------------------------------------------------------------------------------

def _root_index(entries: Sequence[Tuple[int, int, bytes]]) -> bytes:
    out = bytearray()
    for offset, size, key in entries:
        out += struct.pack(">qi", offset, size) + _vlong(len(key)) + key
    return bytes(out)


def write(cells: Iterable[Tuple[bytes, bytes]], file_info: Optional[Dict[bytes, bytes]] = None,
          block_size: int = DEFAULT_BLOCK_SIZE, codec: int = GZ) -> bytes:
    """An HFile of `cells` ((row key, value) pairs, in ascending byte order of the row keys, each
    row once) with `file_info` entries beside HBase's own."""
    pairs = list(cells)
    return write_columns(pa.array([row for row, _ in pairs], pa.binary()),
                         pa.array([value for _, value in pairs], pa.binary()), file_info, block_size, codec)


def _cell_heads(row_lengths: np.ndarray, value_lengths: np.ndarray) -> pa.Array:
    """Each cell's bytes before its row: key length, value length, row length."""
    heads = np.zeros(len(row_lengths), dtype=[("key", ">i4"), ("value", ">i4"), ("row", ">i2")])
    heads["key"] = row_lengths + CELL_KEY_OVERHEAD
    heads["value"] = value_lengths
    heads["row"] = row_lengths
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(heads.itemsize), len(heads),
                                                [None, pa.py_buffer(heads.tobytes())]).cast(pa.binary())


def _lengths(array: pa.Array) -> np.ndarray:
    return pc.binary_length(array).to_numpy(zero_copy_only=False).astype(np.int64)


def write_columns(rows: pa.Array, values: pa.Array, file_info: Optional[Dict[bytes, bytes]] = None,
                  block_size: int = DEFAULT_BLOCK_SIZE, codec: int = GZ) -> bytes:
    """`write` of columns: `rows` (binary or string, ascending bytewise, each once) and their
    `values`, with the cells built by Arrow kernels instead of one Python call per cell."""
    rows, values = rows.cast(pa.binary()), values.cast(pa.binary())
    count = len(rows)
    if count > 1:
        ascending = pc.less(rows[:-1], rows[1:])
        if not pc.all(ascending).as_py():
            at = pc.index(ascending, False).as_py() + 1
            raise HFileError(f"HFile rows must ascend without repeats: {rows[at].as_py()!r} after {rows[at - 1].as_py()!r}")
    row_lengths, value_lengths = _lengths(rows), _lengths(values)
    if count:
        key_tail = pa.array([b"\x00" + struct.pack(">qb", LATEST_TIMESTAMP, PUT)] * count, pa.binary())
        write_number = pa.array([b"\x00"] * count, pa.binary())
        cells = pc.binary_join_element_wise(_cell_heads(row_lengths, value_lengths), rows, key_tail, values,
                                            write_number, b"")
        offsets = np.frombuffer(cells.buffers()[1], dtype=np.int32)[cells.offset:cells.offset + count + 1]
        data = cells.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
        ends = (offsets[1:] - offsets[0]).astype(np.int64)
    else:
        data, ends = b"", np.zeros(0, np.int64)

    out = bytearray()
    index: List[Tuple[int, int, bytes]] = []
    previous = {DATA_BLOCK: -1, ROOT_INDEX: -1}
    uncompressed_total = 0
    first = 0  # each block ends at the first cell that brings it to `block_size` bytes, as HBase's writer
    while first < count:
        start = int(ends[first - 1]) if first else 0
        last = min(int(np.searchsorted(ends, start + block_size, side="left")), count - 1)
        payload = data[start:int(ends[last])]
        block = _block(DATA_BLOCK, payload, codec, previous[DATA_BLOCK])
        previous[DATA_BLOCK] = len(out)
        index.append((len(out), len(block), cell_key(rows[first].as_py())))
        uncompressed_total += HEADER.size + len(payload)
        out.extend(block)
        first = last + 1
    last_data_block = index[-1][0] if index else 0

    load_on_open = len(out)
    data_index = _root_index(index)
    for magic, payload in ((ROOT_INDEX, data_index), (ROOT_INDEX, b"")):
        block = _block(magic, payload, codec, previous[magic])
        previous[magic] = len(out)
        uncompressed_total += HEADER.size + len(payload)
        out.extend(block)
    key_bytes, value_bytes = int(row_lengths.sum()) + CELL_KEY_OVERHEAD * count, int(value_lengths.sum())
    info = {
        b"KEY_VALUE_VERSION": struct.pack(">i", 1),
        b"MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0),
        b"hfile.AVG_KEY_LEN": struct.pack(">i", key_bytes // count if count else 0),
        b"hfile.AVG_VALUE_LEN": struct.pack(">i", value_bytes // count if count else 0),
        b"hfile.CREATE_TIME_TS": struct.pack(">q", 0),
    }
    if count:
        info[b"hfile.LASTKEY"] = cell_key(rows[count - 1].as_py())
    info.update(file_info or {})
    message = b"".join(_proto([(1, _proto([(1, key), (2, value)]))]) for key, value in sorted(info.items()))
    file_info_payload = PBUF_MAGIC + _varint(len(message)) + message
    file_info_offset = len(out)
    uncompressed_total += HEADER.size + len(file_info_payload)
    out.extend(_block(FILE_INFO, file_info_payload, codec, -1))

    trailer = _proto([
        (1, file_info_offset), (2, load_on_open), (3, len(data_index)), (4, uncompressed_total),
        (5, len(index)), (6, 0), (7, count), (8, 1), (9, 0), (10, last_data_block),
        (11, COMPARATOR.encode()), (12, codec)])
    body = TRAILER_MAGIC + _varint(len(trailer)) + trailer
    out += body + bytes(TRAILER_SIZE - 4 - len(body)) + struct.pack(">i", MAJOR_VERSION | MINOR_VERSION << 24)
    return bytes(out)


# -- reading -----------------------------------------------------------------------------------

@dataclass
class Trailer:
    file_info_offset: int
    load_on_open_offset: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    index_levels: int
    codec: int
    comparator: str


def _trailer(data: bytes) -> Trailer:
    (version,) = struct.unpack_from(">i", data, len(data) - 4)
    if version & 0xFFFFFF != MAJOR_VERSION:
        raise HFileError(f"HFile major version {version & 0xFFFFFF} is not supported (3 is)")
    if not data.startswith(TRAILER_MAGIC):
        raise HFileError("the HFile trailer's magic is missing")
    length, pos = _read_varint(data, len(TRAILER_MAGIC))
    fields = dict(_proto_fields(data[pos:pos + length]))
    return Trailer(fields.get(1, 0), fields.get(2, 0), fields.get(5, 0), fields.get(6, 0), fields.get(7, 0),
                   fields.get(8, 1), fields.get(12, NO_COMPRESSION), fields.get(11, b"").decode())


@dataclass
class _IndexEntry:
    offset: int
    size: int
    first_row: bytes


def _read_root_index(payload: bytes, count: int) -> List[_IndexEntry]:
    entries, pos = [], 0
    for _ in range(count):
        offset, size = struct.unpack_from(">qi", payload, pos)
        length, pos = _read_vlong(payload, pos + 12)
        entries.append(_IndexEntry(offset, size, row_of(payload[pos:pos + length])))
        pos += length
    return entries


@dataclass
class HFileReader:
    """An HFile read through `read(offset, length)`: the trailer and the load-on-open section on
    opening, then only the data blocks a scan or a lookup needs."""
    read: Callable[[int, int], bytes]
    size: int
    trailer: Trailer = field(init=False)
    file_info: Dict[bytes, bytes] = field(init=False)
    _index: List[_IndexEntry] = field(init=False)

    @classmethod
    def of_bytes(cls, data: bytes) -> "HFileReader":
        return cls(lambda offset, length: data[offset:offset + length], len(data))

    def __post_init__(self) -> None:
        if self.size < TRAILER_SIZE:
            raise HFileError(f"an HFile of {self.size} bytes is shorter than its trailer")
        self.trailer = _trailer(self.read(self.size - TRAILER_SIZE, TRAILER_SIZE))
        if self.trailer.index_levels != 1:
            raise HFileError(f"an HFile data index of {self.trailer.index_levels} levels is not supported (1 is)")
        section = self.read(self.trailer.load_on_open_offset, self.size - TRAILER_SIZE - self.trailer.load_on_open_offset)
        root = _header(section)
        self._index = _read_root_index(_payload(section[:root.on_disk_size], ROOT_INDEX, self.trailer.codec),
                                       self.trailer.data_index_count)
        info_at = self.trailer.file_info_offset - self.trailer.load_on_open_offset
        info_block = section[info_at:info_at + _header(section, info_at).on_disk_size]
        payload = _payload(info_block, FILE_INFO, self.trailer.codec)
        if not payload.startswith(PBUF_MAGIC):
            raise HFileError("the HFile file info is not in protobuf form")
        length, pos = _read_varint(payload, len(PBUF_MAGIC))
        self.file_info = {}
        for number, entry in _proto_fields(payload[pos:pos + length]):
            pair = dict(_proto_fields(entry))
            self.file_info[pair.get(1, b"")] = pair.get(2, b"")
        self._write_numbers = struct.unpack(">i", self.file_info.get(b"KEY_VALUE_VERSION", b"\x00\x00\x00\x00"))[0] == 1

    def __len__(self) -> int:
        return self.trailer.entry_count

    def _cells(self, entry: _IndexEntry) -> Iterator[Tuple[bytes, bytes]]:
        payload = _payload(self.read(entry.offset, entry.size), DATA_BLOCK, self.trailer.codec)
        return _decode_cells(payload, self._write_numbers)

    def scan(self) -> Iterator[Tuple[bytes, bytes]]:
        """Every cell, in row order."""
        for entry in self._index:
            yield from self._cells(entry)

    def columns(self) -> Tuple[pa.Array, pa.Array]:
        """Every cell as two binary columns (rows, values), in row order."""
        payloads = [_payload(self.read(entry.offset, entry.size), DATA_BLOCK, self.trailer.codec) for entry in self._index]
        return _cell_columns(payloads, self._write_numbers)

    def get(self, rows: Iterable[bytes]) -> Dict[bytes, bytes]:
        """The value of each of `rows` the file holds, reading each data block that may hold one once."""
        firsts = [entry.first_row for entry in self._index]
        wanted: Dict[int, set] = {}
        for row in rows:
            at = bisect.bisect_right(firsts, row) - 1
            if at >= 0:
                wanted.setdefault(at, set()).add(row)
        found = {}
        for at, block_rows in sorted(wanted.items()):
            for row, value in self._cells(self._index[at]):
                if row in block_rows:
                    found[row] = value
        return found
