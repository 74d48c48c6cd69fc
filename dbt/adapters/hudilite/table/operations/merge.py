"""Merging a file group's stored slice with an upsert's incoming rows, in Arrow (what Hudi's
merge handle does): a changed row takes its stored row's place, deleted and moved-away rows are
left out, an incoming row older than the stored one (by the precombine field) changes nothing,
and new keys go last. `merge_slice` merges a slice held whole; `merge_pieces` gives the same
rows for a slice read piece by piece (`stored_pieces`, `piece_rows`), so a worker holds one piece
and the batch's rows at a time.
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..format.keygen import VirtualKeys
from ..format.rows import SLICE
from ..format.schema import IS_DELETED, PARTITION_PATH, RECORD_KEY
from ..spark.jobs import ARROW_BATCH_ROWS


def merge_slice(stored: pa.Table, incoming: pa.Table, partition: str, data_names: Sequence[str],
                precombine: Optional[str], update_columns: Optional[Sequence[str]]) -> Tuple[pa.Table, int, int]:
    """A file group's new slice: (its rows in the `rows.SLICE` layout, with a null commit time
    for changed rows; rows changed; rows deleted or moved out).
    `stored` is its latest slice, `incoming` the batch rows tagged with it (one per key). The
    slice keeps the stored row order: a changed row takes its stored row's place (a key the
    slice did not hold goes last), so an update-only merge keeps the keys in file order."""
    stored_keys = stored.column(RECORD_KEY)
    deleted = pc.or_(incoming.column(IS_DELETED), pc.not_equal(incoming.column(PARTITION_PATH), pa.scalar(partition)))
    in_place = incoming.filter(pc.invert(deleted))
    gone = incoming.filter(deleted).column(RECORD_KEY)
    # One probe of the stored keys against the batch's few (in place, then gone): hashing the
    # batch's keys and probing a file's 80k keys takes 2 ms, hashing the file's 15.
    probed = pa.concat_arrays([in_place.column(RECORD_KEY).combine_chunks(), gone.combine_chunks()])
    first_gone = in_place.num_rows  # probed keys from here on are gone ones
    match = pc.fill_null(pc.index_in(stored_keys, value_set=probed), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    position = first_positions(match, first_gone)
    replaced = match >= 0
    if precombine:  # an incoming row older than the stored one changes nothing
        older = pc.less(in_place.column(precombine), stored.column(precombine).take(position))
        keep = pc.invert(pc.fill_null(older, False))
        dropped = np.flatnonzero(np.invert(keep.to_numpy(zero_copy_only=False)))
        replaced &= np.invert(np.isin(match, dropped))
        in_place, position = in_place.filter(keep), position.filter(keep)
    frozen = set() if update_columns is None else {c.lower() for c in data_names} - {c.lower() for c in update_columns}
    n = in_place.num_rows
    nulls = pa.nulls(n, pa.string())
    changed = pa.table([nulls, nulls, in_place.column(RECORD_KEY), in_place.column(PARTITION_PATH)]
                       + [in_place.column(c) for c in data_names], names=list(SLICE.meta) + list(data_names))
    # Stored slices may predate a column (null) or a widened type (cast to the table's).
    stored_column = lambda c: (stored.column(c).cast(changed.schema.field(c).type) if c in stored.column_names  # noqa: E731
                               else pa.nulls(stored.num_rows, changed.schema.field(c).type))
    for c in data_names:
        if c.lower() in frozen:
            changed = changed.set_column(changed.schema.get_field_index(c), c, stored_column(c).take(position))
    stored_rows = stored.num_rows
    at = pc.fill_null(position, -1).to_numpy(zero_copy_only=False)
    found = at >= 0
    slot = np.arange(stored_rows, dtype=np.int64)  # row i of the slice comes from row slot[i] of stored + changed
    slot[at[found]] = stored_rows + np.flatnonzero(found)
    kept = np.invert(replaced)
    kept[at[found]] = True  # (a key stored twice keeps one row, the changed one)
    order = np.concatenate([slot[kept], stored_rows + np.flatnonzero(~found)])
    both = pa.concat_tables([pa.table([stored_column(c) for c in changed.column_names], schema=changed.schema), changed])
    removed = int(np.count_nonzero(match >= first_gone))
    return both.take(pa.array(order)), n, removed


def first_positions(match: np.ndarray, count: int) -> pa.Array:
    """For each of `count` probed keys, the first stored row that matched it (`match`: per
    stored row, the probed key it holds, or -1); null where none did."""
    rows = np.flatnonzero((match >= 0) & (match < count))
    keys, first = np.unique(match[rows], return_index=True)
    position = np.full(count, -1, dtype=np.int64)
    position[keys] = rows[first]
    return pa.array(position, mask=position < 0)


# A file group's stored rows are merged about this many bytes (in Arrow) at a time: the whole
# slice and its merged copy held at once took a worker about 60 times the file's bytes on disk.
MERGE_PIECE_BYTES = 32 << 20
_WIDTH_PROBE_ROWS = 1024
_SMALL_SLICE_ROWS = 65_536


def stored_pieces(parquet: pq.ParquetFile, rows: int) -> Iterator[pa.Table]:
    """A stored slice in pieces of `rows` rows (`piece_rows`), in file order."""
    if parquet.metadata.num_rows == 0:
        return
    for batch in parquet.iter_batches(batch_size=rows):
        yield pa.Table.from_batches([batch])


def piece_rows(parquet: pq.ParquetFile, piece_bytes: int = MERGE_PIECE_BYTES) -> int:
    """Rows of a piece of about `piece_bytes` in Arrow. A small slice (few rows, few bytes
    decoded) is one piece; otherwise its first rows are read to see their width in Arrow."""
    meta = parquet.metadata
    decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if meta.num_rows <= _SMALL_SLICE_ROWS and decoded <= piece_bytes // 4:
        return max(1, meta.num_rows)
    # (no more rows than the footer's own sizes allow in a piece: 1 MB values are read a few at a time)
    probe = max(1, min(_WIDTH_PROBE_ROWS, int(piece_bytes * meta.num_rows // max(1, decoded))))
    first = next(parquet.iter_batches(batch_size=probe))
    return max(1, int(piece_bytes * first.num_rows // max(1, first.nbytes)))


def merge_pieces(pieces: Iterable[pa.Table], empty: pa.Table, incoming: pa.Table, partition: str,
                 data_names: Sequence[str], precombine: Optional[str], update_columns: Optional[Sequence[str]],
                 counts: List[int], stored_keys: Optional[pa.Array] = None) -> Iterator[pa.Table]:
    """`merge_slice` of a stored slice that arrives in pieces (`empty`: one of no rows), yielded
    piece by piece: the same rows in the same order, holding one piece and the batch's rows at
    a time. Each piece merges the batch rows whose key it holds and no earlier piece did (keys
    leaving the group: every piece holding them); a key a piece changed drops its stored copies
    in later pieces, as `merge_slice` keeps one row per changed key; keys no piece held go last.
    `stored_keys` (the whole slice's, optional) lets the batch's keys be hashed once, not once
    per piece. Adds (rows changed, rows deleted or moved out, rows out, of which new keys) to
    `counts`."""
    keys = incoming.column(RECORD_KEY).combine_chunks()
    leaving = pc.or_(incoming.column(IS_DELETED), pc.not_equal(incoming.column(PARTITION_PATH), pa.scalar(partition)))
    leaving = pc.fill_null(leaving, False).to_numpy(zero_copy_only=False)
    seen = np.zeros(incoming.num_rows, dtype=bool)  # staying keys a piece held
    applied = np.zeros(incoming.num_rows, dtype=bool)  # ... whose changed row is written: later stored copies go
    everywhere = None if stored_keys is None else batch_row_of(stored_keys, keys)
    stored_keys = None  # (positions kept, not the keys)
    offset = 0

    def merged(stored: pa.Table, rows: pa.Table) -> pa.Table:
        out, changed, removed = merge_slice(stored, rows, partition, data_names, precombine, update_columns)
        counts[0] += changed
        counts[1] += removed
        counts[2] += out.num_rows
        return out

    for piece in pieces:
        if everywhere is None:
            at = batch_row_of(piece.column(RECORD_KEY), keys)  # per stored row: its batch row, or -1
        else:
            at, offset = everywhere[offset:offset + piece.num_rows], offset + piece.num_rows
        held = at >= 0
        gone = held.copy()
        gone[held] = applied[at[held]]
        if gone.any():
            piece, at, held = piece.filter(pa.array(~gone)), at[~gone], held[~gone]
        hit = np.zeros(incoming.num_rows, dtype=bool)
        hit[at[held]] = True
        mine = hit & (leaving | ~seen)
        if not mine.any():
            yield merged(piece, incoming.slice(0, 0))  # the piece in the slice layout
            continue
        rows = incoming.filter(pa.array(mine))
        out = merged(piece, rows)
        seen |= hit & ~leaving
        # The staying rows merged here whose changed row was written (not older than the stored one).
        staying = np.flatnonzero(mine & ~leaving)
        written = out.filter(pc.is_null(out.column(0))).column(RECORD_KEY).combine_chunks()
        now = batch_row_of(written, keys.take(pa.array(staying, pa.int64())))
        applied[staying[now[now >= 0]]] = True
        yield out
    new = incoming.filter(pa.array(~seen & ~leaving))
    counts[3] += new.num_rows
    yield merged(empty, new)


def batch_row_of(stored_keys, keys: pa.Array) -> np.ndarray:
    """Per stored key, the position of the same key in `keys`, or -1."""
    return pc.fill_null(pc.index_in(stored_keys, value_set=keys), -1).to_numpy(zero_copy_only=False).astype(np.int64)


def stored_keys_of(parquet: pq.ParquetFile, virtual: Optional[VirtualKeys]) -> pa.Array:
    """The record keys of a stored slice, in file order: as stored, or made from the key fields
    (virtual keys)."""
    if virtual is None:
        return parquet.read(columns=[RECORD_KEY]).column(0).combine_chunks()
    names = {n.lower(): n for n in parquet.schema_arrow.names}
    return virtual.keys(parquet.read(columns=[names[f.lower()] for f in virtual.fields]))


def batches_of(pieces: Iterator[pa.Table]) -> Iterator[pa.RecordBatch]:
    """The pieces' rows as record batches; a group whose every row left still gets one (empty)
    batch, for its (empty) new slice: its old one must go."""
    last, any_rows = None, False
    for piece in pieces:
        last = piece
        for batch in piece.to_batches(ARROW_BATCH_ROWS):
            if batch.num_rows:
                any_rows = True
                yield batch
    if not any_rows and last is not None:
        yield pa.RecordBatch.from_pylist([], schema=last.schema)
