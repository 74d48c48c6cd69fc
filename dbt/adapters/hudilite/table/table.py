"""HudiTable: the public operations on one Copy-On-Write table.

Writes are one Spark job each (tasks write base files, the driver publishes the instant);
reads turn the timeline's file list into a DataFrame over Spark's parquet scan.
"""

from __future__ import annotations

import functools
import json
from typing import Dict, List, Optional, Sequence, Union

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from . import properties as props
from .cleaner import CleanPlan, plan_clean
from .commit import (
    DELETE,
    INSERT,
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    SCHEMA_KEY,
    SPARK_SCHEMA_KEY,
    UPSERT,
    CommitMetadata,
    WriteStat,
)
from .file_group import BaseFile
from .instant import COMMIT, REPLACE_COMMIT, Instant
from .keygen import partition_path, record_key, task_row_index
from .reader import changed_rows, read_base_files
from .schema import (
    FILE_NAME,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    SchemaError,
    check_compatible,
    from_json,
    quote,
    to_avro,
    to_json,
)
from .storage import Storage
from .timeline import PRIVATE_DIR, TMP_DIR, Timeline, TimelineError
from .transaction import WriteTransaction, claimed_instants, writer_path
from .validation import check_table, files_outside_hoodie
from .key_ranges import KeyRangeIndex
from .record_index import RecordIndex, entries_of, file_id_of
from .update import as_dest, check_assignments, deleted_entries, key_marker, keys_rejected_by, matches_per_file_group, rows_after, where_marker, with_file_id
from .upsert import IS_DELETED, OLD_FILE_ID, keyed_batch, new_rows, summarize, tag, tombstones
from .writer import ROW_INDEX, WriteSpec, merge_task, rewrite_task, run_write_job, write_empty_slice, write_stat

CLEAN_STATE = PRIVATE_DIR + "/clean.json"
Fields = Union[None, str, Sequence[str]]


class HudiTableError(ValueError):
    pass


def _field_list(value: Fields) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


class HudiTable:
    def __init__(self, spark: SparkSession, storage: Storage, config: props.TableConfig):
        self.spark = spark
        self.storage = storage
        self.config = config
        self._timeline = Timeline(storage)
        self.write_options: Dict[str, object] = {}  # extra WriteSpec fields (file sizes, test hooks)

    # ---- life cycle -------------------------------------------------------------------------
    @staticmethod
    def exists(path: str) -> bool:
        return Storage(path).exists(props.PROPERTIES_FILE)

    @classmethod
    def create(cls, spark: SparkSession, path: str, name: str, partition_by: Fields = None,
               record_key: Fields = None, precombine: Optional[str] = None,
               database: str = "default") -> "HudiTable":
        storage = Storage(path)
        if storage.exists(props.PROPERTIES_FILE):
            raise HudiTableError(f"{storage.base_path} is already a Hudi table")
        config = props.TableConfig(
            name=name, partition_fields=_field_list(partition_by), record_key_fields=_field_list(record_key),
            precombine_field=precombine, database=database,
        )
        storage.write_atomic(props.PROPERTIES_FILE, props.dumps(config.to_properties()).encode(), TMP_DIR)
        return cls(spark, storage, config)

    @classmethod
    def open(cls, spark: SparkSession, path: str) -> "HudiTable":
        storage = Storage(path)
        if not storage.exists(props.PROPERTIES_FILE):
            raise HudiTableError(f"{storage.base_path} is not a Hudi table (no {props.PROPERTIES_FILE})")
        config = props.TableConfig.from_properties(props.loads(storage.read_text(props.PROPERTIES_FILE)))
        return cls(spark, storage, config)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def path(self) -> str:
        return self.storage.base_path

    # ---- timeline ---------------------------------------------------------------------------
    def timeline(self) -> List[Instant]:
        return self._timeline.instants()

    def commit_metadata(self, instant: Union[str, Instant]) -> CommitMetadata:
        timestamp = instant.timestamp if isinstance(instant, Instant) else instant
        for i in self._timeline.completed():
            if i.timestamp == timestamp:
                return self._timeline.metadata(i)
        raise TimelineError(f"table {self.name}: no completed instant {timestamp}")

    def history(self) -> List[dict]:
        """One summary per instant, oldest first: what a person wants to see of the timeline."""
        out = []
        for i in self._timeline.instants():
            entry = {"instant": i.timestamp, "action": i.action, "state": i.state}
            if i.is_completed:
                m = self._timeline.metadata(i)
                entry.update(
                    operation=m.operation, files_written=len(m.write_stats), rows_written=m.num_writes,
                    file_groups_replaced=sum(len(v) for v in m.replaced_file_ids.values()),
                )
            out.append(entry)
        return out

    def schema(self, as_of: Optional[str] = None) -> Optional[T.StructType]:
        """The data schema (no meta columns) as of an instant; None before the first write."""
        for instant, metadata in reversed(self._timeline.commits(as_of)):
            if SPARK_SCHEMA_KEY in metadata.extra:
                return from_json(metadata.extra[SPARK_SCHEMA_KEY])
        return None

    def latest_base_files(self, as_of: Optional[str] = None) -> List[BaseFile]:
        return self._timeline.view(as_of).latest_base_files()

    # ---- writes -----------------------------------------------------------------------------
    # New rows may add columns to the table schema. With `drop_missing_columns`, columns they
    # lack leave the table schema (earlier files keep them on disk; reads no longer show them).
    def insert(self, df: DataFrame, drop_missing_columns: bool = False) -> str:
        """Append rows as new file groups (a commit); returns the instant."""
        return self._write(df, COMMIT, INSERT, replace=None, schema_mode=_drop_or_evolve(drop_missing_columns))

    def insert_overwrite(self, df: DataFrame, drop_missing_columns: bool = False) -> str:
        """Replace every partition present in `df` (a replacecommit); returns the instant."""
        return self._write(df, REPLACE_COMMIT, INSERT_OVERWRITE, replace="partitions",
                           schema_mode=_drop_or_evolve(drop_missing_columns))

    def insert_overwrite_table(self, df: DataFrame) -> str:
        """Replace the whole table, schema included (a replacecommit); returns the instant."""
        return self._write(df, REPLACE_COMMIT, INSERT_OVERWRITE_TABLE, replace="table", schema_mode="replace")

    # ---- upserts and deletes through the record index -----------------------------------
    def upsert(self, df: DataFrame, update_columns: Optional[Sequence[str]] = None,
               predicates: Sequence[str] = (), drop_missing_columns: bool = False) -> str:
        """Insert new keys and replace the rows of existing ones (a commit); rows with a true
        `_hoodie_is_deleted` column are deletes. Only touched file groups are rewritten. With
        `update_columns`, existing rows change only in those columns. With `predicates` (SQL over
        the stored row, which may be called DBT_INTERNAL_DEST), a stored row some predicate
        rejects may not match: it stays as it is, and the batch's row for its key is dropped
        (a key names one row, so it cannot be inserted beside it)."""
        return self._upsert(df, UPSERT, None if update_columns is None else list(update_columns), list(predicates),
                            _drop_or_evolve(drop_missing_columns))

    def delete(self, keys: DataFrame) -> Optional[str]:
        """Delete the rows whose record key fields `keys` holds (a commit). On an auto-keyed
        table `keys` holds `_hoodie_record_key` values, found through the key ranges; None
        when none of them is in the table."""
        if self.config.auto_keys:
            return self._delete_auto_keys(keys)
        current = self.schema() or T.StructType([])
        present = {c.lower() for c in keys.columns}
        filled = keys.select(*keys.columns, *[F.lit(None).cast(f.dataType).alias(f.name) for f in current.fields
                                               if f.name.lower() not in present])
        return self._upsert(filled.withColumn(IS_DELETED, F.lit(True)), DELETE)

    # ---- rows chosen by a condition: any table, auto-keyed ones included -------------------
    def update(self, assignments: Dict[str, str], where: Optional[str] = None) -> Optional[str]:
        """SQL UPDATE: set columns to SQL expressions over each row's current values, in the
        rows `where` accepts (all without it). Returns the instant; None when nothing matched."""
        data_schema = self._existing_schema()
        values = check_assignments(assignments, data_schema, self.config.record_key_fields + self.config.partition_fields,
                                   self.name)
        return self._rewrite_matching(where_marker(where, self.name), UPSERT, data_schema, assignments=values)

    def delete_where(self, where: str) -> Optional[str]:
        """SQL DELETE: remove the rows `where` accepts. Returns the instant; None when nothing matched."""
        return self._rewrite_matching(where_marker(where, self.name), DELETE, self._existing_schema(), delete=True)

    def delete_insert(self, df: DataFrame, key_columns: Sequence[str], predicates: Sequence[str] = ()) -> str:
        """dbt's delete+insert in one commit: delete the rows whose `key_columns` values occur in
        `df` (and that every predicate accepts), then insert all of `df`."""
        if not self.config.auto_keys:
            raise HudiTableError(f"table {self.name}: delete+insert would duplicate its record keys; use upsert")
        data_schema = self._schema_after(df, "evolve")
        return self._rewrite_matching(key_marker(df, key_columns, predicates, self.name), INSERT, data_schema,
                                      delete=True, inserts=df)

    def _delete_auto_keys(self, keys: DataFrame) -> Optional[str]:
        if RECORD_KEY not in keys.columns and len(keys.columns) != 1:
            raise HudiTableError(f"table {self.name}: its keys are auto-generated: delete takes one column of "
                                 f"{RECORD_KEY} values (got {', '.join(keys.columns)})")
        keys = keys.select((F.col(RECORD_KEY) if RECORD_KEY in keys.columns else F.col(quote(keys.columns[0]))).alias(RECORD_KEY))
        ranges = self.key_range_index()
        if ranges.state() is None and self._timeline.latest_completed() is not None:
            self.build_record_index()
        wanted = [r[0] for r in keys.distinct().collect()]

        def holders(view, completed):
            return set(ranges.holders(wanted, completed, view).values())

        return self._rewrite_matching(key_marker(keys, [RECORD_KEY], (), self.name), DELETE, self._existing_schema(),
                                      delete=True, candidates=holders)

    def _existing_schema(self) -> T.StructType:
        current = self.schema()
        if current is None:
            raise HudiTableError(f"table {self.name}: it has no rows yet")
        return current

    def _rewrite_matching(self, mark, operation: str, data_schema: T.StructType, assignments=None,
                          delete: bool = False, inserts: Optional[DataFrame] = None, candidates=None) -> Optional[str]:
        """`candidates(view, completed)`, when given, names the only file groups that can match
        (an index knows); otherwise every live file group is scanned."""
        with WriteTransaction(self.storage, self._timeline, COMMIT) as txn:
            view = self._timeline.view()
            stored_schema = self.schema() or T.StructType([])
            current = {g.file_id: g for g in view.live_groups()}

            def marked(groups):
                files = [current[f].latest for f in groups]
                return mark(as_dest(with_file_id(read_base_files(self.spark, self.storage, files, stored_schema))))

            scanned = sorted(candidates(view, self._timeline.completed())) if candidates else current
            touched = dict(matches_per_file_group(marked(scanned))) if scanned else {}
            if not touched and inserts is None:
                return None  # nothing to do: the transaction rolls its empty instant back
            spec = self._write_spec(txn.instant, prev_commits={f: current[f].latest.instant for f in touched},
                                    deletes_per_file_group=touched if delete else {})
            stats: List[WriteStat] = []
            inserted: List[WriteStat] = []
            removed = None
            if touched:
                rewritten = marked(sorted(touched))
                stats += run_write_job(rows_after(rewritten, data_schema, assignments, delete, len(touched), self.name), spec,
                                       task=rewrite_task)
                arrow_schema = self._arrow_schema(data_schema)
                for file_id in sorted(set(touched) - {s.fileId for s in stats}):
                    stats.append(write_stat(write_empty_slice(spec, current[file_id].partition, file_id, arrow_schema)))
                if delete:
                    removed = deleted_entries(rewritten)
            if inserts is not None:
                inserted = run_write_job(self._rows_for_writer(inserts, data_schema), spec)
                stats += inserted
            txn.commit(CommitMetadata(operation=operation, write_stats=stats, extra=self._schema_metadata(data_schema)),
                       self._index_delta(txn.instant, data_schema, stats, inserted, removed))
        self._compact_index_if_due()
        return txn.instant

    def record_index(self) -> RecordIndex:
        """The per-key index of a table with a record key."""
        return RecordIndex(self.spark, self.storage)

    def key_range_index(self) -> KeyRangeIndex:
        """The index of an auto-keyed table: runs of keys per file group."""
        return KeyRangeIndex(self.storage)

    def build_record_index(self, num_shards: Optional[int] = None) -> int:
        """Build the index from the latest snapshot: per key, or for an auto-keyed table as
        runs of keys. Returns its entries (keys, or runs)."""
        latest = self._timeline.latest_completed()
        if latest is None:
            raise HudiTableError(f"table {self.name}: nothing to index before the first commit")
        if self.config.auto_keys:
            return self.key_range_index().build(self.read(), latest.timestamp)
        return self.record_index().build(self.read(), latest.timestamp, num_shards)

    def _index(self) -> Union[RecordIndex, KeyRangeIndex]:
        """This table's kind of index (it may not be built yet: `state()` is None then)."""
        return self.key_range_index() if self.config.auto_keys else self.record_index()

    def _index_delta(self, instant: str, data_schema: T.StructType, written: List[WriteStat],
                     added: List[WriteStat], removed: Optional[DataFrame] = None) -> List[str]:
        """The index files of a commit, if the table has an index: for key runs, the runs of
        every file group `written`; per key, the keys of the new file groups (`added`) and
        tombstones for `removed` keys (rewritten groups keep their keys; replaced groups'
        entries are not live)."""
        index = self._index()
        if index.state() is None:
            return []
        if self.config.auto_keys:
            return index.write_delta(self._written_rows(written, data_schema), [s.fileId for s in written], instant) \
                if written else []
        if not added and removed is None:
            return []
        changes = self._index_entries(added, data_schema)
        if removed is not None:
            changes = changes.unionByName(removed)
        return index.write_delta(changes, instant)

    def _compact_index_if_due(self) -> None:
        index = self._index()
        if index.state() is not None and index.needs_compaction(self._timeline.completed()):
            index.compact(self._timeline.completed(), self._timeline.view())

    def _upsert(self, df: DataFrame, operation: str, update_columns: Optional[List[str]] = None,
                predicates: Sequence[str] = (), schema_mode: str = "evolve") -> str:
        if self.config.auto_keys:
            raise HudiTableError(f"table {self.name}: upsert and delete need a record key; this table's keys "
                                 "are auto-generated (create it with record_key=...)")
        data_schema = self._schema_after(df.drop(IS_DELETED), schema_mode)
        index = self.record_index()
        if index.state() is None and self._timeline.latest_completed() is not None:
            self.build_record_index()
        with WriteTransaction(self.storage, self._timeline, COMMIT) as txn:
            view = self._timeline.view()
            completed = self._timeline.completed()
            batch = keyed_batch(df, data_schema, self.config.record_key_fields, self.config.partition_fields,
                                self.config.hive_style_partitioning, self.name)
            if index.state():
                shard_of, partitions, files = index.shard, index.num_shards, index.visible_files(completed)
            else:  # an empty table: every key is new
                partitions = int(self.spark.conf.get("spark.sql.shuffle.partitions"))
                shard_of, files = (lambda key: F.pmod(F.xxhash64(key), F.lit(partitions))), {}
            live = {g.file_id: g.partition for g in view.live_groups()}
            tagged = tag(batch, shard_of, partitions, self.storage.base_path, files, live, self.config.precombine_field)
            if predicates:
                tagged = tagged.join(self._keys_rejected_by(tagged, view, predicates), RECORD_KEY, "left_anti")
            tagged = tagged.persist()
            try:
                touched, duplicate, arriving = summarize(tagged)
                if duplicate is not None:
                    raise SchemaError(f"table {self.name}: the new rows hold record key '{duplicate}' more than once; "
                                      "set a precombine field to choose between them")
                current = {g.file_id: g for g in view.live_groups()}
                spec = self._write_spec(txn.instant, prev_commits={f: current[f].latest.instant for f in touched})
                stats = []
                if touched:
                    slices = {f: (current[f].latest.path, current[f].partition) for f in touched}
                    merge = functools.partial(merge_task, slices, [f.name for f in data_schema.fields],
                                              self.config.precombine_field, update_columns)
                    rows = (tagged.where(F.col(OLD_FILE_ID).isNotNull())
                            .repartition(max(1, min(len(touched), 200)), OLD_FILE_ID).sortWithinPartitions(OLD_FILE_ID))
                    stats += run_write_job(rows, spec, task=merge)
                inserted = run_write_job(self._rows_for_writer(new_rows(tagged, data_schema, arriving), data_schema), spec)
                stats += inserted
                index_files = self._index_delta(txn.instant, data_schema, stats, inserted, tombstones(tagged))
            finally:
                tagged.unpersist()
            txn.commit(CommitMetadata(operation=operation, write_stats=stats, extra=self._schema_metadata(data_schema)),
                       index_files)
        if index.state() is None:  # the table's first rows came through upsert
            self.build_record_index()
        self._compact_index_if_due()
        return txn.instant

    def _keys_rejected_by(self, tagged: DataFrame, view, predicates: Sequence[str]) -> DataFrame:
        """Keys of the batch whose stored rows the predicates keep from matching."""
        holders = {r[0] for r in tagged.where(F.col(OLD_FILE_ID).isNotNull()).select(OLD_FILE_ID).distinct().collect()}
        files = [g.latest for g in view.live_groups() if g.file_id in holders]
        stored = read_base_files(self.spark, self.storage, files, self.schema() or T.StructType([]))
        return keys_rejected_by(stored, predicates, self.name)

    def _index_entries(self, stats: List[WriteStat], data_schema: T.StructType) -> DataFrame:
        """Index entries of the files just written."""
        return entries_of(self._written_rows(stats, data_schema))

    def _written_rows(self, stats: List[WriteStat], data_schema: T.StructType) -> DataFrame:
        """The rows of the files just written, read back (only the columns used are read)."""
        files = [BaseFile(s.partitionPath, s.fileId, "", s.path, s.numWrites, s.fileSizeInBytes) for s in stats]
        return read_base_files(self.spark, self.storage, files, data_schema)

    def _arrow_schema(self, data_schema: T.StructType):
        """The data columns as Spark hands them to Python (timestamps in the session's zone)."""
        return to_arrow_schema(data_schema, timezone=self.spark.conf.get("spark.sql.session.timeZone"))

    def _write_spec(self, instant: str, **extra) -> WriteSpec:
        return WriteSpec(
            base_path=self.storage.base_path, instant=instant, partitioned=bool(self.config.partition_fields),
            partition_depth=len(self.config.partition_fields), auto_keys=self.config.auto_keys,
            **self.write_options, **extra,
        )

    def _schema_metadata(self, data_schema: T.StructType) -> Dict[str, str]:
        return {SCHEMA_KEY: to_avro(data_schema, self.name), SPARK_SCHEMA_KEY: to_json(data_schema)}

    def _write(self, df: DataFrame, action: str, operation: str, replace: Optional[str], schema_mode: str) -> str:
        data_schema = self._schema_after(df, schema_mode)
        with WriteTransaction(self.storage, self._timeline, action) as txn:
            before = self._timeline.view()
            stats = run_write_job(self._rows_for_writer(df, data_schema), self._write_spec(txn.instant))
            if replace == "table":
                replaced = before.live_file_ids()
            elif replace == "partitions":
                replaced = before.live_file_ids({s.partitionPath for s in stats})
            else:
                replaced = {}
            metadata = CommitMetadata(
                operation=operation, write_stats=stats, replaced_file_ids=replaced,
                extra=self._schema_metadata(data_schema),
            )
            txn.commit(metadata, self._index_delta(txn.instant, data_schema, stats, stats))
        self._compact_index_if_due()
        return txn.instant

    def _schema_after(self, df: DataFrame, schema_mode: str) -> T.StructType:
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
        if current is None or schema_mode == "replace":
            return incoming
        return check_compatible(current, incoming, self.name, drop_missing=schema_mode == "drop_missing")

    def _rows_for_writer(self, df: DataFrame, data_schema: T.StructType) -> DataFrame:
        """The columns `writer.write_task` expects: row index in task, record key (unless
        auto-generated), partition path, then the data columns in table order and types."""
        actual = {f.name.lower(): f for f in df.schema.fields}
        data = []
        for field in data_schema.fields:
            source = actual[field.name.lower()]
            col = F.col(quote(source.name))
            if source.dataType != field.dataType:
                col = col.cast(field.dataType)
            data.append(col.alias(field.name))
        meta = [task_row_index().alias(ROW_INDEX)]
        if not self.config.auto_keys:
            meta.append(record_key(self._resolve(self.config.record_key_fields, df.schema), self.name).alias(RECORD_KEY))
        meta.append(
            partition_path(
                self._resolve(self.config.partition_fields, df.schema), self.config.hive_style_partitioning, self.name
            ).alias(PARTITION_PATH)
        )
        out = df.select(*meta, *data)
        # Tasks write one file group per partition path they meet: group their rows.
        return out.sortWithinPartitions(PARTITION_PATH, ROW_INDEX) if self.config.partition_fields else out

    @staticmethod
    def _resolve(fields: List[str], schema: T.StructType) -> List[str]:
        by_lower = {f.name.lower(): f.name for f in schema.fields}
        return [by_lower[f.lower()] for f in fields]

    # ---- reads ------------------------------------------------------------------------------
    def resolve_instant(self, as_of) -> str:
        instant = self._timeline.resolve(as_of)
        earliest = self._earliest_retained()
        if earliest is not None and instant < earliest:
            raise TimelineError(
                f"table {self.name}: instant {instant} was cleaned; the earliest readable instant is {earliest}"
            )
        return instant

    def read(self, as_of=None) -> DataFrame:
        """The latest snapshot, or the snapshot as of an instant or timestamp."""
        instant = None if as_of is None else self.resolve_instant(as_of)
        files = self._timeline.view(instant).latest_base_files()
        return read_base_files(self.spark, self.storage, files, self.schema(instant) or T.StructType([]))

    def read_changes(self, start, end=None) -> DataFrame:
        """Rows inserted or changed in the instants (start, end]; end defaults to the latest."""
        start_instant = str(start) if start is not None else "0"
        if end is None:
            latest = self._timeline.latest_completed()
            end_instant = latest.timestamp if latest else start_instant
        else:
            end_instant = self._timeline.resolve(end)
        files = [f for f in self._timeline.view(end_instant).latest_base_files() if f.instant > start_instant]
        df = read_base_files(self.spark, self.storage, files, self.schema(end_instant) or T.StructType([]))
        return changed_rows(df, start_instant, end_instant)

    def create_temp_view(self, view_name: str, as_of=None) -> DataFrame:
        df = self.read(as_of)
        df.createOrReplaceTempView(view_name)
        return df

    def validate(self) -> List[str]:
        """Problems that make the table ill-formed (empty when it is well-formed)."""
        earliest = self._earliest_retained()
        completed = [i.timestamp for i in self._timeline.completed()]
        readable = [t for t in completed if earliest is None or t >= earliest]
        required = {f.path for t in readable for f in self._timeline.view(t).latest_base_files()}
        if earliest is None:
            required |= {s.path for _, m in self._timeline.commits() for s in m.write_stats}
        problems = check_table(
            props.loads(self.storage.read_text(props.PROPERTIES_FILE)), self._timeline.commits(),
            self._timeline.pending(), files_outside_hoodie(self.storage.list_files_with_sizes("")), required,
        )
        return problems + self._index_problems()

    def _index_problems(self, examples: int = 5) -> List[str]:
        """The record index must hold exactly the snapshot's keys, each at its file group."""
        index = self.record_index()
        if self.spark is None:
            return []
        if self.config.auto_keys and self.key_range_index().state() is not None:
            indexed = self._keys_in_ranges()
        elif index.state() is not None:
            indexed = index.read(self._timeline.completed(), self._timeline.view())
        else:
            return []
        actual = self.read().select(F.col(RECORD_KEY).alias("key"), F.col(PARTITION_PATH).alias("partition"),
                                    file_id_of(F.col(FILE_NAME)).alias("file_id"))
        problems = [f"record index lacks key '{r.key}' ({r.partition}, {r.file_id})"
                    for r in actual.exceptAll(indexed).limit(examples).collect()]
        problems += [f"record index holds key '{r.key}' at ({r.partition}, {r.file_id}), which the snapshot does not"
                     for r in indexed.exceptAll(actual).limit(examples).collect()]
        return problems

    def _keys_in_ranges(self) -> DataFrame:
        """(key, partition, file_id) of every key the auto-key runs cover."""
        view = self._timeline.view()
        partition_of = {g.file_id: g.partition for g in view.live_groups()}
        runs = [(f, partition_of[f], p, a, b) for f, rs in self.key_range_index().runs(self._timeline.completed(), view).items()
                for p, a, b in rs]
        df = self.spark.createDataFrame(runs, "file_id string, partition string, prefix string, first long, last long")
        rows = df.select("prefix", "partition", "file_id", F.explode(F.sequence("first", "last")).alias("row"))
        return rows.select(F.concat_ws("_", "prefix", F.col("row").cast("string")).alias("key"), "partition", "file_id")

    # ---- table services ---------------------------------------------------------------------
    def clean(self, retain_commits: int = 10) -> CleanPlan:
        """Delete file slices that no snapshot of the last `retain_commits` instants reads."""
        completed = [i.timestamp for i in self._timeline.completed()]
        plan = plan_clean(self._timeline.view(), completed, retain_commits, self._earliest_retained())
        for base_file in plan.files_to_delete:
            self.storage.delete_file(base_file.path)
        if plan.files_to_delete:  # only then are instants before it unreadable
            self.storage.write_atomic(CLEAN_STATE, json.dumps({"earliest_retained": plan.earliest_retained}).encode(), TMP_DIR)
        latest = completed[-1] if completed else None
        for claimed in claimed_instants(self.storage):  # tombstones of rolled-back writes
            if latest is not None and claimed < latest and not any(i.timestamp == claimed for i in self._timeline.pending()):
                self.storage.delete_file(writer_path(claimed))
        return plan

    def earliest_readable_instant(self) -> Optional[str]:
        """The oldest instant time travel can reach (None when the cleaner removed nothing)."""
        return self._earliest_retained()

    def _earliest_retained(self) -> Optional[str]:
        if not self.storage.exists(CLEAN_STATE):
            return None
        return json.loads(self.storage.read_text(CLEAN_STATE)).get("earliest_retained")


def _drop_or_evolve(drop_missing_columns: bool) -> str:
    return "drop_missing" if drop_missing_columns else "evolve"
