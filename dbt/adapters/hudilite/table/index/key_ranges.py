"""The index of an auto-keyed table: runs of RFC-76 keys instead of one entry per key.

An auto key is `<instant>_<task>_<row>`, rows numbered in the order the task writes them
(keygen), so the keys of a file group form runs of consecutive rows of one (instant, task):
one run per task that wrote the group, a few more once deletes cut holes. The index stores
each live file group's runs (fileId, prefix `<instant>_<task>`, first row, last row).

Files under `.hoodie/.hudilite/key_ranges/` (`index_files.py`): a base with every live group
as of T (written by `build` or `compact`), and per commit a delta with the complete runs of
each file group it wrote (new or rewritten; a group left empty is a row with null runs). The
newest file naming a group holds its runs. Runs of replaced file groups are not live.
"""

from __future__ import annotations

import bisect
from typing import Dict, List, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..format.file_group import FileSystemView
from .table_index import IndexChange, TableIndex, file_id_of
from .files import BASE, DELTA, completed_set, has_too_many_deltas, write_index_file
from ..format.instant import Instant
from ..storage.layout import KEY_RANGES_DIR
from ..format.schema import FILE_NAME, RECORD_KEY

RUN_SCHEMA = pa.schema([("file_id", pa.string()), ("prefix", pa.string()), ("first", pa.int64()), ("last", pa.int64())])
Run = Tuple[str, int, int]  # (prefix, first row, last row)
RunsByPrefix = Dict[str, List[Tuple[int, int, str]]]  # prefix -> (first, last, fileId), sorted


def runs_of(rows: DataFrame) -> DataFrame:
    """(file_id, prefix, first, last): the runs of consecutive rows among the auto keys of
    `rows` (base-file rows with their meta columns), per file group."""
    key = F.col(RECORD_KEY)
    parsed = rows.select(file_id_of(F.col(FILE_NAME)).alias("file_id"), F.substring_index(key, "_", 2).alias("prefix"),
                         F.substring_index(key, "_", -1).cast("long").alias("row"))
    # Consecutive rows share `row - rank`: each such island is one run.
    island = F.col("row") - F.row_number().over(Window.partitionBy("file_id", "prefix").orderBy("row"))
    return (parsed.withColumn("island", island).groupBy("file_id", "prefix", "island")
            .agg(F.min("row").alias("first"), F.max("row").alias("last")).drop("island"))


def split_key(key: str) -> Optional[Tuple[str, int]]:
    prefix, _, row = key.rpartition("_")
    return (prefix, int(row)) if prefix and row.isdigit() else None


def by_prefix(runs: Dict[str, List[Run]]) -> RunsByPrefix:
    out: RunsByPrefix = {}
    for file_id, file_runs in runs.items():
        for prefix, first, last in file_runs:
            out.setdefault(prefix, []).append((first, last, file_id))
    for prefix_runs in out.values():
        prefix_runs.sort()
    return out


def holder(runs_by_prefix: RunsByPrefix, key: str) -> Optional[str]:
    """The file group whose runs hold `key`."""
    parts = split_key(key)
    if parts is None:
        return None
    runs = runs_by_prefix.get(parts[0], [])
    at = bisect.bisect_right(runs, (parts[1], float("inf"), "")) - 1
    return runs[at][2] if at >= 0 and runs[at][0] <= parts[1] <= runs[at][1] else None


class KeyRangeIndex(TableIndex):
    ROOT = KEY_RANGES_DIR

    def _write(self, instant: str, kind: str, runs: List[Tuple]) -> str:
        path = self.files.path(instant, kind)
        rows = [dict(zip(RUN_SCHEMA.names, r)) for r in runs]
        write_index_file(self.storage, path, pa.Table.from_pylist(rows, schema=RUN_SCHEMA),
                         instant if kind == DELTA else None)
        return path

    def build(self, snapshot: DataFrame, view: FileSystemView, instant: str, num_shards: Optional[int] = None) -> int:
        runs = [tuple(r) for r in runs_of(snapshot).collect()]
        self._write(instant, BASE, runs)
        self.files.write_state({"base_instant": instant})
        return len(runs)

    def delta(self, instant: str, change: IndexChange) -> List[str]:
        """The complete runs of every file group the commit wrote."""
        if not change.written:
            return []
        runs = [tuple(r) for r in runs_of(self.written_rows(change.written)).collect()]
        emptied = sorted({s.fileId for s in change.written} - {r[0] for r in runs})
        return [self._write(instant, DELTA, runs + [(f, None, None, None) for f in emptied])]

    def _visible(self, completed: List[Instant], as_of: Optional[str] = None) -> List[Tuple[str, str]]:
        return self.files.visible(self.state()["base_instant"], completed_set(completed, as_of))

    def runs(self, completed: List[Instant], view: FileSystemView, as_of: Optional[str] = None) -> Dict[str, List[Run]]:
        """fileId -> its runs, for every live file group."""
        live = {g.file_id for g in view.live_groups()}
        out: Dict[str, List[Run]] = {}
        for _, path in reversed(self._visible(completed, as_of)):  # newest first: it holds a group's runs
            with self.storage.open_input(path) as source:
                table = pq.read_table(source)
            newest: Dict[str, List[Run]] = {}
            for file_id, prefix, first, last in zip(*(table.column(c).to_pylist() for c in RUN_SCHEMA.names)):
                if file_id in live and file_id not in out:
                    newest.setdefault(file_id, [])
                    if prefix is not None:
                        newest[file_id].append((prefix, first, last))
            out.update(newest)
        return out

    def holders(self, keys: DataFrame, completed: List[Instant], view: FileSystemView) -> Set[str]:
        """Keys are collected to the driver: the runs are few, and a delete's keys too."""
        wanted = [r[0] for r in keys.distinct().collect()]
        if not wanted:
            return set()
        runs = by_prefix(self.runs(completed, view))
        return {f for f in (holder(runs, k) for k in wanted) if f is not None}

    def entries(self, completed: List[Instant], view: FileSystemView) -> DataFrame:
        """Every key the runs cover, expanded (validation)."""
        partition_of = {g.file_id: g.partition for g in view.live_groups()}
        runs = [(f, partition_of[f], p, a, b) for f, rs in self.runs(completed, view).items() for p, a, b in rs]
        df = self.spark.createDataFrame(runs, "file_id string, partition string, prefix string, first long, last long")
        rows = df.select("prefix", "partition", "file_id", F.explode(F.sequence("first", "last")).alias("row"))
        return rows.select(F.concat_ws("_", "prefix", F.col("row").cast("string")).alias("key"), "partition", "file_id")

    def needs_compaction(self, completed: List[Instant]) -> bool:
        return has_too_many_deltas(self._visible(completed))

    def compact(self, completed: List[Instant], view: FileSystemView) -> None:
        """One base file as of the latest completed instant, on the driver (runs are few)."""
        instant = max(i.timestamp for i in completed)
        superseded = [p for _, p in self._visible(completed)]
        runs = [(f, p, a, b) for f, rs in self.runs(completed, view).items() for p, a, b in rs]
        self._write(instant, BASE, runs)
        self.files.finish_compaction({"base_instant": instant}, superseded)
