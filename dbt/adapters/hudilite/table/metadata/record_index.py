"""The metadata table's `record_index` partition (RFC-8): every record key of the data table's
latest snapshot and the file group holding it, in N file groups `record-index-%04d-0`. A key's
group is Hudi's: Java's `String.hashCode` of the key, sign dropped, modulo N. Each group is an
HFile base plus one log file per data instant that inserted, moved or deleted keys of it: an
HFile data block of the keys at their new file group, a delete block of the keys deleted.

A commit's entries can be many (a bulk insert's every key), so the executors write these files,
one task per group with entries (`write_task`), at names the driver chose beforehand
(`RecordIndexFiles`); the metadata table's deltacommit then lists them (`writer`). Updates in
place write nothing: the key's file group stays.
"""

from __future__ import annotations

import math
import posixpath
import secrets
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format import hfile, log_format, metadata_record
from ..format.file_group import hfile_name, log_file_name
from ..storage.filesystem import Storage
from ..storage.layout import METADATA_TABLE_DIR, TMP_DIR, marker_path
from .reader import DELETE_BLOCK, HFILE_DATA_BLOCK, RECORD_INDEX, FileSlice, MetadataTableReader, Validity, delete_block_content

FOLDER = posixpath.join(METADATA_TABLE_DIR, RECORD_INDEX)
# Hudi's estimate of the file-group count (hoodie.metadata.record.index.*): 10 below ~111M keys.
MIN_FILE_GROUPS, MAX_FILE_GROUPS = 10, 10000
FILE_GROUP_BYTES, GROWTH_FACTOR, AVERAGE_RECORD_BYTES = 1 << 30, 2.0, 48
INIT_OFFSET = 11  # a bootstrap's deltacommit is `<data instant>011`, after `files`' `010`
ENTRY_DDL = "key string, file_id string, deleted boolean"
RESULT = pa.schema([("path", pa.string()), ("size", pa.int64()), ("entries", pa.int64())])
ENTRIES = pa.schema([("key", pa.string()), ("file_id", pa.string()), ("deleted", pa.bool_())])
ENTRIES_PER_BATCH = 500_000


def file_group_count(records: int) -> int:
    expected = math.ceil(records * GROWTH_FACTOR)
    estimate = expected // (FILE_GROUP_BYTES // AVERAGE_RECORD_BYTES)
    return max(MIN_FILE_GROUPS, min(MAX_FILE_GROUPS, estimate))


def file_group(shard: int) -> str:
    return f"record-index-{shard:04d}-0"


def shard_of_group(group: str) -> Optional[int]:
    prefix, _, rest = group.partition("record-index-")
    try:
        return int(rest.split("-")[0]) if not prefix and rest else None
    except ValueError:
        return None


def write_token(shard: int) -> str:
    """A log file's write token: random per write, so that two writers that chose the same log
    version of a group (each listed before the other wrote) make two files, not one."""
    return f"{shard}-{secrets.randbelow(1 << 31)}-0"


@dataclass(frozen=True)
class RecordIndexFiles:
    """The files one data instant's tasks write: by shard, a path relative to the table
    (`paths`), and where each file group of the entries is (`locations`: fileId to its data
    partition and the instant its records carry). `bootstrap`: base files, else log files."""
    base_path: str
    instant: str
    paths: Tuple[str, ...]
    locations: Dict[str, Tuple[str, str]]
    bootstrap: bool = False

    @property
    def num_shards(self) -> int:
        return len(self.paths)


def shard_content(files: RecordIndexFiles, entries: pa.Table) -> bytes:
    """A shard's file of `entries` (key, file_id, deleted; keys unique): a base HFile of the
    live ones, or a log file of an HFile data block and a delete block."""
    live = entries.filter(pc.invert(entries.column("deleted")))
    live = live.take(pc.sort_indices(live.column("key")))  # Arrow orders strings by their UTF-8 bytes
    file_ids = live.column("file_id").combine_chunks()
    at = pc.index_in(file_ids, value_set=pa.array(list(files.locations), pa.string()))
    partitions = pa.array([loc[0] for loc in files.locations.values()], pa.string()).take(at)
    instants = pa.array([loc[1] for loc in files.locations.values()], pa.string()).take(at)
    if pc.any(pc.is_null(partitions)).as_py():
        unknown = file_ids.filter(pc.is_null(partitions))[0].as_py()
        raise ValueError(f"record index: file group {unknown} of instant {files.instant} has no known partition")
    data = hfile.write_columns(live.column("key").combine_chunks(),
                               metadata_record.record_index_values(partitions, file_ids, instants),
                               {b"schema": metadata_record.SCHEMA_JSON.encode()})
    if files.bootstrap:
        return data
    header = {log_format.INSTANT_TIME: files.instant, log_format.SCHEMA: metadata_record.SCHEMA_JSON}
    blocks = [log_format.LogBlock(HFILE_DATA_BLOCK, header, data)] if live.num_rows else []
    deleted = entries.filter(entries.column("deleted")).column("key").to_pylist()
    if deleted:
        blocks.append(log_format.LogBlock(DELETE_BLOCK, header,
                                          delete_block_content((key, RECORD_INDEX) for key in sorted(deleted))))
    return b"".join(log_format.encode_block(block) for block in blocks)


def write_shards(files: RecordIndexFiles, entries: pa.Table, storage: Optional[Storage] = None) -> List[dict]:
    """Write each shard's file of `entries` (key, file_id, deleted; any shards, any order):
    (path, size, entries) of each. A log file is a file of the instant: its marker first, so
    that a rollback of the instant removes it."""
    storage = storage or Storage(files.base_path)
    if not entries.num_rows:
        return []
    keys = entries.column("key").combine_chunks()
    shards = metadata_record.shards_of(keys, files.num_shards)
    out = []
    for shard in np.unique(shards).tolist():
        part = entries.filter(pa.array(shards == shard))
        path = files.paths[shard]
        data = shard_content(files, part)
        if not files.bootstrap:
            storage.write_bytes(marker_path(files.instant, path), b"")
        # Whole or not at all: a task attempt killed while its twin wrote the same name must not
        # leave it cut short.
        storage.write_atomic(path, data, TMP_DIR)
        out.append({"path": path, "size": len(data), "entries": part.num_rows})
    return out


def write_task(files: RecordIndexFiles, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the entries of whole shards (the rows of a Spark partition by `shard`)."""
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if tables:
        entries = pa.concat_tables(tables).select(["key", "file_id", "deleted"])
        for written in write_shards(files, entries):
            yield pa.RecordBatch.from_pylist([written], schema=RESULT)


def with_shard(num_shards: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: entries with their record_index shard appended (Spark has no Java hash)."""
    for batch in batches:
        shards = metadata_record.shards_of(batch.column(0), num_shards) if batch.num_rows else np.zeros(0, np.int64)
        yield pa.RecordBatch.from_arrays(batch.columns + [pa.array(shards, pa.int32())],
                                         names=batch.schema.names + ["shard"])


def log_paths(instant: str, slices: Dict[str, Tuple[str, int]], num_shards: int, own_log: bool = False) -> Tuple[str, ...]:
    """Each shard's next log file of `instant`: `slices` gives a group's base instant and its
    newest log version. `own_log` (timeline layout 2): a log named after `instant` itself."""
    paths = []
    for shard in range(num_shards):
        base_instant, version = (instant, 0) if own_log else slices[file_group(shard)]
        paths.append(posixpath.join(FOLDER, log_file_name(file_group(shard), base_instant, version + 1,
                                                          write_token(shard))))
    return tuple(paths)


def base_paths(instant: str, num_shards: int, token: str) -> Tuple[str, ...]:
    return tuple(posixpath.join(FOLDER, hfile_name(file_group(shard), token, instant)) for shard in range(num_shards))


def entries_task(base_path: str, valid: Validity, slices: List[FileSlice],
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: every live entry (key, file_id, deleted false) of the record_index file
    groups `slices[i]` for each i the rows name (`id`), as the driver judged the instants."""
    reader = MetadataTableReader(Storage(base_path), valid)
    for batch in batches:
        for i in batch.column(0).to_pylist():
            rows, values = reader.folded_cells(RECORD_INDEX, slices[i])
            _, file_ids = metadata_record.locations_of(values)
            entries = pa.table({"key": rows.cast(pa.string()), "file_id": file_ids,
                                "deleted": pa.array(np.zeros(len(rows), dtype=bool))}, schema=ENTRIES)
            yield from entries.to_batches(max_chunksize=ENTRIES_PER_BATCH)
