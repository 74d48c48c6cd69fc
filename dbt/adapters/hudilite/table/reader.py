"""Snapshot, as-of and incremental reads: a file list from the timeline, scanned by Spark.

The timeline names the exact base files of a snapshot, and Spark's own parquet scan reads
them (with the table schema given, so no footer is read to plan). The result is a plain
DataFrame: it can be registered as a temporary view and queried from SQL with no Hudi jar
and no metastore.
"""

from __future__ import annotations

import re
from typing import Iterable, List

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .file_group import BaseFile
from .schema import COMMIT_TIME, with_meta_columns
from .storage import Storage

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
