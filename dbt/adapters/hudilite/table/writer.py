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
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .commit import WriteStat
from .file_group import base_file_name, new_file_id, relative_file_path, write_token
from .keygen import seqno_array
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

    def __init__(self, spec: WriteSpec, storage: Storage, task_partition: int, token: str, partition: str,
                 data_fields: List[pa.Field]):
        self.spec, self.storage, self.partition, self.task_partition = spec, storage, partition, task_partition
        self.file_id = new_file_id()
        self.name = base_file_name(self.file_id, token, spec.instant)
        self.path = relative_file_path(partition, self.name)
        meta = [pa.field(name, pa.string()) for name in (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)]
        self.schema = pa.schema(meta + data_fields)
        self.commit_time_value = pa.scalar(spec.instant, pa.string())
        self.file_name_value = pa.scalar(self.name, pa.string())
        _ensure_partition_metadata(storage, partition, spec)
        storage.write_bytes(marker_path(spec.instant, self.path), b"")  # before the file: rollback finds it
        self.sink = storage.open_output(self.path)
        self.writer = parquet_writer(self.sink, self.schema)
        self.pending: List[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.rows = 0
        self.bytes_in = 0

    def add(self, batch: pa.RecordBatch) -> None:
        n, first_data = batch.num_rows, _partition_column(self.spec) + 1
        seqno = seqno_array(self.spec.instant, self.task_partition, batch.column(0))
        key = seqno if self.spec.auto_keys else batch.column(1)
        meta = [pa.repeat(self.commit_time_value, n), seqno, key, batch.column(first_data - 1),
                pa.repeat(self.file_name_value, n)]
        batch = pa.RecordBatch.from_arrays(meta + batch.columns[first_data:], schema=self.schema)
        self.pending.append(batch)
        self.pending_bytes += batch.nbytes
        self.rows += batch.num_rows
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
        return {
            "partition_path": self.partition, "file_id": self.file_id, "path": self.path,
            "prev_commit": None, "num_writes": self.rows, "num_inserts": self.rows,
            "num_update_writes": 0, "num_deletes": 0, "file_size": self.storage.size(self.path),
        }


def _ensure_partition_metadata(storage: Storage, partition: str, spec: WriteSpec) -> None:
    path = posixpath.join(partition, PARTITION_METADATA) if partition else PARTITION_METADATA
    if not storage.exists(path):
        storage.write_atomic(path, partition_metadata_text(spec.instant, spec.partition_depth).encode(), TMP_DIR)


def _partition_column(spec: WriteSpec) -> int:
    return 1 if spec.auto_keys else 2


def _partition_runs(batch: pa.RecordBatch, spec: WriteSpec) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Slices of consecutive rows that share a partition path."""
    n = batch.num_rows
    if n == 0:
        return
    paths = batch.column(_partition_column(spec))
    if not spec.partitioned:
        yield paths[0].as_py(), batch
        return
    changes = pc.indices_nonzero(pc.not_equal(paths.slice(1), paths.slice(0, n - 1))).to_pylist()
    starts = [0] + [i + 1 for i in changes]
    ends = starts[1:] + [n]
    for start, end in zip(starts, ends):
        yield paths[start].as_py(), batch.slice(start, end - start)


def write_task(spec: WriteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    task_partition, attempt = ctx.partitionId(), ctx.attemptNumber()
    token = write_token(task_partition, ctx.stageId(), attempt)
    storage = Storage(spec.base_path)
    stats: List[dict] = []
    current: Optional[_OpenBaseFile] = None
    try:
        for batch in batches:
            for partition, rows in _partition_runs(batch, spec):
                if current is not None and (current.partition != partition or current.full):
                    stats.append(current.close())
                    current = None
                if current is None:
                    data_fields = list(rows.schema)[_partition_column(spec) + 1 :]
                    current = _OpenBaseFile(spec, storage, task_partition, token, partition, data_fields)
                current.add(rows)
        if current is not None:
            stats.append(current.close())
            current = None
    finally:
        if current is not None:  # a failing task leaves its marker; the driver deletes the file
            current.sink.close()
    if spec.fail_task_attempt == (task_partition, attempt):
        raise RuntimeError(f"injected failure in task {task_partition} attempt {attempt}")
    if stats:
        yield pa.RecordBatch.from_pylist(stats, schema=_stats_arrow_schema())


@functools.lru_cache(maxsize=1)
def _stats_arrow_schema() -> pa.Schema:
    types = {"string": pa.string(), "long": pa.int64()}
    fields = [part.strip().split(" ") for part in STATS_DDL.split(",")]
    return pa.schema([pa.field(name, types[kind]) for name, kind in fields])


def run_write_job(df, spec: WriteSpec) -> List[WriteStat]:
    """Run the write as one Spark job and return the successful task attempts' write stats."""
    spark = df.sparkSession
    # Larger Arrow batches halve the transfer cost (10k rows is Spark's default). Set, not
    # restored: writes may run on several threads of one session.
    if int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")) < ARROW_BATCH_ROWS:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    rows = df.mapInArrow(functools.partial(write_task, spec), STATS_DDL).collect()
    return [
        WriteStat(fileId=r["file_id"], path=r["path"], partitionPath=r["partition_path"],
                  prevCommit=r["prev_commit"], numWrites=r["num_writes"], numInserts=r["num_inserts"],
                  numUpdateWrites=r["num_update_writes"], numDeletes=r["num_deletes"],
                  totalWriteBytes=r["file_size"], fileSizeInBytes=r["file_size"])
        for r in rows
    ]
