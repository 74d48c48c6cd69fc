"""Upsert and delete on a Copy-On-Write table through the record index.

1. The batch gets its record keys and partition paths and is shuffled by index shard.
2. One task per shard (`tag_task`) resolves duplicates within the batch (the largest
   precombine value wins; without a precombine field they are flagged, and the driver raises
   an error naming the key), looks its keys up in that shard's index files and tags each row
   with the file group holding the key now, if any. It stages the tagged rows in a file of
   the instant (read by every later job: the batch is evaluated once) and returns their
   summary: the file groups touched, the rows arriving, a duplicated key.
3. Each touched file group is rewritten by one task (`merge_task`) that reads its
   latest slice and merges the batch's rows in Arrow (`merge.merge_pieces`): unchanged rows keep
   their commit time and seqno, updated rows get this instant's, deleted and moved-away rows
   are left out, and an incoming row older than the stored one (by the precombine field)
   changes nothing. Untouched file groups are neither read nor written.
4. New keys (and keys that moved to another partition: the index is global) go to new file
   groups through the insert writer.
5. The index delta of the instant: the keys of the new file groups, tombstones for deleted
   keys.

A small upsert (its tagged batch under `small_write_bytes` in Arrow) does 3 to 5 in one Spark job
after the tagging, without a shuffle: each task (`small_write_task`) reads the whole staged
batch and rewrites its share of the touched file groups (packed by size, `placement.pack`),
and one of them also writes the new keys. That is three jobs in all, with the tagging
shuffle's map stage. A larger batch is shuffled to rewrite tasks, file groups packed by size.

Smaller still (`driver_write_bytes`), the driver does the tasks' work itself (`jobs.run_on_driver`):
a batch Spark estimates small comes over in Arrow and is tagged there, and when its touched file
groups and new rows are small too, they are written there, a thread per share: one Spark job.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..format.bloom import stored_footer
from ..format.commit import DELETE, WriteStat
from ..context import EVOLVE, TableContext
from ..format.schema import resolve_columns
from ..errors import DataError
from ..format.file_group import FileGroup
from ..index.table_index import IndexChange
from ..index.files import DELTA
from ..metadata import record_index
from ..format.instant import COMMIT
from ..format.keygen import VirtualKeys
from ..storage.layout import staged_path
from ..spark.placement import pack
from ..index.record_index import ENTRY_SCHEMA, LookupPlan, RecordIndex, live_holders, write_shards
from ..format.rows import ROW_INDEX, insert_layout
from ..format.schema import IS_DELETED, META_COLUMNS, PARTITION_PATH, RECORD_KEY, quote
from ..storage.filesystem import Storage
from .merge import batches_of, merge_pieces, piece_rows, stored_keys_of, stored_pieces
from .update import rows_accepted_by
from ..spark.jobs import (ARROW_BATCH_ROWS, arrow_schema_of, driver_threads, estimated_bytes, rows_on_driver,
                          run_on_driver, run_task_job, shuffle_partitions)
from ..spark.writer import (STATS_DDL, NewSlice, WriteSpec, bounded_batches, by_rewrite_task, fail_if_injected,
                            grouped_by_file_group, run_write_job, task_context, write_slices, write_stat, write_task)

OLD_PARTITION = "_hudilite_old_partition"
OLD_FILE_ID = "_hudilite_old_file_id"
DUPLICATE = "_hudilite_duplicate"  # set on every row of a key the batch holds twice (no precombine)
SHARD = "_hudilite_shard"
STORED_PRECOMBINE = "_hudilite_stored_precombine"
STORED_KEY = "_hudilite_stored_key"


def keyed_batch(ctx: TableContext, df: DataFrame, data_schema: T.StructType) -> DataFrame:
    """Record key, partition path, delete flag, then the data columns in table order, keys and
    paths built from the typed columns (`TableContext.typed`), as inserts build them."""
    actual = {f.name.lower(): f.name for f in df.schema.fields}
    flag = F.col(quote(actual[IS_DELETED.lower()])) if IS_DELETED.lower() in actual else F.lit(False)
    typed = ctx.typed(df, data_schema, F.coalesce(flag.cast("boolean"), F.lit(False)).alias(IS_DELETED))
    return typed.select(ctx.keys.record_key(data_schema).alias(RECORD_KEY), ctx.keys.partition_path(data_schema).alias(PARTITION_PATH),
                        IS_DELETED, *[F.col(quote(f.name)) for f in data_schema.fields])


def tagged_schema(batch_schema: T.StructType) -> T.StructType:
    """The staged rows' schema: the batch's columns, every one nullable (a restage may put a
    stored null where the batch had a literal: `_moves_keep_frozen_columns`), then the tags."""
    extra = [T.StructField(OLD_PARTITION, T.StringType()), T.StructField(OLD_FILE_ID, T.StringType()),
             T.StructField(DUPLICATE, T.BooleanType()), T.StructField(SHARD, T.IntegerType())]
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in batch_schema.fields] + extra)


def stage_tagged(batch: DataFrame, plan: LookupPlan, live: Dict[str, str], precombine: Optional[str],
                 spec: WriteSpec, driver_bytes: int = 0) -> Tuple["Summary", List[str]]:
    """The batch tagged (`tag_task`): (its summary, the staged files holding the tagged rows).
    The batch is evaluated once; every later job reads the staged files. A batch Spark
    estimates at most `driver_bytes` comes to the driver in Arrow (one Spark job, no Python
    worker) and is tagged there; a larger one is shuffled by shard to tagging tasks."""
    task = functools.partial(tag_task, plan, live, precombine, spec)
    sharded = batch.withColumn(SHARD, plan.sharding.shard_of(F.col(RECORD_KEY)))
    if on_driver(lambda: estimated_bytes(sharded), driver_bytes, spec):
        rows = rows_on_driver(sharded, sharded.sparkSession.conf.get("spark.sql.session.timeZone"))
        if rows is not None:
            return _staged_result(run_on_driver(task, by_shard(rows, driver_threads()), STAGED_SUMMARY_DDL))
    return _staging_job(plan.sharding.distribute(sharded, RECORD_KEY, SHARD), task)


def on_driver(size: Callable[[], Optional[int]], limit: int, spec: WriteSpec) -> bool:
    """Whether a write's work of `size()` bytes (None: unknown) runs on the driver: at most
    `limit`, and no test injects a Spark task's failure or twin (the driver's is one attempt)."""
    if limit <= 0 or spec.fail_task_attempt is not None or spec.speculative_task is not None:
        return False
    bytes_ = size()
    return bytes_ is not None and bytes_ <= limit


def by_shard(rows: pa.Table, threads: int) -> List[List[pa.RecordBatch]]:
    """`rows` (with their SHARD) split for `threads` tagging threads, whole shards each."""
    shards = rows.column(SHARD).to_numpy(zero_copy_only=False)
    parts = [rows.filter(pa.array(shards % threads == i)) for i in range(threads)] if threads > 1 else [rows]
    return [part.to_batches() for part in parts if part.num_rows] or [[]]


def restage(tagged: DataFrame, spec: WriteSpec) -> Tuple["Summary", List[str]]:
    """Tagged rows (filtered after tagging) staged again: (their summary, the staged files)."""
    return _staging_job(tagged, functools.partial(stage_task, spec))


def _staging_job(rows: DataFrame, task) -> Tuple["Summary", List[str]]:
    return _staged_result(run_task_job(rows, task, STAGED_SUMMARY_DDL, as_arrow=True))


def _staged_result(parts: pa.Table) -> Tuple["Summary", List[str]]:
    return summary_of(parts), sorted(set(parts.column(STAGED).to_pylist()))


def staged_rows(spark, base_path: str, paths: List[str], schema: T.StructType) -> DataFrame:
    """The tagged rows of the staged files, a task per file (no shuffle)."""
    task = functools.partial(read_staged_task, base_path, paths)
    return spark.range(len(paths), numPartitions=max(1, len(paths))).mapInArrow(task, schema)


def read_staged_task(base_path: str, paths: List[str], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the rows of the staged files whose positions in `paths` arrive."""
    mine = [paths[i] for batch in batches for i in batch.column(0).to_pylist()]
    if mine:
        yield from bounded_batches(read_staged(Storage(base_path), mine))  # back to the JVM: bytes bounded


def read_staged(storage: Storage, paths: List[str]) -> pa.Table:
    tables = []
    for path in paths:
        with storage.open_input(path) as source:
            tables.append(pa.ipc.open_file(source).read_all())
    return pa.concat_tables(tables)


def one_row_per_key(rows: pa.Table, precombine: Optional[str]) -> Tuple[pa.Table, pa.Array]:
    """(rows sorted by key with one row per key, flags of keys that occurred more than once).
    With a precombine field the largest value wins (a row without one loses to any that has
    one); without it every row stays and duplicates are flagged."""
    order = rows
    sort_keys = [(RECORD_KEY, "ascending")]
    if precombine:  # rows without a value first, so that the last row of a key is its largest
        order = rows.append_column("_has", pc.is_valid(rows.column(precombine)))
        sort_keys += [("_has", "ascending"), (precombine, "ascending")]
    rows = rows.take(pc.sort_indices(order, sort_keys=sort_keys))
    keys = rows.column(RECORD_KEY)
    n = rows.num_rows
    if n == 0:
        return rows, pa.array([], pa.bool_())
    same_as_next = pc.equal(keys.slice(0, n - 1), keys.slice(1)).combine_chunks()
    same_as_next = pc.fill_null(same_as_next, False)
    last_of_key = pa.concat_arrays([pc.invert(same_as_next), pa.array([True])])
    if precombine:
        kept = rows.filter(last_of_key)
        return kept, pa.array([False] * kept.num_rows, pa.bool_())
    first_of_key = pa.concat_arrays([pa.array([True]), pc.invert(same_as_next)])
    return rows, pc.invert(pc.and_(first_of_key, last_of_key))


def tag_task(plan: LookupPlan, live: Dict[str, str], precombine: Optional[str],
             spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the batch rows of some shards, deduplicated and tagged with the live
    (partition, fileId) of their key from the shard's index files (`live`: fileId -> partition
    of the live file groups), into a staged file of this task attempt. Returns the rows'
    partial summary (`partial_summary`), each row naming that file."""
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    rows = pa.concat_tables(tables)
    storage = Storage(spec.base_path)
    shards = rows.column(SHARD)
    def tagged() -> Iterator[pa.Table]:
        for shard in pc.unique(shards).to_pylist():
            part, duplicate = one_row_per_key(rows.filter(pc.equal(shards, shard)).drop_columns([SHARD]), precombine)
            keys = part.column(RECORD_KEY)
            found = plan.latest_entries(storage, shard, keys.to_pylist())
            file_ids, partitions = live_holders(found, keys, live)
            yield (part.append_column(OLD_PARTITION, partitions).append_column(OLD_FILE_ID, file_ids)
                   .append_column(DUPLICATE, duplicate)
                   .append_column(SHARD, pa.repeat(pa.scalar(shard, pa.int32()), part.num_rows)))

    yield from _staged(spec, tagged())


def stage_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: tagged rows into a staged file of this task attempt (see `tag_task`)."""
    yield from _staged(spec, (pa.Table.from_batches([b]) for b in batches if b.num_rows))


def _staged(spec: WriteSpec, tables: Iterator[pa.Table]) -> Iterator[pa.RecordBatch]:
    """Tagged rows written to a staged file of this task attempt, as they come; their partial
    summary, each row naming the file (the driver takes the files of the attempts whose results
    it keeps) and the first row carrying the rows' bytes in Arrow."""
    task_partition, attempt, _ = task_context(spec)
    storage = Storage(spec.base_path)
    path = staged_path(spec.instant, f"tagged-{task_partition}-{uuid.uuid4().hex}.arrow")
    summaries, size, out, sink = [], 0, None, None
    try:
        for table in tables:
            if out is None:
                sink = storage.open_output(path)
                out = pa.ipc.new_file(sink, table.schema, options=STAGED_IPC)
            out.write_table(table, ARROW_BATCH_ROWS)
            summaries.append(partial_summary(table))
            size += table.nbytes
    finally:
        if out is not None:
            out.close()
            sink.close()
    if out is None:
        return
    if spec.speculative_task == task_partition and attempt == 0:  # a twin's file, which no later job may read
        storage.write_bytes(staged_path(spec.instant, f"tagged-{task_partition}-{uuid.uuid4().hex}.arrow"),
                            storage.read_bytes(path))
    fail_if_injected(spec, task_partition, attempt)
    summary = pa.concat_tables(summaries)
    sizes = pa.array([size] + [0] * (summary.num_rows - 1), pa.int64())
    yield from summary.append_column(STAGED, pa.repeat(pa.scalar(path), summary.num_rows)) \
        .append_column(STAGED_BYTES, sizes).to_batches()


def is_leaving():
    """A stored row leaves its file group: deleted, or moved to another partition."""
    return F.col(IS_DELETED) | (F.col(PARTITION_PATH) != F.col(OLD_PARTITION))


def is_arriving():
    """A row goes to a new file group: a new key, or one that moved to another partition."""
    return ~F.col(IS_DELETED) & (F.col(OLD_FILE_ID).isNull() | (F.col(PARTITION_PATH) != F.col(OLD_PARTITION)))


@dataclass(frozen=True)
class Summary:
    touched: Dict[str, int]  # fileId -> rows deleted or moved out, for every touched file group
    duplicate: Optional[str]  # a key the batch holds twice (without a precombine field)
    arriving: int  # rows for new file groups
    rows: int  # rows of the batch, one per key
    bytes: int  # of those rows in Arrow


STAGED = "staged"  # the tagging job's summary rows name the staged file of their rows
STAGED_BYTES = "staged_bytes"
STAGED_SUMMARY_DDL = (f"file_id string, leaving long, duplicate string, arriving long, rows long, {STAGED} string, "
                      f"{STAGED_BYTES} long")
STAGED_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


def summary_of(parts: pa.Table) -> Summary:
    """Partial summaries (`partial_summary`) added up."""
    touched: Dict[str, int] = {}
    for file_id, leaving in zip(parts.column("file_id").to_pylist(), parts.column("leaving").to_pylist()):
        if file_id is not None:
            touched[file_id] = touched.get(file_id, 0) + leaving
    total = lambda column: pc.sum(parts.column(column)).as_py() or 0  # noqa: E731
    return Summary(touched, pc.min(parts.column("duplicate")).as_py(), total("arriving"), total("rows"),
                   total(STAGED_BYTES))


def partial_summary(rows: pa.Table) -> pa.Table:
    """Per fileId of tagged rows (null: no stored row), the rows leaving it, the smallest
    duplicated key, the rows arriving in new file groups and all rows."""
    duplicate = pc.if_else(rows.column(DUPLICATE), rows.column(RECORD_KEY), pa.scalar(None, pa.string()))
    parts = pa.table({"file_id": rows.column(OLD_FILE_ID), "leaving": pc.cast(leaving_mask(rows), pa.int64()),
                      "duplicate": duplicate, "arriving": pc.cast(arriving_mask(rows), pa.int64())})
    summed = parts.group_by("file_id").aggregate([("leaving", "sum"), ("duplicate", "min"), ("arriving", "sum"),
                                                  ([], "count_all")])
    return summed.select(["file_id", "leaving_sum", "duplicate_min", "arriving_sum", "count_all"]) \
        .rename_columns(["file_id", "leaving", "duplicate", "arriving", "rows"])


def is_small(batch_bytes: int, limit: int) -> bool:
    """Whether an upsert's batch (its tagged rows' bytes in Arrow) is small enough for every
    task of the one-job path to hold it whole."""
    return 0 < limit and batch_bytes <= limit


def merge_task(slices: Dict[str, Tuple[str, str]], data_names: List[str], precombine: Optional[str],
               update_columns: Optional[List[str]], spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the batch's rows of touched file groups arrive tagged and grouped by file
    group; each group's latest slice (`slices`: fileId -> (path, partition)) is read here piece
    by piece and merged with them (`merge_pieces`) into a new slice of the same fileId."""
    storage = Storage(spec.base_path)

    def merged_slices() -> Iterator[NewSlice]:
        for file_id, parts in grouped_by_file_group(batches, OLD_FILE_ID):
            path, partition = slices[file_id]
            incoming = pa.Table.from_batches(list(parts))
            source = storage.open_input(path)
            try:
                parquet = pq.ParquetFile(source)
                counts = [0, 0, 0, 0]
                # A slice of several pieces: its keys read first, for one hashing of the batch's keys.
                rows = piece_rows(parquet)
                several = parquet.metadata.num_rows > rows
                stored_keys = stored_keys_of(parquet, spec.virtual_keys) if several else None
                pieces, empty = stored_pieces(parquet, rows), parquet.schema_arrow.empty_table()
                if spec.virtual_keys is not None:  # the stored rows' keys made again, their slice's commit time
                    fill = functools.partial(spec.virtual_keys.fill, commit_time=spec.prev_commits[file_id])
                    pieces, empty = map(fill, pieces), fill(empty)
                pieces = merge_pieces(pieces, empty, incoming, partition, data_names, precombine, update_columns,
                                      counts, stored_keys)
                stored_keys = None  # the merge holds what it needs
                stored_rows, metadata = parquet.metadata.num_rows, parquet.metadata.metadata

                def footer(stored_rows=stored_rows, metadata=metadata, counts=counts):
                    """The stored bloom footer, when the slice kept the stored keys in order (no
                    row dropped, none added) and it is sized as a new one would be."""
                    same_keys = counts[2] == stored_rows and counts[3] == 0
                    return stored_footer(metadata, stored_rows) if same_keys else None

                # Deletes are counted, and the footer chosen, as the pieces are merged: the
                # slice reads them when it closes.
                yield NewSlice(file_id, partition, 0, batches_of(pieces), footer, counts=counts)
            finally:
                source.close()

    return write_slices(spec, merged_slices())


# A small upsert's task returns its write stats and its index entries (a row of one or the other).
SMALL_WRITE_DDL = STATS_DDL + ", entry_key string, entry_deleted boolean, entry_shard int"


def leaving_mask(rows: pa.Table) -> pa.Array:
    """`is_leaving` of rows with a stored row, in Arrow."""
    moved = pc.fill_null(pc.not_equal(rows.column(PARTITION_PATH), rows.column(OLD_PARTITION)), False)
    return pc.and_(pc.is_valid(rows.column(OLD_FILE_ID)), pc.or_(rows.column(IS_DELETED), moved))


def arriving_mask(rows: pa.Table) -> pa.Array:
    """`is_arriving` in Arrow."""
    moved = pc.fill_null(pc.not_equal(rows.column(PARTITION_PATH), rows.column(OLD_PARTITION)), True)
    return pc.and_(pc.invert(rows.column(IS_DELETED)), pc.or_(pc.is_null(rows.column(OLD_FILE_ID)), moved))


def insert_rows(rows: pa.Table, data_names: Sequence[str], partitioned: bool) -> pa.Table:
    """New-file-group rows in the keyed insert layout (`rows.insert_layout`), grouped by
    partition path."""
    rows = rows.sort_by([(PARTITION_PATH, "ascending"), (RECORD_KEY, "ascending")])
    layout = insert_layout(auto_keys=False, partitioned=partitioned)
    meta = {ROW_INDEX: pa.array(range(rows.num_rows), pa.int64()), RECORD_KEY: rows.column(RECORD_KEY),
            PARTITION_PATH: rows.column(PARTITION_PATH)}
    return pa.table([meta[n] for n in layout.meta] + [rows.column(c) for c in data_names],
                    names=list(layout.meta) + list(data_names))


# The new rows' share of a small upsert's work in `placement.pack` (no fileId is empty).
NEW_ROWS = ""
# A small upsert makes no more than one task per this many bytes of work: a task's fixed cost
# (about 60 ms) is that of rewriting about 2 MB, so each task gets about twice that or more.
MIN_TASK_BYTES = 4 * 1024 * 1024


def small_write_task(slices: Dict[str, Tuple[str, str]], data_names: List[str], precombine: Optional[str],
                     update_columns: Optional[List[str]], index_built: bool, spec: WriteSpec, staged: List[str],
                     placed: Dict[str, int], numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side, task n (its number arrives) of a small upsert: reads the tagged rows of
    the staged files, merges its touched file groups (`placed`: fileId -> task, `merge_task`),
    then, if `NEW_ROWS` is placed on it, writes the new keys to new file groups (`write_task`,
    seqnos numbered on from the merge's). Returns the write stats and, once the index is
    built, its part of the instant's index entries: the new file groups' keys (read back from
    their files) and tombstones of keys deleted from its file groups. The driver writes the
    index delta from the entries of the attempts it takes (a speculative twin's differ)."""
    me = {n for batch in numbers for n in batch.column(0).to_pylist()}
    mine = {f for f, n in placed.items() if n in me}
    if not mine:
        return
    storage = Storage(spec.base_path)
    rows = read_staged(storage, staged)
    stats: List[dict] = []
    touched = rows.filter(pc.is_in(rows.column(OLD_FILE_ID), value_set=pa.array(sorted(mine - {NEW_ROWS}), pa.string())))
    if touched.num_rows:
        touched = touched.sort_by([(OLD_FILE_ID, "ascending"), (RECORD_KEY, "ascending")])
        for out in merge_task(slices, data_names, precombine, update_columns, spec, iter(touched.to_batches())):
            stats += out.to_pylist()
    arriving = rows.filter(arriving_mask(rows)) if NEW_ROWS in mine else rows.slice(0, 0)
    inserted: List[dict] = []
    if arriving.num_rows:
        then = dataclasses.replace(spec, first_row=sum(s["num_writes"] for s in stats))
        layout = insert_rows(arriving, data_names, spec.partitioned)
        for out in write_task(then, iter(layout.to_batches(ARROW_BATCH_ROWS))):
            inserted += out.to_pylist()
    schema = _small_result()
    if stats or inserted:
        written = [dict(s, entry_key=None, entry_deleted=None, entry_shard=None) for s in stats + inserted]
        yield pa.RecordBatch.from_pylist(written, schema=schema)
    if index_built:
        entries = _index_entries(rows, touched.filter(touched.column(IS_DELETED)), inserted, storage, spec.virtual_keys)
        columns = {"file_id": entries.column("file_id"), "entry_key": entries.column("key"),
                   "entry_deleted": entries.column("deleted"), "entry_shard": entries.column("shard")}
        yield from pa.table([columns.get(f.name, pa.nulls(entries.num_rows, f.type)) for f in schema],
                            schema=schema).to_batches(ARROW_BATCH_ROWS)


def _index_entries(rows: pa.Table, gone: pa.Table, inserted: List[dict], storage: Storage,
                   virtual: Optional[VirtualKeys] = None) -> pa.Table:
    """(key, file_id, deleted, shard): what `RecordIndex.delta` writes for the new file groups
    (`inserted`) and the deleted keys (`gone`, tagged rows); `rows` are the whole batch's."""
    parts = []
    for stat in inserted:
        with storage.open_input(stat["path"]) as source:
            keys = stored_keys_of(pq.ParquetFile(source), virtual)
        parts.append(pa.table({"key": keys, "file_id": pa.repeat(pa.scalar(stat["file_id"]), len(keys)),
                               "deleted": pa.repeat(pa.scalar(False), len(keys))}))
    parts.append(pa.table({"key": gone.column(RECORD_KEY), "file_id": gone.column(OLD_FILE_ID),
                           "deleted": pa.repeat(pa.scalar(True), gone.num_rows)}))
    entries = pa.concat_tables([p.cast(ENTRY_SCHEMA) for p in parts])
    at = pc.index_in(entries.column("key"), value_set=rows.column(RECORD_KEY))  # a key's shard, as tagging computed it
    return entries.append_column("shard", rows.column(SHARD).take(at))


def _small_result() -> pa.Schema:
    return arrow_schema_of(SMALL_WRITE_DDL)


# Up to this many new rows go to one file group per partition (one task per partition path)
# instead of one per partition and shard: fewer, larger file groups from small upserts.
GROUPED_INSERT_ROWS = 1_000_000


def new_rows(tagged: DataFrame, data_schema: T.StructType, count: int) -> DataFrame:
    """Rows for new file groups: new keys, and keys that moved to another partition."""
    rows = tagged.where(is_arriving())
    if count <= GROUPED_INSERT_ROWS:
        rows = rows.repartition(PARTITION_PATH)
    return rows.select(*[F.col(quote(f.name)) for f in data_schema.fields])


def tombstones(tagged: DataFrame) -> DataFrame:
    """Index entries removing deleted keys (a moved key's new entry replaces its old one)."""
    gone = tagged.where(F.col(OLD_FILE_ID).isNotNull() & F.col(IS_DELETED))
    return gone.select(F.col(RECORD_KEY).alias("key"), F.col(OLD_FILE_ID).alias("file_id"), F.lit(True).alias("deleted"))


def delete(ctx: TableContext, keys: DataFrame) -> Optional[str]:
    """See `HudiTable.delete`: an upsert of the keys flagged deleted."""
    current = ctx.schema() or T.StructType([])
    known = {f.name.lower() for f in current.fields} | {c.lower() for c in META_COLUMNS} | {IS_DELETED}
    unknown = [c for c in keys.columns if c.lower() not in known]
    if unknown:  # a delete changes no schema: a column the table lacks would be added to it
        raise ctx.error(f"delete takes the record key columns ({', '.join(ctx.config.record_key_fields)}); "
                        f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a column of the table")
    keys = keys.drop(*[c for c in keys.columns if c in META_COLUMNS])
    present = {c.lower() for c in keys.columns}
    filled = keys.select(*[F.col(quote(c)) for c in keys.columns],
                         *[F.lit(None).cast(f.dataType).alias(f.name) for f in current.fields
                           if f.name.lower() not in present])
    return upsert(ctx, filled.withColumn(IS_DELETED, F.lit(True)), DELETE, None, (), None, EVOLVE)


def upsert(ctx: TableContext, df: DataFrame, operation: str, update_columns: Optional[List[str]],
           predicates: Sequence[str], predicate_alias: Optional[str], mode: str) -> Optional[str]:
    """See `HudiTable.upsert`: one commit, only the touched file groups rewritten."""
    if not ctx.config.record_key_fields:
        raise ctx.error("upsert and delete need a record key; this table's keys are auto-generated "
                        "(create it with record_key=...)")
    data_schema = ctx.schema_after(df.drop(IS_DELETED), mode)
    unknown = [c for c in update_columns or [] if c.lower() not in {n.lower() for n in df.columns}]
    if unknown:  # else the column would silently keep its stored value
        raise ctx.error(f"update column '{unknown[0]}' is not a column of the new rows "
                        f"({', '.join(c for c in df.columns if c != IS_DELETED)})")
    index: RecordIndex = ctx.index
    ctx.ensure_index()
    with ctx.transaction(COMMIT) as txn:
        view = ctx.timeline.view()
        batch = keyed_batch(ctx, df, data_schema)
        plan = index.lookup_plan(ctx.timeline.completed(), shuffle_partitions(ctx.spark), ctx.timeline.metadata)
        current = {g.file_id: g for g in view.live_groups()}
        # Its staged rows go with its markers folder (`staged_dir`), after the commit or with a rollback.
        stats, inserted, index_files = _write(ctx, txn.instant, batch, plan, current, data_schema, update_columns,
                                              predicates, predicate_alias)
        if not stats and data_schema == ctx.committed_schema():
            return None  # nothing changed: no instant (the transaction rolls it back)
        ctx.commit(txn, operation, data_schema, stats, index_files)
    ctx.after_commit(build_missing_index=True)
    return txn.instant


def _write(ctx: TableContext, instant: str, batch: DataFrame, plan: LookupPlan, current: Dict[str, FileGroup],
           data_schema: T.StructType, update_columns: Optional[List[str]], predicates: Sequence[str],
           predicate_alias: Optional[str]) -> Tuple[List[WriteStat], List[WriteStat], List[str]]:
    """(write stats, those of new file groups, index files) of an upsert's instant: the batch
    tagged and staged, filtered by the predicates and the precombine field, then written."""
    summary, staged = stage_tagged(batch, plan, {f: g.partition for f, g in current.items()},
                                   ctx.config.precombine_field, ctx.write_spec(instant),
                                   ctx.file_sizing.driver_write_bytes)
    # The staged rows as a DataFrame, built only where one is needed (each costs planning).
    rows_of = functools.partial(staged_rows, ctx.spark, ctx.storage.base_path, schema=tagged_schema(batch.schema))
    if predicates:
        tagged = rows_of(staged)
        in_order = [F.col(quote(c)) for c in tagged.columns]  # staged rows are read by position
        accepted = _rows_accepted_by(ctx, summary, current, tagged, predicates, predicate_alias)
        summary, staged = restage(accepted.select(*in_order), ctx.write_spec(instant))
    if summary.duplicate is not None:
        raise DataError(f"table {ctx.name}: the new rows hold record key '{summary.duplicate}' more than once; "
                        "set a precombine field to choose between them")
    if ctx.config.stored_ordering_field and any(summary.touched.values()):
        tagged = rows_of(staged)
        stale = _stale_leaving_keys(ctx, tagged, summary, current)
        if stale:  # such rows change nothing: drop them before anything is written
            summary, staged = restage(tagged.where(~F.col(RECORD_KEY).isin(stale)), ctx.write_spec(instant))
    frozen = [] if update_columns is None else [
        f.name for f in data_schema.fields if f.name.lower() not in {c.lower() for c in update_columns}]
    if frozen and any(summary.touched.values()):
        tagged = rows_of(staged)
        summary, staged = restage(_moves_keep_frozen_columns(ctx, tagged, summary, current, frozen), ctx.write_spec(instant))
    touched = summary.touched
    spec = ctx.write_spec(instant, prev_commits={f: current[f].latest.instant for f in touched})
    slices = {f: (current[f].latest.path, current[f].partition) for f in touched}
    data_names = [f.name for f in data_schema.fields]
    sizes = {f: current[f].latest.size for f in touched}
    if is_small(summary.bytes, ctx.file_sizing.small_write_bytes):
        new_bytes = max(1, summary.bytes * summary.arriving // max(1, summary.rows)) if summary.arriving else 0
        return _write_small(ctx, staged, spec, slices, sizes, new_bytes, data_names, update_columns)
    tagged = rows_of(staged)
    stats, inserted = _write_large(ctx, tagged, spec, slices, sizes, data_names, update_columns, summary, data_schema)
    if not stats:
        return [], [], []
    return stats, inserted, ctx.index_delta(instant, IndexChange(written=stats, inserted=inserted,
                                                                 removed=tombstones(tagged)))


def _write_small(ctx: TableContext, staged: List[str], spec: WriteSpec, slices: Dict[str, Tuple[str, str]],
                 sizes: Dict[str, int], new_bytes: int, data_names: List[str],
                 update_columns: Optional[List[str]]) -> Tuple[List[WriteStat], List[WriteStat], List[str]]:
    """(write stats, those of new file groups, index files): one Spark job over the tagged rows
    of the staged files, its tasks given the touched file groups (`sizes`: fileId -> stored
    bytes) and the new rows (`new_bytes`) by size."""
    work = dict(sizes, **({NEW_ROWS: new_bytes} if new_bytes else {}))
    if not work:
        return [], [], []
    built = ctx.index.is_built()
    listed = ctx.index.metadata_table.record_index_listed()
    task = functools.partial(small_write_task, slices, data_names, ctx.config.stored_ordering_field, update_columns,
                             built or listed, spec, staged)
    if on_driver(lambda: sum(work.values()), ctx.file_sizing.driver_write_bytes, spec):
        placed = pack(work, driver_threads())  # a thread costs next to nothing
        numbers = [[pa.record_batch([pa.array([i], pa.int64())], names=["id"])] for i in range(max(placed.values()) + 1)]
        rows = run_on_driver(functools.partial(task, placed), numbers, SMALL_WRITE_DDL)
    else:
        placed = pack(work, shuffle_partitions(ctx.spark), MIN_TASK_BYTES)
        tasks = max(placed.values()) + 1
        rows = run_task_job(ctx.spark.range(tasks, numPartitions=tasks), functools.partial(task, placed),
                            SMALL_WRITE_DDL, as_arrow=True)
    is_entry = pc.is_valid(rows.column("entry_key"))
    stats = [write_stat(r) for r in rows.filter(pc.invert(is_entry)).to_pylist()]
    index_files: List[str] = []
    entries = rows.filter(is_entry)
    entries = pa.table({"key": entries.column("entry_key"), "file_id": entries.column("file_id"),
                        "deleted": entries.column("entry_deleted"), "shard": entries.column("entry_shard")})
    if listed and not entries.num_rows:  # no key inserted, moved or deleted: nothing to name logs for
        ctx.index.plan_no_record_index_logs(spec.instant)
    elif listed:
        files = ctx.index.record_index_files(spec.instant, IndexChange(written=stats))
        if files is not None:
            index_files += [w["path"] for w in record_index.write_shards(files, entries.drop(["shard"]), ctx.storage)]
    if built:
        entries = entries.sort_by([("shard", "ascending"), ("key", "ascending")])
        written = write_shards(ctx.storage.base_path, spec.instant, DELTA, ctx.index.entry_key(),
                               iter(entries.to_batches()))
        index_files += [p for out in written for p in out.column("path").to_pylist()]
    index_files.sort()
    return stats, [s for s in stats if not s.prevCommit], index_files


def _write_large(ctx: TableContext, tagged: DataFrame, spec: WriteSpec, slices: Dict[str, Tuple[str, str]],
                 sizes: Dict[str, int], data_names: List[str], update_columns: Optional[List[str]], summary: Summary,
                 data_schema: T.StructType) -> Tuple[List[WriteStat], List[WriteStat]]:
    """(write stats, those of new file groups): the touched file groups (`sizes`: fileId ->
    stored bytes) packed into rewrite tasks, then the inserts."""
    stats: List[WriteStat] = []
    tasks = 0
    if slices:
        merge = functools.partial(merge_task, slices, data_names, ctx.config.stored_ordering_field, update_columns)
        rows, tasks = by_rewrite_task(tagged.where(F.col(OLD_FILE_ID).isNotNull()), OLD_FILE_ID, sizes)
        stats += run_write_job(rows.sortWithinPartitions(OLD_FILE_ID), spec, task=merge)
    inserted = []
    if summary.arriving:
        rows = ctx.rows_for_writer(new_rows(tagged, data_schema, summary.arriving), data_schema)
        inserted = run_write_job(rows, spec.after_rewrite(tasks))
    return stats + inserted, inserted


def _rows_accepted_by(ctx: TableContext, summary: Summary, current: Dict[str, FileGroup], tagged: DataFrame,
                      predicates: Sequence[str], alias: Optional[str]) -> DataFrame:
    """The tagged rows the predicates let match their stored rows, and those of new keys."""
    stored = ctx.read_files([current[f].latest for f in sorted(summary.touched)])
    return rows_accepted_by(tagged, stored.alias(alias) if alias else stored, predicates, ctx.name)


def _moves_keep_frozen_columns(ctx: TableContext, tagged: DataFrame, summary: Summary, current: Dict[str, FileGroup],
                               frozen: List[str]) -> DataFrame:
    """The tagged rows, those whose partition changes taking the stored values of the columns
    the merge does not update, as dbt's MERGE (`update set` of the update columns only) does:
    such a row stays in its partition when the partition columns are among them, and moves
    with its other frozen columns as stored otherwise. (Rows updated in place get theirs in
    `merge_slice`.)"""
    moving = F.col(OLD_FILE_ID).isNotNull() & ~F.col(IS_DELETED) & (F.col(PARTITION_PATH) != F.col(OLD_PARTITION))
    holders = sorted(f for f, n in summary.touched.items() if n)
    stored_names = {f.name.lower() for f in ctx.committed_schema().fields}
    held = {c: f"_hudilite_stored_{i}" for i, c in enumerate(frozen) if c.lower() in stored_names}
    stored = ctx.read_files([current[f].latest for f in holders]).select(
        F.col(RECORD_KEY).alias(STORED_KEY), *[F.col(quote(c)).alias(h) for c, h in held.items()]
    ).dropDuplicates([STORED_KEY])  # a key stored twice must not double its batch row
    joined = tagged.join(stored, F.col(RECORD_KEY) == F.col(STORED_KEY), "left")
    stays = {c.lower() for c in ctx.config.partition_fields} <= {c.lower() for c in frozen}
    moved = moving & F.col(STORED_KEY).isNotNull()
    types = {f.name: f.dataType for f in tagged.schema.fields}

    def column(name: str):
        if name in frozen:  # a column this batch adds was null in the stored row
            was = F.col(held[name]).cast(types[name]) if name in held else F.lit(None).cast(types[name])
            return F.when(moved, was).otherwise(F.col(quote(name))).alias(name)
        if name == PARTITION_PATH and stays:
            return F.when(moved, F.col(OLD_PARTITION)).otherwise(F.col(PARTITION_PATH)).alias(name)
        return F.col(quote(name))

    return joined.select(*[column(c) for c in tagged.columns])  # in order: staged rows are read by position


def _stale_leaving_keys(ctx: TableContext, tagged: DataFrame, summary: Summary, current: Dict[str, FileGroup]) -> List[str]:
    """Keys whose batch row would delete its stored row or move it to another partition, but
    is older than it by the precombine field. In-place updates are compared in `merge_slice`;
    these must be caught before the new partition gets the row. A null precombine value (an
    explicit delete by key) is never older."""
    leaving = tagged.where(F.col(OLD_FILE_ID).isNotNull() & is_leaving())
    holders = sorted(f for f, n in summary.touched.items() if n)
    precombine = resolve_columns([ctx.config.stored_ordering_field], ctx.existing_schema())[0]
    stored = ctx.read_files([current[f].latest for f in holders]).select(
        F.col(RECORD_KEY), F.col(quote(precombine)).alias(STORED_PRECOMBINE))
    stale = leaving.join(stored, RECORD_KEY).where(F.col(quote(precombine)) < F.col(STORED_PRECOMBINE))
    return [r[0] for r in stale.select(RECORD_KEY).collect()]
