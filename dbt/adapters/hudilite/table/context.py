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
from typing import Dict, List, Optional, Set

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from . import properties as props
from .commit import SCHEMA_KEY, SPARK_SCHEMA_KEY, CommitMetadata, WriteStat
from .errors import ConcurrentWriteError, ConfigurationError, SchemaError, TimelineError
from .file_group import BaseFile
from .index import IndexChange, TableIndex
from .key_ranges import KeyRangeIndex
from .keygen import partition_path, record_key, task_row_index
from .layout import CLEAN_STATE
from .lock import TableLock
from .reader import read_base_files
from .record_index import RecordIndex
from .rows import ROW_INDEX, insert_layout
from .schema import META_COLUMNS, PARTITION_PATH, RECORD_KEY, check_compatible, from_json, quote, to_avro, to_json
from .storage import Storage
from .timeline import Timeline
from .transaction import WriteTransaction
from .writer import WriteSpec

logger = logging.getLogger("hudilite")

# How a write treats the table schema: new columns join it ("evolve"), columns the rows lack
# leave it too ("drop_missing"), or the rows' schema becomes the table's ("replace").
EVOLVE, DROP_MISSING, REPLACE = "evolve", "drop_missing", "replace"


def schema_mode(drop_missing_columns: bool) -> str:
    return DROP_MISSING if drop_missing_columns else EVOLVE


def resolve_columns(fields: List[str], schema: T.StructType) -> List[str]:
    """The spelling `schema` uses for each of `fields` (Spark matches names case-insensitively)."""
    by_lower = {f.name.lower(): f.name for f in schema.fields}
    return [by_lower[f.lower()] for f in fields]


class TableContext:
    def __init__(self, spark: SparkSession, storage: Storage, config: props.TableConfig):
        self.spark = spark
        self.storage = storage
        self.config = config
        self.timeline = Timeline(storage)
        self.index: TableIndex = (KeyRangeIndex if config.auto_keys else RecordIndex)(spark, storage, self.index_guard)
        self.write_options: Dict[str, object] = {}  # extra WriteSpec fields (file sizes, test hooks)

    @property
    def name(self) -> str:
        return self.config.name

    def error(self, message: str) -> ConfigurationError:
        return ConfigurationError(f"table {self.name}: {message}")

    # ---- reads ------------------------------------------------------------------------------
    def schema(self, as_of: Optional[str] = None) -> Optional[T.StructType]:
        """The data schema (no meta columns) as of an instant; None before the first write."""
        for _, metadata in reversed(self.timeline.commits(as_of)):
            if SPARK_SCHEMA_KEY in metadata.extra:
                return from_json(metadata.extra[SPARK_SCHEMA_KEY])
        return None

    def existing_schema(self) -> T.StructType:
        current = self.schema()
        if current is None:
            raise self.error("it has no rows yet")
        return current

    def read_files(self, files: List[BaseFile], as_of: Optional[str] = None) -> DataFrame:
        return read_base_files(self.spark, self.storage, files, self.schema(as_of) or T.StructType([]))

    def clean_state(self) -> dict:
        """The cleaner's record: `earliest_retained` (the oldest instant it kept readable, absent
        when it removed nothing) and `complete` (false while its deletions may be unfinished)."""
        if not self.storage.exists(CLEAN_STATE):
            return {}
        return json.loads(self.storage.read_text(CLEAN_STATE))

    def earliest_retained(self) -> Optional[str]:
        return self.clean_state().get("earliest_retained")

    def resolve_instant(self, as_of) -> str:
        instant = self.timeline.resolve(as_of)
        earliest = self.earliest_retained()
        if earliest is not None and instant < earliest:
            raise TimelineError(
                f"table {self.name}: instant {instant} was cleaned; the earliest readable instant is {earliest}"
            )
        return instant

    def read(self, as_of=None) -> DataFrame:
        instant = None if as_of is None else self.resolve_instant(as_of)
        return self.read_files(self.timeline.view(instant).latest_base_files(), instant)

    # ---- the index --------------------------------------------------------------------------
    def build_index(self, num_shards: Optional[int] = None) -> int:
        latest = self.timeline.latest_completed()
        if latest is None:
            raise self.error("nothing to index before the first commit")
        return self.index.build(self.read(), latest.timestamp, num_shards)

    def ensure_index(self) -> None:
        """Tables written before the index existed get it built on their first indexed write."""
        if not self.index.is_built() and self.timeline.latest_completed() is not None:
            self.build_index()

    # ---- the steps of a write ---------------------------------------------------------------
    def transaction(self, action: str) -> WriteTransaction:
        """A write's transaction. A write that began before the index existed wrote no index
        delta: it may not publish once an index was built meanwhile (its keys would be missing)."""
        indexed = self.index.is_built()

        def index_built_meanwhile() -> Optional[str]:
            return None if indexed or not self.index.is_built() else "the record index was built while this write ran"

        return WriteTransaction(self.storage, self.timeline, action, None if self.config.auto_keys else self.keys_in,
                                index_built_meanwhile)

    def keys_in(self, paths: List[str]) -> Set[str]:
        """The record keys stored in base files (driver side: for conflict checks)."""
        keys: Set[str] = set()
        for path in paths:
            with self.storage.open_input(path) as source:
                keys.update(pq.read_table(source, columns=[RECORD_KEY]).column(0).to_pylist())
        return keys

    @contextlib.contextmanager
    def index_guard(self, base_instant: str):
        """Publishing an index base as of `base_instant` (build, compaction): under the table
        lock, only while no commit completed after it and none older is still pending (their
        keys would be in neither the base nor a visible delta)."""
        with TableLock(self.storage):
            latest = self.timeline.latest_completed()
            older_pending = [i.timestamp for i in self.timeline.pending() if i.timestamp < base_instant]
            if latest is None or latest.timestamp != base_instant or older_pending:
                raise ConcurrentWriteError(
                    f"table {self.name}: the record index as of {base_instant} was not published: "
                    f"{'instant ' + older_pending[0] + ' is still pending' if older_pending else 'a commit completed meanwhile'}")
            yield

    def schema_after(self, df: DataFrame, mode: str) -> T.StructType:
        """The table schema once `df` is written; the table's key, partition and precombine
        columns must be among its columns."""
        incoming = T.StructType(
            [T.StructField(f.name, f.dataType, True) for f in df.schema.fields if f.name not in META_COLUMNS]
        )
        names = {f.name.lower() for f in incoming.fields}
        wanted = [("partition", c) for c in self.config.partition_fields] + [("record key", c) for c in self.config.record_key_fields]
        if self.config.precombine_field:
            wanted.append(("precombine", self.config.precombine_field))
        for role, column in wanted:
            if column.lower() not in names:
                raise SchemaError(
                    f"table {self.name}: {role} column '{column}' is not among the new rows' columns "
                    f"({', '.join(f.name for f in incoming.fields)})"
                )
        current = self.schema()
        if current is None or mode == REPLACE:
            return incoming
        return check_compatible(current, incoming, self.name, drop_missing=mode == DROP_MISSING)

    def rows_for_writer(self, df: DataFrame, data_schema: T.StructType) -> DataFrame:
        """`df` in the insert layout (`rows.insert_layout`): data columns in table order and types."""
        actual = {f.name.lower(): f for f in df.schema.fields}
        data = []
        for field in data_schema.fields:
            source = actual[field.name.lower()]
            col = F.col(quote(source.name))
            if source.dataType != field.dataType:
                col = col.cast(field.dataType)
            data.append(col.alias(field.name))
        meta = {
            ROW_INDEX: task_row_index(),
            PARTITION_PATH: partition_path(resolve_columns(self.config.partition_fields, df.schema),
                                           self.config.hive_style_partitioning, self.name),
        }
        if not self.config.auto_keys:
            meta[RECORD_KEY] = record_key(resolve_columns(self.config.record_key_fields, df.schema), self.name)
        out = df.select(*insert_layout(self.config.auto_keys).select(meta, data))
        # Tasks write one file group per partition path they meet: group their rows.
        return out.sortWithinPartitions(PARTITION_PATH, ROW_INDEX) if self.config.partition_fields else out

    def write_spec(self, instant: str, **extra) -> WriteSpec:
        return WriteSpec(
            base_path=self.storage.base_path, instant=instant, partitioned=bool(self.config.partition_fields),
            partition_depth=len(self.config.partition_fields), auto_keys=self.config.auto_keys,
            **self.write_options, **extra,
        )

    def arrow_schema(self, data_schema: T.StructType):
        """The data columns as Spark hands them to Python (timestamps in the session's zone)."""
        return to_arrow_schema(data_schema, timezone=self.spark.conf.get("spark.sql.session.timeZone"))

    def index_delta(self, instant: str, change: IndexChange) -> List[str]:
        """The index files of a commit (none before the index is built)."""
        return self.index.delta(instant, change) if self.index.is_built() else []

    def commit(self, txn: WriteTransaction, operation: str, data_schema: T.StructType, stats: List[WriteStat],
               index_files: List[str], replaced: Optional[Dict[str, List[str]]] = None) -> str:
        """Publish the instant: its write stats, replaced file groups, schema and index files."""
        metadata = CommitMetadata(
            operation=operation, write_stats=stats, replaced_file_ids=replaced or {},
            extra={SCHEMA_KEY: to_avro(data_schema, self.name), SPARK_SCHEMA_KEY: to_json(data_schema)},
        )
        txn.commit(metadata, index_files)
        return txn.instant

    def after_commit(self, build_missing_index: bool = False) -> None:
        """Inline table services after a published write: compact the index when due, or build
        it if asked and the table has none yet (its first rows came through an upsert). The
        write is committed whatever happens here, so a failure is a warning: the next write
        builds or compacts."""
        try:
            if self.index.is_built():
                self.index.compact_if_due(self.timeline.completed(), self.timeline.view())
            elif build_missing_index:
                self.build_index()
        except Exception as err:  # noqa: BLE001 - see above
            logger.warning("table %s: index maintenance after the commit failed, the next write retries it: %s",
                           self.name, err)
