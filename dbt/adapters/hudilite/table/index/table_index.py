"""`TableIndex`: where each record key of the latest snapshot lives, kept in step with every
commit. A table holds one, chosen by its key generator:

- `RecordIndex` (`record_index.py`, RFC-8): one entry per key, in hash shards; for tables
  with a record key.
- `KeyRangeIndex` (`key_ranges.py`): runs of consecutive RFC-76 auto keys per file group;
  for auto-keyed tables, whose keys are numbered in write order.

Both keep their files the same way (`index_files.py`). A write hands the index an
`IndexChange` and commits the files `delta` returns with its data, so the index at an instant
is exactly what the completed instants up to it made.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Set

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..format.commit import WriteStat
from ..format.file_group import BaseFile, FileSystemView
from .files import BaseGuard, IndexFiles
from ..format.instant import Instant
from ..spark.reader import read_base_files
from ..format.schema import FILE_NAME, PARTITION_PATH, RECORD_KEY
from ..storage.filesystem import Storage

LOCATION_DDL = "key string, partition string, file_id string"


def file_id_of(file_name_column):
    """The fileId part of a base-file name `<fileId>_<token>_<T>.parquet`."""
    return F.substring_index(file_name_column, "_", 1)


@dataclass
class IndexChange:
    """What one commit did to the keys: `written` every file it wrote, `inserted` those of new
    file groups, `removed` tombstones (key, file_id, deleted) of keys it deleted, `leaving`
    tombstones of the keys of groups it replaced and did not write again (for the metadata
    table's record_index only: hudilite's index takes replaced groups' entries as not live)."""

    written: List[WriteStat] = field(default_factory=list)
    inserted: List[WriteStat] = field(default_factory=list)
    removed: Optional[DataFrame] = None
    leaving: Optional[DataFrame] = None


class TableIndex(ABC):
    ROOT: str  # the folder of this kind's files (`layout`)

    def __init__(self, spark: SparkSession, storage: Storage, guard: Optional[BaseGuard] = None):
        self.spark = spark
        self.storage = storage
        self.files = IndexFiles(storage, self.ROOT, guard)
        # How the meta columns of written files are read, when their files do not hold them
        # (virtual keys: `TableContext.read_written_files`); None: read from the files.
        self.read_written: Optional[Callable[[List[BaseFile]], DataFrame]] = None

    def state(self) -> Optional[dict]:
        """The index's state file; None until it is built."""
        return self.files.state()

    def is_built(self) -> bool:
        return self.state() is not None

    @abstractmethod
    def build(self, snapshot: DataFrame, view: FileSystemView, instant: str, num_shards: Optional[int] = None) -> int:
        """Bootstrap from a snapshot (rows with their meta columns, of `view`'s latest files) as
        of the completed `instant`; returns the entries written. `num_shards` matters to a
        sharded kind only."""

    @abstractmethod
    def delta(self, instant: str, change: IndexChange) -> List[str]:
        """Write what `instant` changed, inside its commit; returns the files, which the
        commit keeps beside its base files (a rollback removes them)."""

    @abstractmethod
    def holders(self, keys: DataFrame, completed: List[Instant], view: FileSystemView) -> Set[str]:
        """The live file groups holding any of `keys` (a one-column DataFrame of record keys)."""

    @abstractmethod
    def entries(self, completed: List[Instant], view: FileSystemView) -> DataFrame:
        """Every live entry (key, partition, file_id) of the latest snapshot."""

    @abstractmethod
    def needs_compaction(self, completed: List[Instant]) -> bool:
        pass

    @abstractmethod
    def compact(self, completed: List[Instant], view: FileSystemView) -> None:
        """Fold the deltas into a new base as of the latest completed instant."""

    def compact_if_due(self, completed: List[Instant], view: FileSystemView) -> None:
        if self.is_built() and self.needs_compaction(completed):
            self.compact(completed, view)

    def written_rows(self, stats: List[WriteStat]) -> DataFrame:
        """The meta columns of the files a commit wrote, read back."""
        files = [BaseFile(s.partitionPath, s.fileId, "", s.path, s.numWrites, s.fileSizeInBytes) for s in stats]
        if self.read_written is not None:
            return self.read_written(files)
        return read_base_files(self.spark, self.storage, files, T.StructType([]))

    def as_indexed(self, located: DataFrame) -> DataFrame:
        """`located` (key, partition, file_id) with `key` as `entries` gives it, the record key
        kept as `record_key`."""
        return located.withColumn("record_key", F.col("key"))

    def check(self, snapshot: DataFrame, completed: List[Instant], view: FileSystemView, examples: int = 5) -> List[str]:
        """The index must hold exactly the snapshot's keys, each at its file group."""
        if not self.is_built():
            return []
        indexed = self.entries(completed, view)
        location = ["key", "partition", "file_id"]
        actual = self.as_indexed(snapshot.select(F.col(RECORD_KEY).alias("key"), F.col(PARTITION_PATH).alias("partition"),
                                                 file_id_of(F.col(FILE_NAME)).alias("file_id")))
        lacking = actual.join(actual.select(location).exceptAll(indexed).limit(examples), location, "left_semi")
        problems = [f"record index lacks key '{r.record_key}' ({r.partition}, {r.file_id})"
                    for r in lacking.limit(examples).collect()]
        problems += [f"record index holds key {_shown(r.key)} at ({r.partition}, {r.file_id}), which the snapshot does not"
                     for r in indexed.exceptAll(actual.select(location)).limit(examples).collect()]
        return problems


def _shown(key) -> str:
    """A key as an index stores it, for a message: a record key quoted, a digest in hex."""
    return f"'{key}'" if isinstance(key, str) else f"with digest {bytes(key).hex()}"
