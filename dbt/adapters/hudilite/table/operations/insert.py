"""Inserts and overwrites: new file groups from the rows, one Spark job.

On a table with record keys the new rows' keys must be unique and must not be stored already
outside what the write replaces (an insert adds rows; an upsert changes them).

`insert` is a commit; `insert_overwrite` a replacecommit of the partitions the rows hold;
`insert_overwrite_table` a replacecommit of every file group (the rows' schema becomes the
table's). Replaced file groups stay on storage, so time travel to before an overwrite works
until the cleaner removes them.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ..format.commit import INSERT, INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE
from ..context import REPLACE, TableContext
from ..errors import ConcurrentWriteError
from ..format.file_group import FileSystemView
from ..spark.file_sizing import TopUp, average_record_bytes, plan_top_ups
from ..index.table_index import IndexChange
from ..format.instant import COMMIT, REPLACE_COMMIT
from ..format.schema import IS_DELETED, quote
from ..spark.writer import run_write_job

PARTITIONS, TABLE = "partitions", "table"  # what an overwrite replaces
# On a table of more live file groups than this, an insert offers its tasks the small file
# groups of the partitions its rows hold only, found by a Spark job over the rows: an offer of
# every partition's grows with the table (issue 33), in the driver's time and in what each task
# is sent (~10 us a file group: 100k small file groups took 1.4 s to plan and 16 MB to send).
# Below it, that offer costs less than the job (~0.2 s).
TOP_UP_ALL_UP_TO = 20_000
# ... and rows Spark estimates at more bytes than this are kept (persisted) for the write
# rather than computed twice; smaller ones are not worth the cache's cost (~0.2 s).
KEEP_ROWS_ABOVE_BYTES = 64 << 20
_NEWEST, _ARRIVAL = "_hudilite_newest", "_hudilite_arrival"


class TopUpConflict(ConcurrentWriteError):
    """An insert that topped up small files conflicted with a concurrent commit."""


def keyed_rows(ctx: TableContext, df: DataFrame) -> DataFrame:
    """The rows a write of new file groups stores on a keyed table, by the rules an upsert
    applies to its batch, so that a rebuild stores what incremental runs of the same rows
    would: with a precombine field, one row per record key, the one with the largest value
    (a null loses), as `upsert.one_row_per_key` picks; then rows flagged `_hoodie_is_deleted`
    are deletes, which a write of new rows leaves out, and the flag is never stored. Without
    a precombine field a key held twice stays an error (`TableContext.check_new_keys`)."""
    if ctx.config.auto_keys:
        return df  # no key to delete by: the column, if any, is data
    actual = {c.lower(): c for c in df.columns}
    precombine = (ctx.config.precombine_field or "").lower()
    keys = [actual.get(k.lower()) for k in ctx.config.record_key_fields]
    if precombine in actual and all(keys):
        # Equal values: the row that came last wins, as upsert's stable sort keeps it.
        arrival = F.monotonically_increasing_id()
        newest = F.row_number().over(Window.partitionBy(*[F.col(quote(k)) for k in keys])
                                     .orderBy(F.col(quote(actual[precombine])).desc_nulls_last(), F.col(_ARRIVAL).desc()))
        df = (df.withColumn(_ARRIVAL, arrival).withColumn(_NEWEST, newest).where(F.col(_NEWEST) == 1)
              .drop(_NEWEST, _ARRIVAL))
    flag = actual.get(IS_DELETED.lower())
    if flag:
        df = df.where(~F.coalesce(F.col(quote(flag)).cast("boolean"), F.lit(False))).drop(flag)
    return df


def insert(ctx: TableContext, df: DataFrame, mode: str) -> Optional[str]:
    df = keyed_rows(ctx, df)
    try:
        # Virtual keys: new file groups only (a topped-up slice's new rows could not be told from
        # its stored ones, whose commit time is not stored).
        return write_file_groups(ctx, df, COMMIT, INSERT, mode, replace=None, top_up=not ctx.config.virtual_keys)
    except TopUpConflict:
        # A concurrent writer may have given a small file this insert topped up a new slice:
        # nothing of this attempt was published, and new file groups never clash, so write
        # it again as those. Any other conflict is the caller's (write_retries).
        return write_file_groups(ctx, df, COMMIT, INSERT, mode, replace=None, top_up=False)


def insert_overwrite(ctx: TableContext, df: DataFrame, mode: str) -> Optional[str]:
    return write_file_groups(ctx, keyed_rows(ctx, df), REPLACE_COMMIT, INSERT_OVERWRITE, mode, replace=PARTITIONS)


def insert_overwrite_table(ctx: TableContext, df: DataFrame) -> str:
    return write_file_groups(ctx, keyed_rows(ctx, df), REPLACE_COMMIT, INSERT_OVERWRITE_TABLE, REPLACE, replace=TABLE)


def write_file_groups(ctx: TableContext, df: DataFrame, action: str, operation: str, mode: str,
                      replace: Optional[str], top_up: bool = False) -> Optional[str]:
    """The instant; None when the rows were empty and changed nothing. `top_up`: rows first
    fill the partitions' small file groups (`file_sizing`)."""
    data_schema = ctx.schema_after(df, mode)
    keyed = not ctx.config.auto_keys
    if keyed:
        ctx.ensure_index()
    with ctx.transaction(action) as txn:
        before = ctx.timeline.view()
        df, top_ups, kept = offer_top_ups(ctx, df, data_schema, before) if top_up else (df, {}, False)
        try:
            stats = run_write_job(ctx.rows_for_writer(df, data_schema), ctx.write_spec(txn.instant, top_ups=top_ups))
        finally:
            if kept:
                df.unpersist()
        replaced: Dict[str, List[str]] = {}
        if replace == TABLE:
            replaced = before.live_file_ids()
        elif replace == PARTITIONS:
            replaced = before.live_file_ids({s.partitionPath for s in stats})
        if not stats and replace != TABLE and data_schema == ctx.committed_schema():
            return None  # no rows and no new column: nothing to commit (the instant is rolled back)
        if keyed:
            ctx.check_new_keys(txn.instant, stats, {f for ids in replaced.values() for f in ids}, before)
        leaving = ctx.keys_leaving(before, {f for ids in replaced.values() for f in ids}, stats) if keyed else None
        index_files = ctx.index_delta(txn.instant, IndexChange(written=stats, inserted=stats, leaving=leaving))
        try:
            ctx.commit(txn, operation, data_schema, stats, index_files, replaced)
        except ConcurrentWriteError as err:
            if any(s.prevCommit for s in stats):  # it topped up a small file
                raise TopUpConflict(str(err)) from err
            raise
    ctx.after_commit()
    return txn.instant


def offer_top_ups(ctx: TableContext, df: DataFrame, data_schema,
                  view: FileSystemView) -> Tuple[DataFrame, Dict[str, List[TopUp]], bool]:
    """The small file groups an insert's tasks may top up (`file_sizing.plan_top_ups`): of
    every partition on a table of up to TOP_UP_ALL_UP_TO live file groups, else of the
    partitions the rows hold, found by a Spark job over the rows (kept, persisted, for the write
    when large): the rows, the offer, and whether the rows were kept."""
    groups = view.live_groups()
    record_bytes = average_record_bytes(ctx.timeline.commits())
    if len(groups) <= TOP_UP_ALL_UP_TO or not ctx.config.partition_fields:
        return df, plan_top_ups(groups, ctx.file_sizing, record_bytes), False
    if ctx.file_sizing.small_file_limit <= 0:
        return df, {}, False
    from pyspark import StorageLevel

    keep = _estimated_bytes(df) > KEEP_ROWS_ABOVE_BYTES
    if keep:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        paths = ctx.typed(df, data_schema).select(ctx.keys.partition_path(data_schema).alias("path")).distinct().collect()
    except Exception:
        if keep:
            df.unpersist()
        raise
    held = {r.path for r in paths}
    return df, plan_top_ups([g for g in groups if g.partition in held], ctx.file_sizing, record_bytes), keep


def _estimated_bytes(df: DataFrame) -> float:
    """Spark's estimate of the rows' size (its optimizer's statistics); infinite where there is
    none (a Spark Connect DataFrame)."""
    try:
        return float(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes().toString())
    except Exception:  # noqa: BLE001 - no estimate: treat the rows as large
        return float("inf")
