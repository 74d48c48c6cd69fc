"""`TableContext`: one table's state (storage, config, timeline, index) and the steps every
write operation shares: the schema after a write, rows laid out for the writer tasks, the
writer's spec, and the commit with its index delta. The operation modules (`insert`,
`upsert`, `update`, `maintenance`) are small functions over it; `HudiTable` is their public
face, as pyiceberg's `Table` is over its transaction and snapshot producers.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Dict, List, Optional, Set, Tuple

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from .storage import faults
from .format import properties as props
from .format.commit import CHECKPOINT_PREFIX, SCHEMA_KEY, SPARK_SCHEMA_KEY, CommitMetadata, WriteStat
from .errors import (ConcurrentWriteError, ConfigurationError, DataError, HudiliteError, SchemaError,
                     TableReplacedError, TimelineError)
from .format.file_group import BaseFile, FileSystemView
from .spark.file_sizing import FileSizing
from .index.table_index import IndexChange, TableIndex, file_id_of
from .format.instant import CLEAN, RESTORE, Instant
from .index.key_ranges import KeyRangeIndex
from .format.keygen import PartitionFormat, formats_in_task, partition_grouping, task_row_index
from .storage.layout import CLEAN_STATE, PROPERTIES_FILE, archived_dir, history_dir, timeline_dir
from .storage.lock import TableLock
from .spark.reader import literal_path, read_base_files, read_data_files
from .index.record_index import RecordIndex, Sharding, entry_key_of, recorded_deltas
from .format.rows import ROW_INDEX, insert_layout
from .format.schema import (COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, IS_DELETED, META_COLUMNS, PARTITION_PATH,
                            RECORD_KEY, check_compatible, from_avro, from_json, quote, resolve_columns, same_key_text,
                            to_avro, to_json, with_meta_columns)
from .storage.filesystem import Storage
from .format.timeline import Timeline
from .keys import TableKeys
from .transaction import WriteTransaction, open_claims
from .spark.writer import WriteSpec

logger = logging.getLogger("hudilite")

# How a write treats the table schema: new columns join it ("evolve"), columns the rows lack
# leave it too ("drop_missing"), or the rows' schema becomes the table's ("replace").
EVOLVE, DROP_MISSING, REPLACE = "evolve", "drop_missing", "replace"


def schema_mode(drop_missing_columns: bool) -> str:
    return DROP_MISSING if drop_missing_columns else EVOLVE


def _shards(index_state: Optional[dict]) -> Optional[tuple]:
    """How an index is laid out (shard count, hash, what entries are keyed by), for writers
    that began before a change: None when not built."""
    if index_state is None:
        return None
    return tuple(index_state.get(k) for k in Sharding.STATE_KEYS) + (entry_key_of(index_state),)


def _file_instant() -> Column:
    """The instant that wrote a row's base file (`<fileId>_<token>_<instant>.parquet`)."""
    return F.regexp_extract(F.col("_metadata.file_name"), r"_(\d+)\.parquet$", 1)


class TableContext:
    def __init__(self, spark: SparkSession, storage: Storage, config: props.TableConfig):
        self.spark = spark
        self.storage = storage
        self.config = config
        self.timeline = Timeline(storage, archived_dir(config.archive_folder), timeline_dir(config.timeline_folder),
                                 history_dir(config.timeline_folder, config.history_folder))
        self.index: TableIndex = (KeyRangeIndex if config.auto_keys else RecordIndex)(spark, storage, self.index_guard)
        if config.virtual_keys:  # the keys of files a write made come from their key fields
            self.index.read_written = self.read_written_files
        self.write_options: Dict[str, object] = {}  # extra WriteSpec fields (file sizes, test hooks)
        self.file_sizing = FileSizing()  # small-file handling of inserts
        # Per upstream table whose changes the next write consumed: (the checkpoint it read
        # from, where it read to). Kept in the commit's extraMetadata; the write publishes only
        # if no other write of this table moved the checkpoint meanwhile.
        self.checkpoints: Dict[str, Tuple[Optional[str], str]] = {}
        self._index_basis: Optional[Set[str]] = None  # the completed instants a new index base is computed from
        self.keys = TableKeys(self)  # how its record keys and partition paths are made

    @property
    def name(self) -> str:
        return self.config.name

    def error(self, message: str) -> ConfigurationError:
        return ConfigurationError(f"table {self.name}: {message}")

    # ---- reads ------------------------------------------------------------------------------
    def schema(self, as_of: Optional[str] = None) -> Optional[T.StructType]:
        """The data schema (no meta columns) as of an instant, for reads: that of the commits,
        else `hoodie.table.create.schema` of a table without one; None when neither is there."""
        committed = self.committed_schema(as_of)
        if committed is None and self.config.create_schema:
            return from_avro(self.config.create_schema)
        return committed

    def committed_schema(self, as_of: Optional[str] = None) -> Optional[T.StructType]:
        """The schema the latest commit recorded; None before the first. Writes build on this,
        never on the create schema, whose Avro loses Spark types (tinyint, smallint, varchar).
        Ours carries exact Spark types; a commit of Hudi's Java writer only the Avro schema."""
        for _, metadata in reversed(self.timeline.commits(as_of)):
            if SPARK_SCHEMA_KEY in metadata.extra:
                return from_json(metadata.extra[SPARK_SCHEMA_KEY])
            if metadata.extra.get(SCHEMA_KEY):
                return from_avro(metadata.extra[SCHEMA_KEY])
        return None

    def existing_schema(self) -> T.StructType:
        current = self.committed_schema()
        if current is None:
            raise self.error("it has no rows yet")
        return current

    def read_files(self, files: List[BaseFile], as_of: Optional[str] = None, file_instants: bool = False) -> DataFrame:
        """`file_instants`: on a table with virtual keys, each row's commit time is its file's
        instant (for a rewrite, which tells stored rows from changed ones by having one); else
        null, as stored."""
        data_schema = self.schema(as_of) or T.StructType([])
        if self.config.virtual_keys and files:
            instant = _file_instant() if file_instants else None
            return self._with_virtual_meta_columns(read_data_files(self.spark, self.storage, files, data_schema),
                                                   data_schema, instant)
        return read_base_files(self.spark, self.storage, files, data_schema)

    def read_written_files(self, files: List[BaseFile]) -> DataFrame:
        """Virtual keys: the meta columns of files this write made (`TableIndex.written_rows`),
        their schema read from the files (it may hold columns no commit has yet), each row's
        commit time the instant that wrote its file (new rows only: inserts top up no small
        file on such a table)."""
        if not files:
            return self.spark.createDataFrame([], with_meta_columns(T.StructType([])))
        data = self.spark.read.parquet(*[literal_path(self.storage.uri(f.path)) for f in files])
        data_schema = T.StructType([f for f in data.schema.fields if f.name not in META_COLUMNS])
        return self._with_virtual_meta_columns(data, data_schema, _file_instant())

    def _with_virtual_meta_columns(self, data: DataFrame, data_schema: T.StructType,
                                   commit_time: Optional[Column] = None) -> DataFrame:
        """Meta columns of a table whose files hold none (virtual keys): the key and partition
        path as its key generator makes them from their fields, the file name from the file. A
        row's commit time and sequence number are not stored anywhere: null (or `commit_time`)."""
        unknown = F.lit(None).cast("string")
        try:
            key, partition = self.keys.record_key(data_schema, refuse=False), self.keys.partition_path(data_schema)
        except (HudiliteError, KeyError):  # a key generator we make no keys for, or fields not in the files
            key = partition = unknown
        meta = {
            COMMIT_TIME: unknown if commit_time is None else commit_time,
            COMMIT_SEQNO: unknown,
            RECORD_KEY: key,
            PARTITION_PATH: partition,
            FILE_NAME: F.col("_metadata.file_name"),
        }
        return data.select(*[meta[c].alias(c) for c in META_COLUMNS], *[F.col(quote(f.name)) for f in data_schema])

    def clean_state(self) -> dict:
        """The cleaner's record, from its latest clean instant: `earliest_retained` (the oldest
        instant it kept readable, absent when it removed nothing) and `complete` (false while
        its deletions may be unfinished)."""
        cleans = self.timeline.service_instants(CLEAN)
        if not cleans:  # a table cleaned before hudilite recorded cleans as Hudi does
            try:
                return json.loads(self.storage.read_state(CLEAN_STATE))
            except FileNotFoundError:
                return {}
        record = self.timeline.service_metadata(cleans[-1])
        if cleans[-1].is_completed:
            return {"earliest_retained": record["earliestCommitToRetain"] or None, "complete": True,
                    "policy": record.get("policy")}
        earliest = record["earliestInstantToRetain"]
        return {"earliest_retained": earliest and earliest["timestamp"], "complete": False, "policy": record.get("policy")}

    def pending_restore(self) -> Optional[Instant]:
        """A restore that has not finished (`restore`), if any."""
        restores = self.timeline.service_instants(RESTORE)
        return restores[-1] if restores and not restores[-1].is_completed else None

    def earliest_retained(self) -> Optional[str]:
        return self.clean_state().get("earliest_retained")

    def resolve_instant(self, as_of) -> str:
        instant = self.timeline.resolve(as_of)
        earliest = self.earliest_retained()
        if earliest is not None and instant < earliest and instant not in self.timeline.savepoints() \
                and instant != self.timeline.latest_completed().timestamp:  # after a restore to before `earliest`
            raise TimelineError(
                f"table {self.name}: instant {instant} was cleaned; the earliest readable instant is {earliest}"
            )
        return instant

    def read(self, as_of=None) -> DataFrame:
        instant = None if as_of is None else self.resolve_instant(as_of)
        return self.read_files(self.timeline.view(instant).latest_base_files(), instant)

    # ---- the index --------------------------------------------------------------------------
    def build_index(self, num_shards: Optional[int] = None) -> int:
        self.timeline.refresh()  # built from what is completed now: its guard compares with that
        completed = self.timeline.completed()
        if not completed:
            raise self.error("nothing to index before the first commit")
        latest = completed[-1].timestamp
        with self._index_computed_from(completed):
            view = self.timeline.view(latest)
            built = self.index.build(self.read_files(view.latest_base_files(), latest), view, latest, num_shards)
        if isinstance(self.index, RecordIndex) and self.index.metadata_table.record_index_missing():
            self.bootstrap_record_index()
        return built

    def bootstrap_record_index(self) -> None:
        """Build the metadata table's record_index from the latest snapshot (a table that had
        none, or whose partition Hudi's writer dropped); skipped while a write is in flight,
        which the next write retries."""
        latest = self.timeline.latest_completed()
        if latest is None:
            return
        if not self.index.bootstrap_record_index(self.read(latest.timestamp), latest.timestamp,
                                                 self.timeline.view(latest.timestamp)):
            logger.info("table %s: a write is in flight; the metadata table's record index is built by a later write",
                        self.name)

    @contextlib.contextmanager
    def _index_computed_from(self, completed: List[Instant]):
        """The completed instants an index base computed inside is built from (`index_guard`);
        forgotten afterwards, published or not."""
        self._index_basis = {i.timestamp for i in completed}
        try:
            yield
        finally:
            self._index_basis = None

    def compact_index(self, only_if_due: bool = False) -> None:
        """Fold the index's deltas into a new base as of the latest completed instant. Commits
        another writer made have no delta to fold: then the index is built again instead (a
        folded base past them would hide their keys for good)."""
        if self.foreign_commits():
            self.rebuild_index()
            return
        completed = self.timeline.completed()
        view = self.timeline.view(completed[-1].timestamp)
        with self._index_computed_from(completed):
            if only_if_due:
                self.index.compact_if_due(completed, view)
            else:
                self.index.compact(completed, view)

    def rebuild_index(self) -> int:
        """Build the index again from the latest snapshot, with the shard count it has."""
        return self.build_index(self.index.num_shards if isinstance(self.index, RecordIndex) else None)

    def foreign_commits(self) -> List[str]:
        """Completed commits after the index's base that another writer (Hudi's own) made and
        the index has not caught up with: they wrote no index delta, so the index does not know
        the keys they inserted, moved or deleted."""
        base = self.index.state()["base_instant"]
        foreign = [i.timestamp for i, metadata in self.timeline.commits()
                   if i.timestamp > base and SPARK_SCHEMA_KEY not in metadata.extra]
        if foreign and isinstance(self.index, RecordIndex):
            caught_up = self.index.caught_up()
            foreign = [t for t in foreign if t not in caught_up]
        return foreign

    def ensure_index(self) -> None:
        """Tables written before the index existed get it built on their first indexed write;
        an index behind commits another writer made is built again before it is used."""
        self.check_writable()
        if self.timeline.latest_completed() is None:
            return
        if not self.index.is_built():
            self.build_index()
            return
        if self._index_base_gone():
            logger.info("table %s: the index's base instant %s is no longer on the timeline (another writer restored "
                        "or rolled back the table); building it again from the snapshot", self.name,
                        self.index.state()["base_instant"])
            self.rebuild_index()
            return
        foreign = self.foreign_commits()
        if foreign and isinstance(self.index, RecordIndex) and self.index.catch_up(foreign):
            logger.info("table %s: %d commit(s) from another writer (%s ... %s) taken from the metadata table's "
                        "record index", self.name, len(foreign), foreign[0], foreign[-1])
        elif foreign:
            logger.info("table %s: %d commit(s) from another writer (%s ... %s) since the index was built; "
                        "building it again from the snapshot", self.name, len(foreign), foreign[0], foreign[-1])
            self.rebuild_index()
        elif isinstance(self.index, RecordIndex) and self.index.metadata_table.record_index_missing():
            self.bootstrap_record_index()

    def _index_base_gone(self) -> bool:
        """Whether the index's base instant is neither completed nor archived: Hudi's restore or
        rollback removed commits the index holds (a removed commit after the base only hides
        its delta, which is read only for completed instants)."""
        def gone(base: str) -> bool:
            through = self.timeline.archived().through
            return base not in {i.timestamp for i in self.timeline.completed()} and (through is None or base > through)
        if not gone(self.index.state()["base_instant"]):
            return False
        # The timeline was listed before the state was read: a commit and a compaction of the
        # index since would look like a base gone. Asked again on a fresh listing.
        self.timeline.refresh()
        return gone(self.index.state()["base_instant"])

    # ---- the steps of a write ---------------------------------------------------------------
    def check_writable(self) -> None:
        """Refuse, before anything is written, a table whose Java writer's settings we cannot
        keep (see `properties`), or whose keys we cannot make."""
        if self.config.not_writable:
            raise self.error(f"hudilite cannot write it: {self.config.not_writable}")
        if self.config.virtual_keys and self.config.auto_keys:
            raise self.error("hudilite cannot write it: its rows carry no meta fields (hoodie.populate.meta.fields="
                             "false, virtual keys) and it has no record key fields, so its keys are stored nowhere")
        restore = self.pending_restore()
        if restore is not None:
            target = self.timeline.service_metadata(restore)["savepointToRestoreTimestamp"]
            raise TimelineError(f"table {self.name}: a restore to {target} is unfinished; finish it first "
                                f"(hudilite restore {self.storage.base_path} {target})")
        if not self.config.auto_keys:
            self.keys.field_prefixed()
        self.keys.generator()

    def transaction(self, action: str) -> WriteTransaction:
        """A write's transaction. A write that began before the index existed (or before it was
        rebuilt with other shards) wrote no delta (or one in the old shards): it may not publish
        after such a change (its keys would be missing). Its schema is compared with that of
        concurrent commits (`conflict.py`). A keyed write whose index lookups missed a commit of
        another writer (Hudi's own, one that completed after `ensure_index`) is refused: it may
        hold a key that commit stored."""
        self.check_writable()
        self.check_not_replaced()
        shards_at_start = _shards(self.index.state())
        schema_at_start = self.committed_schema()

        # A read from a checkpoint adds to what earlier writes consumed: it may publish only
        # while that checkpoint is the latest. A read from the start replaces it all.
        read_from = {source: start for source, (start, _) in self.checkpoints.items() if start is not None}

        def changed_meanwhile() -> Optional[str]:
            self.check_not_replaced()
            if _shards(self.index.state()) != shards_at_start:
                return "the record index was built, resharded or rewritten in a new format while this write ran"
            if not self.config.auto_keys and self.index.is_built() and self.foreign_commits():
                return ("another writer (Hudi's own) committed while this write ran, after the record index was read. "
                        "Run it again (write_retries retries it), which builds the index anew")
            for source, start in read_from.items():
                if self.checkpoint(source) != start:
                    return (f"another write consumed the changes of {source} since this one read them (its checkpoint "
                            f"moved from {start} to {self.checkpoint(source)}); run again")
            return None

        return WriteTransaction(self.storage, self.timeline, action, None if self.config.auto_keys else self.keys_in,
                                changed_meanwhile, None if schema_at_start is None else to_json(schema_at_start))

    def check_not_replaced(self) -> None:
        """The table at this path is still the one this handle opened: not dropped, and not
        replaced by a rebuild with another layout (what hoodie.properties fixes when a table is
        made). Checked when a write begins and under the lock before it
        publishes; not a conflict to retry, as a retry with this handle would write its layout."""
        try:
            current = read_config(self.storage)
        except FileNotFoundError:
            current = None
        if current is None or current.layout() != self.config.layout():
            raise TableReplacedError(f"table {self.name} at {self.storage.base_path} was dropped or replaced by a "
                                     "rebuild since it was opened; nothing was published: open it again")
        if (current.table_version, current.timeline_folder) != (self.config.table_version, self.config.timeline_folder):
            raise TableReplacedError(f"table {self.name} at {self.storage.base_path} was upgraded to table version "
                                     f"{current.table_version} since it was opened; nothing was published: open it again")

    def checkpoint(self, source: str) -> Optional[str]:
        """The instant of `source` up to which this table's latest write that recorded one
        consumed its changes (None when no active commit holds one)."""
        key = CHECKPOINT_PREFIX + source
        for instant in reversed(self.timeline.completed()):
            value = self.timeline.metadata(instant).extra.get(key)
            if value:
                return value
        return None

    def keys_in(self, paths: List[str]) -> Set[str]:
        """The record keys stored in base files (driver side: for conflict checks)."""
        keys: Set[str] = set()
        virtual = self.keys.virtual()
        for path in paths:
            with self.storage.open_input(path) as source:
                if virtual is not None:
                    parquet = pq.ParquetFile(source)
                    names = {n.lower(): n for n in parquet.schema_arrow.names}
                    keys.update(virtual.keys(parquet.read(columns=[names[f.lower()] for f in virtual.fields])).to_pylist())
                else:
                    keys.update(pq.read_table(source, columns=[RECORD_KEY]).column(0).to_pylist())
        return keys

    @contextlib.contextmanager
    def index_guard(self, base_instant: str):
        """Publishing an index base as of `base_instant` (build, compaction): under the table
        lock, only while exactly the instants it was computed from are completed and no older
        one is pending or claimed (their keys would be in neither the base nor a visible delta)."""
        basis = self._index_basis
        with TableLock(self.storage):  # the timeline read afresh under it
            completed = {i.timestamp for i in self.timeline.completed()}
            if basis is None:  # a direct `index.build`/`compact` call: the base covers what is completed up to it
                basis = {t for t in completed if t <= base_instant}
            in_flight = {i.timestamp for i in self.timeline.pending()} | (set(open_claims(self.storage)) - completed)
            older = sorted(t for t in in_flight if t <= base_instant)
            if completed != basis or older:
                why = f"instant {older[0]} is in flight" if older else "a commit completed while it was computed"
                raise ConcurrentWriteError(f"table {self.name}: the index as of {base_instant} was not published: {why}")
            yield

    def schema_after(self, df: DataFrame, mode: str) -> T.StructType:
        """The table schema once `df` is written; the table's key, partition and precombine
        columns must be among its columns."""
        incoming = T.StructType(
            [T.StructField(f.name, f.dataType, True) for f in df.schema.fields if f.name not in META_COLUMNS]
        )
        names = {f.name.lower() for f in incoming.fields}
        meta = {c.lower() for c in META_COLUMNS}
        clashes = [f.name for f in incoming.fields if f.name.lower() in meta]
        if clashes:
            raise SchemaError(f"table {self.name}: column '{clashes[0]}' differs from Hudi's meta column only by case; "
                              "rename it")
        if len(names) < len(incoming.fields):
            twice = sorted(f.name for f in incoming.fields if [g.name.lower() for g in incoming.fields].count(f.name.lower()) > 1)
            raise SchemaError(f"table {self.name}: the new rows hold columns that differ only by case: {', '.join(twice)}")
        to_avro(incoming, self.name)  # refuses what Java readers could not parse, before anything is written
        wanted = [("partition", c) for c in self.config.partition_fields] + [("record key", c) for c in self.config.record_key_fields]
        if self.config.precombine_field:
            wanted.append(("precombine", self.config.precombine_field))
        for role, column in wanted:
            if column.lower() not in names:
                raise SchemaError(
                    f"table {self.name}: {role} column '{column}' is not among the new rows' columns "
                    f"({', '.join(f.name for f in incoming.fields)})"
                )
        current = self.committed_schema()
        if current is None or mode == REPLACE:
            return incoming
        if not self.config.auto_keys and IS_DELETED not in names:
            # The delete flag is a control column of keyed writes; an older hudilite stored it
            # on rebuilds. Such a table's next write leaves it out of the schema, as any keyed
            # write of today would (the files keep it; readers no longer see it).
            current = T.StructType([f for f in current.fields if f.name.lower() != IS_DELETED])
        after = check_compatible(current, incoming, self.name, drop_missing=mode == DROP_MISSING)
        self._refuse_retyped_key_columns(current, after)
        self._refuse_readded_columns(current, after)
        return after

    def _refuse_retyped_key_columns(self, current: T.StructType, after: T.StructType) -> None:
        """Record keys and partition paths are the text of their columns' values, so a widening
        that changes the text (int to double: '1' to '1.0'; a decimal's scale: '1.50' to '1.500')
        would key every stored row anew, duplicating each, or write p=1.0 beside p=1. Widenings
        that keep the text (among integers, a decimal's precision alone) stay allowed."""
        before = {f.name.lower(): f.dataType for f in current.fields}
        roles = [("record key", c) for c in self.config.record_key_fields] + [
            ("partition", c) for c in self.config.partition_fields]
        for field in after.fields:
            old = before.get(field.name.lower())
            role = next((r for r, c in roles if c.lower() == field.name.lower()), None)
            if role is None or old is None or old == field.dataType or same_key_text(old, field.dataType):
                continue
            raise SchemaError(
                f"table {self.name}: {role} column '{field.name}' cannot change type from {old.simpleString()} to "
                f"{field.dataType.simpleString()}: its {role} values are the text of its values, which the new type "
                f"writes differently, so stored rows would no longer match; cast it to {old.simpleString()} in the "
                "model, or rebuild the table (--full-refresh)")

    def _refuse_readded_columns(self, current: T.StructType, after: T.StructType) -> None:
        """A column dropped earlier and added again while files of the snapshot still hold it:
        readers (Spark, hudi-rs, Hudi's own) match parquet columns by name, so the values written
        before the drop would show again (data a user removed on purpose), or, with another type,
        the files would fail to read. The schema history is the Spark schema each commit records:
        a live slice written by an instant whose schema held the name still holds its values."""
        known = {f.name.lower() for f in current.fields}
        added = {f.name.lower(): f for f in after.fields if f.name.lower() not in known}
        if not added:
            return
        for instant, fields in self._live_slice_schemas():
            for name, old_type in fields:
                new = added.get(name.lower())
                if new is None:
                    continue
                if old_type is not None and new.dataType != old_type:
                    raise SchemaError(
                        f"table {self.name}: column '{new.name}' was {old_type.simpleString()} when files still in "
                        f"the table were written (instant {instant}); adding it back as "
                        f"{new.dataType.simpleString()} would make them unreadable: use another name, or rebuild the "
                        "table (a full refresh)")
                raise SchemaError(
                    f"table {self.name}: column '{new.name}' was dropped, but files still in the table hold the values "
                    f"it had before (written by instant {instant}); adding it back would show those values again "
                    "instead of nulls: use another name, or rebuild the table (a full refresh)")

    def _live_slice_schemas(self):
        """(instant, [(column, Spark type or None)]) of each instant that wrote a live slice: the
        schema its commit recorded (ours exact, Hudi's Java writer's in Avro), else the columns
        of a file it wrote (an archived Java commit), their types unknown."""
        live: Dict[str, str] = {}
        for group in self.timeline.view().live_groups():
            live.setdefault(group.latest.instant, group.latest.path)
        recorded = {i: from_json(s) for i, s in self.timeline.archived().schemas.items()}
        for instant, metadata in self.timeline.commits():
            if SPARK_SCHEMA_KEY in metadata.extra:
                recorded[instant.timestamp] = from_json(metadata.extra[SPARK_SCHEMA_KEY])
            elif metadata.extra.get(SCHEMA_KEY):
                recorded[instant.timestamp] = from_avro(metadata.extra[SCHEMA_KEY])
        for instant, path in sorted(live.items()):
            if instant in recorded:
                yield instant, [(f.name, f.dataType) for f in recorded[instant].fields]
                continue
            with self.storage.open_input(path) as source:
                names = pq.ParquetFile(source).schema_arrow.names
            yield instant, [(n, None) for n in names if n not in META_COLUMNS]

    def typed(self, df: DataFrame, data_schema: T.StructType, *extra: Column) -> DataFrame:
        """`df`'s data columns in table order, with the table's names and types, then `extra`.
        Keys and partition paths are built from these, never from the rows as they came: a
        key column spelled in another case, or an int arriving for a double, keys the same row."""
        if not extra and [(f.name, f.dataType) for f in df.schema.fields] == [
                (f.name, f.dataType) for f in data_schema.fields]:
            return df  # already so: a select would only cost its analysis
        actual = {f.name.lower(): f for f in df.schema.fields}
        data = []
        for field in data_schema.fields:
            source = actual[field.name.lower()]
            col = F.col(quote(source.name))
            if source.dataType != field.dataType:
                col = col.cast(field.dataType)
            data.append(col.alias(field.name))
        return df.select(*data, *extra)

    def rows_for_writer(self, df: DataFrame, data_schema: T.StructType) -> DataFrame:
        """`df` in the insert layout (`rows.insert_layout`): data columns in table order and types."""
        typed = self.typed(df, data_schema)
        partitioned = bool(self.config.partition_fields)
        columns = resolve_columns(self.config.partition_fields, data_schema)
        types = [data_schema[c].dataType for c in columns]
        in_task = formats_in_task(types) and self.keys.generator().plain
        # A path the task makes (`keygen.PartitionFormat`) crosses from the JVM as a null column.
        path = F.lit(None) if in_task else self.keys.partition_path(data_schema)
        meta = {ROW_INDEX: task_row_index(), PARTITION_PATH: path} if partitioned else {}
        if not self.config.auto_keys:
            meta[RECORD_KEY] = self.keys.record_key(data_schema)
        data = [F.col(quote(f.name)) for f in data_schema.fields]
        out = typed.select(*insert_layout(self.config.auto_keys, partitioned).select(meta, data))
        if not partitioned:
            return out
        # Tasks write one file group per partition path they meet: group their rows (by the
        # partition columns where the task makes the path).
        grouping = partition_grouping(columns, types) if in_task else [F.col(PARTITION_PATH)]
        return out.sortWithinPartitions(*grouping, ROW_INDEX)

    def check_new_keys(self, instant: str, stats: List[WriteStat], replaced: Set[str], view: FileSystemView) -> None:
        """Refuse new rows whose record keys repeat, or that the table holds outside the file
        groups being replaced: either would store a key twice. The new rows are those of this
        instant (a topped-up small file also holds its stored rows)."""
        if not stats:
            return
        keys = self.index.written_rows(stats).where(F.col(COMMIT_TIME) == instant).select(RECORD_KEY)
        twice = keys.groupBy(RECORD_KEY).count().where(F.col("count") > 1).limit(1).collect()
        if twice:
            raise DataError(f"table {self.name}: the new rows hold record key '{twice[0][0]}' more than once")
        held = sorted(self.index.holders(keys, self.timeline.completed(), view) - replaced)
        if held:
            raise DataError(f"table {self.name}: some new rows have record keys the table holds already (file group "
                            f"{held[0]}); an insert adds rows: use upsert (a merge model) to change stored ones")

    def write_spec(self, instant: str, **extra) -> WriteSpec:
        fields = dict(
            base_path=self.storage.base_path, instant=instant, partitioned=bool(self.config.partition_fields),
            partition_depth=self.keys.generator().depth, auto_keys=self.config.auto_keys,
            portable_encoding=self.config.parquet_encoding == props.PORTABLE,
            partition_format=PartitionFormat(tuple(self.config.partition_fields), self.config.hive_style_partitioning,
                                             self.name) if self.config.partition_fields else None,
            # What Java's BLOOM index reads; no index looks up auto keys, and Hudi's writer puts none
            # in the files of a table with virtual keys.
            bloom_footers=not self.config.auto_keys and not self.config.virtual_keys,
            virtual_keys=self.keys.virtual(),
        )
        return WriteSpec(**{**fields, **self.write_options, **extra})

    def arrow_schema(self, data_schema: T.StructType):
        """The data columns as Spark hands them to Python (timestamps in the session's zone)."""
        return to_arrow_schema(data_schema, timezone=self.spark.conf.get("spark.sql.session.timeZone"))

    def index_delta(self, instant: str, change: IndexChange) -> List[str]:
        """The index files of a commit: hudilite's index (once built) and the metadata table's
        record_index (once listed)."""
        if isinstance(self.index, RecordIndex) or self.index.is_built():
            return self.index.delta(instant, change)
        return []

    def keys_leaving(self, before: FileSystemView, replaced: Set[str], stats: List[WriteStat]) -> Optional[DataFrame]:
        """Tombstones (key, file_id, deleted) of the keys of `replaced` file groups that the write
        (`stats`) did not store again, for the metadata table's record_index (Hudi's writer
        deletes them there; hudilite's own index takes replaced groups' entries as not live)."""
        if not replaced or not isinstance(self.index, RecordIndex) or not self.index.metadata_table.record_index_listed():
            return None
        files = [g.latest for g in before.live_groups() if g.file_id in replaced]
        stored = self.read_files(files).select(F.col(RECORD_KEY).alias("key"), file_id_of(F.col(FILE_NAME)).alias("file_id"))
        again = self.index.written_rows(stats).select(F.col(RECORD_KEY).alias("key")) if stats else None
        leaving = stored.join(again, "key", "left_anti") if again is not None else stored
        return leaving.withColumn("deleted", F.lit(True))

    def commit(self, txn: WriteTransaction, operation: str, data_schema: T.StructType, stats: List[WriteStat],
               index_files: List[str], replaced: Optional[Dict[str, List[str]]] = None) -> str:
        """Publish the instant: its write stats, replaced file groups, schema and index files."""
        metadata = CommitMetadata(
            operation=operation, write_stats=stats, replaced_file_ids=replaced or {},
            extra={**{CHECKPOINT_PREFIX + source: end for source, (_, end) in self.checkpoints.items()},
                   SCHEMA_KEY: to_avro(data_schema, self.name), SPARK_SCHEMA_KEY: to_json(data_schema),
                   **(recorded_deltas(index_files) if isinstance(self.index, RecordIndex) else {})},
        )
        planned = isinstance(self.index, RecordIndex) and txn.instant in self.index.record_index_planned
        txn.commit(metadata, index_files, record_index_planned=planned)
        return txn.instant

    def after_commit(self, build_missing_index: bool = False) -> None:
        """Inline table services after a published write: compact the index when due, or build
        it if asked and the table has none yet (its first rows came through an upsert). The
        write is committed whatever happens here, so a failure is a warning: the next write
        builds or compacts."""
        faults.reach("after_publish")
        try:
            if self.index.is_built():
                self.compact_index(only_if_due=True)
            elif build_missing_index:
                self.build_index()
        except Exception as err:  # noqa: BLE001 - see above
            logger.warning("table %s: index maintenance after the commit failed, the next write retries it: %s",
                           self.name, err)


def read_config(storage: Storage) -> props.TableConfig:
    """The table's config, from its hoodie.properties."""
    text = storage.read_state(PROPERTIES_FILE)
    return props.TableConfig.from_properties(props.loads(text), ours=text.startswith(props.SAVED_BY_HUDILITE))
