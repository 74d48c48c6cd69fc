"""The record-level index (RFC-8): record key -> (partition path, fileId) for the snapshot.

Kept under `.hoodie/.hudilite/record_index/` (hudilite's own; Hudi readers ignore it) in N
hash shards (`Sharding`), each shard a folder of index files
(`index_files.py`): a base written when the index is built, one delta per later commit that
changed keys of the shard (inserted or moved keys with their new place, deleted keys as
tombstones). An entry is keyed by a 16-byte digest of the record key (`DIGESTS`): a lookup
compares fixed-width bytes instead of decoding strings, and an entry takes the same room
whatever the key's length. Files are ordered by the digests' first 8 bytes, so a lookup reads
only the row groups whose digest range can hold a wanted one and searches them as numbers.
Entries pointing at file groups a replacecommit replaced are not live: readers drop them, so
overwrites need no delta.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import logging
import posixpath
import re
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..format.commit import CommitMetadata
from ..format.file_group import FileSystemView
from .table_index import LOCATION_DDL, IndexChange, TableIndex, file_id_of
from .files import BASE, DELTA, completed_set, deltas_may_be_too_many, has_too_many_deltas, write_index_file
from ..format.instant import Instant
from ..storage.layout import RECORD_INDEX_DIR, TMP_DIR, index_file_name, record_index_shard_dir
from ..spark.reader import literal_path
from ..format.schema import COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from ..storage.filesystem import Storage
from ..spark.jobs import run_task_job, settled
from ..spark.writer import bounded_batches
from ..metadata import record_index as metadata_record_index
from ..metadata.record_index import RecordIndexFiles
from ..metadata.table import MetadataTable
from ..storage.lock import TableLock

logger = logging.getLogger(__name__)

# In a commit's extraMetadata: the shards it wrote a delta to (comma-separated), so that a lookup
# finds the deltas without listing the index; with the base's shards in the state file.
DELTAS_KEY = "hudilite.recordIndexDeltas"
BASE_SHARDS = "base_shard_numbers"
_DELTA_PATH = re.compile(r"^" + re.escape(RECORD_INDEX_DIR) + r"/shard=(\d+)/\d{17}\.delta\.parquet$")
_BASE_PATH = re.compile(r"^" + re.escape(RECORD_INDEX_DIR) + r"/shard=(\d+)/\d{17}\.base\.parquet$")
CAUGHT_UP_FILE = "caught_up.json"  # another writer's commits taken from record_index (`catch_up`)
ENTRIES_PER_SHARD = 2_000_000
MAX_SHARDS = 1024
# What a lookup returns: record keys with their entry. A file group lives in one partition:
# entries store the fileId only (1-2 B less per entry) and readers take the partition from the
# file-system view.
ENTRY_SCHEMA = pa.schema([("key", pa.string()), ("file_id", pa.string()), ("deleted", pa.bool_())])

# What an entry's key is, as the index's state file says (`entry_key`). DIGESTS: the first 16
# bytes of the SHA-256 of the record key's UTF-8, stored uncompressed (random bytes do not
# compress): a lookup of 5k keys in a 2M-entry shard took 48 ms against 140-190 ms for the
# PLAIN + zstd keys of RECORD_KEYS, and an entry 16.8 B against 19.1 for UUID keys. A collision
# is as unlikely as one of random 128-bit values, and no one can construct one. RECORD_KEYS: indexes built before
# 2026-11-26, read as they are until their next compaction rewrites them as DIGESTS.
DIGESTS = "sha256_128"
RECORD_KEYS = "record_key"
DIGEST_BYTES = 16


def entry_key_of(state: Optional[dict]) -> str:
    return DIGESTS if state is None else state.get("entry_key", RECORD_KEYS)


def entry_schema(entry_key: str) -> pa.Schema:
    """The schema of an index file of `entry_key` entries."""
    key_type = pa.binary(DIGEST_BYTES) if entry_key == DIGESTS else pa.string()
    return pa.schema([("key", key_type), ("file_id", pa.string()), ("deleted", pa.bool_())])


def key_digests(keys: pa.Array) -> pa.Array:
    """The DIGESTS index key of each record key."""
    digest = hashlib.sha256
    return pa.array([None if k is None else digest(k).digest()[:DIGEST_BYTES] for k in keys.cast(pa.binary()).to_pylist()],
                    pa.binary(DIGEST_BYTES))


def _words(digests: pa.FixedSizeBinaryArray) -> Tuple[np.ndarray, np.ndarray]:
    """The first and second 8 bytes of each digest, as big-endian numbers (byte order)."""
    words = np.frombuffer(digests.buffers()[1], dtype=">u8")[2 * digests.offset:2 * (digests.offset + len(digests))]
    return words[0::2], words[1::2]


def _digest_order(digests: pa.FixedSizeBinaryArray) -> np.ndarray:
    """Row positions in the order of `digests`' first 8 bytes (4x as fast as sorting by all
    16): byte order but for ties, about one per 10^12 pairs."""
    return np.argsort(_words(digests)[0], kind="stable")


def _positions(keys: pa.Array, wanted: pa.Array) -> pa.Array:
    """The positions of `wanted` keys in `keys` (one row group's). Digests in `_digest_order`,
    as index files store them, by binary search on their first 8 bytes (ties and all), then
    compared whole; anything else (record keys, digests out of that order) by hashing."""
    if pa.types.is_fixed_size_binary(keys.type):
        stored_first, stored_second = _words(keys)
        if bool(np.all(stored_first[1:] >= stored_first[:-1])):
            wanted_first, wanted_second = _words(wanted)
            low = np.searchsorted(stored_first, wanted_first, "left")
            counts = np.searchsorted(stored_first, wanted_first, "right") - low
            which = np.repeat(np.arange(len(wanted)), counts)  # each candidate's wanted digest
            candidates = np.repeat(low, counts) + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            return pa.array(np.sort(candidates[stored_second[candidates] == wanted_second[which]]), pa.int64())
    return pc.indices_nonzero(pc.is_in(keys, value_set=wanted))


def index_keys(keys: pa.Array, entry_key: str) -> pa.Array:
    """Record keys as an index of `entry_key` entries stores them."""
    return key_digests(keys) if entry_key == DIGESTS else keys


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


def _shards_of(paths: Iterable[str], kind: re.Pattern) -> List[int]:
    return sorted({int(m[1]) for m in map(kind.match, paths) if m})


def _base_shards(instant: str, written: Iterable[str]) -> dict:
    """The shards a base of `instant` has files in, named with it: a state an older hudilite
    moves to another base carries them along unchanged, and they are then not taken."""
    return {"instant": instant, "shards": _shards_of(written, _BASE_PATH)}


def recorded_deltas(files: Iterable[str]) -> Dict[str, str]:
    """What a commit records of its index files (`DELTAS_KEY`): the shards it wrote a delta to."""
    return {DELTAS_KEY: ",".join(map(str, _shards_of(files, _DELTA_PATH)))}


def write_shards(base_path: str, instant: str, kind: str, entry_key: str,
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: rows of record keys sorted by shard (RECORD_KEYS: by shard and key) into
    one index file of `entry_key` entries per shard (a Spark partition may hold several shards)."""
    storage = Storage(base_path)
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    table = pa.concat_tables(tables)
    shards = table.column("shard").to_numpy()
    starts = [0] + (np.flatnonzero(shards[1:] != shards[:-1]) + 1).tolist() + [len(shards)]
    for start, end in zip(starts, starts[1:]):
        entries = table.slice(start, end - start)
        if entry_key == DIGESTS:
            entries = entries.set_column(entries.schema.get_field_index("key"), "key", key_digests(entries.column("key")))
        path = shard_path(int(shards[start]), instant, kind)
        _write_entries(storage, path, entries, entry_key, instant if kind == DELTA else None)
        yield pa.RecordBatch.from_pylist([{"path": path, "entries": end - start}], schema=_SHARD_RESULT)


def _write_entries(storage: Storage, path: str, entries: pa.Table, entry_key: str, delta_instant: Optional[str]) -> None:
    """One index file of `entry_key` entries (their keys as the index stores them)."""
    schema = entry_schema(entry_key)
    entries = entries.select(schema.names)
    options = dict(use_dictionary=["file_id"], row_group_size=64 * 1024)
    if entry_key == DIGESTS:
        entries = entries.take(_digest_order(entries.column("key").combine_chunks()))
        options.update(compression={"key": "none", "file_id": "zstd", "deleted": "zstd"})
    write_index_file(storage, path, entries.cast(schema), delta_instant, **options)


def compact_task(base_path: str, files_by_shard: FilesByShard, live_ids: List[str], instant: str,
                 numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: each digest index shard whose number arrives folded into a base as of
    `instant`: the newest entry of each key in the shard's files, but for tombstones and
    entries of file groups no longer live. A shard left without entries gets no file."""
    storage = Storage(base_path)
    live = pa.array(live_ids, pa.string())
    for shard in (n for batch in numbers for n in batch.column(0).to_pylist()):
        files = sorted(files_by_shard.get(shard, []))
        if not files:
            continue
        newest = _newest_entries(storage, [path for _, path in files])
        kept = newest.filter(pc.and_(pc.invert(newest.column("deleted")), pc.is_in(newest.column("file_id"), value_set=live)))
        if not kept.num_rows:
            continue
        path = shard_path(shard, instant, BASE)
        _write_entries(storage, path, kept, DIGESTS, None)
        yield pa.RecordBatch.from_pylist([{"path": path, "entries": kept.num_rows}], schema=_SHARD_RESULT)


def _newest_entries(storage: Storage, paths: List[str]) -> pa.Table:
    """The newest entry of each key in one shard's files (`paths`, oldest first; hudilite's
    writes put a key in a file once). The oldest, usually the large base, is filtered by the
    keys of the others."""
    def read(path: str) -> pa.Table:
        with storage.open_input(path) as source:  # fileIds as their dictionary: a 2M-entry shard is ~40 MB, not ~150
            return pq.read_table(source, use_threads=False, read_dictionary=["file_id"])

    oldest = read(paths[0])
    if len(paths) == 1:
        return oldest
    newer = _newest_of_each_key(pa.concat_tables([_aged(read(p), age) for age, p in enumerate(paths[1:], 1)]))
    older = oldest.filter(pc.invert(pc.is_in(oldest.column("key"), value_set=newer.column("key").combine_chunks())))
    return pa.concat_tables([older, newer])


def _aged(entries: pa.Table, age: int) -> pa.Table:
    return entries.append_column("age", pa.repeat(pa.scalar(age, pa.int32()), entries.num_rows))


def _newest_of_each_key(entries: pa.Table) -> pa.Table:
    """Of `entries` (`_aged`), the one of each key with the highest age, without the age."""
    entries = entries.take(pc.sort_indices(entries, [("key", "ascending"), ("age", "descending")]))
    keys = entries.column("key").combine_chunks()
    first_of_key = pa.concat_arrays([pa.array([True]), pc.not_equal(keys[1:], keys[:-1])]) if len(keys) \
        else pa.array([], pa.bool_())
    return entries.filter(first_of_key).drop_columns(["age"])


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


def latest_entries(storage: Storage, files: List[Tuple[str, str]], keys: Sequence[str], entry_key: str) -> pa.Table:
    """The newest entry (record key, file_id, deleted) of each of `keys` that one of `files`
    ((instant, path)) of an index of `entry_key` entries holds; only the row groups that can
    hold one of `keys` are read."""
    record_keys = pa.array(sorted(set(keys)), pa.string())
    wanted = index_keys(record_keys, entry_key)
    order = pc.sort_indices(wanted)  # digests sort apart from their keys
    wanted, record_keys = wanted.take(order), record_keys.take(order)
    sorted_wanted = wanted.to_pylist()
    parts = []
    for age, (_, path) in enumerate(sorted(files)):  # oldest first: a later delta's entry wins
        with storage.open_input(path) as source:
            parquet = pq.ParquetFile(source, read_dictionary=["file_id"])
            for group, start, end in keys_by_row_group(parquet.metadata, sorted_wanted):
                parts.append(_aged(_matches(parquet, group, wanted.slice(start, end - start)), age))
    if not parts:
        return ENTRY_SCHEMA.empty_table()
    entries = pa.concat_tables(parts)
    entries = entries.set_column(0, "key", record_keys.take(pc.index_in(entries.column("key"), value_set=wanted)))
    return _newest_of_each_key(entries).cast(ENTRY_SCHEMA)


def _matches(parquet: pq.ParquetFile, group: int, wanted: pa.Array) -> pa.Table:
    """The entries (index key, file_id, deleted) of one row group whose key is wanted
    (`wanted`: the keys in the group's key range, so that all groups together probe each key
    once, `_positions`). One row group at a time, the key column first and the rest for matches only,
    fileIds kept as their dictionary: a shard's lookup then decodes its keys into the same few
    MB again and again. (Decoding a whole 2M-entry shard at once, fileIds as strings, allocated
    ~150 MB per lookup and took 2-8x as long inside a task, page faults included.)"""
    keys = parquet.read_row_group(group, columns=["key"], use_threads=False).column("key").combine_chunks()
    at = _positions(keys, wanted)
    if not len(at):
        return pa.table({"key": keys.take(at), "file_id": pa.array([], pa.string()), "deleted": pa.array([], pa.bool_())})
    # Bases and most deltas hold no tombstones: their row groups' statistics say so, and the
    # column need not be read (3-4 ms of a 2M-entry shard's 48 ms lookup).
    tombstones = _may_hold_tombstones(parquet.metadata, group)
    rest = parquet.read_row_group(group, columns=["file_id", "deleted"] if tombstones else ["file_id"],
                                  use_threads=False).take(at)
    deleted = rest.column("deleted") if tombstones else pa.repeat(pa.scalar(False), len(at))
    return pa.table({"key": keys.take(at), "file_id": rest.column("file_id").cast(pa.string()), "deleted": deleted})


def _may_hold_tombstones(metadata: pq.FileMetaData, group: int) -> bool:
    stats = metadata.row_group(group).column(metadata.schema.names.index("deleted")).statistics
    return stats is None or not stats.has_min_max or stats.max is not False or stats.null_count != 0


def live_holders(found: pa.Table, keys: pa.Array, live: Dict[str, str]) -> Tuple[pa.Array, pa.Array]:
    """Per key, (fileId, partition) of the live file group holding it (`live`: fileId ->
    partition); nulls where the key is not indexed, deleted, or in a replaced file group."""
    at = pc.index_in(keys, value_set=found.column("key").combine_chunks())
    file_ids, deleted = found.column("file_id").take(at), found.column("deleted").take(at)
    live_ids = pa.array(list(live), pa.string())
    where = pc.index_in(pc.if_else(pc.fill_null(deleted, True), pa.scalar(None, pa.string()), file_ids),
                        value_set=live_ids)
    return live_ids.take(where), pa.array(list(live.values()), pa.string()).take(where)


def _lookup_task(base_path: str, plan: "LookupPlan", live: Optional[Dict[str, str]],
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: the live entries of the keys that arrive (with their shard), reading
    each shard's index files directly. `live` None: every entry not deleted, the partition
    left null (the caller tells which of the few found file groups are live)."""
    storage = Storage(base_path)
    arrived = [b for b in batches if b.num_rows]
    if not arrived:
        return
    arrived = pa.Table.from_batches(arrived)
    arrived = arrived.filter(pc.is_valid(arrived.column("key")))
    for shard in pc.unique(arrived.column("shard")).to_pylist():
        keys = arrived.filter(pc.equal(arrived.column("shard"), shard)).column("key")
        found = plan.latest_entries(storage, shard, keys.to_pylist())
        if live is None:
            file_ids = pc.if_else(pc.fill_null(found.column("deleted"), True), pa.scalar(None, pa.string()),
                                  found.column("file_id"))
            partitions = pa.nulls(len(file_ids), pa.string())
        else:
            file_ids, partitions = live_holders(found, found.column("key"), live)
        held = pa.table([found.column("key"), partitions, file_ids], schema=_LOCATION).filter(pc.is_valid(file_ids))
        yield from bounded_batches(held)


def entries_of(rows: DataFrame) -> DataFrame:
    """Index entries for rows read from base files (with their meta columns)."""
    return rows.select(F.col(RECORD_KEY).alias("key"),
                       file_id_of(F.col(FILE_NAME)).alias("file_id"), F.lit(False).alias("deleted"))


@dataclass(frozen=True)
class LookupPlan:
    """How a batch finds its keys: the shard of a key, each shard's files, what their entries
    are keyed by."""

    sharding: Sharding
    files_by_shard: FilesByShard
    entry_key: str = DIGESTS

    def latest_entries(self, storage: Storage, shard: int, keys: Sequence[str]) -> pa.Table:
        """The newest entry of each of `keys` (all of `shard`) in the shard's files."""
        return latest_entries(storage, self.files_by_shard.get(shard, []), keys, self.entry_key)


class RecordIndex(TableIndex):
    ROOT = RECORD_INDEX_DIR

    def __init__(self, spark, storage: Storage, guard=None):
        super().__init__(spark, storage, guard)
        self.metadata_table = MetadataTable(storage)
        self.record_index_planned: Set[str] = set()  # instants whose writes wrote record_index logs

    @property
    def num_shards(self) -> int:
        return self.sharding.num_shards

    @property
    def sharding(self) -> Sharding:
        return Sharding.of_state(self.state())

    def entry_key(self) -> str:
        return entry_key_of(self.state())

    def _write(self, entries: DataFrame, instant: str, kind: str, sharding: Sharding, entry_key: str) -> Dict[str, int]:
        """Index files of `entry_key` entries written ({path: entries}), one per shard that has
        entries (`entries`: key, file_id, deleted of record keys)."""
        keyed = entries.withColumn("shard", sharding.shard_of(F.col("key")))
        order = ["shard", "key"] if entry_key == RECORD_KEYS else ["shard"]  # digests are sorted as they are made
        task = functools.partial(write_shards, self.storage.base_path, instant, kind, entry_key)
        out = (sharding.distribute(keyed, "key", "shard").sortWithinPartitions(*order)
               .mapInArrow(task, "path string, entries long"))
        rows = settled(self.spark, out.collect)
        return {r.path: r.entries for r in rows}

    def build(self, snapshot: DataFrame, view: FileSystemView, instant: str, num_shards: Optional[int] = None) -> int:
        """From the metadata table's record_index when it holds the keys (RFC-8's record index:
        this one is its cache; its entries at file groups not in `view` dropped), else from
        `snapshot`'s keys. A record_index that holds another number of live keys than the
        snapshot's rows (half dropped by a writer that died, say), or that cannot be read, is
        not taken: the snapshot is; one with another count than the snapshot's distinct keys is
        also taken off the metadata table's partitions (the caller builds it again).
        `num_shards` defaults to one per ENTRIES_PER_SHARD entries.
        A build as of the instant of the current base (a rebuild) deletes the base files of that
        instant it did not write: of shards it left empty, of another format or hash."""
        entries = self.record_index_entries(view)
        # a parquet count reads footers only; a rebuild from the snapshot with its shard count needs none
        rows = snapshot.count() if entries is not None or not num_shards else None
        sharding = Sharding(num_shards or shards_for(rows))
        written, built_from = None, "record_index"
        if entries is not None:
            try:
                written = self._write(entries, instant, BASE, sharding, DIGESTS)
            except Exception as err:  # noqa: BLE001 - a file group compacted away meanwhile, an unreadable file
                logger.warning("record index at %s: record_index could not be read (%s); built from the snapshot",
                               self.storage.base_path, str(err).splitlines()[0] if str(err) else type(err).__name__)
            else:
                if sum(written.values()) != rows:
                    logger.warning("record index at %s: record_index holds %d live keys, the snapshot %d rows; "
                                   "built from the snapshot", self.storage.base_path, sum(written.values()), rows)
                    # Wrong for Hudi's readers and writers too: taken off, and built again by the
                    # caller; not when the snapshot holds a key twice (Hudi's insert may store it so).
                    if sum(written.values()) != snapshot.select(RECORD_KEY).distinct().count():
                        self.metadata_table.take_off_record_index(f"{sum(written.values())} live keys, the "
                                                                  f"snapshot {rows} rows")
                    written = None
        if written is None:
            written, built_from = self._write(entries_of(snapshot), instant, BASE, sharding, DIGESTS), "snapshot"
        self.files.write_state(dict(sharding.state(), entry_key=DIGESTS, base_instant=instant,
                                    entries_at_build=sum(written.values()), built_from=built_from,
                                    **{BASE_SHARDS: _base_shards(instant, written)}))
        self._delete_bases_not_written(instant, set(written))
        return sum(written.values())

    def _delete_bases_not_written(self, instant: str, written: Set[str]) -> None:
        """Base files of `instant` other than `written`: of shards a build or compaction at this
        instant left empty, or of an earlier attempt at it that did not publish."""
        for shard in self.storage.list_names(RECORD_INDEX_DIR):
            stale = posixpath.join(RECORD_INDEX_DIR, shard, index_file_name(instant, BASE))
            if stale not in written and self.storage.exists(stale):
                self.storage.delete_file(stale)

    def delta(self, instant: str, change: IndexChange) -> List[str]:
        """The keys of new file groups and tombstones of deleted keys (rewritten groups keep
        their keys; replaced groups' entries are not live), in hudilite's index when it is built
        and in the metadata table's record_index when it is listed."""
        record_index_files = self.record_index_files(instant, change)
        built = self.is_built()
        if not built and record_index_files is None:
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
        entries = functools.reduce(lambda a, b: a.unionByName(b), parts) if parts else None
        written = []
        both = built and record_index_files is not None and entries is not None
        if both:
            entries = entries.persist()  # read once for the two sinks
        try:
            if record_index_files is not None:
                gone = [p for p in (entries, change.leaving) if p is not None]
                if gone:
                    rows = functools.reduce(lambda a, b: a.unionByName(b), gone)
                    written += [w["path"] for w in self.write_record_index(record_index_files, rows)]
            if built and entries is not None:
                state = self.state()
                written += self._write(entries, instant, DELTA, Sharding.of_state(state), entry_key_of(state))
        finally:
            if both:
                entries.unpersist()
        return sorted(written)

    # -- the metadata table's record_index (RFC-8's place for the index; this one is its cache) --

    def record_index_files(self, instant: str, change: IndexChange) -> Optional[RecordIndexFiles]:
        """Where a write of `instant` puts its record_index entries; None while the metadata
        table does not list record_index. A write that asked commits with its log files (even
        none): `record_index_planned`."""
        paths = self.metadata_table.record_index_log_paths(instant)
        if paths is None:
            return None
        self.record_index_planned.add(instant)
        locations = {s.fileId: (s.partitionPath, instant) for s in change.written}
        return RecordIndexFiles(self.storage.base_path, instant, paths, locations)

    def plan_no_record_index_logs(self, instant: str) -> None:
        """A write of `instant` that changed no key's location commits with no record_index log
        (`record_index_planned`), without the listings that name the logs of one that does."""
        self.record_index_planned.add(instant)

    def write_record_index(self, files: RecordIndexFiles, entries: DataFrame) -> List[dict]:
        """Each shard's file of `entries` (key, file_id, deleted), a task per shard with entries:
        (path, size, entries) of each."""
        with_shards = entries.select("key", "file_id", "deleted").mapInArrow(
            functools.partial(metadata_record_index.with_shard, files.num_shards), metadata_record_index.ENTRY_DDL + ", shard int")
        out = (with_shards.repartition(files.num_shards, "shard")
               .mapInArrow(functools.partial(metadata_record_index.write_task, files), "path string, size long, entries long"))
        return [r.asDict() for r in settled(self.spark, out.collect)]

    def record_index_entries(self, view: FileSystemView) -> Optional[DataFrame]:
        """Every key the metadata table's record_index holds at a live file group of `view`, as
        the completed data instants make it (key, file_id, deleted false), read on the
        executors, a task per file group; None when it holds none to read (not listed, or
        listed without file groups)."""
        reader = self.metadata_table.reader()
        if reader is None or not self.metadata_table.record_index_listed():
            return None
        slices = [piece for _, piece in sorted(reader.slices(metadata_record_index.RECORD_INDEX).items())]
        if not slices:
            return None
        task = functools.partial(metadata_record_index.entries_task, self.storage.base_path, reader.valid, slices)
        entries = self.spark.range(len(slices), numPartitions=len(slices)).mapInArrow(task, metadata_record_index.ENTRY_DDL)
        live = self.spark.createDataFrame([(g.file_id,) for g in view.live_groups()], "file_id string")
        return entries.join(F.broadcast(live), "file_id").select("key", "file_id", "deleted")

    def check_record_index(self, snapshot: DataFrame, examples: int = 5) -> List[str]:
        """The metadata table's record_index must hold exactly the snapshot's keys, each at its
        file group (`snapshot`: the latest rows with their meta columns)."""
        located = self.metadata_table.record_index_locations()
        if located is None:
            return []
        indexed = self.spark.createDataFrame(located.to_pandas(), "key string, partition string, file_id string")
        actual = snapshot.select(F.col(RECORD_KEY).alias("key"), F.col(PARTITION_PATH).alias("partition"),
                                 file_id_of(F.col(FILE_NAME)).alias("file_id"))
        problems = [f"metadata table: record_index lacks key '{r.key}' ({r.partition}, {r.file_id})"
                    for r in actual.exceptAll(indexed).limit(examples).collect()]
        problems += [f"metadata table: record_index holds key '{r.key}' at ({r.partition}, {r.file_id}), "
                     "which the snapshot does not" for r in indexed.exceptAll(actual).limit(examples).collect()]
        return problems

    def caught_up(self) -> Set[str]:
        """Commits of another writer whose keys this index took from record_index (`catch_up`)."""
        path = posixpath.join(RECORD_INDEX_DIR, CAUGHT_UP_FILE)
        return set(json.loads(self.storage.read_text(path))) if self.storage.exists(path) else set()

    def catch_up(self, foreign: List[str]) -> bool:
        """Take the keys commits of another writer (Hudi's, with its record index on) inserted,
        moved or deleted from what they wrote to the metadata table's record_index: one delta
        per commit, as if hudilite had made it. False when record_index cannot tell (then the
        index is built again from the snapshot)."""
        changes = self.metadata_table.record_index_changes(foreign)
        if changes is None or not self.is_built():
            return False
        state = self.state()
        for instant, entries in changes.items():
            if entries.num_rows:
                rows = self.spark.createDataFrame(entries.to_pandas(), metadata_record_index.ENTRY_DDL)
                self._write(rows, instant, DELTA, Sharding.of_state(state), entry_key_of(state))
        done = sorted(i for i in self.caught_up() | set(foreign) if i > state["base_instant"])
        self.storage.write_atomic(posixpath.join(RECORD_INDEX_DIR, CAUGHT_UP_FILE), json.dumps(done).encode(), TMP_DIR)
        return True

    def bootstrap_record_index(self, snapshot: DataFrame, instant: str, view: FileSystemView) -> bool:
        """Build the metadata table's record_index from `snapshot` (rows with meta columns) as of
        completed `instant`, under the table lock (`MetadataTable.bootstrap_record_index`)."""
        entries = snapshot.select(F.col(RECORD_KEY).alias("key"), file_id_of(F.col(FILE_NAME)).alias("file_id"),
                                  F.lit(False).alias("deleted"))
        locations = {f.file_id: (f.partition, f.instant) for f in view.latest_base_files()}
        count = snapshot.count()
        with TableLock(self.storage):
            return self.metadata_table.bootstrap_record_index(
                instant, lambda files: self.write_record_index(files, entries), locations, count)

    def visible_files(self, completed: List[Instant], as_of: Optional[str] = None, state: Optional[dict] = None,
                      metadata_of: Optional[Callable[[Instant], CommitMetadata]] = None) -> FilesByShard:
        """Per shard, the (instant, path) of the base and the deltas the index at `as_of` reads
        (`state`: the state file, when the caller has read it). Given the commits' metadata
        (`metadata_of`), from what the state and the commits recorded when they all did (no
        listing); else from a listing of the index."""
        state = state or self.state()
        done = completed_set(completed, as_of)
        files = self.recorded_files(state, [i for i in completed if i.timestamp in done], metadata_of)
        if files is None:
            by_folder = self.files.visible_by_folder(state["base_instant"], done)
            shards = (by_folder.get(f"shard={shard}") for shard in range(Sharding.of_state(state).num_shards))
            files = {shard: files for shard, files in enumerate(shards) if files}
        return files

    def recorded_files(self, state: dict, completed: List[Instant],
                        metadata_of: Optional[Callable[[Instant], CommitMetadata]]) -> Optional[FilesByShard]:
        """`visible_files` from the base's shards in the state and the deltas each commit after it
        recorded (`recorded_deltas`); None when one of them did not record them (written before
        they did, or by Hudi's writer, whose keys come in deltas of its instants: `catch_up`)."""
        base = state["base_instant"]
        recorded_base = state.get(BASE_SHARDS)
        if metadata_of is None or not isinstance(recorded_base, dict) or recorded_base.get("instant") != base:
            return None
        files: FilesByShard = {shard: [(base, shard_path(shard, base, BASE))] for shard in recorded_base["shards"]}
        for instant in completed:
            if instant.timestamp <= base:
                continue
            recorded = metadata_of(instant).extra.get(DELTAS_KEY)
            if recorded is None:
                return None
            for shard in (int(s) for s in recorded.split(",") if s):
                files.setdefault(shard, []).append((instant.timestamp, shard_path(shard, instant.timestamp, DELTA)))
        return {shard: sorted(per_shard) for shard, per_shard in files.items()}

    def lookup_plan(self, completed: List[Instant], default_shards: int,
                    metadata_of: Optional[Callable[[Instant], CommitMetadata]] = None) -> LookupPlan:
        """Before the index is built (an empty table) every key is new: `default_shards` shards, no
        files. `metadata_of`: the commits' metadata, to find the index's files without a listing."""
        state = self.state()
        if state is None:
            return LookupPlan(Sharding(default_shards), {})
        files = self.visible_files(completed, state=state, metadata_of=metadata_of)
        return LookupPlan(Sharding.of_state(state), files, entry_key_of(state))

    def entries(self, completed: List[Instant], view: FileSystemView, as_of: Optional[str] = None,
                state: Optional[dict] = None) -> DataFrame:
        """Every live entry (key as stored: a digest in a DIGESTS index, partition, file_id) of
        the index at `as_of` (`state`: the state file, when the caller has read it)."""
        state = state or self.state()
        key_type = "binary" if entry_key_of(state) == DIGESTS else "string"
        files = [path for per_shard in self.visible_files(completed, as_of, state).values() for _, path in per_shard]
        if not files:
            return self.spark.createDataFrame([], f"key {key_type}, partition string, file_id string")
        entries = (self.spark.read.schema(f"key {key_type}, file_id string, deleted boolean")
                   .parquet(*[literal_path(self.storage.uri(p)) for p in files])
                   .withColumn("instant", F.substring(F.col("_metadata.file_name"), 1, 17)))
        latest = entries.groupBy("key").agg(F.max_by(F.struct("file_id", "deleted"), "instant").alias("e"))
        live = self.spark.createDataFrame([(g.file_id, g.partition) for g in view.live_groups()],
                                          "file_id string, partition string")
        return (latest.where(~F.col("e.deleted")).select("key", F.col("e.file_id").alias("file_id"))
                .join(F.broadcast(live), "file_id").select("key", "partition", "file_id"))

    def as_indexed(self, located: DataFrame) -> DataFrame:
        if self.entry_key() == RECORD_KEYS:
            return super().as_indexed(located)
        schema = T.StructType([T.StructField("key", T.BinaryType())] + located.schema.fields[1:]
                              + [T.StructField("record_key", T.StringType())])
        return located.mapInArrow(_with_digests, schema)

    def lookup(self, completed: List[Instant], view: Optional[FileSystemView], keys: DataFrame) -> DataFrame:
        """The live entries (key, partition, file_id) of `keys` (a one-column DataFrame): one
        task per shard with keys reads that shard's files, only the row groups whose key range
        can hold a wanted key, on the executors. `view` None: the entries not deleted, live or
        not, without their partition (the tasks are not sent the table's file groups)."""
        live = None if view is None else {g.file_id: g.partition for g in view.live_groups()}
        plan = self.lookup_plan(completed, 1)
        task = functools.partial(_lookup_task, self.storage.base_path, plan, live)
        probes = keys.toDF("key").select("key", plan.sharding.shard_of(F.col("key")).alias("shard"))
        return plan.sharding.distribute(probes, "key", "shard").mapInArrow(task, LOCATION_DDL)

    def holders(self, keys: DataFrame, completed: List[Instant], view: FileSystemView) -> Set[str]:
        if not self.is_built():
            return set()
        # The tasks find the few file groups holding a key; which are live is told here, so that
        # what they are sent does not grow with the table's file groups (issue 33).
        found = {r[0] for r in self.lookup(completed, None, keys).select("file_id").distinct().collect()}
        return found & {g.file_id for g in view.live_groups()} if found else set()

    def needs_compaction(self, completed: List[Instant]) -> bool:
        base = self.state()["base_instant"]
        if not deltas_may_be_too_many(len([i for i in completed if i.timestamp > base])):
            return False
        return any(has_too_many_deltas(files) for files in self.visible_files(completed).values())

    def compact(self, completed: List[Instant], view: FileSystemView) -> None:
        """The RFC-8 base-plus-log compaction into a DIGESTS base, on the executors: a task per
        shard folds its files (`compact_task`). An index of record keys is rewritten from all
        its entries instead, resharded with the current hash (the shard count stays). The state
        is read once: a compaction published meanwhile changes nothing this one computes."""
        state = self.state()
        instant = max(i.timestamp for i in completed)
        files = self.visible_files(completed, state=state)
        if entry_key_of(state) == DIGESTS:
            sharding = Sharding.of_state(state)  # digests cannot be resharded: their keys are gone
            task = functools.partial(compact_task, self.storage.base_path, files,
                                     [g.file_id for g in view.live_groups()], instant)
            shards = sharding.num_shards
            written = {r["path"] for r in run_task_job(self.spark.range(shards, numPartitions=shards), task,
                                                       "path string, entries long")}
        else:  # record keys: rewritten as digests, on today's hash
            sharding = Sharding(Sharding.of_state(state).num_shards)
            entries = self.entries(completed, view, state=state).select("key", "file_id", F.lit(False).alias("deleted"))
            written = set(self._write(entries, instant, BASE, sharding, DIGESTS))
        self._delete_bases_not_written(instant, written)  # of an earlier attempt at this instant
        kept = {k: v for k, v in state.items() if k not in Sharding.STATE_KEYS and k != "built_from"}  # of the base it replaces
        superseded = [p for per_shard in files.values() for _, p in per_shard]
        self.files.finish_compaction(dict(kept, **sharding.state(), entry_key=DIGESTS, base_instant=instant,
                                          **{BASE_SHARDS: _base_shards(instant, written)}), superseded)


def _with_digests(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: rows (key, ...) of record keys with `key` their digest (as Spark's binary:
    it takes no fixed-width bytes), the record key appended as `record_key`."""
    for batch in batches:
        keys = batch.column(0)
        yield pa.RecordBatch.from_arrays([key_digests(keys).cast(pa.binary())] + batch.columns[1:] + [keys],
                                         names=batch.schema.names + ["record_key"])
