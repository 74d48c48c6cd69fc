"""The record-level index (RFC-8): record key -> (partition path, fileId) for the snapshot.

Kept under `.hoodie/.hudilite/record_index/` (hudilite's own; Hudi readers ignore it) in N
hash shards (`Sharding`), each shard a folder of index files
(`index_files.py`): a base written when the index is built, one delta per later commit that
changed keys of the shard (inserted or moved keys with their new place, deleted keys as
tombstones). Files are sorted by key, so a lookup reads only the row groups whose key range
can hold a wanted key. Entries pointing at file groups a replacecommit replaced are not live:
readers drop them, so overwrites need no delta.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .file_group import FileSystemView
from .index import LOCATION_DDL, IndexChange, TableIndex, file_id_of
from .index_files import BASE, DELTA, completed_set, has_too_many_deltas, write_index_file
from .instant import Instant
from .layout import RECORD_INDEX_DIR, index_file_name, record_index_shard_dir
from .reader import literal_path
from .schema import COMMIT_TIME, FILE_NAME, RECORD_KEY
from .storage import Storage
from .writer import settled

ENTRIES_PER_SHARD = 2_000_000
MAX_SHARDS = 1024
# A file group lives in one partition: entries store the fileId only (1-2 B less per entry) and
# readers take the partition from the file-system view. Keys are PLAIN + zstd: as small as
# DELTA_BYTE_ARRAY for hashed keys (+6%) and decoded in about 60% of the time, on every lookup.
ENTRY_SCHEMA = pa.schema([("key", pa.string()), ("file_id", pa.string()), ("deleted", pa.bool_())])
ENTRY_DDL = "key string, file_id string, deleted boolean"
_SHARD_RESULT = pa.schema([("path", pa.string()), ("entries", pa.int64())])
_LOCATION = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])
FilesByShard = Dict[int, List[Tuple[str, str]]]


MURMUR3 = "murmur3"  # Spark's `hash` (seed 42), the hash of Spark's own hash partitioning
XXHASH64 = "xxhash64"  # indexes built before 2026-11-25 (their state names no hash)


@dataclass(frozen=True)
class Sharding:
    """The shard of a key: `pmod(hash(key), num_shards)`. With MURMUR3 it is the Spark
    partition a shuffle of the key into `num_shards` partitions puts the key in, so each task
    gets one whole shard. (A shuffle by the shard number itself spreads shards unevenly: two
    shards can share a task while the other idles.)"""

    num_shards: int
    hash_name: str = MURMUR3
    STATE_KEYS = ("num_shards", "shards", "shard_hash")  # where an index's state file says it

    @staticmethod
    def of_state(state: dict) -> "Sharding":
        """An index's sharding from its state file. A MURMUR3 index names its count `shards`,
        not `num_shards`: a version that knew only XXHASH64 then fails on the missing key
        instead of looking keys up in the wrong shards."""
        if "num_shards" in state:
            return Sharding(state["num_shards"], XXHASH64)
        return Sharding(state["shards"], state["shard_hash"])

    def state(self) -> dict:
        if self.hash_name == XXHASH64:
            return {"num_shards": self.num_shards}
        return {"shards": self.num_shards, "shard_hash": self.hash_name}

    def shard_of(self, key: Column) -> Column:
        hashed = F.hash(key) if self.hash_name == MURMUR3 else F.xxhash64(key)
        return F.pmod(hashed, F.lit(self.num_shards)).cast("int")

    def distribute(self, rows: DataFrame, key: str, shard: str) -> DataFrame:
        """`rows` shuffled into `num_shards` partitions, each holding whole shards (with
        MURMUR3, partition i holds shard i)."""
        return rows.repartition(self.num_shards, F.col(key) if self.hash_name == MURMUR3 else F.col(shard))


def shards_for(entries: int) -> int:
    return max(1, min(MAX_SHARDS, -(-entries // ENTRIES_PER_SHARD)))


def shard_path(shard: int, instant: str, kind: str) -> str:
    return f"{record_index_shard_dir(shard)}/{index_file_name(instant, kind)}"


def write_shards(base_path: str, instant: str, kind: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: rows sorted by (shard, key) into one index file per shard (a Spark
    partition may hold several shards)."""
    storage = Storage(base_path)
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    table = pa.concat_tables(tables)
    shards = table.column("shard").to_numpy()
    starts = [0] + [i + 1 for i in range(len(shards) - 1) if shards[i] != shards[i + 1]] + [len(shards)]
    for start, end in zip(starts, starts[1:]):
        path = shard_path(int(shards[start]), instant, kind)
        write_index_file(storage, path, table.slice(start, end - start).drop_columns(["shard"]).cast(ENTRY_SCHEMA),
                         instant if kind == DELTA else None, use_dictionary=["file_id"], row_group_size=64 * 1024)
        yield pa.RecordBatch.from_pylist([{"path": path, "entries": end - start}], schema=_SHARD_RESULT)


def keys_by_row_group(metadata: pq.FileMetaData, sorted_keys: List[str]) -> List[Tuple[int, int, int]]:
    """(row group, start, end) of a key-sorted index file's row groups whose key range holds
    some of `sorted_keys`: those are `sorted_keys[start:end]`."""
    out = []
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(0).statistics
        if stats is None or not stats.has_min_max:
            out.append((i, 0, len(sorted_keys)))
            continue
        start, end = bisect.bisect_left(sorted_keys, stats.min), bisect.bisect_right(sorted_keys, stats.max)
        if start < end:
            out.append((i, start, end))
    return out


def latest_entries(storage: Storage, files: List[Tuple[str, str]], keys: Sequence[str]) -> pa.Table:
    """The newest entry (key, file_id, deleted) of each of `keys` that one of `files`
    ((instant, path)) holds; only the row groups that can hold one of `keys` are read."""
    sorted_keys = sorted(set(keys))
    wanted = pa.array(sorted_keys, pa.string())
    parts = []
    for age, (_, path) in enumerate(sorted(files)):  # oldest first: a later delta's entry wins
        with storage.open_input(path) as source:
            parquet = pq.ParquetFile(source, read_dictionary=["file_id"])
            for group, start, end in keys_by_row_group(parquet.metadata, sorted_keys):
                found = _matches(parquet, group, wanted.slice(start, end - start))
                parts.append(found.append_column("age", pa.repeat(pa.scalar(age, pa.int32()), found.num_rows)))
    if not parts:
        return ENTRY_SCHEMA.empty_table()
    entries = pa.concat_tables(parts)
    entries = entries.take(pc.sort_indices(entries, [("key", "ascending"), ("age", "descending")]))
    keys_in_order = entries.column("key").combine_chunks()
    first_of_key = pa.concat_arrays([pa.array([True]), pc.not_equal(keys_in_order[1:], keys_in_order[:-1])]) \
        if len(keys_in_order) else pa.array([], pa.bool_())
    return entries.filter(first_of_key).drop_columns(["age"])


def _matches(parquet: pq.ParquetFile, group: int, wanted: pa.Array) -> pa.Table:
    """The entries of one row group whose key is wanted (`wanted`: the keys in the group's key
    range, so that all groups together hash each key once), as ENTRY_SCHEMA. One row group at
    a time, the key column first and the rest for matches only, fileIds kept as their
    dictionary: a shard's lookup then decodes its keys into the same few MB again and again.
    (Decoding a whole 2M-entry shard at once, fileIds as strings, allocated ~150 MB per lookup
    and took 2-8x as long inside a task, page faults included.)"""
    keys = parquet.read_row_group(group, columns=["key"], use_threads=False).column("key")
    at = pc.indices_nonzero(pc.is_in(keys, value_set=wanted))
    if not len(at):  # new keys fall in some group's range and match nothing there
        return ENTRY_SCHEMA.empty_table()
    rest = parquet.read_row_group(group, columns=["file_id", "deleted"], use_threads=False).take(at)
    return pa.table([keys.take(at), rest.column("file_id").cast(pa.string()), rest.column("deleted")],
                    schema=ENTRY_SCHEMA)


def live_holders(found: pa.Table, keys: pa.Array, live: Dict[str, str]) -> Tuple[pa.Array, pa.Array]:
    """Per key, (fileId, partition) of the live file group holding it (`live`: fileId ->
    partition); nulls where the key is not indexed, deleted, or in a replaced file group."""
    at = pc.index_in(keys, value_set=found.column("key").combine_chunks())
    file_ids, deleted = found.column("file_id").take(at), found.column("deleted").take(at)
    live_ids = pa.array(list(live), pa.string())
    where = pc.index_in(pc.if_else(pc.fill_null(deleted, True), pa.scalar(None, pa.string()), file_ids),
                        value_set=live_ids)
    return live_ids.take(where), pa.array(list(live.values()), pa.string()).take(where)


def _lookup_task(base_path: str, files_by_shard: FilesByShard, live: Dict[str, str],
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the live entries of the keys that arrive (with their shard), reading
    each shard's index files directly."""
    storage = Storage(base_path)
    arrived = [b for b in batches if b.num_rows]
    if not arrived:
        return
    arrived = pa.Table.from_batches(arrived)
    arrived = arrived.filter(pc.is_valid(arrived.column("key")))
    for shard in pc.unique(arrived.column("shard")).to_pylist():
        keys = arrived.filter(pc.equal(arrived.column("shard"), shard)).column("key")
        found = latest_entries(storage, files_by_shard.get(shard, []), keys.to_pylist())
        file_ids, partitions = live_holders(found, found.column("key"), live)
        held = pa.table([found.column("key"), partitions, file_ids], schema=_LOCATION).filter(pc.is_valid(file_ids))
        yield from held.to_batches()


def entries_of(rows: DataFrame) -> DataFrame:
    """Index entries for rows read from base files (with their meta columns)."""
    return rows.select(F.col(RECORD_KEY).alias("key"),
                       file_id_of(F.col(FILE_NAME)).alias("file_id"), F.lit(False).alias("deleted"))


@dataclass(frozen=True)
class LookupPlan:
    """How a batch finds its keys: the shard of a key, each shard's files."""

    sharding: Sharding
    files_by_shard: FilesByShard


class RecordIndex(TableIndex):
    ROOT = RECORD_INDEX_DIR

    @property
    def num_shards(self) -> int:
        return self.sharding.num_shards

    @property
    def sharding(self) -> Sharding:
        return Sharding.of_state(self.state())

    def _write(self, entries: DataFrame, instant: str, kind: str, sharding: Sharding) -> Dict[str, int]:
        """Index files written ({path: entries}), one per shard that has entries."""
        keyed = entries.withColumn("shard", sharding.shard_of(F.col("key")))
        task = functools.partial(write_shards, self.storage.base_path, instant, kind)
        out = (sharding.distribute(keyed, "key", "shard").sortWithinPartitions("shard", "key")
               .mapInArrow(task, "path string, entries long"))
        rows = settled(self.spark, out.collect)
        return {r.path: r.entries for r in rows}

    def build(self, snapshot: DataFrame, instant: str, num_shards: Optional[int] = None) -> int:
        """`num_shards` defaults to one per ENTRIES_PER_SHARD entries."""
        entries = entries_of(snapshot)
        sharding = Sharding(num_shards or shards_for(entries.count()))
        written = sum(self._write(entries, instant, BASE, sharding).values())
        self.files.write_state(dict(sharding.state(), base_instant=instant, entries_at_build=written))
        return written

    def delta(self, instant: str, change: IndexChange) -> List[str]:
        """The keys of new file groups and tombstones of deleted keys (rewritten groups keep
        their keys; replaced groups' entries are not live)."""
        if not change.inserted and change.removed is None:
            return []
        # Every row of a new file group (a clustering's keep their commit time); of a topped-up
        # small file only this instant's: its stored rows are indexed at that file group already.
        parts = []
        new_groups = [s for s in change.inserted if not s.prevCommit]
        topped_up = [s for s in change.inserted if s.prevCommit]
        if new_groups:
            parts.append(entries_of(self.written_rows(new_groups)))
        if topped_up:
            parts.append(entries_of(self.written_rows(topped_up).where(F.col(COMMIT_TIME) == instant)))
        if change.removed is not None:
            parts.append(change.removed)
        entries = functools.reduce(lambda a, b: a.unionByName(b), parts)
        return sorted(self._write(entries, instant, DELTA, self.sharding))

    def visible_files(self, completed: List[Instant], as_of: Optional[str] = None,
                      state: Optional[dict] = None) -> FilesByShard:
        """Per shard, the (instant, path) of the base and the deltas the index at `as_of` reads
        (`state`: the state file, when the caller has read it)."""
        state = state or self.state()
        done = completed_set(completed, as_of)
        out: FilesByShard = {}
        for shard in range(Sharding.of_state(state).num_shards):
            files = self.files.visible(state["base_instant"], done, f"shard={shard}")
            if files:
                out[shard] = files
        return out

    def lookup_plan(self, completed: List[Instant], default_shards: int) -> LookupPlan:
        """Before the index is built (an empty table) every key is new: `default_shards` shards, no files."""
        state = self.state()
        if state is None:
            return LookupPlan(Sharding(default_shards), {})
        return LookupPlan(Sharding.of_state(state), self.visible_files(completed, state=state))

    def entries(self, completed: List[Instant], view: FileSystemView, as_of: Optional[str] = None) -> DataFrame:
        files = [path for per_shard in self.visible_files(completed, as_of).values() for _, path in per_shard]
        if not files:
            return self.spark.createDataFrame([], LOCATION_DDL)
        entries = (self.spark.read.schema(ENTRY_DDL).parquet(*[literal_path(self.storage.uri(p)) for p in files])
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
        live = {g.file_id: g.partition for g in view.live_groups()}
        task = functools.partial(_lookup_task, self.storage.base_path, self.visible_files(completed), live)
        sharding = self.sharding
        probes = keys.toDF("key").select("key", sharding.shard_of(F.col("key")).alias("shard"))
        return sharding.distribute(probes, "key", "shard").mapInArrow(task, LOCATION_DDL)

    def holders(self, keys: DataFrame, completed: List[Instant], view: FileSystemView) -> Set[str]:
        if not self.is_built():
            return set()
        return {r[0] for r in self.lookup(completed, view, keys).select("file_id").distinct().collect()}

    def needs_compaction(self, completed: List[Instant]) -> bool:
        return any(has_too_many_deltas(files) for files in self.visible_files(completed).values())

    def compact(self, completed: List[Instant], view: FileSystemView) -> None:
        """The RFC-8 base-plus-log compaction, on the executors. An index of an older sharding
        hash is resharded with the current one (the shard count stays)."""
        instant = max(i.timestamp for i in completed)
        superseded = [p for files in self.visible_files(completed).values() for _, p in files]
        entries = self.entries(completed, view).select("key", "file_id", F.lit(False).alias("deleted"))
        sharding = Sharding(self.num_shards)
        self._write(entries, instant, BASE, sharding)
        state = {k: v for k, v in self.state().items() if k not in Sharding.STATE_KEYS}
        self.files.finish_compaction(dict(state, **sharding.state(), base_instant=instant), superseded)
