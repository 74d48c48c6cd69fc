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
"""

from __future__ import annotations

import json
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterable, List, Optional, Tuple

from ..format import avro_metadata, hfile, log_format, metadata_record
from ..format.archived_timeline import write_archive
from ..format.instant import COMPLETED, Instant
from ..format import properties as props
from ..format.file_group import hfile_name, log_file_name, parse_hfile_name, parse_log_file_name
from ..storage.filesystem import Storage
from ..storage.layout import METADATA_TABLE_DIR, TMP_DIR, PARTITION_METADATA
from ..storage.lock import check_lease
from ..errors import CorruptTableError
from .reader import (DATA_INSTANT_DIGITS, DELETE_BLOCK, FILES, HFILE_DATA_BLOCK, RECORD_INDEX, FileSlice, MetadataTableReader,
                     delete_block_content, latest_slices)
from .record_index import file_group
from .timeline import COMMIT, COMPACTION, DELTA_COMMIT, TIMELINE_DIR, parse

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


def metadata_properties(table_name: str) -> Dict[str, str]:
    """The metadata table's `hoodie.properties`, as Hudi 0.15 writes it at table version 6."""
    name = f"{table_name}_metadata"
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


def _commit_json(stats: Dict[str, List[dict]], operation: str, compacted: bool = False,
                 extra: Optional[Dict[str, str]] = None) -> bytes:
    body = {"partitionToWriteStats": stats, "compacted": compacted,
            "extraMetadata": {} if compacted else {"schema": SCHEMA_JSON, **(extra or {})}, "operationType": operation}
    return json.dumps(body, indent=2).encode()


class MetadataTableWriter:
    def __init__(self, storage: Storage):
        self.storage = storage

    def _path(self, *parts: str) -> str:
        return posixpath.join(METADATA_TABLE_DIR, *parts)

    def _timeline_path(self, instant: str, action: str, suffix: str = "") -> str:
        return posixpath.join(TIMELINE_DIR, f"{instant}.{action}{suffix}")

    def _publish(self, instant: str, action: str, body: bytes) -> None:
        self.storage.publish(self._timeline_path(instant, action), body, TMP_DIR, lambda: check_lease(self.storage))

    def exists(self) -> bool:
        return self.storage.is_file(PROPERTIES)

    # -- bootstrap ---------------------------------------------------------------------------

    def create(self, table_name: str, files: Dict[str, Dict[str, int]]) -> None:
        """The metadata table of a snapshot whose files are `files` (partition to name to size)."""
        if self.storage.exists(METADATA_TABLE_DIR):
            self.storage.delete_dir(METADATA_TABLE_DIR)  # a bootstrap cut short, never listed
        self.storage.write_bytes(PROPERTIES, props.dumps(metadata_properties(table_name)).encode())
        self.storage.write_bytes(self._path(FILES, PARTITION_METADATA),
                                 f"#partition metadata\ncommitTime={INIT_INSTANT}\npartitionDepth=1\n".encode())
        self.storage.write_bytes(self._timeline_path(INIT_INSTANT, DELTA_COMMIT, ".requested"), b"")
        self.storage.write_bytes(self._timeline_path(INIT_INSTANT, DELTA_COMMIT, ".inflight"), b"")
        records = files_records(files, {}, partitions_added=files.keys())
        if metadata_record.ALL_PARTITIONS not in records:
            records[metadata_record.ALL_PARTITIONS] = metadata_record.partition_list()
        data = hfile.write(files_cells(records), {b"schema": SCHEMA_JSON.encode()})
        name = hfile_name(FILES_GROUP, WRITE_TOKEN, INIT_INSTANT)
        self.storage.write_bytes(self._path(FILES, name), data)
        stat = _log_stat(FILES, FILES_GROUP, posixpath.join(FILES, name), len(data), None, "null", [], len(records))
        stat.update(numInserts=len(records), numUpdateWrites=0)
        for key in ("logVersion", "logOffset", "baseFile", "logFiles"):
            stat.pop(key)
        self._publish(INIT_INSTANT, DELTA_COMMIT, _commit_json({FILES: [stat]}, "BULK_INSERT"))

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
        if on_file is not None:
            on_file(self._timeline_path(instant, DELTA_COMMIT))
        elif self.storage.is_file(self._timeline_path(instant, DELTA_COMMIT)):
            return 0
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".requested"), b"")
        block = log_format.LogBlock(HFILE_DATA_BLOCK, {log_format.INSTANT_TIME: instant, log_format.SCHEMA: SCHEMA_JSON},
                                    hfile.write(files_cells(records), {b"schema": SCHEMA_JSON.encode()}))
        data = log_format.encode_block(block)
        folder = self._path(FILES)
        timeline = self.storage.list_names(TIMELINE_DIR)
        piece = self.recorded_files_slice(timeline, instant) or self.latest_slices(FILES, timeline)[FILES_GROUP]
        version = max([parse_log_file_name(n).version for n in piece.logs], default=0) + 1
        stats = {RECORD_INDEX: [_log_stat(RECORD_INDEX, parse_log_file_name(path).file_id,
                                          posixpath.relpath(path, METADATA_TABLE_DIR), size, None,
                                          parse_log_file_name(path).base_instant, [posixpath.basename(path)], 0)
                                for path, size in sorted((record_index_logs or {}).items())]}
        stats = {k: v for k, v in stats.items() if v}
        while True:
            name = log_file_name(FILES_GROUP, piece.base_instant, version, WRITE_TOKEN)
            stats[FILES] = [_log_stat(FILES, FILES_GROUP, posixpath.join(FILES, name), len(data), piece.base,
                                      piece.base_instant, piece.logs + [name], len(records))]
            # The inflight names the log files, so that Hudi's writer can roll the deltacommit back.
            body = _commit_json(stats, "UPSERT_PREPPED", extra={WHOLE_FILES_SLICE: "true"})
            self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".inflight"), body)
            if on_file is not None:
                on_file(posixpath.join(folder, name))
            if self.storage.create_exclusive(posixpath.join(folder, name), data):
                break
            # another writer took this version meanwhile: its log joins the slice
            piece = self.latest_slices(FILES)[FILES_GROUP]
            version = max([version] + [parse_log_file_name(n).version for n in piece.logs]) + 1
        self._publish(instant, DELTA_COMMIT, body)
        return len(piece.logs) + 1

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
        meanwhile. A group without a base (an empty record_index shard) joins its init instant."""
        names = self.storage.list_names(self._path(partition))
        if timeline is None:
            timeline = self.storage.list_names(TIMELINE_DIR)
        entries = [parsed for parsed in map(parse, timeline) if parsed is not None]
        completed = {instant for instant, action, state in entries if not state and action in (DELTA_COMMIT, COMMIT)}
        first_active = min((instant for instant, _, _ in entries), default=None)
        slices = latest_slices(names, lambda instant: instant in completed or (first_active is not None and instant < first_active))
        done = {instant for instant, action, state in entries if not state and action == COMMIT}
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

    def begin_record_index(self, instant: str) -> None:
        """Start the record_index bootstrap at `instant` (`<data instant>011`): an earlier
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
            stat = _log_stat(RECORD_INDEX, parse_hfile_name(written["path"]).file_id,
                             posixpath.relpath(written["path"], METADATA_TABLE_DIR), written["size"], None, "null", [],
                             written["entries"])
            stat.update(numInserts=written["entries"], numUpdateWrites=0)
            for key in ("logVersion", "logOffset", "baseFile", "logFiles"):
                stat.pop(key)
            stats.append(stat)
        body = _commit_json({RECORD_INDEX: stats}, "BULK_INSERT")
        self.storage.write_bytes(self._timeline_path(instant, DELTA_COMMIT, ".inflight"), body)
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

    def _finish_pending(self, reader: MetadataTableReader, instant: str) -> str:
        plan = avro_metadata.decode(self.storage.read_bytes(self._timeline_path(instant, COMPACTION, ".requested")))
        pieces = [(op["partitionPath"], FileSlice(op["fileId"], op["dataFilePath"] and posixpath.basename(op["dataFilePath"]),
                                                  op["baseInstantTime"], [posixpath.basename(p) for p in op["deltaFilePaths"] or []]))
                  for op in plan["operations"] or []]
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
            stat = _log_stat(partition, piece.file_group, posixpath.join(partition, name), len(data), None,
                             piece.base_instant, [], count)
            for key in ("logVersion", "logOffset", "baseFile", "logFiles"):
                stat.pop(key)
            stat.update(totalLogFilesCompacted=len(piece.logs), totalLogBlocks=len(piece.logs))
            return partition, stat

        # Two threads: most of a group's time is zlib and Arrow, which run outside the GIL.
        stats: Dict[str, List[dict]] = {}
        with ThreadPoolExecutor(max_workers=2) as pool:
            for partition, stat in pool.map(compact, pieces):
                stats.setdefault(partition, []).append(stat)
        self._publish(instant, COMMIT, _commit_json(stats, "COMPACT", compacted=True))
        for partition, piece in pieces:
            self._clean_before(partition, piece.file_group, piece.base_instant)
        files_base = [piece.base_instant for partition, piece in pieces if partition == FILES]
        if files_base:
            self._archive_before(files_base[0])

    def _archive_before(self, kept_base_instant: str) -> None:
        """Move the metadata table's instants older than the slice it keeps to its archived
        timeline (`.hoodie/metadata/.hoodie/archived`, Hudi's archive format), so that its active
        timeline stays short: their files were cleaned (`_clean_before`), and a reader counts an
        instant older than the active timeline as completed."""
        names = self.storage.list_names(TIMELINE_DIR)
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

    def _clean_before(self, partition: str, group: str, kept_base_instant: str) -> None:
        """Delete the slices of `group` older than `kept_base_instant` (the previous base is
        kept, so a reader that listed before the compaction still finds its files)."""
        folder = self._path(partition)
        for name in self.storage.list_names(folder):
            base = parse_hfile_name(name)
            log = parse_log_file_name(name)
            parsed = base or log
            if parsed is None or parsed.file_id != group:
                continue
            instant = base.instant if base else log.base_instant
            if instant < kept_base_instant:
                self.storage.delete_file(posixpath.join(folder, name))
