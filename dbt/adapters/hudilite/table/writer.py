"""The executor side of a write: each Spark task writes its own base files.

`write_task` runs inside `mapInArrow`. Its rows arrive as the row's index in its task, the
record key (unless keys are auto-generated), the partition path, then the data columns,
grouped by partition path. The task makes the other meta columns itself: the commit time and
file name are constants, the seqno (and an auto key) is built from the row index. It writes one file group per partition path (rolling over to a
new one at the size limit), each file after its marker, and returns one write-stat row per
file. The driver collects those rows; no data crosses back.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .commit import WriteStat
from .file_group import base_file_name, new_file_id, relative_file_path, write_token
from .keygen import row_numbers, seqno_array
from .schema import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from .storage import Storage
from .timeline import TMP_DIR
from .transaction import marker_path

PARTITION_METADATA = ".hoodie_partition_metadata"

STATS_DDL = (
    "partition_path string, file_id string, path string, prev_commit string, num_writes long, "
    "num_inserts long, num_update_writes long, num_deletes long, file_size long"
)

# Keys and seqnos share long prefixes and ascend within a file: delta-encoded, then zstd,
# they cost a fraction of a byte each (dictionary encoding costs several).
DELTA_ENCODED = (RECORD_KEY, COMMIT_SEQNO)
ARROW_BATCH_ROWS = 100_000
ROW_INDEX = "_hudilite_row_index"  # shipped to the writer, not written


@dataclass(frozen=True)
class WriteSpec:
    base_path: str
    instant: str
    partitioned: bool
    partition_depth: int
    auto_keys: bool
    row_group_bytes: int = 128 * 1024 * 1024  # in Arrow memory; about a third of that on disk
    max_file_bytes: int = 512 * 1024 * 1024
    fail_task_attempt: Optional[Tuple[int, int]] = None  # (task partition, attempt): tests only
    # Rewrites of existing file groups (upsert, delete): fileId -> the instant of its current slice.
    prev_commits: Dict[str, str] = field(default_factory=dict)
    deletes_per_file_group: Dict[str, int] = field(default_factory=dict)


def parquet_writer(sink, schema: pa.Schema) -> pq.ParquetWriter:
    return pq.ParquetWriter(
        sink,
        schema,
        compression="zstd",
        use_dictionary=[n for n in schema.names if n not in DELTA_ENCODED],
        column_encoding={n: "DELTA_BYTE_ARRAY" for n in DELTA_ENCODED},
        write_statistics=True,
    )


def partition_metadata_text(instant: str, depth: int) -> str:
    return f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n"


class _OpenBaseFile:
    """One base file being written: buffers batches into large row groups."""

    def __init__(self, spec: WriteSpec, storage: Storage, token: str, partition: str, data_fields: List[pa.Field],
                 file_id: Optional[str] = None, prev_commit: Optional[str] = None):
        self.spec, self.storage, self.partition = spec, storage, partition
        self.file_id = file_id or new_file_id()
        self.prev_commit = prev_commit
        self.name = base_file_name(self.file_id, token, spec.instant)
        self.path = relative_file_path(partition, self.name)
        meta = [pa.field(name, pa.string()) for name in (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)]
        self.schema = pa.schema(meta + data_fields)
        self.file_name_value = pa.scalar(self.name, pa.string())
        _ensure_partition_metadata(storage, partition, spec)
        storage.write_bytes(marker_path(spec.instant, self.path), b"")  # before the file: rollback finds it
        self.sink = storage.open_output(self.path)
        self.writer = parquet_writer(self.sink, self.schema)
        self.pending: List[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.rows = 0
        self.changed_rows = 0
        self.bytes_in = 0
        self.deletes = spec.deletes_per_file_group.get(self.file_id, 0)

    def add(self, commit_time: pa.Array, seqno: pa.Array, key: pa.Array, partition: pa.Array,
            data: List[pa.Array], changed_rows: int) -> None:
        """Rows with their first four meta columns made; the file name is this file's."""
        batch = pa.RecordBatch.from_arrays(
            [commit_time, seqno, key, partition, pa.repeat(self.file_name_value, len(key))] + data, schema=self.schema
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
        return self.bytes_in >= self.spec.max_file_bytes

    def _flush(self) -> None:
        if self.pending:
            table = pa.Table.from_batches(self.pending, schema=self.schema)
            self.writer.write_table(table, row_group_size=table.num_rows)
            self.pending, self.pending_bytes = [], 0

    def close(self) -> dict:
        self._flush()
        self.writer.close()
        self.sink.close()
        rewrite = self.prev_commit is not None
        return {
            "partition_path": self.partition, "file_id": self.file_id, "path": self.path,
            "prev_commit": self.prev_commit, "num_writes": self.rows,
            "num_inserts": 0 if rewrite else self.rows, "num_update_writes": self.changed_rows if rewrite else 0,
            "num_deletes": self.deletes,
            "file_size": self.storage.size(self.path),
        }


def _ensure_partition_metadata(storage: Storage, partition: str, spec: WriteSpec) -> None:
    path = posixpath.join(partition, PARTITION_METADATA) if partition else PARTITION_METADATA
    if not storage.exists(path):
        storage.write_atomic(path, partition_metadata_text(spec.instant, spec.partition_depth).encode(), TMP_DIR)


def _partition_column(spec: WriteSpec) -> int:
    return 1 if spec.auto_keys else 2


def _runs(batch: pa.RecordBatch, column: int) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Slices of consecutive rows that share the value of one column."""
    n = batch.num_rows
    if n == 0:
        return
    values = batch.column(column)
    changes = pc.indices_nonzero(pc.not_equal(values.slice(1), values.slice(0, n - 1))).to_pylist()
    starts = [0] + [i + 1 for i in changes]
    for start, end in zip(starts, starts[1:] + [n]):
        yield values[start].as_py(), batch.slice(start, end - start)


def _task_context(spec: WriteSpec) -> Tuple[int, int, str]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId(), ctx.attemptNumber(), write_token(ctx.partitionId(), ctx.stageId(), ctx.attemptNumber())


def _finish(spec: WriteSpec, task_partition: int, attempt: int, stats: List[dict]) -> Iterator[pa.RecordBatch]:
    if spec.fail_task_attempt == (task_partition, attempt):
        raise RuntimeError(f"injected failure in task {task_partition} attempt {attempt}")
    if stats:
        yield pa.RecordBatch.from_pylist(stats, schema=_stats_arrow_schema())


def write_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """New file groups: one per partition path the task meets (rolled over at the size limit)."""
    task_partition, attempt, token = _task_context(spec)
    storage = Storage(spec.base_path)
    stats: List[dict] = []
    first_data = _partition_column(spec) + 1
    commit_time = pa.scalar(spec.instant, pa.string())
    current: Optional[_OpenBaseFile] = None
    written = 0  # rows are numbered in the order they are written (see keygen)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            for partition, rows in _runs(batch, first_data - 1) if spec.partitioned else [("", batch)]:
                if current is not None and (current.partition != partition or current.full):
                    stats.append(current.close())
                    current = None
                if current is None:
                    current = _OpenBaseFile(spec, storage, token, partition, list(rows.schema)[first_data:])
                seqno = seqno_array(spec.instant, task_partition, row_numbers(written, rows.num_rows))
                written += rows.num_rows
                key = seqno if spec.auto_keys else rows.column(1)
                current.add(pa.repeat(commit_time, rows.num_rows), seqno, key, rows.column(first_data - 1),
                            rows.columns[first_data:], rows.num_rows)
        if current is not None:
            stats.append(current.close())
            current = None
    finally:
        if current is not None:  # a failing task leaves its marker; the driver deletes the file
            current.sink.close()
    yield from _finish(spec, task_partition, attempt, stats)


# Rows of `rewrite_task` arrive grouped by file group as: file id, commit time and seqno (null
# for a changed row, kept for an unchanged one), record key, partition path, data columns.
REWRITE_META = 5


class _SliceRows:
    """Adds rows to new slices of existing file groups: a changed row (null commit time) gets
    this instant's commit time and a new seqno numbered within the task."""

    def __init__(self, spec: WriteSpec, task_partition: int):
        self.spec, self.task_partition, self.row_index = spec, task_partition, 0
        self.commit_time = pa.scalar(spec.instant, pa.string())

    def add(self, out: _OpenBaseFile, commit_time: pa.Array, seqno: pa.Array, key: pa.Array, partition: pa.Array,
            data: List[pa.Array]) -> None:
        changed = pc.is_null(commit_time)
        n = len(key)
        new_seqno = seqno_array(self.spec.instant, self.task_partition, row_numbers(self.row_index, n))
        self.row_index += n
        out.add(pc.if_else(changed, self.commit_time, commit_time), pc.if_else(changed, new_seqno, seqno), key, partition,
                data, pc.sum(changed).as_py() or 0)


def rewrite_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """New slices of existing file groups (Copy-On-Write): same fileId, this instant."""
    task_partition, attempt, token = _task_context(spec)
    storage = Storage(spec.base_path)
    stats: List[dict] = []
    slice_rows = _SliceRows(spec, task_partition)
    current: Optional[_OpenBaseFile] = None
    try:
        for batch in batches:
            for file_id, rows in _runs(batch, 0):
                if current is not None and current.file_id != file_id:
                    stats.append(current.close())
                    current = None
                if current is None:
                    current = _OpenBaseFile(spec, storage, token, rows.column(4)[0].as_py(),
                                            list(rows.schema)[REWRITE_META:], file_id, spec.prev_commits[file_id])
                slice_rows.add(current, *rows.columns[1:REWRITE_META], rows.columns[REWRITE_META:])
        if current is not None:
            stats.append(current.close())
            current = None
    finally:
        if current is not None:
            current.sink.close()
    yield from _finish(spec, task_partition, attempt, stats)


def merge_task(slices: Dict[str, Tuple[str, str]], data_names: List[str], precombine: Optional[str],
               update_columns: Optional[List[str]], spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Upsert: the batch's rows of touched file groups arrive tagged and grouped by file group;
    each group's latest slice (`slices`: fileId -> (path, partition)) is read here and merged
    with them (`upsert.merge_slice`) into a new slice of the same fileId."""
    from .upsert import OLD_FILE_ID, merge_slice

    task_partition, attempt, token = _task_context(spec)
    storage = Storage(spec.base_path)
    stats: List[dict] = []
    slice_rows = _SliceRows(spec, task_partition)

    def write(file_id: str, parts: List[pa.RecordBatch]) -> None:
        path, partition = slices[file_id]
        with storage.open_input(path) as source:
            stored = pq.read_table(source)
        merged, _, removed = merge_slice(stored, pa.Table.from_batches(parts), partition, data_names, precombine,
                                         update_columns)
        out = _OpenBaseFile(spec, storage, token, partition, list(merged.schema)[4:], file_id, spec.prev_commits[file_id])
        out.deletes = removed
        try:
            for chunk in merged.to_batches(ARROW_BATCH_ROWS):
                slice_rows.add(out, *chunk.columns[:4], chunk.columns[4:])
        except BaseException:  # the marker stays: the driver deletes the file
            out.sink.close()
            raise
        stats.append(out.close())

    current_id, parts = None, []
    for batch in batches:
        for file_id, rows in _runs(batch, batch.schema.get_field_index(OLD_FILE_ID)):
            if current_id is not None and file_id != current_id:
                write(current_id, parts)
                parts = []
            current_id = file_id
            parts.append(rows)
    if current_id is not None:
        write(current_id, parts)
    yield from _finish(spec, task_partition, attempt, stats)


def write_empty_slice(spec: WriteSpec, partition: str, file_id: str, data_schema: pa.Schema) -> dict:
    """A file group whose every row was deleted gets an empty new slice."""
    current = _OpenBaseFile(spec, Storage(spec.base_path), write_token(0, 0, 0), partition, list(data_schema),
                            file_id, spec.prev_commits[file_id])
    return current.close()


@functools.lru_cache(maxsize=1)
def _stats_arrow_schema() -> pa.Schema:
    types = {"string": pa.string(), "long": pa.int64()}
    fields = [part.strip().split(" ") for part in STATS_DDL.split(",")]
    return pa.schema([pa.field(name, types[kind]) for name, kind in fields])


def run_write_job(df, spec: WriteSpec, task=write_task) -> List[WriteStat]:
    """Run the write as one Spark job and return the successful task attempts' write stats."""
    spark = df.sparkSession
    # Larger Arrow batches halve the transfer cost (10k rows is Spark's default). Set, not
    # restored: writes may run on several threads of one session.
    if int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")) < ARROW_BATCH_ROWS:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    rows = df.mapInArrow(functools.partial(task, spec), STATS_DDL).collect()
    return [write_stat(r.asDict()) for r in rows]


def write_stat(r: dict) -> WriteStat:
    return WriteStat(fileId=r["file_id"], path=r["path"], partitionPath=r["partition_path"],
                     prevCommit=r["prev_commit"], numWrites=r["num_writes"], numInserts=r["num_inserts"],
                     numUpdateWrites=r["num_update_writes"], numDeletes=r["num_deletes"],
                     totalWriteBytes=r["file_size"], fileSizeInBytes=r["file_size"])
