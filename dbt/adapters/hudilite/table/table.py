"""HudiTable: the public operations on one Copy-On-Write table.

A thin face over the operation modules (`insert`, `upsert`, `update`, `maintenance`), which
work on the table's `TableContext`: each write is one transaction on the timeline whose files
Spark tasks write; reads turn the timeline's file list into a DataFrame.
"""

from __future__ import annotations

import functools
import posixpath
from typing import Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from .services import clustering
from .operations import insert as inserts
from .services import maintenance
from .metadata.table import MetadataTable
from .format import properties as props
from .services import restore as restoring
from .services import savepoint as savepointing
from .services import upgrade as upgrading
from .operations import update as updates
from .operations import upsert as upserts
from .format.archived_timeline import java_archive_files
from .services.archival import DEFAULT_KEEP_MAX_COMMITS, DEFAULT_KEEP_MIN_COMMITS
from .services.cleaner import (DEFAULT_RETAIN_COMMITS, DEFAULT_RETAIN_FILE_VERSIONS, DEFAULT_RETAIN_HOURS,
                               KEEP_LATEST_COMMITS, CleanPlan, CleanPolicy)
from .format.commit import UPSERT, CommitMetadata
from .context import TableContext, read_config, schema_mode
from .spark.environment import check_python_workers
from .errors import ConfigurationError, CorruptTableError, TimelineError
from .format.file_group import BaseFile
from .spark.file_sizing import FileSizing
from .index.table_index import TableIndex
from .format.instant import Instant, to_instant_time
from .format.keygen import EPOCH_MICROS
from .storage.layout import EMPTY_DIR, HOODIE_DIR, PROPERTIES_FILE, TMP_DIR, history_dir
from .storage.lock import TableLock
from .spark.reader import changed_rows, rows_of_instants
from .format.schema import data_columns, to_avro, with_meta_columns
from .storage.filesystem import Storage
from .transaction import first_write_in_flight, list_writers_first

Fields = Union[None, str, Sequence[str]]


def _field_list(value: Fields) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def _write(method):
    """A write plans on one listing of the timeline (`Timeline.pinned`), not one per question,
    taken after the claims so that its claim, made soon after, lists nothing again
    (`transaction.list_writers_first`); its commit lists it again."""
    @functools.wraps(method)
    def write(self, *args, **kwargs):
        with self.context.timeline.pinned():
            list_writers_first(self.context.timeline)
            return method(self, *args, **kwargs)
    return write


class HudiTable:
    def __init__(self, spark: SparkSession, storage: Storage, config: props.TableConfig):
        check_python_workers(spark)
        self.context = TableContext(spark, storage, config)

    # ---- life cycle -------------------------------------------------------------------------
    @staticmethod
    def exists(path: str) -> bool:
        return Storage(path).exists(PROPERTIES_FILE)

    @classmethod
    def create(cls, spark: SparkSession, path: str, name: str, partition_by: Fields = None,
               record_key: Fields = None, precombine: Optional[str] = None,
               database: str = "default", schema: Optional[T.StructType] = None,
               parquet_encoding: str = props.COMPACT, virtual_keys: bool = False,
               table_version: int = int(props.TABLE_VERSION)) -> "HudiTable":
        """A new, empty table. `schema` (the rows it will hold) is recorded as Hudi's
        `hoodie.table.create.schema`, which Java readers resolve the schema of a table without
        commits from; `parquet_encoding` is `compact` or `portable` (properties.PARQUET_ENCODINGS).
        `virtual_keys`: Hudi's `hoodie.populate.meta.fields=false`, the meta columns of its files
        left empty (null) but for `_hoodie_file_name`; keys come from the record key fields, and
        changes reads are refused (no commit time is stored per row). It needs a record key.
        `table_version`: Hudi's table version, 6 (Hudi 0.14 and later read it), 8 (Hudi 1.0 and
        later) or 9 (Hudi 1.1 and later)."""
        check_python_workers(spark)
        storage = Storage(path)
        if storage.exists(PROPERTIES_FILE):
            raise ConfigurationError(f"{storage.base_path} is already a Hudi table")
        try:
            foreign = storage.list_names("")
        except (NotADirectoryError, FileExistsError):
            raise ConfigurationError(f"cannot create table {name} at {storage.base_path}: it is a file") from None
        if foreign == [HOODIE_DIR] and all(
                posixpath.join(HOODIE_DIR, p).startswith((TMP_DIR + "/", EMPTY_DIR + "/"))
                for p in storage.list_files_recursive(HOODIE_DIR)):
            storage.delete_dir(HOODIE_DIR)  # a create killed before its properties were in place
            foreign = []
        if foreign:
            raise ConfigurationError(f"cannot create table {name}: {storage.base_path} holds files that are not a Hudi "
                                     f"table ({', '.join(sorted(foreign)[:3])}); move them away or choose another location")
        config = props.TableConfig(
            name=name, partition_fields=_field_list(partition_by), record_key_fields=_field_list(record_key),
            precombine_field=precombine, database=database, parquet_encoding=parquet_encoding,
            virtual_keys=virtual_keys, create_schema=None if schema is None else to_avro(data_columns(schema), name),
            timestamp_keys=EPOCH_MICROS, table_version=int(table_version),
            timeline_folder="timeline" if int(table_version) >= 8 else None,
        )
        config.check_new()
        try:
            if config.timeline_folder:  # Hudi 1.x lists these folders from the start
                storage.make_dirs(history_dir(config.timeline_folder, config.history_folder))
            storage.write_atomic(PROPERTIES_FILE, props.dumps(config.to_properties()).encode(), TMP_DIR)
        except OSError as err:
            raise ConfigurationError(f"cannot create table {name} at {storage.base_path}: {err}") from None
        return cls(spark, storage, config)

    @classmethod
    def open(cls, spark: SparkSession, path: str) -> "HudiTable":
        storage = Storage(path)
        if not storage.exists(PROPERTIES_FILE):
            raise ConfigurationError(f"{storage.base_path} is not a Hudi table (no {PROPERTIES_FILE})")
        config = read_config(storage)
        table = cls(spark, storage, config)
        try:  # Java's writer may have archived part of the timeline: its archive must be readable
            table.context.timeline.archived()
        except CorruptTableError as err:
            folder = table.context.timeline.archived_dir
            archived = java_archive_files(storage.list_names(folder))
            raise ConfigurationError(
                f"table {config.name}: the archived timeline ({folder}, {len(archived)} Hudi archive file(s)) "
                f"cannot be read, and the file groups its commits wrote would be missing from hudilite's view of "
                f"the table: {err}") from None
        return table

    def upgrade(self, to_version: int) -> bool:
        """Upgrade the table to Hudi table version `to_version` (8: Hudi 1.0, 9: Hudi 1.1), the
        way Hudi 1.x's writer does (`services.upgrade`); never down. False when it is there."""
        upgraded = upgrading.upgrade(self.context, int(to_version))
        self.context = TableContext(self.spark, self.storage, read_config(self.storage))
        return upgraded

    def drop_metadata_table(self) -> bool:
        """Remove Hudi's metadata table as Hudi's writer does with hoodie.metadata.enable=false
        (`metadata_table`), so that hudilite may write the table; True when there was one.
        Java writers of the table must run with that setting from then on."""
        with TableLock(self.storage):
            dropped = MetadataTable(self.storage).drop()
        if dropped:
            self.context = TableContext(self.spark, self.storage, read_config(self.storage))
        return dropped

    @property
    def spark(self) -> SparkSession:
        return self.context.spark

    @property
    def storage(self) -> Storage:
        return self.context.storage

    @property
    def config(self) -> props.TableConfig:
        return self.context.config

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def path(self) -> str:
        return self.storage.base_path

    @property
    def index(self) -> TableIndex:
        """The record index: per key (RFC-8), or key runs for an auto-keyed table."""
        return self.context.index

    @property
    def write_options(self) -> Dict[str, object]:
        """Extra `WriteSpec` fields for this table's writes (file sizes, test hooks)."""
        return self.context.write_options

    @write_options.setter
    def write_options(self, options: Dict[str, object]) -> None:
        self.context.write_options = dict(options)

    @property
    def file_sizing(self) -> FileSizing:
        """Small-file handling of inserts: `FileSizing(small_file_limit=0)` turns it off."""
        return self.context.file_sizing

    @file_sizing.setter
    def file_sizing(self, sizing: FileSizing) -> None:
        self.context.file_sizing = sizing

    @property
    def checkpoints(self) -> Dict[str, Tuple[Optional[str], str]]:
        """Per upstream table (`schema.name`) whose changes the next writes consume: (the
        checkpoint they were read from, or None for every row; the instant they were read to).
        The commit keeps the end (`CHECKPOINT_PREFIX`); a write that read from a checkpoint
        publishes only while that checkpoint is still the latest."""
        return self.context.checkpoints

    @checkpoints.setter
    def checkpoints(self, checkpoints: Dict[str, Tuple[Optional[str], str]]) -> None:
        self.context.checkpoints = dict(checkpoints)

    # ---- timeline ---------------------------------------------------------------------------
    def timeline(self) -> List[Instant]:
        return self.context.timeline.instants()

    def commit_metadata(self, instant: Union[str, Instant]) -> CommitMetadata:
        timestamp = instant.timestamp if isinstance(instant, Instant) else instant
        for i in self.context.timeline.completed():
            if i.timestamp == timestamp:
                return self.context.timeline.metadata(i)
        raise TimelineError(f"table {self.name}: no completed instant {timestamp}")

    def history(self) -> List[dict]:
        """One summary per instant, oldest first."""
        return maintenance.history(self.context)

    def schema(self, as_of: Optional[str] = None, with_meta: bool = False) -> Optional[T.StructType]:
        """The data schema as of an instant (with Hudi's meta columns first if asked); None
        before the first write."""
        data = self.context.schema(as_of)
        if not with_meta:
            return data
        return with_meta_columns(data or T.StructType([]))

    def latest_base_files(self, as_of: Optional[str] = None) -> List[BaseFile]:
        return self.context.timeline.view(as_of).latest_base_files()

    def read_only_companions(self) -> List[str]:
        """Two parquet files of no rows (`.hoodie/.hudilite/empty/`), made once. A catalog entry
        names them beside the snapshot's base files: reading them adds nothing, and Spark's
        file writers refuse a relation of more than one path (UNSUPPORTED_INSERT.MULTI_PATH), so
        no INSERT the adapter's router missed can replace a base file, even of a one-file table."""
        paths = [posixpath.join(EMPTY_DIR, f"{n}.parquet") for n in (0, 1)]
        for path in paths:
            # Not in a folder the table left meanwhile (dropped, swapped out): it would block the name.
            if not self.storage.exists(path) and self.storage.exists(PROPERTIES_FILE):
                sink = pa.BufferOutputStream()
                pq.write_table(pa.table({"_hudilite_no_rows": pa.array([], pa.int32())}), sink)
                self.storage.write_atomic(path, sink.getvalue(), TMP_DIR)
        return paths

    # ---- writes -----------------------------------------------------------------------------
    # New rows may add columns to the table schema. With `drop_missing_columns`, columns they
    # lack leave the table schema (earlier files keep them on disk; reads no longer show them).
    # An insert, overwrite of partitions or upsert of no rows that adds no column changes
    # nothing: no instant is written and None is returned.
    @_write
    def insert(self, df: DataFrame, drop_missing_columns: bool = False) -> Optional[str]:
        """Append rows as new file groups (a commit); returns the instant."""
        return inserts.insert(self.context, df, schema_mode(drop_missing_columns))

    @_write
    def insert_overwrite(self, df: DataFrame, drop_missing_columns: bool = False) -> Optional[str]:
        """Replace every partition present in `df` (a replacecommit); returns the instant."""
        return inserts.insert_overwrite(self.context, df, schema_mode(drop_missing_columns))

    @_write
    def insert_overwrite_table(self, df: DataFrame) -> str:
        """Replace the whole table, schema included (a replacecommit); returns the instant."""
        return inserts.insert_overwrite_table(self.context, df)

    @_write
    def upsert(self, df: DataFrame, update_columns: Optional[Sequence[str]] = None,
               predicates: Sequence[str] = (), drop_missing_columns: bool = False,
               predicate_alias: Optional[str] = None) -> Optional[str]:
        """Insert new keys and replace the rows of existing ones (a commit); rows with a true
        `_hoodie_is_deleted` column are deletes. Only touched file groups are rewritten. With
        `update_columns`, existing rows change only in those columns (a row whose partition
        columns are not among them stays in its partition). With `predicates` (SQL over the
        stored row, which they may call `predicate_alias`, and the incoming row, called
        `update.SOURCE_ALIAS`), a batch row some predicate rejects with its stored row does not
        match: the stored row stays as it is, and the batch row is dropped (a key names one
        row, so it cannot be inserted beside it)."""
        return upserts.upsert(self.context, df, UPSERT, None if update_columns is None else list(update_columns),
                              list(predicates), predicate_alias, schema_mode(drop_missing_columns))

    @_write
    def delete(self, keys: DataFrame) -> Optional[str]:
        """Delete the rows whose record key fields `keys` holds (a commit). On an auto-keyed
        table `keys` holds `_hoodie_record_key` values, found through the key runs; None
        when none of them is in the table."""
        if self.config.auto_keys:
            return updates.delete_auto_keys(self.context, keys)
        return upserts.delete(self.context, keys)

    @_write
    def update(self, assignments: Dict[str, str], where: Optional[str] = None, alias: Optional[str] = None
               ) -> Optional[str]:
        """SQL UPDATE: set columns to SQL expressions over each row's current values, in the
        rows `where` accepts (all without it); `alias` is the name the SQL gives the table.
        Returns the instant; None when nothing matched."""
        return updates.update(self.context, assignments, where, alias)

    @_write
    def delete_where(self, where: str, alias: Optional[str] = None) -> Optional[str]:
        """SQL DELETE: remove the rows `where` accepts. Returns the instant; None when nothing matched."""
        return updates.delete_where(self.context, where, alias)

    @_write
    def delete_insert(self, df: DataFrame, key_columns: Sequence[str], predicates: Sequence[str] = (),
                      predicate_alias: Optional[str] = None) -> str:
        """dbt's delete+insert in one commit: delete the rows whose `key_columns` values occur in
        `df` (and that every predicate accepts with such a row of `df` as `update.SOURCE_ALIAS`),
        then insert all of `df`."""
        return updates.delete_insert(self.context, df, key_columns, predicates, predicate_alias)

    def build_index(self, num_shards: Optional[int] = None) -> int:
        """Build the index from the latest snapshot; returns its entries (keys, or key runs)."""
        return self.context.build_index(num_shards)

    # ---- reads ------------------------------------------------------------------------------
    def resolve_instant(self, as_of) -> str:
        """The completed instant an instant time or timestamp names (cleaned ones refused)."""
        return self.context.resolve_instant(as_of)

    def read(self, as_of=None) -> DataFrame:
        """The latest snapshot, or the snapshot as of an instant or timestamp."""
        return self.context.read(as_of)

    def read_changes(self, start, end=None) -> DataFrame:
        """Rows inserted or changed in the instants (start, end]; `start` None reads every
        row. `end` defaults to `changes_end()`."""
        start_instant, end_instant = self.changes_range(start, end)
        if end_instant == start_instant:  # nothing final after the start (a first write may be in flight)
            return self.spark.createDataFrame([], self.schema(with_meta=True))
        timeline = self.context.timeline
        if timeline.orders_by_completion:
            return self._changes_by_completion(start_instant, end_instant)
        files = [f for f in timeline.view(end_instant).latest_base_files() if f.instant > start_instant]
        return changed_rows(self.context.read_files(files, end_instant), start_instant, end_instant)

    def _changes_by_completion(self, start: str, end: str) -> DataFrame:
        """Timeline layout 2 (as Hudi 1.x and hudi-rs read it): the rows of the instants that
        completed in (start, end], read from the table as those completions left it. An instant
        requested earlier but completed later falls in the later range, so a reader that goes on
        from `end` misses no commit."""
        timeline = self.context.timeline
        view, changed = timeline.completed_view(start, end)
        if not changed:
            return self.spark.createDataFrame([], self.schema(with_meta=True))
        as_of = max(changed)
        files = [f for f in view.latest_base_files() if f.instant >= min(changed)]
        return rows_of_instants(self.context.read_files(files, as_of), changed)

    def changes_range(self, start, end=None) -> Tuple[str, str]:
        """The instants (start, end] a changes read covers. `end` defaults to the latest
        instant no write in flight precedes: a concurrent writer that claimed an earlier time
        may still publish, and a reader that took a later end as its next start would miss
        it. An explicit `end` past such a writer is refused for the same reason."""
        if self.config.virtual_keys:  # as in Hudi: no commit time is stored per row
            raise ConfigurationError(f"table {self.name}: its rows carry no meta fields (hoodie.populate.meta.fields="
                                     "false, virtual keys), so which rows changed cannot be told; read snapshots")
        timeline = self.context.timeline
        start_instant = str(start) if start is not None else "0"
        if timeline.orders_by_completion:  # completion times: a writer in flight completes later than any seen
            return start_instant, self._completion_bound(start_instant, end)
        completed, in_flight = first_write_in_flight(self.context.storage, timeline)
        final = [t for t in completed if in_flight is None or t < in_flight]
        if end is None:
            return start_instant, max(final[-1], start_instant) if final else start_instant
        end_instant = self.context.resolve_instant(end)  # a cleaned end is refused, naming the earliest readable
        if in_flight is not None and in_flight < end_instant:
            raise TimelineError(
                f"table {self.name}: instant {in_flight} is still being written and precedes {end_instant}, so "
                f"changes up to {end_instant} are not final; read up to {final[-1] if final else start_instant} "
                "or retry when it is done")
        return start_instant, end_instant

    def _completion_bound(self, start: str, end) -> str:
        """Layout 2's end of a changes read (`Timeline.completion_bound`); one whose snapshot
        was cleaned is refused."""
        bound = self.context.timeline.completion_bound(start, None if end is None else to_instant_time(end))
        done = [i.timestamp for i in self.context.timeline.completed() if i.completed_at <= bound]
        if done:
            self.context.resolve_instant(max(done))  # refuses a cleaned snapshot
        return bound

    def checkpoint(self, source: str) -> Optional[str]:
        """The instant of `source` (an upstream table) up to which this table's latest write
        that recorded one consumed its changes, as Hudi's streamer keeps its checkpoint in
        the commit's extraMetadata; None when no active commit holds one."""
        return self.context.checkpoint(source)

    def create_temp_view(self, view_name: str, as_of=None) -> DataFrame:
        df = self.read(as_of)
        df.createOrReplaceTempView(view_name)
        return df

    # ---- table services ---------------------------------------------------------------------
    def validate(self) -> List[str]:
        """Problems that make the table ill-formed (empty when it is well-formed)."""
        return maintenance.validate(self.context)

    def cluster(self, cluster_by: Sequence[str] = ()) -> Optional[str]:
        """Rewrite each partition's small file groups (below `file_sizing.small_file_limit`, two
        or more) into files near `file_sizing.max_file_size`, sorted by `cluster_by` (a
        replacecommit, operation CLUSTER); returns the instant, None when nothing is small."""
        return clustering.cluster(self.context, list(cluster_by))

    def pinned(self):
        """One picture of the table's small state (the timeline's listing, its properties, the
        index's state) for what runs inside: a write and the services after it then judge on
        the picture its commit took under the lock, and the services list nothing again. Every
        table lock still reads afresh."""
        return self.context.timeline.pinned()

    def run_services(self, services: maintenance.TableServices = maintenance.TableServices()) -> None:
        """The table services Hudi's writer runs inline after a commit: clustering when due,
        the cleaner, archival."""
        maintenance.run_services(self.context, services)

    def clean(self, retain_commits: int = DEFAULT_RETAIN_COMMITS, policy: str = KEEP_LATEST_COMMITS,
              retain_hours: int = DEFAULT_RETAIN_HOURS, retain_file_versions: int = DEFAULT_RETAIN_FILE_VERSIONS,
              sweep: bool = False) -> CleanPlan:
        """Delete file slices the cleaner `policy` no longer retains (Hudi's: the default keeps
        every snapshot of the last `retain_commits` instants readable; see `cleaner`), never a
        savepointed one; recorded as a `.clean` instant. Files late tasks left are found through
        their markers; `sweep` looks through the whole table (`maintenance.remove_zombie_files`)."""
        return maintenance.clean(self.context, CleanPolicy(policy.upper(), retain_commits, retain_hours,
                                                           retain_file_versions), sweep)

    def savepoint(self, as_of=None, comments: str = "") -> str:
        """Savepoint the latest completed instant at or before `as_of` (default: the latest):
        the cleaner and archival keep its snapshot until the savepoint is deleted. Returns it."""
        return savepointing.create_savepoint(self.context, as_of, comments)

    def savepoints(self) -> List[str]:
        return self.context.timeline.savepoints()

    def delete_savepoint(self, instant: str) -> str:
        """Drop a savepoint; from then on the cleaner and archival may take its snapshot."""
        savepointing.delete_savepoint(self.context, instant)
        return instant

    def restore(self, as_of) -> List[str]:
        """Take the table back to the latest completed instant at or before `as_of` (a savepoint,
        or an instant still readable): later commits, their files and index entries go.
        Returns the instants rolled back, newest first."""
        return restoring.restore(self.context, as_of)

    def archive(self, keep_min_commits: int = DEFAULT_KEEP_MIN_COMMITS,
                keep_max_commits: int = DEFAULT_KEEP_MAX_COMMITS) -> List[str]:
        """Once more than `keep_max_commits` completed instants are on the active timeline,
        move the oldest to `.hoodie/archived/` until `keep_min_commits` are left; only what the
        cleaner has finished with goes (see `archival`). Returns the archived instants."""
        return maintenance.archive(self.context, keep_min_commits, keep_max_commits)

    def stats(self) -> dict:
        """Files per partition, a file-size histogram, active and archived instants, index size."""
        return maintenance.stats(self.context)

    def earliest_readable_instant(self) -> Optional[str]:
        """The oldest instant time travel can reach (None when the cleaner removed nothing)."""
        return self.context.earliest_retained()


