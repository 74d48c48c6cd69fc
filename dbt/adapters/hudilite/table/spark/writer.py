"""The executor side of a write: each Spark task writes its own base files.

The tasks run inside `mapInArrow` and know nothing of the operation that feeds them:
`write_task` writes new file groups from rows in the insert layout, grouped by partition path
(one file group per partition path, rolling over at the size limit); `write_slices` writes new
slices of existing file groups, fed by `rewrite_task` (rows that SQL UPDATE or DELETE computed)
or by the upsert's merge task. Row layouts are in `rows`. A task makes the meta columns it does
not receive: the commit time and file name are constants, the seqno (and an auto key) comes
from the row's number in the task. Each file is written after its marker; each task returns one
write-stat row per file, and no data crosses back to the driver.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..storage import faults
from ..format.bloom import FileKeys
from .file_sizing import TopUp
from .jobs import (ARROW_BATCH_BYTES, ARROW_BATCH_ROWS, arrow_schema_of, driver_task_partition, run_task_job,
                   shuffle_partitions)
from ..format.commit import WriteStat
from ..format.file_group import base_file_name, new_file_id, parse_base_file_name, relative_file_path, write_token
from ..format.keygen import PartitionFormat, VirtualKeys, seqno_array
from ..storage.layout import TMP_DIR, marker_path, partition_metadata_path
from .placement import pack, routing_values
from ..format.rows import CLUSTER_GROUP, CLUSTER_ROWS, FILE_ID, REWRITE, SLICE, RowLayout, insert_layout
from ..format.schema import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from ..storage.filesystem import Storage

STATS_DDL = (
    "partition_path string, file_id string, path string, prev_commit string, num_writes long, "
    "num_inserts long, num_update_writes long, num_deletes long, file_size long"
)

# Keys and seqnos share long prefixes and ascend within a file: delta-encoded, then zstd,
# they cost a fraction of a byte each (dictionary encoding costs several).
DELTA_ENCODED = (RECORD_KEY, COMMIT_SEQNO)


@dataclass(frozen=True)
class WriteSpec:
    base_path: str
    instant: str
    partitioned: bool
    partition_depth: int
    auto_keys: bool
    portable_encoding: bool = False  # properties.PORTABLE
    partition_format: Optional[PartitionFormat] = None  # for rows whose partition path is left to the task
    bloom_footers: bool = False  # Hudi's bloom filter and key range in each file's footer (keyed tables)
    # hoodie.populate.meta.fields=false: files keep the meta columns null but the file name, as
    # Hudi's writer leaves them; stored rows' keys are made again from the key fields.
    virtual_keys: Optional[VirtualKeys] = None
    # Inserts: per partition path, small file groups to top up; task i takes entry i (file_sizing).
    top_ups: Dict[str, List[TopUp]] = field(default_factory=dict)
    row_group_bytes: int = 128 * 1024 * 1024  # in Arrow memory; about a third of that on disk
    max_file_bytes: int = 512 * 1024 * 1024
    fail_task_attempt: Optional[Tuple[int, int]] = None  # (task partition, attempt): tests only
    speculative_task: Optional[int] = None  # task partition whose files a second attempt also writes: tests only
    # Rewrites of existing file groups (upsert, delete): fileId -> the instant of its current slice.
    prev_commits: Dict[str, str] = field(default_factory=dict)
    deletes_per_file_group: Dict[str, int] = field(default_factory=dict)
    rows_per_file: List[int] = field(default_factory=list)  # clustering: per clustering group
    # Seqnos number a task's rows from here: a task that writes twice (a small upsert's merge,
    # then its inserts) starts the second write after the first's rows.
    first_row: int = 0
    # ... and a job that writes after another in one commit numbers its tasks after that one's
    # (`after_rewrite`): a seqno is unique within its commit.
    seqno_task_offset: int = 0

    def after_rewrite(self, rewrite_tasks: int) -> "WriteSpec":
        """This spec for a job that writes after a rewrite job of `rewrite_tasks` tasks in the
        same commit, whose changed rows took new seqnos (an upsert's inserts; a delete+insert's
        rewrite only deletes, so its changed rows keep theirs)."""
        return replace(self, seqno_task_offset=rewrite_tasks)


ROUTE = "_hudilite_route"
_ROUTE_FILE_ID = "_hudilite_route_file_id"


def by_rewrite_task(rows: DataFrame, file_id_column: str, sizes: Dict[str, int]) -> Tuple[DataFrame, int]:
    """(`rows` of the file groups in `sizes` (fileId -> stored bytes) shuffled into rewrite
    tasks; the number of tasks). The file groups are packed into at most as many tasks as the
    session's shuffle partitions (`placement.pack`); the columns stay. A row of a file group
    not in `sizes` is kept (in some task), for the rewrite task to refuse."""
    spark = rows.sparkSession
    placed = pack(sizes, shuffle_partitions(spark))
    tasks = max(placed.values(), default=0) + 1
    routes = routing_values(tasks)
    route = spark.createDataFrame([(f, routes[t]) for f, t in sorted(placed.items())],
                                  f"{_ROUTE_FILE_ID} string, {ROUTE} int")
    routed = rows.join(F.broadcast(route), rows[file_id_column] == route[_ROUTE_FILE_ID], "left")
    out = routed.repartition(tasks, route[ROUTE]).select(*[rows[c] for c in rows.columns])
    return out, tasks


def repeated(value: str, n: int) -> pa.Array:
    """`value` n times: a slice of an array built once per value (`pa.repeat` copies the value
    for every row of every batch, a large part of a narrow append's cost)."""
    return _repeated(value, max(1024, 1 << max(0, n - 1).bit_length())).slice(0, n)


@functools.lru_cache(maxsize=8)
def _repeated(value: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), n)


# A Parquet writer ends a data page once it passes its size (1 MiB), but checks only after each
# `write_batch_size` values (1024): rows of 1 MB made one page of a whole row group (128 MB), which
# Spark's reader decompresses into one array on the JVM's heap, twice over. Wide rows are written
# in fewer values per check, so that a page stays near the size.
PAGE_BYTES = 1 << 20
WRITE_BATCH_VALUES = 1024  # pyarrow's default


def write_batch_values(row_bytes: float) -> int:
    """Values a Parquet writer writes between page-size checks, for rows of `row_bytes`."""
    return max(1, min(WRITE_BATCH_VALUES, int(PAGE_BYTES // max(1.0, row_bytes))))


def parquet_writer(sink, schema: pa.Schema, portable: bool = False,
                   dictionary: Optional[Sequence[str]] = None, row_bytes: float = 0) -> pq.ParquetWriter:
    """`dictionary`: the columns to dictionary-encode (default: every one that may be);
    `row_bytes`: the rows' width in Arrow, which bounds the values per page check."""
    chosen = set(schema.names if dictionary is None else dictionary)
    # pyarrow takes the Parquet leaf paths of nested columns (`address.city`), not their names.
    use_dictionary = [path for f in schema if f.name in chosen and (portable or f.name not in DELTA_ENCODED)
                      for path in _leaf_paths(f.name, f.type)]
    batch = write_batch_values(row_bytes)
    codec = "snappy" if portable else "zstd"
    paths = [(f.name, path) for f in schema for path in _leaf_paths(f.name, f.type)]
    compression = {path: "none" if name in UNCOMPRESSED else codec for name, path in paths}
    statistics = [path for name, path in paths if name not in NO_STATISTICS]
    if portable:  # what every Parquet reader reads (properties.PORTABLE)
        return pq.ParquetWriter(sink, schema, compression=compression, use_dictionary=use_dictionary,
                                write_statistics=statistics, write_batch_size=batch)
    return pq.ParquetWriter(
        sink,
        schema,
        compression=compression,
        use_dictionary=use_dictionary,
        column_encoding={n: "DELTA_BYTE_ARRAY" for n in DELTA_ENCODED},
        write_statistics=statistics,
        write_batch_size=batch,
    )


# Meta columns of one value in a base file (a file group lives in one partition): a dictionary
# of that value and runs of its index, which a codec only makes bigger (its frame outweighs
# the page). Stored uncompressed.
UNCOMPRESSED = (PARTITION_PATH, FILE_NAME)
# Meta columns without min/max statistics (kept in the footer and again in each page header):
# the file name is the file's own (70 bytes, four times over), and no reader filters on the
# seqno. Together ~400 bytes of a 100-row keyed file's ~5.7 KB (issue 33: a keyed table within
# 2x the bytes of plain parquet).
NO_STATISTICS = (FILE_NAME, COMMIT_SEQNO)


def _leaf_paths(name: str, kind: pa.DataType) -> List[str]:
    """The Parquet column paths of one Arrow field, as pyarrow names them."""
    if pa.types.is_struct(kind):
        return [p for i in range(kind.num_fields) for p in _leaf_paths(f"{name}.{kind.field(i).name}", kind.field(i).type)]
    if pa.types.is_map(kind):
        return _leaf_paths(f"{name}.key_value.key", kind.key_type) + _leaf_paths(f"{name}.key_value.value", kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaf_paths(f"{name}.list.element", kind.value_type)
    return [name]


DICTIONARY_SAMPLE_ROWS = 4096
DICTIONARY_MIN_SAMPLE = 256  # a file of fewer rows keeps every dictionary: too few to judge, too small to matter


def dictionary_columns(rows: pa.Table) -> Optional[List[str]]:
    """The columns of a file worth a dictionary, judged by its first rows: those whose values
    repeat; None (every column) for a file too small to judge. A Parquet writer tries a
    dictionary on every column and falls back to plain once it outgrows a page; on a column of
    distinct values (ids, amounts, timestamps) that try costs time and leaves more bytes than
    plain (narrow event rows: 15% less encoding time, a third fewer bytes). A column whose
    values cannot be counted keeps the dictionary."""
    sample = rows.slice(0, DICTIONARY_SAMPLE_ROWS)
    if sample.num_rows < DICTIONARY_MIN_SAMPLE:
        return None
    return [field.name for field, column in zip(sample.schema, sample.columns) if _repeats(column)]


def _repeats(column) -> bool:
    """Whether at most half of the values are distinct (null counted as one)."""
    if pa.types.is_nested(column.type):
        return True
    try:
        return pc.count_distinct(column, mode="all").as_py() * 2 <= len(column)
    except pa.ArrowNotImplementedError:
        return True


def partition_metadata_text(instant: str, depth: int) -> str:
    return f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n"


# Keys a file holds while it is unknown whether its stored footer holds them, before they are
# hashed into a filter after all: about one merge piece of them (`operations.merge`).
HELD_KEY_BYTES = 32 << 20


class _KeysUntilClose:
    """The keys of a file whose stored footer may turn out to hold them, which is known once its
    rows are all written (a stored file group merged in pieces): held as they come and hashed
    into Hudi's filter only if it does not (`footer`), or once they pass `HELD_KEY_BYTES`, so
    that a file's memory stays bounded. An update-only merge so builds no filter it drops."""

    def __init__(self):
        self.held: List[pa.Array] = []
        self.held_bytes = 0
        self.keys: Optional[FileKeys] = None

    def add(self, keys: pa.Array) -> None:
        if self.keys is not None:
            self.keys.add(keys)
            return
        self.held.append(keys)
        self.held_bytes += keys.nbytes
        if self.held_bytes > HELD_KEY_BYTES:
            self._file_keys()

    def _file_keys(self) -> FileKeys:
        if self.keys is None:
            self.keys = FileKeys()
            for keys in self.held:  # in file order, as the filter is built
                self.keys.add(keys)
            self.held, self.held_bytes = [], 0
        return self.keys

    def footer(self) -> Dict[str, str]:
        return self._file_keys().footer()


class _OpenBaseFile:
    """One base file being written: buffers batches into large row groups."""

    def __init__(self, spec: WriteSpec, storage: Storage, token: str, partition: str, data_fields: List[pa.Field],
                 file_id: Optional[str] = None, prev_commit: Optional[str] = None, deletes: int = 0,
                 insert_limit: Optional[int] = None, footer: Optional[Dict[str, str]] = None,
                 footer_at_close: bool = False):
        self.spec, self.storage, self.partition = spec, storage, partition
        self.file_id = file_id or new_file_id()
        self.prev_commit = prev_commit
        self.name = base_file_name(self.file_id, token, spec.instant)
        self.path = relative_file_path(partition, self.name)
        meta = [pa.field(name, pa.string()) for name in META_COLUMNS]
        self.schema = pa.schema(meta + data_fields)
        if prev_commit is None:  # a slice of an existing file group: its partition has the file
            _ensure_partition_metadata(storage, partition, spec)
        storage.write_bytes(marker_path(spec.instant, self.path), b"")  # before the file: rollback finds it
        self.sink = storage.open_output(self.path)
        self.writer: Optional[pq.ParquetWriter] = None  # made at the first row group (`_writer`)
        self.pending: List[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.rows = 0
        self.changed_rows = 0
        self.bytes_in = 0
        self.deletes = deletes
        # The bloom footer: built from the keys written, or given (a slice of the same keys), or
        # perhaps given once the rows are written (`footer_at_close`).
        self.footer = footer if spec.bloom_footers else None
        self.keys: Union[FileKeys, _KeysUntilClose, None] = None
        if spec.bloom_footers and footer is None:
            self.keys = _KeysUntilClose() if footer_at_close else FileKeys()
        self.insert_limit = insert_limit  # a topped-up small file: how many new rows it takes

    def add(self, commit_time: pa.Array, seqno: pa.Array, key: pa.Array, partition: pa.Array,
            data: List[pa.Array], changed_rows: int) -> None:
        """Rows with their first four meta columns made; the file name is this file's."""
        if len(key) == 0:  # an emptied file group's slice: no row group at all
            return
        if self.keys is not None:
            self.keys.add(key)
        if self.spec.virtual_keys is not None:  # as Hudi's writer leaves them: only the file name is stored
            commit_time = seqno = key = partition = pa.nulls(len(key), pa.string())
        batch = pa.RecordBatch.from_arrays(
            [commit_time, seqno, key, partition, repeated(self.name, len(key))] + data, schema=self.schema
        )
        self.pending.append(batch)
        self.pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        self.changed_rows += changed_rows
        self.bytes_in += batch.nbytes
        if self.pending_bytes >= self.spec.row_group_bytes:
            self._flush()

    @property
    def full(self) -> bool:
        return self.bytes_in >= self.spec.max_file_bytes or self.room == 0

    @property
    def room(self) -> Optional[int]:
        """New rows a topped-up file still takes; None: no limit but the size."""
        return None if self.insert_limit is None else max(0, self.insert_limit - self.changed_rows)

    def copy_rows_of(self, path: str) -> None:
        """Start a topped-up slice with its file group's stored rows, as they are (in the
        table's current columns: a column added since reads null)."""
        names = self.schema.names
        with self.storage.open_input(path) as source:
            for batch in pq.ParquetFile(source).iter_batches(ARROW_BATCH_ROWS):
                columns = [batch.column(n).cast(self.schema.field(n).type) if n in batch.schema.names
                           else pa.nulls(batch.num_rows, self.schema.field(n).type) for n in names]
                self.add(*columns[:4], columns[len(META_COLUMNS):], changed_rows=0)

    def _writer(self) -> pq.ParquetWriter:
        """The file's Parquet writer, its dictionaries chosen from its first rows."""
        if self.writer is None:
            dictionary = dictionary_columns(pa.Table.from_batches(self.pending)) if self.pending else None
            row_bytes = self.pending_bytes / max(1, sum(b.num_rows for b in self.pending))
            self.writer = parquet_writer(self.sink, self.schema, self.spec.portable_encoding, dictionary, row_bytes)
        return self.writer

    def _flush(self) -> None:
        if self.pending:
            table = pa.Table.from_batches(self.pending, schema=self.schema)
            self._writer().write_table(table, row_group_size=table.num_rows)
            self.pending, self.pending_bytes = [], 0

    def close(self) -> dict:
        self._flush()
        writer = self._writer()
        if self.keys is not None:
            writer.add_key_value_metadata(self.keys.footer())
        elif self.footer:
            writer.add_key_value_metadata(self.footer)
        writer.close()
        size = self.sink.tell()  # what went up: no request to ask the store
        self.sink.close()
        if self.prev_commit is None:  # a new file group
            inserts, updates = self.rows, 0
        elif self.insert_limit is not None:  # a topped-up small file
            inserts, updates = self.changed_rows, 0
        else:  # a rewrite (upsert, update, delete)
            inserts, updates = 0, self.changed_rows
        return {
            "partition_path": self.partition, "file_id": self.file_id, "path": self.path,
            "prev_commit": self.prev_commit, "num_writes": self.rows,
            "num_inserts": inserts, "num_update_writes": updates,
            "num_deletes": self.deletes,
            "file_size": size,
        }


def _close_into(stats: List[dict], out: "_OpenBaseFile") -> None:
    """A task's finished file: its stat row, then the crash tests' `task` phase."""
    stats.append(out.close())
    faults.reach("task")


def _ensure_partition_metadata(storage: Storage, partition: str, spec: WriteSpec) -> None:
    path = partition_metadata_path(partition)
    if not storage.exists(path):
        storage.write_atomic(path, partition_metadata_text(spec.instant, spec.partition_depth).encode(), TMP_DIR)


def _runs(batch: pa.RecordBatch, values: pa.Array) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Slices of consecutive rows that share their value (`values`: one per row)."""
    starts = run_starts([values])
    if starts:
        yield from _labelled_runs(batch, starts, values.take(pa.array(starts, pa.int64())).to_pylist())


def run_starts(columns: Sequence[pa.Array]) -> List[int]:
    """The positions where a run of rows with equal values in all `columns` begins (nulls equal
    each other); 0 first."""
    n = len(columns[0])
    if n == 0:
        return []
    changed = np.zeros(n - 1, dtype=bool)
    for values in columns:
        later, earlier = values.slice(1), values.slice(0, n - 1)
        differs = pc.not_equal(later, earlier)
        if values.null_count:
            differs = pc.if_else(pc.and_(pc.is_null(later), pc.is_null(earlier)), False, pc.fill_null(differs, True))
        changed |= differs.to_numpy(zero_copy_only=False)
    return [0] + (np.flatnonzero(changed) + 1).tolist()


def _labelled_runs(batch: pa.RecordBatch, starts: List[int], labels: List[str]) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """The slices of `batch` from each of `starts` to the next, adjacent ones of the same label
    (`labels`: one per start) joined."""
    ends = starts[1:] + [batch.num_rows]
    i = 0
    while i < len(starts):
        j = i
        while j + 1 < len(starts) and labels[j + 1] == labels[i]:
            j += 1
        yield labels[i], batch.slice(starts[i], ends[j] - starts[i])
        i = j + 1


def partition_runs(spec: WriteSpec, layout: RowLayout, batch: pa.RecordBatch) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Slices of consecutive rows of one partition path. A path made in Spark comes with each
    row; one the task makes (`keygen.PartitionFormat`, from a null path column) is made once
    per run of equal partition values, not per row: rows arrive grouped by them."""
    paths = layout.meta_column(batch, PARTITION_PATH)
    if not pa.types.is_null(paths.type):
        yield from _runs(batch, paths)
        return
    if spec.partition_format is None:
        raise ValueError("rows without partition paths, and no partition format to make them")
    starts = run_starts([values for _, values in spec.partition_format.columns(batch)])
    if starts:
        firsts = batch.take(pa.array(starts, pa.int64()))
        yield from _labelled_runs(batch, starts, spec.partition_format.paths(firsts).to_pylist())


def task_context(spec: WriteSpec) -> Tuple[int, int, str]:
    """(task partition, attempt, write token) of the Spark task running this; on the driver,
    which writes a small upsert itself (`jobs.run_on_driver`), its task's first attempt."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        task = driver_task_partition()
        if task is None:
            raise RuntimeError("a write task ran outside a Spark task and outside jobs.run_on_driver")
        return task, 0, write_token(task, 0, 0)
    return ctx.partitionId(), ctx.attemptNumber(), write_token(ctx.partitionId(), ctx.stageId(), ctx.attemptNumber())


def fail_if_injected(spec: WriteSpec, task_partition: int, attempt: int) -> None:
    """The crash tests' failure of one task attempt, after it wrote its files."""
    if spec.fail_task_attempt == (task_partition, attempt):
        raise RuntimeError(f"injected failure in task {task_partition} attempt {attempt}")


def _finish(spec: WriteSpec, task_partition: int, attempt: int, stats: List[dict]) -> Iterator[pa.RecordBatch]:
    fail_if_injected(spec, task_partition, attempt)
    if spec.speculative_task == task_partition and attempt == 0:
        _write_as_second_attempt(spec, stats)
    if stats:
        yield pa.RecordBatch.from_pylist(stats, schema=stats_arrow_schema())


def _write_as_second_attempt(spec: WriteSpec, stats: List[dict]) -> None:
    """What a speculative attempt that also succeeds leaves: its own copy of each file (a new
    file group for an insert, the same file group for a new slice), after its marker."""
    storage = Storage(spec.base_path)
    for stat in stats:
        name = parse_base_file_name(stat["path"])
        token = name.write_token.rsplit("-", 1)[0] + "-1"
        file_id = name.file_id if stat["prev_commit"] else new_file_id()
        copy = relative_file_path(stat["partition_path"], base_file_name(file_id, token, spec.instant))
        storage.write_bytes(marker_path(spec.instant, copy), b"")
        storage.write_bytes(copy, storage.read_bytes(stat["path"]))


def write_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows in the insert layout (`rows.insert_layout`), per partition path the task meets:
    first into the small file group the spec offers this task there (a new slice of it, up to
    its room), then into new file groups, rolled over at the size limit."""
    task_partition, attempt, token = task_context(spec)
    layout = insert_layout(spec.auto_keys, spec.partitioned)
    storage = Storage(spec.base_path)
    top_ups = {p: offered[task_partition] for p, offered in spec.top_ups.items() if task_partition < len(offered)}
    stats: List[dict] = []
    current: Optional[_OpenBaseFile] = None
    written = spec.first_row  # rows are numbered in the order they are written (see keygen)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            layout.check(batch.schema)
            partitions = partition_runs(spec, layout, batch) if spec.partitioned else [("", batch)]
            for partition, run in partitions:
                while run.num_rows:  # a run may fill a topped-up file and go on in a new one
                    if current is not None and (current.partition != partition or current.full):
                        _close_into(stats, current)
                        current = None
                    if current is None:
                        current = _open_for_insert(spec, storage, token, partition, layout.data_fields(run.schema),
                                                   top_ups.pop(partition, None))
                    rows = run if current.room is None else run.slice(0, current.room)
                    run = run.slice(rows.num_rows)
                    seqno = seqno_array(spec.instant, task_partition + spec.seqno_task_offset, written, rows.num_rows)
                    written += rows.num_rows
                    key = seqno if spec.auto_keys else layout.meta_column(rows, RECORD_KEY)
                    current.add(repeated(spec.instant, rows.num_rows), seqno, key, repeated(partition, rows.num_rows),
                                layout.data(rows), rows.num_rows)
        if current is not None:
            _close_into(stats, current)
            current = None
    finally:
        if current is not None:  # a failing task leaves its marker; the driver deletes the file
            current.sink.close()
    yield from _finish(spec, task_partition, attempt, stats)


def _open_for_insert(spec: WriteSpec, storage: Storage, token: str, partition: str, data_fields: List[pa.Field],
                     top_up: Optional[TopUp]) -> _OpenBaseFile:
    if top_up is None:
        return _OpenBaseFile(spec, storage, token, partition, data_fields)
    nullable = [f.with_nullable(True) for f in data_fields]  # stored rows predating a column hold nulls
    out = _OpenBaseFile(spec, storage, token, partition, nullable, top_up.file_id, top_up.prev_commit,
                        insert_limit=top_up.rows)
    out.copy_rows_of(top_up.path)
    return out


@dataclass
class NewSlice:
    """The rows of one new slice of an existing file group, in the `rows.SLICE` layout."""

    file_id: str
    partition: str
    deletes: int  # rows the slice drops (deleted, or moved to another partition)
    batches: Iterable[pa.RecordBatch]
    # Bloom footer entries, when its keys are the stored slice's; or a function giving them (or
    # None) once `batches` are all made (a merge streamed piece by piece), the keys held meanwhile.
    footer: Union[None, Dict[str, str], Callable[[], Optional[Dict[str, str]]]] = None
    # [rows changed, rows deleted, ...] counted while `batches` are made (a streamed merge): the
    # deletes are read from here once they are all made.
    counts: Optional[List[int]] = None


def write_slices(spec: WriteSpec, slices: Iterable[NewSlice]) -> Iterator[pa.RecordBatch]:
    """Executor side, Copy-On-Write: each slice becomes a base file of the same fileId at this
    instant. A changed row (null commit time) gets this instant's commit time and a new seqno,
    the task's changed rows numbered in order; an unchanged one keeps both. (Numbering only the
    changed rows spares building a seqno for every row of a rewritten file.)"""
    task_partition, attempt, token = task_context(spec)
    storage = Storage(spec.base_path)
    stats: List[dict] = []
    written = spec.first_row
    for new_slice in slices:
        out: Optional[_OpenBaseFile] = None
        try:
            for rows in new_slice.batches:
                SLICE.check(rows.schema)
                if out is None:
                    out = _OpenBaseFile(spec, storage, token, new_slice.partition, SLICE.data_fields(rows.schema),
                                        new_slice.file_id, spec.prev_commits[new_slice.file_id], new_slice.deletes,
                                        footer=None if callable(new_slice.footer) else new_slice.footer,
                                        footer_at_close=callable(new_slice.footer))
                commit_time, seqno = SLICE.meta_column(rows, COMMIT_TIME), SLICE.meta_column(rows, COMMIT_SEQNO)
                changed = pc.is_null(commit_time)
                count = pc.sum(changed).as_py() or 0
                if count:
                    commit_time = pc.replace_with_mask(commit_time, changed, repeated(spec.instant, count))
                    seqno = pc.replace_with_mask(seqno, changed, seqno_array(spec.instant, task_partition, written, count))
                    written += count
                out.add(commit_time, seqno, SLICE.meta_column(rows, RECORD_KEY), SLICE.meta_column(rows, PARTITION_PATH),
                        SLICE.data(rows), count)
        except BaseException:  # the marker stays: the driver deletes the file
            if out is not None:
                out.sink.close()
            raise
        if out is not None:
            if new_slice.counts is not None:
                out.deletes = new_slice.counts[1]
            late = new_slice.footer() if callable(new_slice.footer) else None
            if late and out.keys is not None:  # the stored footer holds these keys: no filter to build
                out.footer, out.keys = late, None
            _close_into(stats, out)
    yield from _finish(spec, task_partition, attempt, stats)


def grouped_by_file_group(batches: Iterable[pa.RecordBatch], file_id_column: str
                          ) -> Iterator[Tuple[str, Iterator[pa.RecordBatch]]]:
    """(fileId, its rows) for rows that arrive grouped by a fileId column, streamed."""
    runs = (run for batch in batches if batch.num_rows
            for run in _runs(batch, batch.column(file_id_column)))
    for file_id, group in itertools.groupby(runs, key=lambda run: run[0]):
        yield file_id, (rows for _, rows in group)


def rewrite_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """New slices of existing file groups from rows in the `rows.REWRITE` layout, grouped by
    file group (SQL UPDATE and DELETE, delete+insert)."""
    def slices() -> Iterator[NewSlice]:
        for file_id, group in grouped_by_file_group(batches, FILE_ID):
            first = next(group)
            REWRITE.check(first.schema)
            partition = REWRITE.meta_column(first, PARTITION_PATH)[0].as_py()
            rows = (b.drop_columns([FILE_ID]) for b in itertools.chain([first], group))
            yield NewSlice(file_id, partition, spec.deletes_per_file_group.get(file_id, 0), rows)

    return write_slices(spec, slices())


def cluster_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows in the `rows.CLUSTER_ROWS` layout, grouped by clustering group: each group's rows,
    unchanged but for the file name, into new file groups of at most its `rows_per_file` rows."""
    task_partition, attempt, token = task_context(spec)
    storage = Storage(spec.base_path)
    stats: List[dict] = []
    out: Optional[_OpenBaseFile] = None
    try:
        for group, group_batches in grouped_by_file_group(batches, CLUSTER_GROUP):
            limit = spec.rows_per_file[int(group)]
            for batch in group_batches:
                CLUSTER_ROWS.check(batch.schema)
                while batch.num_rows:
                    if out is not None and out.rows >= limit:
                        _close_into(stats, out)
                        out = None
                    if out is None:
                        partition = CLUSTER_ROWS.meta_column(batch, PARTITION_PATH)[0].as_py()
                        out = _OpenBaseFile(spec, storage, token, partition, CLUSTER_ROWS.data_fields(batch.schema))
                    rows = batch.slice(0, limit - out.rows)
                    batch = batch.slice(rows.num_rows)
                    out.add(*[CLUSTER_ROWS.meta_column(rows, n) for n in SLICE.meta], CLUSTER_ROWS.data(rows),
                            changed_rows=0)
            if out is not None:
                _close_into(stats, out)
                out = None
    finally:
        if out is not None:  # a failing task leaves its marker; the driver deletes the file
            out.sink.close()
    yield from _finish(spec, task_partition, attempt, stats)


def write_empty_slice(spec: WriteSpec, partition: str, file_id: str, data_schema: pa.Schema) -> dict:
    """A file group whose every row was deleted gets an empty new slice (on the driver)."""
    current = _OpenBaseFile(spec, Storage(spec.base_path), write_token(0, 0, 0), partition, list(data_schema),
                            file_id, spec.prev_commits[file_id], spec.deletes_per_file_group.get(file_id, 0))
    return current.close()


def stats_arrow_schema() -> pa.Schema:
    return arrow_schema_of(STATS_DDL)


def bounded_batches(rows: pa.Table, max_rows: int = ARROW_BATCH_ROWS,
                    max_bytes: int = ARROW_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """`rows` in batches of at most `max_rows` rows and `max_bytes` bytes (halved until they
    fit, so a few wide rows among narrow ones cut only their own batch); a row wider than
    `max_bytes` goes alone."""
    pending = list(reversed(rows.to_batches(max_rows)))
    while pending:
        batch = pending.pop()
        if batch.num_rows > 1 and batch.nbytes > max_bytes:
            half = batch.num_rows // 2
            pending += [batch.slice(half), batch.slice(0, half)]
        else:
            yield batch


def run_write_job(df, spec: WriteSpec, task=write_task) -> List[WriteStat]:
    """Run the write as one Spark job and return the successful task attempts' write stats."""
    return [write_stat(r) for r in run_task_job(df, functools.partial(task, spec), STATS_DDL)]


def write_stat(r: dict) -> WriteStat:
    return WriteStat(fileId=r["file_id"], path=r["path"], partitionPath=r["partition_path"],
                     prevCommit=r["prev_commit"], numWrites=r["num_writes"], numInserts=r["num_inserts"],
                     numUpdateWrites=r["num_update_writes"], numDeletes=r["num_deletes"],
                     totalWriteBytes=r["file_size"], fileSizeInBytes=r["file_size"])
