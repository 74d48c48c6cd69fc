"""Snapshot, as-of and incremental reads: a file list from the timeline, scanned by Spark.

The timeline names the exact base files of a snapshot, and Spark's own parquet scan reads
them (with the table schema given, so no footer is read to plan). The result is a plain
DataFrame: it can be registered as a temporary view and queried from SQL with no Hudi jar
and no metastore.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Iterable, Iterator, List, Optional

import pyarrow.parquet as pq

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import DataError
from ..format.file_group import BaseFile
from ..format.schema import COMMIT_TIME, with_meta_columns
from ..storage.filesystem import Storage

# Planning a read of N explicit files lists them; above this many Spark would start a
# distributed listing job (seconds). Listing on the driver takes milliseconds.
PARTITION_DISCOVERY_THRESHOLD = "1000000"


_GLOB_CHARACTERS = re.compile(r"([\\{}\[\]*?])")


def literal_path(path: str) -> str:
    """`path` for Spark's reader, which expands glob patterns: a partition value may hold `[`,
    `{`, `*` or `?`, so each is escaped to stand for itself."""
    return _GLOB_CHARACTERS.sub(r"\\\1", path)


def read_base_files(spark: SparkSession, storage: Storage, files: Iterable[BaseFile], data_schema: T.StructType) -> DataFrame:
    return read_data_files(spark, storage, files, with_meta_columns(data_schema))


def read_data_files(spark: SparkSession, storage: Storage, files: Iterable[BaseFile], schema: T.StructType) -> DataFrame:
    """The columns of `schema` from exactly these files."""
    paths: List[str] = [literal_path(storage.uri(f.path)) for f in files]
    if not paths:
        return spark.createDataFrame([], schema)
    if spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold", "32") != PARTITION_DISCOVERY_THRESHOLD:
        spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", PARTITION_DISCOVERY_THRESHOLD)
    return spark.read.schema(schema).parquet(*paths)


def changed_rows(df: DataFrame, start: str, end: str) -> DataFrame:
    """Rows whose last change lies in (start, end]."""
    return df.where((F.col(COMMIT_TIME) > F.lit(start)) & (F.col(COMMIT_TIME) <= F.lit(end)))


def rows_of_instants(df: DataFrame, instants: Iterable[str]) -> DataFrame:
    """Rows whose last change is one of `instants`."""
    return df.where(F.col(COMMIT_TIME).isin(sorted(instants)))


# Spark's vectorized parquet reader decodes `spark.sql.parquet.columnarReaderBatchSize` rows
# (4096) of every column into one buffer each, on the JVM's heap: rows of 1 MB make a 4 GB
# buffer, rows of 20 KB 80 MB per task, and the JVM dies of it (its OutOfMemoryError kills the
# executor, which in a local session is the driver). The reads the core makes of stored slices
# (update, delete, delete+insert, clustering) take fewer rows per batch when the files' rows
# are wide, sized from the files' own footers (the uncompressed bytes of their row groups).
READER_BATCH_ROWS = 4096  # Spark's default
READER_BATCH_BYTES = 8 << 20
WIDTH_SAMPLE_FILES = 4  # footers read: the files with the most bytes per row on disk
# A row wider than this share of the JVM's heap is refused before Spark reads it: even one row
# per batch is then more than a task can decode beside another task (and the row's copies).
MAX_ROW_HEAP_SHARE = 1 / 8
_BATCH_SIZE = "spark.sql.parquet.columnarReaderBatchSize"
_bounded_lock = threading.Lock()
_bounded_active: List[int] = []
_bounded_saved: List[Optional[str]] = []


def widest_row_bytes(storage: Storage, files: Iterable[BaseFile], sample: int = WIDTH_SAMPLE_FILES) -> float:
    """The most uncompressed bytes per row of a row group, among the footers of the `sample`
    files with the most bytes per row on disk (the files of a table share its columns, so the
    widest rows on disk are the widest decoded too, give or take their compression)."""
    ranked = sorted(files, key=lambda f: f.size / max(1, f.num_records), reverse=True)[:sample]
    widest = 0.0
    for f in ranked:
        with storage.open_input(f.path) as source:
            meta = pq.read_metadata(source)
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            if group.num_rows:
                widest = max(widest, group.total_byte_size / group.num_rows)
    return widest


def reader_batch_rows(row_bytes: float, budget: int = READER_BATCH_BYTES) -> Optional[int]:
    """Rows per batch of Spark's parquet reader for rows of `row_bytes`: None when Spark's
    default fits in `budget`, else as many as fit (at least one)."""
    if row_bytes * READER_BATCH_ROWS <= budget:
        return None
    return max(1, int(budget // max(1.0, row_bytes)))


def jvm_heap_bytes(spark) -> Optional[int]:
    """The driver JVM's maximum heap (a local session's tasks run in it); None over Connect."""
    try:
        return int(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM here, the server's is not ours to size
        return None


@contextlib.contextmanager
def bounded_stored_reads(spark, storage: Storage, files: Iterable[BaseFile], table: str) -> Iterator[Optional[int]]:
    """While inside, Spark's parquet reader decodes the stored rows of `files` in batches that
    fit `READER_BATCH_BYTES` (yields the rows per batch, None when Spark's default fits). The
    setting is the session's, read when a job runs: it is lowered while any bounded read runs
    and put back when the last one ends (reads on other threads meanwhile take smaller batches:
    slower, never wrong). A row too wide for the JVM's heap at one row per batch is refused,
    naming the table, instead of killing the JVM."""
    width = widest_row_bytes(storage, files)
    heap = jvm_heap_bytes(spark)
    if heap and width > heap * MAX_ROW_HEAP_SHARE:
        raise DataError(f"table {table}: its rows take up to {width / 2**20:.0f} MiB decoded, too wide for Spark's "
                        f"{heap / 2**20:.0f} MiB heap to read back (a row may take up to 1/{int(1 / MAX_ROW_HEAP_SHARE)} "
                        "of it); raise spark.driver.memory (or the executors' memory) and run it again")
    rows = reader_batch_rows(width)
    if rows is None:
        yield None
        return
    with _bounded_lock:
        if not _bounded_active:
            _bounded_saved[:] = [spark.conf.get(_BATCH_SIZE, None)]
        _bounded_active.append(rows)
        spark.conf.set(_BATCH_SIZE, str(min(_bounded_active)))
    try:
        yield rows
    finally:
        with _bounded_lock:
            _bounded_active.remove(rows)
            if _bounded_active:
                spark.conf.set(_BATCH_SIZE, str(min(_bounded_active)))
            elif _bounded_saved[0] is None:
                spark.conf.unset(_BATCH_SIZE)
            else:
                spark.conf.set(_BATCH_SIZE, _bounded_saved[0])
