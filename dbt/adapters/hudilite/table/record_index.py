"""The record-level index (RFC-8): record key -> (partition path, fileId) for the snapshot.

Kept under `.hoodie/.hudilite/record_index/` (hudilite's own; Hudi readers ignore it) in N
hash shards, `shard = pmod(xxhash64(key), N)`. Each shard is a base file written when the
index is built (`shard=<k>/<T>.base.parquet`, the snapshot as of T) plus one delta file per
later commit that changed keys of the shard (`shard=<k>/<T>.delta.parquet`): inserted or
moved keys with their new place, deleted keys as tombstones. Files are sorted by key.

A delta is written inside its commit, after a marker, so the index at instant T is exactly
the base plus the deltas of completed instants up to T; a failed write's delta is rolled back
with its data. Entries pointing at file groups a replacecommit replaced are not live: the
index reader drops them, so overwrites need no delta.
"""

from __future__ import annotations

import bisect
import functools
import json
import posixpath
import re
from typing import Dict, Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .file_group import FileSystemView
from .instant import Instant
from .schema import FILE_NAME, RECORD_KEY
from .storage import Storage
from .timeline import PRIVATE_DIR, TMP_DIR
from .transaction import marker_path

INDEX_DIR = PRIVATE_DIR + "/record_index"
INDEX_STATE = INDEX_DIR + "/index.json"
ENTRIES_PER_SHARD = 2_000_000
COMPACT_AFTER_DELTAS = 20  # per shard: then the base is rewritten as of the latest instant
MAX_SHARDS = 1024
_SHARD_FILE = re.compile(r"^(\d{17})\.(base|delta)\.parquet$")
# A file group lives in one partition: entries store the fileId only (1-2 B less per entry) and
# readers take the partition from the file-system view.
ENTRY_SCHEMA = pa.schema([("key", pa.string()), ("file_id", pa.string()), ("deleted", pa.bool_())])
ENTRY_DDL = "key string, file_id string, deleted boolean"
_SHARD_RESULT = pa.schema([("path", pa.string()), ("entries", pa.int64())])
LOCATION_DDL = "key string, partition string, file_id string"
_LOCATION = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])


def file_id_of(file_name_column):
    """The fileId part of a base-file name `<fileId>_<token>_<T>.parquet`."""
    return F.substring_index(file_name_column, "_", 1)


def shards_for(entries: int) -> int:
    return max(1, min(MAX_SHARDS, -(-entries // ENTRIES_PER_SHARD)))


def shard_path(shard: int, instant: str, kind: str) -> str:
    return posixpath.join(INDEX_DIR, f"shard={shard}", f"{instant}.{kind}.parquet")


def _write_shard_task(base_path: str, instant: str, kind: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: rows sorted by (shard, key) into one index file per shard (a Spark
    partition may hold several shards). A delta belongs to a pending instant and gets a
    marker, so a rollback removes it."""
    storage = Storage(base_path)
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    table = pa.concat_tables(tables)
    shards = table.column("shard").to_numpy()
    starts = [0] + [i + 1 for i in range(len(shards) - 1) if shards[i] != shards[i + 1]] + [len(shards)]
    for start, end in zip(starts, starts[1:]):
        path = shard_path(int(shards[start]), instant, kind)
        if kind == "delta":
            storage.write_bytes(marker_path(instant, path), b"")
        with storage.open_output(path) as sink:
            pq.write_table(table.slice(start, end - start).drop_columns(["shard"]).cast(ENTRY_SCHEMA), sink,
                           compression="zstd", use_dictionary=["file_id"],
                           column_encoding={"key": "DELTA_BYTE_ARRAY"}, row_group_size=64 * 1024)
        yield pa.RecordBatch.from_pylist([{"path": path, "entries": end - start}], schema=_SHARD_RESULT)


def row_groups_holding(metadata: pq.FileMetaData, sorted_keys: List[str]) -> List[int]:
    """Row groups of a key-sorted index file whose key range holds one of `sorted_keys`."""
    out = []
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(0).statistics
        if stats is None or not stats.has_min_max:
            out.append(i)
            continue
        at = bisect.bisect_left(sorted_keys, stats.min)
        if at < len(sorted_keys) and sorted_keys[at] <= stats.max:
            out.append(i)
    return out


def latest_entries(storage: Storage, files: List[Tuple[str, str]], keys: List[str]) -> Dict[str, tuple]:
    """key -> (file_id, deleted) as of the newest of `files` ((instant, path)) that
    holds it; only the row groups that can hold one of `keys` are read."""
    sorted_keys = sorted(set(keys))
    wanted = pa.array(sorted_keys, pa.string())
    found: Dict[str, tuple] = {}
    for _, path in sorted(files):  # oldest first: a later delta's entry wins
        with storage.open_input(path) as source:
            parquet = pq.ParquetFile(source)
            groups = row_groups_holding(parquet.metadata, sorted_keys)
            if not groups:
                continue
            rows = parquet.read_row_groups(groups, columns=["key", "file_id", "deleted"])
        rows = rows.filter(pc.is_in(rows.column("key"), value_set=wanted))
        for key, file_id, deleted in zip(*(rows.column(c).to_pylist() for c in rows.column_names)):
            found[key] = (file_id, deleted)
    return found


def live_holders(found: Dict[str, tuple], keys: List[str], live: Dict[str, str]) -> List[Optional[str]]:
    """Per key, the live file group holding it (None: not indexed, deleted, or replaced)."""
    holders = [found.get(k, (None, True)) for k in keys]
    return [f if not deleted and f in live else None for f, deleted in holders]


def _lookup_task(base_path: str, files_by_shard: Dict[int, List[Tuple[str, str]]], live: Dict[str, str],
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the live entries of the keys that arrive (with their shard), reading
    each shard's index files directly."""
    storage = Storage(base_path)
    keys_by_shard: Dict[int, List[str]] = {}
    for batch in batches:
        for shard, key in zip(batch.column("shard").to_pylist(), batch.column("key").to_pylist()):
            if key is not None:
                keys_by_shard.setdefault(shard, []).append(key)
    for shard, keys in keys_by_shard.items():
        found = latest_entries(storage, files_by_shard.get(shard, []), keys)
        rows = [(k, live[f], f) for k, f in zip(found, live_holders(found, list(found), live)) if f is not None]
        if rows:
            columns = list(zip(*rows))
            yield pa.RecordBatch.from_arrays([pa.array(c, pa.string()) for c in columns], schema=_LOCATION)


def entries_of(rows: DataFrame) -> DataFrame:
    """Index entries for rows read from base files (with their meta columns)."""
    return rows.select(F.col(RECORD_KEY).alias("key"),
                       file_id_of(F.col(FILE_NAME)).alias("file_id"), F.lit(False).alias("deleted"))


class RecordIndex:
    def __init__(self, spark: SparkSession, storage: Storage):
        self.spark = spark
        self.storage = storage

    def state(self) -> Optional[dict]:
        if not self.storage.exists(INDEX_STATE):
            return None
        return json.loads(self.storage.read_text(INDEX_STATE))

    @property
    def num_shards(self) -> int:
        return self.state()["num_shards"]

    def shard(self, key_column):
        return F.pmod(F.xxhash64(key_column), F.lit(self.num_shards)).cast("int")

    def _write(self, entries: DataFrame, instant: str, kind: str, num_shards: int) -> Dict[str, int]:
        """Index files written ({path: entries}), one per shard that has entries."""
        keyed = entries.withColumn("shard", F.pmod(F.xxhash64("key"), F.lit(num_shards)).cast("int"))
        task = functools.partial(_write_shard_task, self.storage.base_path, instant, kind)
        rows = (keyed.repartition(num_shards, "shard").sortWithinPartitions("shard", "key")
                .mapInArrow(task, "path string, entries long").collect())
        return {r.path: r.entries for r in rows}

    def build(self, snapshot: DataFrame, instant: str, num_shards: Optional[int] = None) -> int:
        """Bootstrap from a snapshot (a DataFrame with the meta columns) as of the completed
        `instant`. The state file is written last: a build that dies is simply redone."""
        entries = entries_of(snapshot)
        shards = num_shards or shards_for(entries.count())
        written = sum(self._write(entries, instant, "base", shards).values())
        state = {"num_shards": shards, "base_instant": instant, "entries_at_build": written}
        self.storage.write_atomic(INDEX_STATE, json.dumps(state).encode(), TMP_DIR)
        return written

    def write_delta(self, entries: DataFrame, instant: str) -> List[str]:
        """Changes made by `instant` (key, file_id, deleted), inside its commit;
        returns the files, which the commit keeps beside its base files."""
        return sorted(self._write(entries, instant, "delta", self.num_shards))

    def visible_files(self, completed: List[Instant], as_of: Optional[str] = None) -> Dict[int, List[Tuple[str, str]]]:
        """Per shard, the (instant, path) of the base and the deltas the index at `as_of` reads."""
        state = self.state()
        done = {i.timestamp for i in completed if as_of is None or i.timestamp <= as_of}
        out: Dict[int, List[Tuple[str, str]]] = {}
        for shard in range(state["num_shards"]):
            folder = posixpath.join(INDEX_DIR, f"shard={shard}")
            for name in self.storage.list_names(folder):
                m = _SHARD_FILE.match(name)
                if not m:
                    continue
                instant, kind = m.groups()
                if (kind == "base" and instant == state["base_instant"]) or (
                        kind == "delta" and instant > state["base_instant"] and instant in done):
                    out.setdefault(shard, []).append((instant, posixpath.join(folder, name)))
        return out

    def read(self, completed: List[Instant], view: FileSystemView, as_of: Optional[str] = None) -> DataFrame:
        """All live entries (key, partition, file_id) of the snapshot at `as_of` (validation,
        compaction); a batch's keys are found with `lookup`."""
        files = [(instant, path) for per_shard in self.visible_files(completed, as_of).values() for instant, path in per_shard]
        if not files:
            return self.spark.createDataFrame([], LOCATION_DDL)
        entries = (self.spark.read.schema(ENTRY_DDL).parquet(*[self.storage.uri(p) for _, p in files])
                   .withColumn("instant", F.substring(F.col("_metadata.file_name"), 1, 17)))
        latest = entries.groupBy("key").agg(F.max_by(F.struct("file_id", "deleted"), "instant").alias("e"))
        live = self.spark.createDataFrame([(g.file_id, g.partition) for g in view.live_groups()],
                                          "file_id string, partition string")
        return (latest.where(~F.col("e.deleted")).select("key", F.col("e.file_id").alias("file_id"))
                .join(F.broadcast(live), "file_id").select("key", "partition", "file_id"))

    def lookup(self, completed: List[Instant], view: FileSystemView, keys: DataFrame) -> DataFrame:
        """The live entries (key, partition, file_id) of `keys` (a one-column DataFrame): one
        task per shard with keys reads that shard's files, only the row groups whose key range
        can hold a wanted key, on the executors."""
        files = self.visible_files(completed)
        live = {g.file_id: g.partition for g in view.live_groups()}
        task = functools.partial(_lookup_task, self.storage.base_path, files, live)
        shards = self.num_shards
        probes = keys.toDF("key").select("key", self.shard(F.col("key")).alias("shard"))
        return probes.repartition(shards, "shard").mapInArrow(task, LOCATION_DDL)

    def needs_compaction(self, completed: List[Instant]) -> bool:
        return any(len(files) - 1 > COMPACT_AFTER_DELTAS for files in self.visible_files(completed).values())

    def compact(self, completed: List[Instant], view: FileSystemView) -> None:
        """Fold the deltas into new base files as of the latest completed instant (the RFC-8
        base-plus-log compaction); the files it supersedes are deleted once it is published."""
        instant = max(i.timestamp for i in completed)
        superseded = [p for files in self.visible_files(completed).values() for _, p in files]
        entries = self.read(completed, view).select("key", "file_id", F.lit(False).alias("deleted"))
        self._write(entries, instant, "base", self.num_shards)
        state = dict(self.state(), base_instant=instant)
        self.storage.write_atomic(INDEX_STATE, json.dumps(state).encode(), TMP_DIR)
        for path in superseded:
            if not path.endswith(f"{instant}.base.parquet"):
                self.storage.delete_file(path)
