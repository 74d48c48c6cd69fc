"""The records of Hudi's metadata table (`HoodieMetadataRecord`, RFC-15 and RFC-8), as its
`files` and `record_index` partitions hold them, and how a newer record of a key folds over an
older one (`HoodieMetadataPayload`'s merge).

Each record is the value of an HFile cell whose row is the record's key (the record's own
`key` field is left empty, as Hudi's writer leaves it to save room):
- `files`: one record of type PARTITION_LIST keyed `__all_partitions__` (a map of partition
  path to nothing), and one record of type FILE_LIST per partition, keyed by its path (`.` for a
  non-partitioned table): a map of file name to (size, isDeleted). A newer record adds its files
  to the older one's and removes those it marks deleted.
- `record_index`: one record of type RECORD_INDEX per record key: the partition path and the
  fileId (a `<uuid>-<n>` fileId as two longs and an int, any other as text), and the instant
  that wrote it as epoch milliseconds. A newer record replaces an older one; a delete is the
  key in a delete block.

The schema is Hudi 0.15's, five (null) meta columns first as its writer puts them; Hudi 1.x's
has more fields after these, with defaults, so either reads the other's records.
"""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Dict, Iterable, Optional, Tuple

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PARTITION_LIST = 1
FILE_LIST = 2
COLUMN_STATS = 3
BLOOM_FILTER = 4
RECORD_INDEX = 5
ALL_PARTITIONS = "__all_partitions__"
NON_PARTITIONED = "."  # the files partition's key for a table without partitions
UUID_FILE_ID = 0
RAW_FILE_ID = 1

_NS = "org.apache.hudi.avro.model"
_STRING = {"type": "string", "avro.java.string": "String"}


def _record(name: str, fields: list) -> dict:
    return {"type": "record", "name": name, "namespace": _NS, "fields": fields}


def _optional(name: str, avro_type, **extra) -> dict:
    return {"name": name, "type": ["null", avro_type], "default": None, **extra}


def _wrapper(name: str, value_type) -> dict:
    return _record(name, [{"name": "value", "type": value_type}])


_WRAPPERS = [
    _wrapper("BooleanWrapper", "boolean"), _wrapper("IntWrapper", "int"), _wrapper("LongWrapper", "long"),
    _wrapper("FloatWrapper", "float"), _wrapper("DoubleWrapper", "double"), _wrapper("BytesWrapper", "bytes"),
    _wrapper("StringWrapper", _STRING), _wrapper("DateWrapper", "int"),
    _wrapper("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    _wrapper("TimestampMicrosWrapper", "long"),
]
SCHEMA = _record("HoodieMetadataRecord", [
    *[_optional(name, "string", doc="") for name in (
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name")],
    {"name": "key", "type": _STRING},
    {"name": "type", "type": "int"},
    {"name": "filesystemMetadata", "type": ["null", {
        "type": "map", "avro.java.string": "String",
        "values": _record("HoodieMetadataFileInfo", [{"name": "size", "type": "long"},
                                                     {"name": "isDeleted", "type": "boolean"}])}]},
    _optional("BloomFilterMetadata", _record("HoodieMetadataBloomFilter", [
        {"name": "type", "type": _STRING}, {"name": "timestamp", "type": _STRING},
        {"name": "bloomFilter", "type": "bytes"}, {"name": "isDeleted", "type": "boolean"}])),
    _optional("ColumnStatsMetadata", _record("HoodieMetadataColumnStats", [
        _optional("fileName", _STRING), _optional("columnName", _STRING),
        {"name": "minValue", "type": ["null", *_WRAPPERS], "default": None},
        {"name": "maxValue", "type": ["null", *[f"{_NS}.{w['name']}" for w in _WRAPPERS]], "default": None},
        _optional("valueCount", "long"), _optional("nullCount", "long"), _optional("totalSize", "long"),
        _optional("totalUncompressedSize", "long"), {"name": "isDeleted", "type": "boolean"}])),
    _optional("recordIndexMetadata", _record("HoodieRecordIndexInfo", [
        _optional("partitionName", _STRING), _optional("fileIdHighBits", "long"),
        _optional("fileIdLowBits", "long"), _optional("fileIndex", "int"), _optional("fileId", _STRING),
        _optional("instantTime", "long"), {"name": "fileIdEncoding", "type": "int", "default": 0}])),
])
SCHEMA_JSON = json.dumps(SCHEMA, separators=(",", ":"))
_PARSED = fastavro.parse_schema(SCHEMA)
_BY_SCHEMA: Dict[str, dict] = {}


def encode(record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _PARSED, record)
    return out.getvalue()


def decode(value: bytes, writer_schema_json: Optional[str] = None) -> dict:
    """A record written with `writer_schema_json` (an HFile's or a log block's), or with ours."""
    schema = _PARSED
    if writer_schema_json is not None:
        schema = _BY_SCHEMA.get(writer_schema_json)
        if schema is None:
            schema = _BY_SCHEMA[writer_schema_json] = fastavro.parse_schema(json.loads(writer_schema_json))
    return fastavro.schemaless_reader(io.BytesIO(value), schema, None)


def _blank(kind: int) -> dict:
    return {"_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
            "_hoodie_partition_path": None, "_hoodie_file_name": None, "key": "", "type": kind,
            "filesystemMetadata": None, "BloomFilterMetadata": None, "ColumnStatsMetadata": None,
            "recordIndexMetadata": None}


def partition_key(partition_path: str) -> str:
    return partition_path or NON_PARTITIONED


def partition_of_key(key: str) -> str:
    return "" if key == NON_PARTITIONED else key


def partition_list(added: Iterable[str] = (), deleted: Iterable[str] = ()) -> dict:
    record = _blank(PARTITION_LIST)
    listed = {partition_key(p): {"size": 0, "isDeleted": False} for p in added}
    listed.update({partition_key(p): {"size": 0, "isDeleted": True} for p in deleted})
    record["filesystemMetadata"] = listed
    return record


def file_list(added: Dict[str, int], deleted: Iterable[str] = ()) -> dict:
    """A partition's files record: `added` file names with their sizes, `deleted` names."""
    record = _blank(FILE_LIST)
    files = {name: {"size": size, "isDeleted": False} for name, size in added.items()}
    files.update({name: {"size": 0, "isDeleted": True} for name in deleted})
    record["filesystemMetadata"] = files
    return record


def fold_files(older: Optional[dict], newer: dict) -> dict:
    """A files record folded over an older one of its key: deletions remove, additions add
    (a file listed twice keeps the larger size, as a log file only grows)."""
    if older is None:
        merged = {}
    else:
        merged = {name: info for name, info in (older["filesystemMetadata"] or {}).items() if not info["isDeleted"]}
    for name, info in (newer["filesystemMetadata"] or {}).items():
        if info["isDeleted"]:
            merged.pop(name, None)
        elif name in merged:
            merged[name] = {"size": max(merged[name]["size"], info["size"]), "isDeleted": False}
        else:
            merged[name] = info
    folded = dict(newer)
    folded["filesystemMetadata"] = merged
    return folded


def listed(record: Optional[dict]) -> Dict[str, int]:
    """The live entries of a folded files record: file (or partition) name to size."""
    if record is None:
        return {}
    return {name: info["size"] for name, info in (record["filesystemMetadata"] or {}).items() if not info["isDeleted"]}


# -- record index ------------------------------------------------------------------------------

def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def instant_millis(instant: str) -> int:
    """The epoch milliseconds of an instant time (yyyyMMddHHmmss[SSS], read in UTC: a table of
    ours keeps its timeline in UTC)."""
    moment = datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    millis = int(instant[14:17]) if len(instant) >= 17 else 0
    return int(moment.timestamp()) * 1000 + millis


def location(partition_path: str, file_id: str, instant: str) -> dict:
    """The recordIndexMetadata of a key in `file_id` of `partition_path`, written at `instant`."""
    info = {"partitionName": partition_path, "fileIdHighBits": None, "fileIdLowBits": None, "fileIndex": None,
            "fileId": None, "instantTime": instant_millis(instant), "fileIdEncoding": RAW_FILE_ID}
    head, _, index = file_id.rpartition("-")
    try:
        parsed = uuid.UUID(head) if len(head) == 36 else None
        number = int(index)
    except ValueError:
        parsed = None
    if parsed is not None and str(parsed) == head and str(number) == index and 0 <= number < 1 << 31:
        info.update(fileIdHighBits=_signed(parsed.int >> 64), fileIdLowBits=_signed(parsed.int & ((1 << 64) - 1)),
                    fileIndex=number, fileId="", fileIdEncoding=UUID_FILE_ID)
    else:
        info["fileId"] = file_id
    return info


def record_index(partition_path: str, file_id: str, instant: str) -> dict:
    record = _blank(RECORD_INDEX)
    record["recordIndexMetadata"] = location(partition_path, file_id, instant)
    return record


@dataclass(frozen=True)
class Location:
    partition_path: str
    file_id: str


def location_of(record: dict) -> Location:
    info = record["recordIndexMetadata"]
    if info["fileIdEncoding"] == UUID_FILE_ID:
        bits = (info["fileIdHighBits"] & ((1 << 64) - 1)) << 64 | (info["fileIdLowBits"] & ((1 << 64) - 1))
        # Hudi's writer stores a file id that is a bare UUID with fileIndex -1 (no `-<n>` suffix)
        file_id = str(uuid.UUID(int=bits)) if info["fileIndex"] == -1 else f"{uuid.UUID(int=bits)}-{info['fileIndex']}"
    else:
        file_id = info["fileId"]
    return Location(info["partitionName"] or "", file_id)


def locations_of(values: pa.Array) -> Tuple[pa.Array, pa.Array]:
    """(partition paths, file ids) of encoded `record_index` values in our schema, vectorized:
    each distinct value decoded once (a file group's keys share one)."""
    distinct = values.dictionary_encode()
    where = [location_of(decode(v)) for v in distinct.dictionary.to_pylist()]
    return (pa.array([w.partition_path for w in where], pa.string()).take(distinct.indices),
            pa.array([w.file_id for w in where], pa.string()).take(distinct.indices))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode of `text` (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_of(record_key: str, shards: int) -> int:
    """The record_index file group of a key, as Hudi maps it (the key's hash code, sign dropped,
    modulo the number of file groups)."""
    return abs(java_string_hash(record_key)) % shards


def shards_of(keys: pa.Array, shards: int) -> np.ndarray:
    """`shard_of` for each of `keys` (a string array without nulls), vectorized: keys of one
    length at a time, Horner's rule over their bytes as columns (Java hashes UTF-16 units, which
    are the bytes of an ASCII key); other keys one by one."""
    if pa.types.is_string(keys.type):
        keys = keys.cast(pa.large_string())
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64)[keys.offset:keys.offset + len(keys) + 1]
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8) if keys.buffers()[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    hashes = np.zeros(len(keys), dtype=np.uint64)
    ascii_ = np.ones(len(keys), dtype=bool)
    mask = np.uint64(0xFFFFFFFF)
    for length in np.unique(lengths):
        which = np.nonzero(lengths == length)[0]
        if length == 0:
            continue
        columns = data[starts[which][:, None] + np.arange(length)]
        ascii_[which] = (columns < 128).all(axis=1)
        h = np.zeros(len(which), dtype=np.uint64)
        for column in columns.T:
            h = (h * np.uint64(31) + column) & mask
        hashes[which] = h
    signed = hashes.astype(np.int64)
    signed = np.where(signed >= 1 << 31, signed - (1 << 32), signed)
    out = np.abs(signed) % shards
    for i in np.nonzero(~ascii_)[0]:
        out[i] = shard_of(keys[int(i)].as_py(), shards)
    return out


def record_index_values(partitions: pa.Array, file_ids: pa.Array, instants: pa.Array) -> pa.Array:
    """The encoded `record_index` records of rows at (partition, file_id, instant), vectorized:
    a record holds no key (the cell's row is the key), so rows of one location share one value,
    encoded once."""
    triples = pc.binary_join_element_wise(partitions.cast(pa.string()), file_ids.cast(pa.string()),
                                          instants.cast(pa.string()), "\x00").dictionary_encode()
    encoded = [encode(record_index(*triple.split("\x00"))) for triple in triples.dictionary.to_pylist()]
    return pa.array(encoded, pa.binary()).take(triples.indices)
