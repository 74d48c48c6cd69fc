"""Keeping Hudi's metadata table in step with the data table, as Hudi's writer does:

- `create`: the bootstrap. The metadata table's `hoodie.properties`, then deltacommit
  `00000000000000010` whose base HFile of file group `files-0000-0` lists every partition and
  every file of the snapshot's completed instants. The caller lists `files` in the data table's
  properties afterwards, so a bootstrap cut short is never read.
- `deltacommit`: for each data instant (commit, replacecommit, clean), before the data instant
  completes, a deltacommit at the same instant time: one new log file of the `files` file group
  holding one HFile data block (the partitions it touched, their added and deleted files), and
  the record_index log files the instant's tasks wrote (`record_index`). A data instant that
  never completes leaves a deltacommit no reader takes (`reader`).
- `begin_record_index` / `finish_record_index`: the record_index bootstrap at `<X>011` around
  the tasks that write its bases.
- `compact_if_due`: after `MAX_DELTA_COMMITS` deltacommits on one base, and only when no data
  instant is in flight (a later-completing one's log would be folded away), each file group's
  valid records are folded into a new base HFile at `<latest deltacommit>001`, completed as a
  commit. Slices older than the previous base are then cleaned.

Log files are made with create-if-absent, one per deltacommit (object stores cannot append), at
the next version after the newest one of the slice. Which slice: the one the newest deltacommit
recorded (`hudilite.filesSliceWhole`: its `files` stat names every log) when nothing else is
pending and nothing was compacted or written out of order since (`recorded_files_slice`), else
a listing of the partition.

At timeline layout 2 (table versions 8 and 9), as Hudi 1.x writes it: the timeline is under
`.hoodie/metadata/.hoodie/timeline`, a completed instant is `<T>_<C>.<action>` with its
metadata in Avro, initializations are `00000000000000000` and on (`INIT_PREFIX`), each
deltacommit's log is its own file named after it (`.files-0000-0_<T>.log.1_0-0-0`: no listing
to find a version), a log belongs to the newest base requested before its deltacommit completed,
compactions take a new instant time (reserved on the data table, `reserve_time`), and archived
instants go into an LSM history.
"""

from __future__ import annotations

import json
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ..format import avro_metadata, hfile, log_format, lsm_history, metadata_record
from ..format.archived_timeline import write_archive
from ..format.instant import COMPLETED, Instant, next_instant_time
from ..format import properties as props
from ..format.file_group import hfile_name, log_file_name, parse_hfile_name, parse_log_file_name
from ..storage.filesystem import Storage
from ..storage.layout import METADATA_TABLE_DIR, PARTITION_METADATA, PROPERTIES_FILE, TMP_DIR
from ..storage.lock import check_lease
from ..errors import CorruptTableError
from .reader import (DATA_INSTANT_DIGITS, DELETE_BLOCK, FILES, HFILE_DATA_BLOCK, RECORD_INDEX, FileSlice, MetadataTableReader,
                     delete_block_content, latest_slices)
from .record_index import INIT_OFFSET as RECORD_INDEX_INIT_OFFSET, file_group
from .timeline import (COMMIT, COMPACTION, DELTA_COMMIT, HISTORY_DIR, INIT_PREFIX, LAYOUT_2_TIMELINE_DIR, TIMELINE_DIR,
                       MetadataTimeline, archived_completions, completion_time, is_init_instant, parse)

ARCHIVED_DIR = posixpath.join(TIMELINE_DIR, "archived")

INIT_INSTANT = "00000000000000010"  # the bootstrap's deltacommit, older than any data instant
COMPACTION_SUFFIX = "001"
# In a deltacommit's extraMetadata: its `files` stat names the group's whole slice (base and every
# log), as it stood under the table lock, so the next deltacommit need not list the partition.
WHOLE_FILES_SLICE = "hudilite.filesSliceWhole"
MAX_DELTA_COMMITS = 10  # hoodie.metadata.compact.max.delta.commits
FILES_GROUP = "files-0000-0"
WRITE_TOKEN = "0-0-0"
PROPERTIES = posixpath.join(TIMELINE_DIR, "hoodie.properties")
SCHEMA_JSON = metadata_record.SCHEMA_JSON

COMPACTION_PLAN = {
    "type": "record", "name": "HoodieCompactionPlan", "namespace": "org.apache.hudi.avro.model", "fields": [
        {"name": "operations", "default": None, "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "HoodieCompactionOperation", "fields": [
                {"name": "baseInstantTime", "type": ["null", "string"]},
                {"name": "deltaFilePaths", "default": None, "type": ["null", {"type": "array", "items": "string"}]},
                {"name": "dataFilePath", "default": None, "type": ["null", "string"]},
                {"name": "fileId", "type": ["null", "string"]},
                {"name": "partitionPath", "default": None, "type": ["null", "string"]},
                {"name": "metrics", "default": None, "type": ["null", {"type": "map", "values": "double"}]},
                {"name": "bootstrapFilePath", "default": None, "type": ["null", "string"]}]}}]},
        {"name": "extraMetadata", "default": None, "type": ["null", {"type": "map", "values": "string"}]},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "strategy", "default": None, "type": ["null", {
            "type": "record", "name": "HoodieCompactionStrategy", "fields": [
                {"name": "compactorClassName", "default": None, "type": ["null", "string"]},
                {"name": "strategyParams", "default": None, "type": ["null", {"type": "map", "values": "string"}]},
                {"name": "version", "default": 1, "type": ["int", "null"]}]}]},
        {"name": "preserveHoodieMetadata", "default": False, "type": ["boolean", "null"]}]}


def metadata_properties(table_name: str, table_version: int = int(props.TABLE_VERSION)) -> Dict[str, str]:
    """The metadata table's `hoodie.properties`, as Hudi 0.15 writes it at table version 6, and
    Hudi 1.0 (8) and 1.1 (9) at theirs."""
    name = f"{table_name}_metadata"
    if table_version >= 8:
        return {
            "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
            "hoodie.table.initial.version": str(table_version),
            "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.archivelog.folder": "history",
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.history.path": "history",
            "hoodie.table.checksum": str(props.table_checksum("", name)),
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.table.name": name,
            "hoodie.timeline.path": "timeline",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.base.file.format": "HFILE",
            "hoodie.record.merge.mode": "CUSTOM",
            "hoodie.table.version": str(table_version),
        }
    return {
        "hoodie.table.name": name,
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": props.TABLE_VERSION,
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.keygenerator.class": "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.compaction.record.merger.strategy": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
        "hoodie.populate.meta.fields": "false",
        "hoodie.archivelog.folder": "archived",
        "hoodie.timeline.layout.version": "1",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": str(props.table_checksum("", name)),
    }


def files_cells(records: Dict[str, dict]) -> List[Tuple[bytes, bytes]]:
    return [(key.encode(), metadata_record.encode(record)) for key, record in sorted(records.items(), key=lambda kv: kv[0].encode())]


def files_records(added: Dict[str, Dict[str, int]], deleted: Dict[str, Iterable[str]],
                  partitions_added: Iterable[str] = (), partitions_deleted: Iterable[str] = ()) -> Dict[str, dict]:
    """The `files` records of one change: each touched partition's files record, and the
    partition list when it gains or loses a partition."""
    records = {}
    for partition in sorted(set(added) | set(deleted)):
        records[metadata_record.partition_key(partition)] = metadata_record.file_list(
            added.get(partition, {}), deleted.get(partition, ()))
    partitions_added, partitions_deleted = list(partitions_added), list(partitions_deleted)
    if partitions_added or partitions_deleted:
        records[metadata_record.ALL_PARTITIONS] = metadata_record.partition_list(partitions_added, partitions_deleted)
    return records


def _log_stat(partition: str, group: str, path: str, size: int, base: Optional[str], base_instant: str,
              logs: List[str], writes: int) -> dict:
    return {
        "fileId": group, "path": path, "cdcStats": None, "prevCommit": base_instant, "numWrites": writes,
        "numDeletes": 0, "numUpdateWrites": writes, "numInserts": 0, "totalWriteBytes": size, "totalWriteErrors": 0,
        "tempPath": None, "partitionPath": partition, "totalLogRecords": 0, "totalLogFilesCompacted": 0,
        "totalLogSizeCompacted": 0, "totalUpdatedRecordsCompacted": 0, "totalLogBlocks": 0,
        "totalCorruptLogBlock": 0, "totalRollbackBlocks": 0, "fileSizeInBytes": size, "minEventTime": None,
        "maxEventTime": None, "logVersion": int(path.rsplit(".log.", 1)[1].split("_")[0]) if ".log." in path else 0,
        "logOffset": 0, "baseFile": base or "", "logFiles": logs}


def _commit_body(stats: Dict[str, List[dict]], operation: str, compacted: bool = False,
                 extra: Optional[Dict[str, str]] = None) -> dict:
    return {"partitionToWriteStats": stats, "compacted": compacted,
            "extraMetadata": {} if compacted else {"schema": SCHEMA_JSON, **(extra or {})}, "operationType": operation}


def _base_stat(partition: str, group: str, path: str, size: int, prev_commit: str, records: int) -> dict:
    """The write stat of a new base file (a bootstrap's, a compaction's)."""
    stat = _log_stat(partition, group, path, size, None, prev_commit, [], records)
    for key in ("logVersion", "logOffset", "baseFile", "logFiles"):
        stat.pop(key)
    return stat


def _latest_time(names: Iterable[str]) -> Optional[str]:
    """The latest instant or completion time among a timeline's file names."""
    return max((t for name in names for parsed in [parse(name)] if parsed is not None
                for t in (parsed[0], completion_time(name)) if t), default=None)


class MetadataTableWriter:
    def __init__(self, storage: Storage, reserve_time: Optional[Callable[[], str]] = None):
        """`reserve_time`: a new instant time, reserved on the data table (a layout 2 compaction's
        time, which no data instant may take); without it no layout 2 compaction is made."""
        self.storage = storage
        self.reserve_time = reserve_time

    @property
    def table_version(self) -> int:
        """The data table's version, which its metadata table takes (a stale one is dropped)."""
        try:
            return int(props.loads(self.storage.read_state(PROPERTIES_FILE)).get("hoodie.table.version", props.TABLE_VERSION))
        except FileNotFoundError:
            return int(props.TABLE_VERSION)

    @property
    def layout2(self) -> bool:
        return self.table_version >= 8

    @property
    def timeline_dir(self) -> str:
        return LAYOUT_2_TIMELINE_DIR if self.layout2 else TIMELINE_DIR

    def _path(self, *parts: str) -> str:
        return posixpath.join(METADATA_TABLE_DIR, *parts)

    def _timeline_path(self, instant: str, action: str, suffix: str = "") -> str:
        """A pending state's file (`suffix`), or a completed instant's at layout 1 (at layout 2,
        the name a marker gives it: `instant_files`)."""
        return posixpath.join(self.timeline_dir, f"{instant}.{action}{suffix}")

    def _encode(self, body: dict) -> bytes:
        if self.layout2:
            return avro_metadata.encode(avro_metadata.COMMIT_FILE_METADATA, avro_metadata.commit_record(body, False))
        return json.dumps(body, indent=2).encode()

    def _completed_name(self, names: Iterable[str], instant: str, action: str) -> Optional[str]:
        for name in names:
            parsed = parse(name)
            if parsed is not None and parsed[:2] == (instant, action) and not parsed[2]:
                return name
        return None

    def read_completed(self, instant: str, action: str, names: Optional[Iterable[str]] = None) -> Optional[dict]:
        """A completed instant's metadata (its JSON form's fields); None when it is not completed."""
        if not self.layout2:
            try:
                return json.loads(self.storage.read_bytes(self._timeline_path(instant, action)))
            except FileNotFoundError:
                return None
        names = self.storage.list_names(self.timeline_dir) if names is None else names
        name = self._completed_name(names, instant, action)
        return None if name is None else avro_metadata.decode(self.storage.read_bytes(posixpath.join(self.timeline_dir, name)))

    def _publish(self, instant: str, action: str, body: dict, names: Optional[List[str]] = None) -> None:
        """Complete `instant`: created only if absent. At layout 2 its completion time is taken
        under the table lock on `names` (the timeline as listed under it; listed when None),
        later than every time there, so that a log's slice (by that time) follows the order in
        which this timeline's instants completed."""
        if not self.layout2:
            self.storage.publish(self._timeline_path(instant, action), self._encode(body), TMP_DIR,
                                 lambda: check_lease(self.storage))
            return
        names = self.storage.list_names(self.timeline_dir) if names is None else names
        if self._completed_name(names, instant, action) is not None:
            raise CorruptTableError(f"{self.storage.base_path}: metadata table instant {instant} ({action}) completed already")
        completion = self._fresh_time(names)
        self.storage.publish(posixpath.join(self.timeline_dir, f"{instant}_{completion}.{action}"), self._encode(body),
                             TMP_DIR, lambda: check_lease(self.storage))

    @staticmethod
    def _fresh_time(names: Iterable[str]) -> str:
        return next_instant_time(_latest_time(names))

    def exists(self) -> bool:
        return self.storage.is_file(PROPERTIES)

    def same_version(self) -> bool:
        """Whether the metadata table is at the data table's version (as Hudi upgrades both). A
        version 6 table's is taken as it is (no read more per commit)."""
        if not self.layout2:
            return True
        try:
            listed = props.loads(self.storage.read_state(PROPERTIES))
        except FileNotFoundError:
            return False
        return int(listed.get("hoodie.table.version", props.TABLE_VERSION)) == self.table_version

    # -- bootstrap ---------------------------------------------------------------------------

    def _init_instant(self, names: Optional[List[str]] = None) -> str:
        """The instant of a partition's initialization: at layout 1 `INIT_INSTANT`; at layout 2
        the first of `00000000000000000` and on that the active timeline does not hold, as Hudi
        1.x takes it (one archived may be taken again: an archived instant's blocks are read only
        in a base, and a base at that instant was compacted away before it was archived)."""
        if not self.layout2:
            return INIT_INSTANT
        names = self.storage.list_names(self.timeline_dir) if names is None else names
        used = {parsed[0] for parsed in map(parse, names) if parsed is not None}
        for offset in range(1000):
            instant = f"{INIT_PREFIX}{offset:03d}"
            if instant not in used:
                return instant
        raise CorruptTableError(f"{self.storage.base_path}: the metadata table has no initialization instant left")

    def create(self, table_name: str, files: Dict[str, Dict[str, int]]) -> None:
        """The metadata table of a snapshot whose files are `files` (partition to name to size)."""
        if self.storage.exists(METADATA_TABLE_DIR):
            self.storage.delete_dir(METADATA_TABLE_DIR)  # a bootstrap cut short, never listed
        instant = self._init_instant()
        self.storage.write_bytes(PROPERTIES, props.dumps(metadata_properties(table_name, self.table_version)).encode())
        self.storage.write_bytes(self._path(FILES, PARTITION_METADATA),
                                 f"#partition metadata\ncommitTime={instant}\npartitionDepth=1\n".encode())
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".requested"), b"")
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".inflight"), b"")
        records = files_records(files, {}, partitions_added=files.keys())
        if metadata_record.ALL_PARTITIONS not in records:
            records[metadata_record.ALL_PARTITIONS] = metadata_record.partition_list()
        data = hfile.write(files_cells(records), {b"schema": SCHEMA_JSON.encode()})
        name = hfile_name(FILES_GROUP, WRITE_TOKEN, instant)
        self.storage.write_bytes(self._path(FILES, name), data)
        stat = _base_stat(FILES, FILES_GROUP, posixpath.join(FILES, name), len(data), "null", len(records))
        stat.update(numInserts=len(records), numUpdateWrites=0)
        self._publish(instant, DELTA_COMMIT, _commit_body({FILES: [stat]}, "BULK_INSERT"))

    # -- one data instant --------------------------------------------------------------------

    def deltacommit(self, instant: str, records: Dict[str, dict], on_file: Optional[callable] = None,
                    record_index_logs: Optional[Dict[str, int]] = None) -> int:
        """Deltacommit `instant` of `files` records and of the `record_index` log files its tasks
        wrote (path to size). `on_file(path)` is told of each file before it is written (the
        caller's markers: a rollback of the data instant removes them; the completed instant's
        path stands for its three files, `instant_files`). Given `on_file`, the instant is a
        new one (a data instant's); without, it may have been recorded by an earlier attempt (a
        clean finished by the next cleaner). Returns how many log files the `files` slice has
        now (0 when an earlier attempt recorded it)."""
        names = self.storage.list_names(self.timeline_dir)
        if on_file is not None:
            on_file(self._timeline_path(instant, DELTA_COMMIT))
        elif self._completed_name(names, instant, DELTA_COMMIT) is not None:
            return 0
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".requested"), b"")
        block = log_format.LogBlock(HFILE_DATA_BLOCK, {log_format.INSTANT_TIME: instant, log_format.SCHEMA: SCHEMA_JSON},
                                    hfile.write(files_cells(records), {b"schema": SCHEMA_JSON.encode()}))
        data = log_format.encode_block(block)
        stats = {RECORD_INDEX: [_log_stat(RECORD_INDEX, parse_log_file_name(path).file_id,
                                          posixpath.relpath(path, METADATA_TABLE_DIR), size, None,
                                          parse_log_file_name(path).base_instant, [posixpath.basename(path)], 0)
                                for path, size in sorted((record_index_logs or {}).items())]}
        stats = {k: v for k, v in stats.items() if v}
        if self.layout2:
            return self._deltacommit_own_log(instant, names, len(records), data, stats, on_file)
        folder = self._path(FILES)
        piece = self.recorded_files_slice(names, instant) or self.latest_slices(FILES, names)[FILES_GROUP]
        version = max([parse_log_file_name(n).version for n in piece.logs], default=0) + 1
        while True:
            name = log_file_name(FILES_GROUP, piece.base_instant, version, WRITE_TOKEN)
            stats[FILES] = [_log_stat(FILES, FILES_GROUP, posixpath.join(FILES, name), len(data), piece.base,
                                      piece.base_instant, piece.logs + [name], len(records))]
            # The inflight names the log files, so that Hudi's writer can roll the deltacommit back.
            body = _commit_body(stats, "UPSERT_PREPPED", extra={WHOLE_FILES_SLICE: "true"})
            self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".inflight"), self._encode(body))
            if on_file is not None:
                on_file(posixpath.join(folder, name))
            if self.storage.create_exclusive(posixpath.join(folder, name), data):
                break
            # another writer took this version meanwhile: its log joins the slice
            piece = self.latest_slices(FILES)[FILES_GROUP]
            version = max([version] + [parse_log_file_name(n).version for n in piece.logs]) + 1
        self._publish(instant, DELTA_COMMIT, body)
        return len(piece.logs) + 1

    def _deltacommit_own_log(self, instant: str, names: List[str], count: int, data: bytes, stats: Dict[str, List[dict]],
                             on_file: Optional[callable]) -> int:
        """Layout 2: the deltacommit's `files` log is a file of its own, named after it, so no
        listing finds a version and no other writer can take its name (a file there is an
        earlier attempt's of this instant: replaced). Returns how many deltacommits completed
        since the latest compaction, this one included."""
        name = log_file_name(FILES_GROUP, instant, 1, WRITE_TOKEN)
        compacted_at = max((p[0] for p in map(parse, names) if p is not None and p[1] == COMMIT and not p[2]), default="")
        # As Hudi 1.x: a log's previous commit is its own deltacommit, its base not named.
        stats[FILES] = [_log_stat(FILES, FILES_GROUP, posixpath.join(FILES, name), len(data), None, instant, [name], count)]
        body = _commit_body(stats, "UPSERT_PREPPED")
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".inflight"), self._encode(body))
        if on_file is not None:
            on_file(self._path(FILES, name))
        self.storage.write_atomic(self._path(FILES, name), data, TMP_DIR)
        self._publish(instant, DELTA_COMMIT, body, names + [f"{instant}.{DELTA_COMMIT}.requested"])
        since = [n for n in names if (completion_time(n) or "") > compacted_at and parse(n)[1] == DELTA_COMMIT]
        return len(since) + 1

    def recorded_files_slice(self, timeline: List[str], writing: str) -> Optional[FileSlice]:
        """The `files` slice as the newest instant recorded it (`WHOLE_FILES_SLICE`), when that
        is one of our deltacommits and nothing but `writing` is pending on the timeline (not a
        compaction, nor a writer that died after its log): then no log exists beyond the ones it
        names. None: list the partition."""
        entries = [parsed for parsed in map(parse, timeline) if parsed is not None and parsed[0] != writing]
        completed = {instant: action for instant, action, state in entries if not state}  # a compaction completes as a commit
        if not completed or any(instant not in completed for instant, _, _ in entries):
            return None
        instant, action = max(completed.items())
        if action != DELTA_COMMIT:
            return None
        try:
            body = json.loads(self.storage.read_bytes(self._timeline_path(instant, DELTA_COMMIT)))
        except (FileNotFoundError, ValueError):
            return None
        stats = [s for s in (body.get("partitionToWriteStats") or {}).get(FILES) or [] if s.get("fileId") == FILES_GROUP]
        if (body.get("extraMetadata") or {}).get(WHOLE_FILES_SLICE) != "true" or len(stats) != 1:
            return None
        stat = stats[0]
        piece = FileSlice(FILES_GROUP, stat.get("baseFile") or None, stat.get("prevCommit"), list(stat.get("logFiles") or []))
        # Writers publish out of instant order, and Hudi's writer may compact below our newest
        # instant: the slice is taken only when no compaction followed its base and each data
        # instant's deltacommit since its base has its log in it (a partition's initialization,
        # `<T>011`, writes none).
        after_base = {i: a for i, a in completed.items() if piece.base_instant is None or i > piece.base_instant}
        if any(a != DELTA_COMMIT for a in after_base.values()):
            return None
        if len([i for i in after_base if len(i) == DATA_INSTANT_DIGITS]) != len(piece.logs):
            return None
        return piece

    def latest_slices(self, partition: str, timeline: Optional[List[str]] = None) -> Dict[str, FileSlice]:
        """The slices new logs join, by file group: each group's newest base a completed instant
        wrote (a bootstrap's, Hudi's `<X>010` too, or a compaction's); past a compaction still
        pending, its instant, as Hudi names them, so that completing it keeps the logs written
        meanwhile. A group without a base (an empty record_index shard) joins its init instant.
        At layout 2 a log follows the newest base requested before its deltacommit completed,
        and a pending compaction's slice is not joined (it is finished before anything else)."""
        names = self.storage.list_names(self._path(partition))
        if timeline is None:
            timeline = self.storage.list_names(self.timeline_dir)
        entries = [parsed for parsed in map(parse, timeline) if parsed is not None]
        completed = {instant for instant, action, state in entries if not state and action in (DELTA_COMMIT, COMMIT)}
        first_active = min((instant for instant, _, _ in entries), default=None)
        completions = {p[0]: c for p, c in zip(map(parse, timeline), map(completion_time, timeline)) if p and c}
        slices = latest_slices(names, lambda instant: instant in completed or (first_active is not None and instant < first_active),
                               completions, lambda: archived_completions(self.storage))
        done = {instant for instant, action, state in entries if not state and action == COMMIT}
        if self.layout2:
            done |= {instant for instant, action, _ in entries if action == COMPACTION}
        # A pending compaction starts a new slice only in the groups its plan lists, as Hudi's
        # file-system view reads it: a log another group named after it would sit in a slice of
        # its own, without the base, for Java's readers.
        planned = {instant: self._planned_groups(instant, partition) for instant, action, state in entries
                   if action == COMPACTION and state == ".requested" and instant not in done}
        out = {}
        for group, piece in slices.items():
            if piece.base_instant is None:
                firsts = sorted(parse_log_file_name(n).base_instant for n in piece.logs)
                if not firsts:
                    continue
                piece = FileSlice(group, None, firsts[0], piece.logs)
            pending = [instant for instant, groups in planned.items() if instant > piece.base_instant and group in groups]
            if pending:
                piece = FileSlice(group, None, max(pending),
                                  [n for n in piece.logs if parse_log_file_name(n).base_instant == max(pending)])
            out[group] = piece
        if partition == FILES and FILES_GROUP not in out:
            raise CorruptTableError(f"{self.storage.base_path}: the metadata table's {FILES} partition has no base file")
        return out

    def _planned_groups(self, instant: str, partition: str) -> set:
        """The file groups of `partition` a pending compaction's plan lists."""
        plan = avro_metadata.decode(self.storage.read_bytes(self._timeline_path(instant, COMPACTION, ".requested")))
        return {op["fileId"] for op in plan.get("operations") or [] if op.get("partitionPath") == partition}

    # -- the record_index partition ----------------------------------------------------------

    def record_index_init_instant(self, data_instant: str) -> str:
        """The record_index bootstrap's instant as of completed data instant `data_instant`:
        `<data instant>011` at layout 1; at layout 2 the next initialization instant, once the
        pending files of a bootstrap that died are gone (under the table lock: nobody else's)."""
        if not self.layout2:
            return f"{data_instant}{RECORD_INDEX_INIT_OFFSET:03d}"
        names = self.storage.list_names(self.timeline_dir)
        done = {parsed[:2] for parsed in map(parse, names) if parsed is not None and not parsed[2]}
        for name in names:
            parsed = parse(name)
            if parsed is not None and parsed[2] and is_init_instant(parsed[0]) and parsed[:2] not in done:
                self.storage.delete_file(posixpath.join(self.timeline_dir, name))
        return self._init_instant()

    def begin_record_index(self, instant: str) -> None:
        """Start the record_index bootstrap at `instant` (`record_index_init_instant`): an earlier
        attempt's files go, then the deltacommit is requested; the tasks write the bases next."""
        self.storage.delete_dir(self._path(RECORD_INDEX))
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".requested"), b"")

    def finish_record_index(self, instant: str, num_shards: int, bases: List[dict]) -> None:
        """Complete the bootstrap: each file group starts with an empty delete block at `instant`
        (how Hudi's writer makes a group exist before it has a base), then the deltacommit."""
        self.storage.write_bytes(self._path(RECORD_INDEX, PARTITION_METADATA),
                                 f"#partition metadata\ncommitTime={instant}\npartitionDepth=1\n".encode())
        empty = log_format.encode_block(log_format.LogBlock(DELETE_BLOCK, {log_format.INSTANT_TIME: instant},
                                                            delete_block_content(())))
        for shard in range(num_shards):
            self.storage.write_bytes(self._path(RECORD_INDEX, log_file_name(file_group(shard), instant, 1, WRITE_TOKEN)), empty)
        stats = []
        for written in bases:
            stat = _base_stat(RECORD_INDEX, parse_hfile_name(written["path"]).file_id,
                              posixpath.relpath(written["path"], METADATA_TABLE_DIR), written["size"], "null",
                              written["entries"])
            stat.update(numInserts=written["entries"], numUpdateWrites=0)
            stats.append(stat)
        body = _commit_body({RECORD_INDEX: stats}, "BULK_INSERT")
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".inflight"), self._encode(body))
        self._publish(instant, DELTA_COMMIT, body)

    def record_index_slices(self) -> Dict[str, Tuple[str, int]]:
        """Each record_index group's base instant and newest log version (`record_index.log_paths`)."""
        return {group: (piece.base_instant, max([parse_log_file_name(n).version for n in piece.logs
                                                 if parse_log_file_name(n).base_instant == piece.base_instant], default=0))
                for group, piece in self.latest_slices(RECORD_INDEX).items()}

    # -- compaction --------------------------------------------------------------------------

    def compact_if_due(self, reader: MetadataTableReader, data_in_flight: bool, now: bool = False) -> Optional[str]:
        """Compact the metadata table into new bases when due (`now`: whenever `files` has a
        log) and safe: every file group with logs, as Hudi's compaction plans it. A compaction a
        dead writer left pending is finished first, from its plan (logs written since name its
        instant as their base: the slice it starts must exist). The compaction instant, or None."""
        if data_in_flight:
            return None
        pending = sorted(i for i, action in reader.timeline.pending().items() if action == COMPACTION)
        if pending:
            return self._finish_pending(reader, pending[0])
        files_piece = reader.slices(FILES).get(FILES_GROUP)
        if files_piece is None or files_piece.base is None or len(files_piece.logs) < (1 if now else MAX_DELTA_COMMITS):
            return None
        if self.layout2:
            instant = self._compaction_time(reader.timeline.names)
            if instant is None:
                return None
        else:
            deltas = [i for i in reader.timeline.completed((DELTA_COMMIT,)) if i > files_piece.base_instant]
            if not deltas:
                return None
            instant = deltas[-1] + COMPACTION_SUFFIX
        # A record_index group without a base yet (none of its keys at the bootstrap) starts at
        # the bootstrap's instant, which its first log names.
        pieces = [(FILES, files_piece)] + [(RECORD_INDEX, piece) for _, piece in sorted(self.latest_slices(RECORD_INDEX).items())
                                           if piece.logs]
        plan = {"operations": [{
            "baseInstantTime": piece.base_instant, "deltaFilePaths": piece.logs, "dataFilePath": piece.base,
            "fileId": piece.file_group, "partitionPath": partition,
            "metrics": {"TOTAL_LOG_FILES": float(len(piece.logs))}, "bootstrapFilePath": None}
            for partition, piece in pieces], "extraMetadata": None, "version": 2, "strategy": None,
            "preserveHoodieMetadata": False}
        self.storage.write_atomic(self._timeline_path(instant, COMPACTION, ".requested"),
                                  avro_metadata.encode(COMPACTION_PLAN, plan), TMP_DIR)
        self._compact(reader, instant, pieces)
        return instant

    def _compaction_time(self, names: List[str]) -> Optional[str]:
        """Layout 2: a compaction's instant, reserved on the data table and later than every
        time on this timeline: a log whose deltacommit completed at or after it would follow its
        base though the compaction folded it. None: no time to be had (no `reserve_time`, or a
        clock behind this timeline's)."""
        if self.reserve_time is None:
            return None
        latest = _latest_time(names) or ""
        for _ in range(3):  # the same clock as the times listed: at most a millisecond behind
            instant = self.reserve_time()
            if instant > latest:
                return instant
        return None

    def _finish_pending(self, reader: MetadataTableReader, instant: str) -> str:
        plan = avro_metadata.decode(self.storage.read_bytes(self._timeline_path(instant, COMPACTION, ".requested")))
        pieces = [(op["partitionPath"], FileSlice(op["fileId"], op["dataFilePath"] and posixpath.basename(op["dataFilePath"]),
                                                  op["baseInstantTime"], [posixpath.basename(p) for p in op["deltaFilePaths"] or []]))
                  for op in plan["operations"] or []
                  if op["partitionPath"] in (FILES, RECORD_INDEX)]  # another writer's partitions are taken off
        self._compact(reader, instant, pieces)
        return instant

    def _compact(self, reader: MetadataTableReader, instant: str, pieces: List[Tuple[str, FileSlice]]) -> None:
        """Fold each slice of `pieces` (partition, slice) into a base at `instant`, then
        complete the compaction and clean and archive behind it."""
        self.storage.write_bytes(self._timeline_path(instant, COMPACTION, ".inflight"), b"")
        def compact(entry: Tuple[str, FileSlice]) -> Tuple[str, dict]:
            partition, piece = entry
            if partition == FILES:
                records = reader.records(FILES, pieces={FILES_GROUP: piece})
                data, count = hfile.write(files_cells(records), {b"schema": SCHEMA_JSON.encode()}), len(records)
            else:
                rows, values = reader.folded_cells(partition, piece)
                data, count = hfile.write_columns(rows, values, {b"schema": SCHEMA_JSON.encode()}), len(rows)
            name = hfile_name(piece.file_group, WRITE_TOKEN, instant)
            self.storage.write_bytes(self._path(partition, name), data)
            stat = _base_stat(partition, piece.file_group, posixpath.join(partition, name), len(data), piece.base_instant,
                              count)
            stat.update(totalLogFilesCompacted=len(piece.logs), totalLogBlocks=len(piece.logs))
            return partition, stat

        # Two threads: most of a group's time is zlib and Arrow, which run outside the GIL.
        stats: Dict[str, List[dict]] = {}
        with ThreadPoolExecutor(max_workers=2) as pool:
            for partition, stat in pool.map(compact, pieces):
                stats.setdefault(partition, []).append(stat)
        self._publish(instant, COMMIT, _commit_body(stats, "COMPACT", compacted=True))
        completions = MetadataTimeline(self.storage).completions
        for partition, piece in pieces:
            self._clean_before(partition, piece.file_group, piece.base_instant, completions)
        files_base = [piece.base_instant for partition, piece in pieces if partition == FILES]
        if files_base:
            self._archive_before(files_base[0])

    def _archive_before(self, kept_base_instant: str) -> None:
        """Move the metadata table's instants older than the slice it keeps to its archived
        timeline (`.hoodie/metadata/.hoodie/archived`, Hudi's archive format; at layout 2 its
        LSM history, those that also completed before it), so that its active timeline stays
        short: their files were cleaned (`_clean_before`), and a reader counts an instant older
        than the active timeline as completed."""
        names = self.storage.list_names(self.timeline_dir)
        if self.layout2:
            self._archive_into_history(names, kept_base_instant)
            return
        old = sorted((parsed, name) for name in names for parsed in [parse(name)]
                     if parsed is not None and parsed[0] < kept_base_instant)
        completed = [(Instant(instant, action, COMPLETED), self.storage.read_text(posixpath.join(TIMELINE_DIR, name)))
                     for (instant, action, state), name in old if not state and action in (DELTA_COMMIT, COMMIT)]
        if not completed:
            return
        write_archive(self.storage, completed, ARCHIVED_DIR)
        last = completed[-1][0].timestamp
        for (instant, _, _), name in sorted(old, key=lambda entry: -entry[1].count(".")):  # completed files last
            if instant <= last:
                self.storage.delete_file(posixpath.join(TIMELINE_DIR, name))

    def _archive_into_history(self, names: List[str], kept_base_instant: str) -> None:
        """Layout 2: the completed instants requested and completed before `kept_base_instant`
        into one new file of the LSM history (a compaction with its plan), as Hudi 1.x's archiver
        writes them, none past an instant still pending (a reader counts what is older than the
        active timeline's completed instants as archived); then their files leave the timeline,
        completed ones last."""
        by_instant: Dict[Tuple[str, str], Dict[str, str]] = {}
        for name in names:
            parsed = parse(name)
            if parsed is not None:
                action = COMMIT if parsed[1] == COMPACTION else parsed[1]
                by_instant.setdefault((parsed[0], action), {})[parsed[2] or "done"] = name
        pending = min((key[0] for key, states in by_instant.items() if "done" not in states), default=None)
        old = {key: states for key, states in by_instant.items()
               if "done" in states and key[0] < kept_base_instant and completion_time(states["done"]) < kept_base_instant
               and (pending is None or key[0] < pending)}
        if not old:
            return
        entries = []
        for (instant, action), states in sorted(old.items()):
            plan = (self.storage.read_bytes(posixpath.join(self.timeline_dir, states[".requested"]))
                    if action == COMMIT and ".requested" in states else None)
            body = self.storage.read_bytes(posixpath.join(self.timeline_dir, states["done"]))
            entries.append(lsm_history.HistoryEntry(instant, completion_time(states["done"]), action, body or None, plan or None))
        lsm_history.write_history(self.storage, HISTORY_DIR, entries)
        lsm_history.compact_history(self.storage, HISTORY_DIR)
        # Oldest first, each instant's completed file last: killed half way, what is left active
        # is newer than what went (the oldest completed active instant bounds the archived).
        for _, states in sorted(old.items()):
            for state in (".requested", ".inflight", "done"):
                if state in states:
                    self.storage.delete_file(posixpath.join(self.timeline_dir, states[state]))

    def _clean_before(self, partition: str, group: str, kept_base_instant: str, completions: Dict[str, str]) -> None:
        """Delete the slices of `group` older than `kept_base_instant` (the previous base is
        kept, so a reader that listed before the compaction still finds its files). At layout 2
        a log is in an older slice when its deltacommit completed before that base (one whose
        completion is not known is left)."""
        folder = self._path(partition)
        for name in self.storage.list_names(folder):
            base = parse_hfile_name(name)
            log = parse_log_file_name(name)
            parsed = base or log
            if parsed is None or parsed.file_id != group:
                continue
            instant = base.instant if base else (completions.get(log.base_instant) if self.layout2 else log.base_instant)
            if instant is not None and instant < kept_base_instant:
                self.storage.delete_file(posixpath.join(folder, name))
