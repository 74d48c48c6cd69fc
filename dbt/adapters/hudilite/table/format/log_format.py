"""Hudi's log file format (HoodieLogFormat, log format version 1), as far as the archived
timeline uses it: a file is a sequence of blocks, each

    "#HUDI#"                      magic
    int64   block size            everything after this field up to the block's end
    int32   log format version    1
    int32   block type            ordinal: 0 command, 1 delete, 2 corrupt, 3 Avro data, ...
    header                        int32 count, then per entry: int32 key ordinal, int32 length, bytes (UTF-8)
    int64   content length
    bytes   content
    footer                        as the header (Hudi writes none: count 0)
    int64   total block length    the bytes before this field, magic included: the reverse pointer,
                                  and the check that the block is whole (block size + 6)

all integers big-endian (Java's DataOutputStream). Header keys are ordinals too: 0 instant
time, 1 target instant time, 2 schema, 3 command block type, ... An Avro data block's content is

    int32   data block version    (Hudi 0.15 and 1.x write 3; every version has the record count)
    int32   record count
    per record: int32 length, the record in Avro binary encoding with the header's schema

A block cut short at the end of a file (a writer that died mid-append) is skipped, as Hudi's
reader takes it for a corrupt block; anything else malformed is an error.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional

import fastavro

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
AVRO_DATA_BLOCK = 3  # HoodieLogBlockType.AVRO_DATA_BLOCK
AVRO_DATA_BLOCK_VERSION = 3  # HoodieLogBlock.version
# HeaderMetadataType ordinals
INSTANT_TIME = 0
TARGET_INSTANT_TIME = 1
SCHEMA = 2
COMMAND_BLOCK_TYPE = 3


class LogFormatError(ValueError):
    """Bytes that are not a Hudi log file."""


@dataclass
class LogBlock:
    block_type: int
    header: Dict[int, str] = field(default_factory=dict)
    content: bytes = b""
    footer: Dict[int, str] = field(default_factory=dict)
    version: int = LOG_FORMAT_VERSION


def _metadata_bytes(entries: Dict[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        data = value.encode("utf-8")
        out.append(struct.pack(">ii", key, len(data)))
        out.append(data)
    return b"".join(out)


def encode_block(block: LogBlock) -> bytes:
    header = _metadata_bytes(block.header)
    footer = _metadata_bytes(block.footer)
    # version, type, header, content length, content, footer, total length
    size = 4 + 4 + len(header) + 8 + len(block.content) + len(footer) + 8
    body = b"".join([struct.pack(">qii", size, block.version, block.block_type), header,
                     struct.pack(">q", len(block.content)), block.content, footer])
    return MAGIC + body + struct.pack(">q", len(MAGIC) + len(body))


class _Cursor:
    def __init__(self, data: bytes, start: int, end: int):
        self.data, self.pos, self.end = data, start, end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise EOFError
        chunk = self.data[self.pos: self.pos + n]
        self.pos += n
        return chunk

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def metadata(self) -> Dict[int, str]:
        count = self.int32()
        if count < 0:
            raise LogFormatError(f"negative metadata count {count}")
        out = {}
        for _ in range(count):
            key = self.int32()
            out[key] = self.take(self.int32()).decode("utf-8")
        return out


def decode_blocks(data: bytes) -> Iterator[LogBlock]:
    """The whole blocks of a log file, in order."""
    pos = 0
    while pos < len(data):
        if data[pos: pos + len(MAGIC)] != MAGIC:
            if len(data) - pos < len(MAGIC) and MAGIC.startswith(data[pos:]):
                return  # a magic cut short
            raise LogFormatError(f"no block starts at byte {pos} (expected {MAGIC!r})")
        start = pos
        if len(data) - pos < len(MAGIC) + 8:
            return  # the last block was cut short in its size
        try:
            cursor = _Cursor(data, pos + len(MAGIC), len(data))
            size = cursor.int64()
            if size < 0 or cursor.pos + size > len(data):
                return  # the last block was cut short
            cursor.end = cursor.pos + size
            version, block_type = cursor.int32(), cursor.int32()
            if version != LOG_FORMAT_VERSION:
                raise LogFormatError(f"block at byte {start}: log format version {version}, expected "
                                     f"{LOG_FORMAT_VERSION}")
            header = cursor.metadata()
            content = cursor.take(cursor.int64())
            footer = cursor.metadata()
            before_total = cursor.pos - start
            total = cursor.int64()
        except EOFError:
            raise LogFormatError(f"block at byte {start} ends before its fields do") from None
        if cursor.pos != cursor.end or total != before_total:
            raise LogFormatError(f"block at byte {start}: its lengths disagree ({size}, {total})")
        yield LogBlock(block_type, header, content, footer, version)
        pos = cursor.end


# ---- Avro data blocks -----------------------------------------------------------------------
_SCHEMAS: Dict[str, dict] = {}


def _parsed(schema_json: str) -> dict:
    parsed = _SCHEMAS.get(schema_json)
    if parsed is None:
        if len(_SCHEMAS) > 64:
            _SCHEMAS.clear()
        parsed = _SCHEMAS[schema_json] = fastavro.parse_schema(json.loads(schema_json))
    return parsed


def avro_data_block(schema: dict, records: List[dict], header: Optional[Dict[int, str]] = None) -> LogBlock:
    """An Avro data block of `records`, the schema in its header as Hudi puts it."""
    schema_json = json.dumps(schema, separators=(",", ":"))
    parsed = _parsed(schema_json)
    out = [struct.pack(">ii", AVRO_DATA_BLOCK_VERSION, len(records))]
    for record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        out.append(struct.pack(">i", buf.tell()))
        out.append(buf.getvalue())
    return LogBlock(AVRO_DATA_BLOCK, {**(header or {}), SCHEMA: schema_json}, b"".join(out))


def avro_records(block: LogBlock) -> List[dict]:
    """The records of an Avro data block, read with the writer's schema from its header."""
    if block.block_type != AVRO_DATA_BLOCK:
        raise LogFormatError(f"block type {block.block_type} is not an Avro data block")
    if SCHEMA not in block.header:
        raise LogFormatError("Avro data block without a schema in its header")
    schema = _parsed(block.header[SCHEMA])
    cursor = _Cursor(block.content, 0, len(block.content))
    try:
        cursor.int32()  # the data block version: every one has the record count
        count = cursor.int32()
        records = []
        for _ in range(count):
            length = cursor.int32()
            records.append(fastavro.schemaless_reader(io.BytesIO(cursor.take(length)), schema, None))
    except EOFError:
        raise LogFormatError("Avro data block ends before its records do") from None
    return records


def encode_log(blocks: List[LogBlock]) -> bytes:
    return b"".join(encode_block(b) for b in blocks)
