"""`MetadataTable`: what the data table's writers and services do to keep Hudi's metadata table
(`.hoodie/metadata`) in step, as Hudi's own writer keeps it with `hoodie.metadata.enable=true`.

hudilite keeps the `files` partition, and `record_index` on a table with a record key
(`record_index.py`: its tasks write the files, this lists them). The data table's
`hoodie.table.metadata.partitions` says which partitions readers may use: each is listed only
once its bootstrap completed; a partition someone else's writer added and hudilite does not keep
(column_stats, partition_stats, ...) is taken off the list under the table lock before hudilite
commits, then its folder goes, as Hudi's writer drops an index that was disabled. A table may opt out for
good (`drop`, `hudilite.metadata.enable=false`): then readers list storage, as before.

Every call that changes the metadata table runs under the data table's lock.
"""

from __future__ import annotations

import logging
import posixpath
from typing import AbstractSet, Callable, Dict, Iterable, List, Optional, Set, Tuple

import pyarrow as pa

from ..format import properties as props
from ..format.commit import CommitMetadata
from ..format import hfile, log_format, metadata_record
from ..format.file_group import parse_base_file_name, parse_log_file_name
from ..format.timeline import Timeline
from ..storage.filesystem import Storage
from ..storage.lock import TableLock
from ..storage.layout import METADATA_TABLE_DIR, PARTITION_METADATA, PROPERTIES_FILE, TMP_DIR, is_hoodie_path
from ..errors import ConcurrentWriteError
from . import record_index
from .reader import DATA_INSTANT_DIGITS, FILES, HFILE_DATA_BLOCK, RECORD_INDEX, MetadataTableReader, deleted_keys
from .timeline import COMMIT, DELTA_COMMIT, completion_time, parse
from .writer import MAX_DELTA_COMMITS, WRITE_TOKEN, MetadataTableWriter, files_records

logger = logging.getLogger("hudilite")

PARTITIONS_KEY, INFLIGHT_KEY = props.METADATA_PARTITIONS
ENABLE_KEY = "hudilite.metadata.enable"  # "false": this table keeps no metadata table (`drop`)
KEPT = (FILES,)
HADOOP_CHECKSUM = posixpath.join(posixpath.dirname(PROPERTIES_FILE), "." + posixpath.basename(PROPERTIES_FILE) + ".crc")
DROPPED_HEADER = "#Updated by hudilite: Hudi's metadata table dropped (as hoodie.metadata.enable=false does)"
_PENDING_DATA_ACTIONS = {"inflight"}  # v6's name of an inflight commit (`<T>.inflight`)


def listed_partitions(properties: Dict[str, str], key: str = PARTITIONS_KEY) -> List[str]:
    return [p for p in (properties.get(key) or "").split(",") if p]


def _kept(properties: Dict[str, str]) -> bool:
    """Whether writes keep the metadata table in step: unless the table opted out."""
    return properties.get(ENABLE_KEY, "true").lower() != "false"


def _keyed(properties: Dict[str, str]) -> bool:
    """A table with record key fields: its keys go in record_index (auto keys' do not: hudilite
    finds them by their runs, `key_ranges`)."""
    return bool(properties.get("hoodie.table.recordkey.fields"))


def data_timeline(storage: Storage) -> Timeline:
    """The data table's timeline, in the layout its properties give (layout 1 without them)."""
    try:
        return Timeline.of_table(storage, props.loads(storage.read_state(PROPERTIES_FILE)))
    except FileNotFoundError:
        return Timeline(storage)


def data_instants(storage: Storage) -> Tuple[Set[str], Set[str]]:
    """The data table's active instants of every action: (completed, pending)."""
    completed, pending = set(), set()
    for name in data_timeline(storage).file_names():  # the pinned listing, in a pinned picture
        parsed = parse(name)
        if parsed is None:
            continue
        instant, action, state = parsed
        (pending if state or action in _PENDING_DATA_ACTIONS else completed).add(instant)
    return completed, pending - completed


def _write_properties(storage: Storage, text: str, changed: Dict[str, str], header: str) -> None:
    listed = props.loads(text)
    listed.update(changed)
    header = props.SAVED_BY_HUDILITE if text.startswith(props.SAVED_BY_HUDILITE) else header
    # Hadoop's local file system keeps a checksum beside each file Java wrote and refuses to
    # read a file that no longer matches it; without one it reads the file unchecked.
    if storage.is_file(HADOOP_CHECKSUM):
        storage.delete_file(HADOOP_CHECKSUM)
    storage.write_atomic(PROPERTIES_FILE, props.dumps(listed, header).encode(), TMP_DIR)


class MetadataTable:
    def __init__(self, storage: Storage, reserve_time: Optional[Callable[[], str]] = None):
        """`reserve_time`: a new instant time reserved on the data table (`MetadataTableWriter`):
        given by a caller that may compact a version 8/9 table's metadata table."""
        self.storage = storage
        self.writer = MetadataTableWriter(storage, reserve_time)
        self._logs_after_last_write = 0  # `after_publish` looks further only when a compaction may be due

    def _properties(self) -> Tuple[str, Dict[str, str]]:
        text = self.storage.read_state(PROPERTIES_FILE)
        return text, props.loads(text)

    def is_kept(self) -> bool:
        """Whether writes keep a metadata table (every table, unless it opted out)."""
        return _kept(self._properties()[1])

    def reader(self) -> Optional[MetadataTableReader]:
        """The metadata table as readers see it; None when `files` is not listed."""
        if FILES not in listed_partitions(self._properties()[1]):
            return None
        completed, pending = data_instants(self.storage)
        return MetadataTableReader.of_timelines(self.storage, completed, min(completed | pending, default=None))

    # -- writes ------------------------------------------------------------------------------

    def record_commit(self, instant: str, metadata: CommitMetadata, on_file: Callable[[str], None],
                      record_index_logs: Optional[Dict[str, int]] = None) -> None:
        """Before data instant `instant` completes: its files in `files` (the metadata table
        bootstrapped first if the table has none) and the record_index log files its tasks
        wrote (path to size; None: the write planned none, as the partition was not listed
        when it began, which a keyed write may no longer do once it is)."""
        added: Dict[str, Dict[str, int]] = {}
        for stat in metadata.write_stats:
            added.setdefault(stat.partitionPath, {})[posixpath.basename(stat.path)] = stat.fileSizeInBytes
        self._record(instant, files_records(added, {}, partitions_added=added), on_file, record_index_logs,
                     keyed_write=bool(metadata.write_stats))

    def record_deletions(self, instant: str, deleted: Dict[str, Iterable[str]]) -> None:
        """Before a clean (or another instant that deletes files) completes: the files it deleted."""
        self._record(instant, files_records({}, {p: list(names) for p, names in deleted.items()}), None)

    def _record(self, instant: str, records: Dict[str, dict], on_file: Optional[Callable[[str], None]],
                record_index_logs: Optional[Dict[str, int]] = None, keyed_write: bool = False) -> None:
        # One read of the properties on this path (it runs under the lock of every commit).
        text, listed = self._properties()
        if not _kept(listed):
            if any(listed.get(key) for key in props.METADATA_PARTITIONS):
                # Hudi's writer built one since: it would be stale from this instant on
                self.drop(keep_dropped=listed.get(ENABLE_KEY, "true").lower() == "false")
            return
        if self._take_off_unkept(text, listed):
            text, listed = self._properties()
        if FILES not in listed_partitions(listed) or not self.writer.exists() or not self.writer.same_version():
            if self.writer.exists() and not self.writer.same_version():
                self.drop(keep_dropped=False)  # unlisted before it goes: no reader takes one half rebuilt
            self.bootstrap()  # none, listed but not there, or left at another table version
            text, listed = self._properties()
            record_index_logs = None  # any this write wrote went with the partition they were in
        if RECORD_INDEX in listed_partitions(listed) and record_index_logs is None and keyed_write and _keyed(listed):
            raise ConcurrentWriteError(
                f"table at {self.storage.base_path}: the record index of Hudi's metadata table was built while "
                f"instant {instant} ran, which did not write its keys there; nothing was published. Run it again")
        self._logs_after_last_write = self.writer.deltacommit(instant, records, on_file, record_index_logs)

    def keeps_record_index(self) -> bool:
        """Whether writes keep the record_index partition (a keyed table that keeps a metadata table)."""
        listed = self._properties()[1]
        return _kept(listed) and _keyed(listed)

    def record_index_missing(self) -> bool:
        """Whether writes keep a record_index that is not (or no longer) listed: to be built."""
        listed = self._properties()[1]
        return _kept(listed) and _keyed(listed) and RECORD_INDEX not in listed_partitions(listed)

    def record_index_listed(self) -> bool:
        return RECORD_INDEX in listed_partitions(self._properties()[1])

    def record_index_log_paths(self, instant: str) -> Optional[Tuple[str, ...]]:
        """The record_index log files a write of `instant` writes, by shard; None while the
        partition is not listed (a write then writes none; `record_commit` refuses it once it is),
        or the metadata table is not kept (the table opted out)."""
        listed = self._properties()[1]
        if not _kept(listed) or RECORD_INDEX not in listed_partitions(listed):
            return None
        slices = self.writer.record_index_slices()
        # Keys hash into groups 0..N-1: with one gone (a Java writer dropping the partition died
        # half way, a hand) a write would hash them mod another N, into the wrong groups.
        if set(slices) != {record_index.file_group(shard) for shard in range(len(slices))} or not slices:
            self.take_off_record_index(f"file groups {sorted(slices)}, not numbered from 0 without a gap"
                                       if slices else "no file groups")
            return None
        return record_index.log_paths(instant, slices, len(slices), own_log=self.writer.layout2)

    def take_off_record_index(self, why: str) -> None:
        """Under the table lock, record_index leaves the listed partitions (no reader or writer of
        Hudi's then trusts it): the next write builds it again (`record_index_missing`)."""
        with TableLock(self.storage):
            text, listed = self._properties()
            kept = [p for p in listed_partitions(listed) if p != RECORD_INDEX]
            _write_properties(self.storage, text, {PARTITIONS_KEY: ",".join(kept)}, DROPPED_HEADER)
        logger.warning("table at %s: the metadata table's record_index holds %s; taken off, built again from the "
                       "snapshot", self.storage.base_path, why)

    def bootstrap_record_index(self, data_instant: str, write: Callable[[record_index.RecordIndexFiles], List[dict]],
                               locations: Dict[str, Tuple[str, str]], num_keys: int) -> bool:
        """Under the table lock: build the record_index partition as of completed data instant
        `data_instant` (the latest), as Hudi's writer does when its record index is turned on:
        `write(files)` writes each shard's base (the snapshot's keys), then the deltacommit
        `<data_instant>011` completes and the partition is listed. Refused (False) while a data
        write is in flight: it would not write its keys there."""
        _, pending = data_instants(self.storage)
        latest = data_timeline(self.storage).latest_completed()  # commits only: a clean since changes no key
        if pending or latest is None or latest.timestamp != data_instant:
            return False
        text, listed = self._properties()
        if FILES not in listed_partitions(listed) or not self.writer.exists():
            self.bootstrap()
        instant = self.writer.record_index_init_instant(data_instant)
        num_shards = record_index.file_group_count(num_keys)
        self.writer.begin_record_index(instant)
        files = record_index.RecordIndexFiles(self.storage.base_path, instant,
                                              record_index.base_paths(instant, num_shards, WRITE_TOKEN), locations,
                                              bootstrap=True)
        self.writer.finish_record_index(instant, num_shards, write(files))
        text, listed = self._properties()
        partitions = sorted(set(listed_partitions(listed)) | {RECORD_INDEX})
        _write_properties(self.storage, text, {PARTITIONS_KEY: ",".join(partitions)}, DROPPED_HEADER)
        logger.info("table at %s: the record index of Hudi's metadata table built (%d keys in %d file groups)",
                    self.storage.base_path, num_keys, num_shards)
        return True

    def after_publish(self) -> None:
        """After a data instant completed (under the lock): compact `files` when due."""
        if self._logs_after_last_write < MAX_DELTA_COMMITS:
            return
        reader = self.reader()
        if reader is None:
            return
        _, pending = data_instants(self.storage)
        compacted = self.writer.compact_if_due(reader, bool(pending))
        if compacted:
            logger.info("table at %s: metadata table compacted at %s", self.storage.base_path, compacted)

    def archivable_through(self) -> Optional[str]:
        """Data instants at or before this may leave the active timeline; None: any may. As
        Hudi's archiver: only those the metadata table folded into a compacted base (a reader
        takes a deltacommit only while its data instant is on the active timeline)."""
        reader = self.reader()
        if reader is None:
            return None
        timeline = reader.timeline
        compactions = timeline.completed((COMMIT,))
        if not compactions:
            return ""
        if not self.writer.layout2:
            return compactions[-1][:DATA_INSTANT_DIGITS]
        # Layout 2, as Hudi 1.x's archiver: the data instants requested before the first one that
        # completed after the latest compaction was requested (a data instant's deltacommit
        # completes before it does: all of theirs were folded).
        completions = {parsed[0]: done for name in data_timeline(self.storage).file_names()
                       for parsed, done in [(parse(name), completion_time(name))] if parsed is not None and done}
        later = [instant for instant, done in completions.items() if done >= compactions[-1]]
        return max((i for i in completions if not later or i < min(later)), default="")

    def compact_now(self) -> Optional[str]:
        """Compact `files` whatever its log count (for archival), when no data write is in flight."""
        reader = self.reader()
        if reader is None:
            return None
        _, pending = data_instants(self.storage)
        return self.writer.compact_if_due(reader, bool(pending), now=True)

    def bootstrap(self) -> None:
        """Build the metadata table from the snapshot's files, as Hudi's writer does on its first
        commit with the metadata table on; listed in the properties once complete."""
        text, listed = self._properties()
        files = self._committed_files()
        self.writer.create(listed.get("hoodie.table.name", "table"), files)
        _write_properties(self.storage, text, {PARTITIONS_KEY: FILES, INFLIGHT_KEY: ""}, DROPPED_HEADER)
        logger.info("table at %s: Hudi's metadata table built (%d files in %d partitions)", self.storage.base_path,
                    sum(len(f) for f in files.values()), len(files))

    def _committed_files(self) -> Dict[str, Dict[str, int]]:
        """Every base file on storage that a completed instant wrote: by partition, name to size."""
        timeline = data_timeline(self.storage)
        committed = {s.path for _, m in timeline.commits() for s in m.write_stats}
        committed |= {f.path for f in timeline.archived().files}
        files: Dict[str, Dict[str, int]] = {}
        for path, size in self.storage.list_files_with_sizes(""):
            if is_hoodie_path(path) or parse_base_file_name(path) is None or path not in committed:
                continue
            partition, _, name = path.rpartition("/")
            files.setdefault(partition, {})[name] = size
        for stat_path in committed:  # partitions whose every file was cleaned are still partitions
            files.setdefault(stat_path.rpartition("/")[0], {})
        return files

    def _take_off_unkept(self, text: str, listed: Dict[str, str]) -> List[str]:
        """Take the metadata-table partitions hudilite does not keep off the table's list (its
        properties: `text`, parsed `listed`), then delete them. Returns them."""
        partitions = listed_partitions(listed)
        kept = KEPT + ((RECORD_INDEX,) if _keyed(listed) else ())
        unkept = [p for p in partitions if p not in kept] + listed_partitions(listed, INFLIGHT_KEY)
        if not unkept:
            return []
        _write_properties(self.storage, text, {PARTITIONS_KEY: ",".join(p for p in partitions if p in kept),
                                               INFLIGHT_KEY: ""}, DROPPED_HEADER)
        for partition in unkept:
            self.storage.delete_dir(posixpath.join(METADATA_TABLE_DIR, partition))
        logger.info("table at %s: metadata-table partitions hudilite does not keep taken off: %s",
                    self.storage.base_path, ", ".join(unkept))
        return unkept

    def drop(self, keep_dropped: bool = True) -> bool:
        """Remove the metadata table as Hudi's writer does with `hoodie.metadata.enable=false`:
        the properties stop listing it first (from then on readers list storage), then its
        folder goes; a drop killed between the two leaves a folder no reader looks at, which the
        next drop or bootstrap removes. `keep_dropped`: the table keeps none from now on.
        True when there was one to remove."""
        text, listed = self._properties()
        listing = any(listed.get(key) for key in props.METADATA_PARTITIONS)
        changed = {key: "" for key in props.METADATA_PARTITIONS if key in listed or listing}
        if keep_dropped and listed.get(ENABLE_KEY) != "false":
            changed[ENABLE_KEY] = "false"
        if changed:
            _write_properties(self.storage, text, changed, DROPPED_HEADER)
        folder = self.storage.exists(METADATA_TABLE_DIR)
        if folder:
            self.storage.delete_dir(METADATA_TABLE_DIR)
        if listing or folder:
            logger.info("table at %s: Hudi's metadata table dropped", self.storage.base_path)
        return listing or folder

    def enable(self) -> None:
        """Keep a metadata table again (built on the next write)."""
        text, listed = self._properties()
        if listed.get(ENABLE_KEY) == "false":
            _write_properties(self.storage, text, {ENABLE_KEY: "true"}, DROPPED_HEADER)

    def written_by(self, path: str, instant: str) -> bool:
        """Whether `path`, a file a write of `instant` marked, is that write's: a metadata log
        file's name does not carry the instant, and another writer may have created the name a
        dead one had marked (its blocks then carry the other instant)."""
        log = parse_log_file_name(path)
        if log is None or not path.startswith(METADATA_TABLE_DIR + "/"):
            return True
        try:
            blocks = list(log_format.decode_blocks(self.storage.read_bytes(path)))
        except FileNotFoundError:
            return False
        return all(block.header.get(log_format.INSTANT_TIME) == instant for block in blocks)

    def record_index_changes(self, instants: List[str]) -> Optional[Dict[str, pa.Table]]:
        """What each of `instants` (completed data instants another writer made) did to
        record_index, from the log files its deltacommit lists: (key, file_id, deleted) of the
        keys it inserted or moved, and deleted. None when that cannot be told: the partition
        not listed, a deltacommit gone from the active timeline, or its logs compacted away."""
        if not self.is_kept():
            return None
        reader = self.reader()
        if reader is None or not self.record_index_listed():
            return None
        completed = reader.timeline.completed_instants()
        built_at = self._record_index_built_at()
        if built_at is None:
            return None
        if self.writer.layout2:  # its initialization instant: the deltacommits that completed after it
            built_completed = reader.timeline.completions.get(built_at, "")  # gone from the timeline: before all
            after_build = lambda instant: reader.timeline.completions.get(instant, "") > built_completed
        else:  # the data instant it was built as of
            after_build = lambda instant: instant > built_at[:DATA_INSTANT_DIGITS]
        names = reader.timeline.names
        out = {}
        for instant in instants:
            # One at or before the partition's bootstrap, or not completed there, wrote no logs of it.
            if not after_build(instant) or instant not in completed or not reader.valid(instant):
                return None
            body = self.writer.read_completed(instant, DELTA_COMMIT, names) or {}
            changed: Dict[str, Tuple[str, bool]] = {}  # key -> (file_id, deleted); the last block of the instant wins
            for stat in (body.get("partitionToWriteStats") or {}).get(RECORD_INDEX) or []:
                path = posixpath.join(METADATA_TABLE_DIR, stat["path"])
                if not self.storage.exists(path):
                    return None
                for block in reader.blocks(path):
                    if block.header.get(log_format.INSTANT_TIME) != instant:
                        continue
                    if block.block_type == HFILE_DATA_BLOCK:
                        schema = block.header.get(log_format.SCHEMA)
                        for row, value in hfile.HFileReader.of_bytes(block.content).scan():
                            changed[row.decode()] = (metadata_record.location_of(metadata_record.decode(value, schema)).file_id, False)
                    else:
                        changed.update((key, ("", True)) for key in deleted_keys(block.content))
            out[instant] = pa.table({"key": pa.array(list(changed), pa.string()),
                                     "file_id": pa.array([f for f, _ in changed.values()], pa.string()),
                                     "deleted": pa.array([d for _, d in changed.values()], pa.bool_())})
        return out

    def _record_index_built_at(self) -> Optional[str]:
        """The instant record_index was last built at (its partition metadata's commit time: at
        layout 1 `<data instant>011` or Hudi's `<X>01n`, at layout 2 an initialization instant)."""
        path = posixpath.join(METADATA_TABLE_DIR, RECORD_INDEX, PARTITION_METADATA)
        if not self.storage.exists(path):
            return None
        return props.loads(self.storage.read_text(path)).get("commitTime") or None

    # -- checks ------------------------------------------------------------------------------

    def record_index_locations(self) -> Optional[pa.Table]:
        """Every key record_index holds with its location (key, partition, file_id); None when
        it is not listed."""
        reader = self.reader()
        if reader is None or not self.record_index_listed():
            return None
        keys, partitions, file_ids = [], [], []
        for piece in reader.slices(RECORD_INDEX).values():
            rows, values = reader.folded_cells(RECORD_INDEX, piece)
            where, file_id = metadata_record.locations_of(values)
            keys.append(rows.cast(pa.string()))
            partitions.append(where)
            file_ids.append(file_id)
        if not keys:
            return pa.table({"key": pa.array([], pa.string()), "partition": pa.array([], pa.string()),
                             "file_id": pa.array([], pa.string())})
        return pa.table({"key": pa.concat_arrays(keys), "partition": pa.concat_arrays(partitions),
                         "file_id": pa.concat_arrays(file_ids)})

    def problems(self, live: Dict[str, Dict[str, int]], on_storage: AbstractSet[str]) -> List[str]:
        """How the `files` partition differs from storage: every live file (`live`: the committed
        files on storage, by partition, name to size) listed with its size, and every file it
        lists on storage (`on_storage`: relative paths)."""
        reader = self.reader()
        if reader is None:
            return []
        listed = reader.files()
        out = [f"metadata table: {path} is listed in its files partition but is not on storage"
               for path in sorted(posixpath.join(partition, name) if partition else name
                                  for partition, files in listed.items() for name in files)
               if path not in on_storage]
        for partition, files in sorted(live.items()):
            for name, size in sorted(files.items()):
                have = listed.get(partition, {}).get(name)
                if have is None:
                    out.append(f"metadata table: {posixpath.join(partition, name)} is not listed in its files partition")
                elif have != size:
                    out.append(f"metadata table: {posixpath.join(partition, name)} is listed with {have} bytes, "
                               f"storage has {size}")
        missing = sorted(set(live) - set(reader.partitions()))
        if missing:
            out.append(f"metadata table: partitions {missing[:5]} are not in its partition list")
        return out
