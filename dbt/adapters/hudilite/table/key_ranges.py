"""The record index of an auto-keyed table: runs of RFC-76 keys instead of one entry per key.

An auto key is `<instant>_<task>_<row>`, rows numbered in the order the task writes them
(keygen), so the keys of a file group form runs of consecutive rows of one (instant, task):
one run per task that wrote the group, a few more once deletes cut holes. The index stores
each live file group's runs (fileId, prefix `<instant>_<task>`, first row, last row).

Files under `.hoodie/.hudilite/key_ranges/`: `<T>.base.parquet` (every live group as of T,
written by `build` or `compact`) and `<T>.delta.parquet`, the complete runs of each file group
instant T wrote (new or rewritten; a group left empty is a row with null runs). The newest
file naming a group holds its runs. A delta belongs to its commit: marked first, rolled back
with it, and ignored unless T completed. Runs of replaced file groups are not live.
"""

from __future__ import annotations

import bisect
import json
import posixpath
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .file_group import FileSystemView
from .instant import Instant
from .record_index import COMPACT_AFTER_DELTAS, file_id_of
from .schema import FILE_NAME, RECORD_KEY
from .storage import Storage
from .timeline import PRIVATE_DIR, TMP_DIR
from .transaction import marker_path

RANGES_DIR = PRIVATE_DIR + "/key_ranges"
RANGES_STATE = RANGES_DIR + "/index.json"
RUN_SCHEMA = pa.schema([("file_id", pa.string()), ("prefix", pa.string()), ("first", pa.int64()), ("last", pa.int64())])
_RANGE_FILE = re.compile(r"^(\d{17})\.(base|delta)\.parquet$")
Run = Tuple[str, int, int]  # (prefix, first row, last row)


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


def holder(runs_by_prefix: Dict[str, List[Tuple[int, int, str]]], key: str) -> Optional[str]:
    """The file group whose runs hold `key` (runs per prefix sorted by first row)."""
    parts = split_key(key)
    if parts is None:
        return None
    runs = runs_by_prefix.get(parts[0], [])
    at = bisect.bisect_right(runs, (parts[1], float("inf"), "")) - 1
    return runs[at][2] if at >= 0 and runs[at][0] <= parts[1] <= runs[at][1] else None


class KeyRangeIndex:
    def __init__(self, storage: Storage):
        self.storage = storage

    def state(self) -> Optional[dict]:
        return json.loads(self.storage.read_text(RANGES_STATE)) if self.storage.exists(RANGES_STATE) else None

    def _write(self, path: str, runs: Iterable[Tuple], delta_instant: Optional[str] = None) -> None:
        rows = [dict(zip(RUN_SCHEMA.names, r)) for r in runs]
        if delta_instant is not None:
            self.storage.write_bytes(marker_path(delta_instant, path), b"")
        with self.storage.open_output(path) as sink:
            pq.write_table(pa.Table.from_pylist(rows, schema=RUN_SCHEMA), sink, compression="zstd")

    def build(self, snapshot: DataFrame, instant: str) -> int:
        """Bootstrap from the snapshot as of the completed `instant`; returns the runs."""
        runs = [tuple(r) for r in runs_of(snapshot).collect()]
        self._write(posixpath.join(RANGES_DIR, f"{instant}.base.parquet"), runs)
        self.storage.write_atomic(RANGES_STATE, json.dumps({"base_instant": instant}).encode(), TMP_DIR)
        return len(runs)

    def write_delta(self, written: DataFrame, file_ids: Sequence[str], instant: str) -> List[str]:
        """The runs of the file groups `instant` wrote (`written`: their new slices' rows)."""
        runs = [tuple(r) for r in runs_of(written).collect()]
        empty = sorted(set(file_ids) - {r[0] for r in runs})
        path = posixpath.join(RANGES_DIR, f"{instant}.delta.parquet")
        self._write(path, runs + [(f, None, None, None) for f in empty], delta_instant=instant)
        return [path]

    def _visible(self, completed: List[Instant], as_of: Optional[str] = None) -> List[Tuple[str, str]]:
        base = self.state()["base_instant"]
        done = {i.timestamp for i in completed if as_of is None or i.timestamp <= as_of}
        out = []
        for name in self.storage.list_names(RANGES_DIR):
            m = _RANGE_FILE.match(name)
            if m and ((m[2] == "base" and m[1] == base) or (m[2] == "delta" and m[1] > base and m[1] in done)):
                out.append((m[1], posixpath.join(RANGES_DIR, name)))
        return sorted(out)

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

    def holders(self, keys: Iterable[str], completed: List[Instant], view: FileSystemView) -> Dict[str, str]:
        """key -> the live file group holding it, for the keys some run covers."""
        by_prefix: Dict[str, List[Tuple[int, int, str]]] = {}
        for file_id, runs in self.runs(completed, view).items():
            for prefix, first, last in runs:
                by_prefix.setdefault(prefix, []).append((first, last, file_id))
        for runs in by_prefix.values():
            runs.sort()
        found = {k: holder(by_prefix, k) for k in keys}
        return {k: f for k, f in found.items() if f is not None}

    def needs_compaction(self, completed: List[Instant]) -> bool:
        return len(self._visible(completed)) - 1 > COMPACT_AFTER_DELTAS

    def compact(self, completed: List[Instant], view: FileSystemView) -> None:
        """One base file as of the latest completed instant; the files it supersedes go."""
        instant = max(i.timestamp for i in completed)
        superseded = [p for _, p in self._visible(completed)]
        runs = [(f, p, a, b) for f, rs in self.runs(completed, view).items() for p, a, b in rs]
        self._write(posixpath.join(RANGES_DIR, f"{instant}.base.parquet"), runs)
        self.storage.write_atomic(RANGES_STATE, json.dumps({"base_instant": instant}).encode(), TMP_DIR)
        for path in superseded:
            if not path.endswith(f"{instant}.base.parquet"):
                self.storage.delete_file(path)
