"""Reading Hudi's metadata table (`.hoodie/metadata`): a Merge-On-Read table of its own whose
partitions (`files`, `record_index`, ...) hold file groups of an HFile base and log files of HFile
data blocks, delete blocks and rollback command blocks.

What a reader takes, as Hudi's reader does:
- instants completed on the metadata table's timeline (or archived there: older than its
  active timeline) that are *valid*: the data table has completed the same instant (a
  deltacommit of a data write still in flight, or rolled back, is skipped), or it is older than
  the data table's active timeline (archived there, or the bootstrap's `00000000000000010`), or
  it is the metadata table's own (a compaction's `<T>001`);
- per file group, the latest base whose instant is valid, and the log files that follow it
  (named after that base's instant, or after a newer, still pending compaction), in version
  order; in them, the blocks of valid instants not rolled back by a command block;
- per key, the records folded oldest to newest (`metadata_record`), a delete dropping the key.
"""

from __future__ import annotations

import io
import posixpath
import struct
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Set, Tuple

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format import hfile, log_format, metadata_record
from ..format.file_group import parse_log_file_name, parse_hfile_name
from ..storage.filesystem import Storage
from ..storage.layout import METADATA_TABLE_DIR
from .timeline import MetadataTimeline, archived_completions

FILES = "files"
RECORD_INDEX = "record_index"
HFILE_DATA_BLOCK = 4
DELETE_BLOCK = 1
COMMAND_BLOCK = 0
ROLLBACK_COMMAND = 0  # HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK
DATA_INSTANT_DIGITS = 17  # a data instant's time; the metadata table's own add digits (`<T>001`)

# The content of a delete block (version 3): int32 version, int32 length, then the keys as one
# HoodieDeleteRecordList in Avro binary (its ordering values are not needed to drop a key).
_ORDERING_WRAPPERS = [
    ("BooleanWrapper", "boolean"), ("IntWrapper", "int"), ("LongWrapper", "long"), ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"), ("BytesWrapper", "bytes"), ("StringWrapper", "string"), ("DateWrapper", "int"),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}), ("TimestampMicrosWrapper", "long")]
DELETE_RECORD_LIST = {
    "type": "record", "name": "HoodieDeleteRecordList", "namespace": "org.apache.hudi.avro.model",
    "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": {
        "type": "record", "name": "HoodieDeleteRecord", "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "type": ["null", *[
                {"type": "record", "name": name, "fields": [{"name": "value", "type": value}]}
                for name, value in _ORDERING_WRAPPERS]], "default": None}]}}}]}
_DELETES = fastavro.parse_schema(DELETE_RECORD_LIST)
DELETE_BLOCK_VERSION = 3


def delete_block_content(keys: Iterable[Tuple[str, str]]) -> bytes:
    """A delete block's content for (record key, partition path) pairs. The ordering value is
    the int 0 Hudi's writer puts there (Hudi 0.15's reader fails on a null one)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _DELETES, {"deleteRecordList": [
        {"recordKey": key, "partitionPath": partition, "orderingVal": ("org.apache.hudi.avro.model.IntWrapper", {"value": 0})}
        for key, partition in keys]})
    body = out.getvalue()
    return struct.pack(">ii", DELETE_BLOCK_VERSION, len(body)) + body


def deleted_keys(content: bytes) -> List[str]:
    version, length = struct.unpack_from(">ii", content, 0)
    if version != DELETE_BLOCK_VERSION:
        raise log_format.LogFormatError(f"delete block version {version} is not read (3 is)")
    records = fastavro.schemaless_reader(io.BytesIO(content[8:8 + length]), _DELETES, None)
    return [r["recordKey"] for r in records["deleteRecordList"]]


@dataclass
class FileSlice:
    file_group: str
    base: Optional[str]  # file name
    base_instant: Optional[str]
    logs: List[str] = field(default_factory=list)  # file names, oldest first


def latest_slices(names: Iterable[str], valid: Callable[[str], bool],
                  completions: Optional[Dict[str, str]] = None,
                  archived: Optional[Callable[[], Dict[str, str]]] = None) -> Dict[str, FileSlice]:
    """Each file group's latest slice among the file names of one metadata-table partition.
    `completions`: the completion time of each completed instant of a layout 2 timeline;
    `archived()`: those of its archived instants, asked for a log of one no longer active."""
    completions = completions or {}
    oldest = min(completions, default=None)  # a log of a deltacommit older than this one was archived
    history: List[Dict[str, str]] = []
    bases: Dict[str, List[Tuple[str, str]]] = {}
    logs: Dict[str, List[Tuple[str, int, str, str]]] = {}
    for name in names:
        base = parse_hfile_name(name)
        if base is not None:
            if valid(base.instant):
                bases.setdefault(base.file_id, []).append((base.instant, name))
            continue
        log = parse_log_file_name(name)
        if log is not None:
            # Layout 2 names a log after the deltacommit that wrote it, and it follows the newest
            # base requested before that deltacommit completed (a compaction that started later
            # did not take it in); layout 1 names it after its base.
            at = completions.get(log.base_instant)
            if at is None and archived is not None and oldest is not None and log.base_instant < oldest:
                if not history:
                    history.append(archived())
                at = history[0].get(log.base_instant)
            at = at or log.base_instant
            logs.setdefault(log.file_id, []).append((at, log.base_instant, log.version, log.write_token, name))
    slices = {}
    for group in sorted(set(bases) | set(logs)):
        instant, name = max(bases.get(group, [(None, None)]), key=lambda b: b[0] or "")
        following = sorted(entry for entry in logs.get(group, []) if instant is None or entry[0] >= instant)
        slices[group] = FileSlice(group, name, instant, [entry[-1] for entry in following])
    return slices


Fold = Callable[[Optional[dict], dict], dict]


def _replace(older: Optional[dict], newer: dict) -> dict:
    return newer


FOLDS: Dict[str, Fold] = {FILES: metadata_record.fold_files, RECORD_INDEX: _replace}


@dataclass(frozen=True)
class Validity:
    """Which instants of the metadata table a reader takes (see the module's docstring): plain
    sets, so that executors reading file groups apply the driver's judgement unchanged."""
    completed: FrozenSet[str]  # on the metadata table's timeline
    rolled_back: FrozenSet[str]  # and instants still pending there
    first_active: Optional[str]  # the metadata table's oldest completed active instant
    data_completed: FrozenSet[str]
    data_first_active: Optional[str]
    own: FrozenSet[str] = frozenset()  # the metadata table's own instants (`MetadataTimeline.own_instants`)
    completions: Dict[str, str] = field(default_factory=dict, hash=False, compare=False)  # layout 2

    def __call__(self, instant: str) -> bool:
        archived = self.first_active is not None and instant < self.first_active
        if (instant not in self.completed and not archived) or instant in self.rolled_back:
            return False
        # Archived there: a compaction's (at layout 2 a time like a data instant's), or a
        # deltacommit folded into a base before it was archived.
        if archived or len(instant) != DATA_INSTANT_DIGITS or instant in self.own:
            return True  # the metadata table's own (a compaction: `<T>001`, or a new time at layout 2)
        return instant in self.data_completed or (self.data_first_active is not None and instant < self.data_first_active)


class MetadataTableReader:
    """The latest state of a table's metadata table, as its completed data instants make it."""

    def __init__(self, storage: Storage, valid: Validity, timeline: Optional[MetadataTimeline] = None):
        """`timeline`: the metadata table's, as `valid` was judged on (an executor's reader,
        given the driver's judgement, has none)."""
        self.storage = storage
        self.valid = valid
        self.timeline = timeline

    @classmethod
    def of_timelines(cls, storage: Storage, data_completed: Set[str], data_first_active: Optional[str]) -> "MetadataTableReader":
        """`data_completed`: the data table's completed active instants; `data_first_active`:
        its oldest active instant, any state (older ones are archived)."""
        timeline = MetadataTimeline(storage)
        # Instants older than the metadata table's completed active ones were archived there:
        # completed (an older one still pending, a dead bootstrap's, is not).
        completed = timeline.completed_instants()
        valid = Validity(frozenset(completed), frozenset(timeline.rolled_back() | set(timeline.pending())),
                         min(completed, default=None), frozenset(data_completed), data_first_active,
                         frozenset(timeline.own_instants()), timeline.completions)
        return cls(storage, valid, timeline)

    def _partition_dir(self, partition: str) -> str:
        return posixpath.join(METADATA_TABLE_DIR, partition)

    def slices(self, partition: str) -> Dict[str, FileSlice]:
        return latest_slices(self.storage.list_names(self._partition_dir(partition)), self.valid, self.valid.completions,
                             lambda: archived_completions(self.storage))

    def records(self, partition: str, keys: Optional[Set[str]] = None,
                file_groups: Optional[Iterable[str]] = None, pieces: Optional[Dict[str, FileSlice]] = None) -> Dict[str, dict]:
        """Every live record of `partition` (or of `keys` only), folded; of the latest slices,
        or of `pieces` (by file group: a compaction's plan)."""
        fold = FOLDS[partition]
        folder = self._partition_dir(partition)
        found: Dict[str, Optional[dict]] = {}
        wanted_rows = None if keys is None else sorted(k.encode() for k in keys)
        slices = pieces if pieces is not None else self.slices(partition)
        for group in (file_groups if file_groups is not None else slices):
            piece = slices.get(group)
            if piece is None:
                continue
            if piece.base is not None:
                reader = hfile.HFileReader.of_bytes(self.storage.read_bytes(posixpath.join(folder, piece.base)))
                schema = reader.file_info.get(b"schema", b"").decode() or None
                cells = reader.get(wanted_rows) if wanted_rows is not None else dict(reader.scan())
                for row, value in cells.items():
                    found[row.decode()] = fold(None, metadata_record.decode(value, schema))
            for log in piece.logs:
                self._apply_log(posixpath.join(folder, log), fold, found, wanted_rows)
        return {key: record for key, record in found.items() if record is not None}

    def blocks(self, path: str) -> Iterator[log_format.LogBlock]:
        """The data and delete blocks of a log file that count: of valid instants."""
        for block in log_format.decode_blocks(self.storage.read_bytes(path)):
            instant = block.header.get(log_format.INSTANT_TIME)
            if block.block_type == COMMAND_BLOCK or instant is None or not self.valid(instant):
                continue  # rollbacks are read from the timeline (`MetadataTimeline.rolled_back`)
            if block.block_type not in (HFILE_DATA_BLOCK, DELETE_BLOCK):
                raise log_format.LogFormatError(f"{path}: log block type {block.block_type} is not read in a metadata table")
            yield block

    def _apply_log(self, path: str, fold: Fold, found: Dict[str, Optional[dict]], wanted_rows) -> None:
        for block in self.blocks(path):
            if block.block_type == HFILE_DATA_BLOCK:
                reader = hfile.HFileReader.of_bytes(block.content)
                schema = block.header.get(log_format.SCHEMA)
                cells = reader.get(wanted_rows) if wanted_rows is not None else dict(reader.scan())
                for row, value in cells.items():
                    key = row.decode()
                    found[key] = fold(found.get(key), metadata_record.decode(value, schema))
            else:
                wanted = None if wanted_rows is None else set(wanted_rows)
                for key in deleted_keys(block.content):
                    if wanted is None or key.encode() in wanted:
                        found[key] = None

    def folded_cells(self, partition: str, piece: FileSlice) -> Tuple[pa.Array, pa.Array]:
        """The live cells (row, value) of one file group whose newer record replaces an older
        one (record_index), in row order, values in our schema: what its compaction writes.
        Columns throughout (a shard holds millions of keys): the newest cell of each row wins,
        a delete drops the row; a value another schema wrote is re-encoded once per distinct value."""
        folder = self._partition_dir(partition)
        parts: List[Tuple[pa.Array, pa.Array]] = []  # oldest first; a null value: deleted

        def add(rows: pa.Array, values: pa.Array, schema: Optional[str]) -> None:
            if schema not in (None, metadata_record.SCHEMA_JSON) and len(values):
                distinct = values.dictionary_encode()
                ours = [metadata_record.encode(metadata_record.decode(v, schema)) for v in distinct.dictionary.to_pylist()]
                values = pa.array(ours, pa.binary()).take(distinct.indices)
            parts.append((rows, values))

        if piece.base is not None:
            reader = hfile.HFileReader.of_bytes(self.storage.read_bytes(posixpath.join(folder, piece.base)))
            add(*reader.columns(), reader.file_info.get(b"schema", b"").decode() or None)
        for log in piece.logs:
            for block in self.blocks(posixpath.join(folder, log)):
                if block.block_type == HFILE_DATA_BLOCK:
                    add(*hfile.HFileReader.of_bytes(block.content).columns(), block.header.get(log_format.SCHEMA))
                else:
                    gone = pa.array([k.encode() for k in deleted_keys(block.content)], pa.binary())
                    parts.append((gone, pa.nulls(len(gone), pa.binary())))
        if not parts:
            return pa.array([], pa.binary()), pa.array([], pa.binary())
        cells = pa.table({"row": pa.concat_arrays([r for r, _ in parts]), "value": pa.concat_arrays([v for _, v in parts]),
                          "age": np.concatenate([np.full(len(r), -i, dtype=np.int64) for i, (r, _) in enumerate(parts)])})
        cells = cells.sort_by([("row", "ascending"), ("age", "ascending")])  # each row's newest first
        rows = cells.column("row").combine_chunks()
        first = np.ones(len(rows), dtype=bool)
        if len(rows) > 1:
            first[1:] = pc.not_equal(rows[1:], rows[:-1]).to_numpy(zero_copy_only=False)
        newest = cells.filter(pa.array(first))
        live = newest.filter(pc.is_valid(newest.column("value")))
        return live.column("row").combine_chunks(), live.column("value").combine_chunks()

    def partitions(self) -> List[str]:
        """The data table's partition paths the `files` partition lists."""
        record = self.records(FILES, {metadata_record.ALL_PARTITIONS}).get(metadata_record.ALL_PARTITIONS)
        return sorted(metadata_record.partition_of_key(p) for p in metadata_record.listed(record))

    def files(self, partitions: Optional[Iterable[str]] = None) -> Dict[str, Dict[str, int]]:
        """File name to size, by data partition path (all partitions when None)."""
        wanted = self.partitions() if partitions is None else list(partitions)
        records = self.records(FILES, {metadata_record.partition_key(p) for p in wanted})
        return {p: metadata_record.listed(records.get(metadata_record.partition_key(p))) for p in wanted}
