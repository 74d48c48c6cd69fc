"""Rows chosen by a condition, changed in place: SQL UPDATE, DELETE ... WHERE, delete+insert.

These work on any table, auto-keyed ones included: the rows' own `_hoodie_file_name` says
which file groups hold matches, so no index is needed. The whole snapshot is scanned once to
find them (a WHERE clause can name any column); only the file groups with a match are read
again and rewritten as new slices of the same fileId (Copy-On-Write). Unmatched rows keep
their commit time and seqno; updated rows get the instant's.

A condition is a function from the stored rows (a DataFrame, aliased as the caller asks so
that its predicates resolve: dbt says `DBT_INTERNAL_DEST`) to the same rows, or only those it
matches, with a boolean `MATCHED` column. Predicates of a merge or delete+insert may also name
the incoming row, `SOURCE_ALIAS`: with it, they are part of the match, as in a MERGE's `on`.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.errors import AnalysisException, ParseException

from ..format.commit import DELETE, INSERT, UPSERT, WriteStat
from ..context import EVOLVE, TableContext
from ..errors import SchemaError
from ..index.table_index import IndexChange, file_id_of
from ..format.instant import COMMIT
from ..spark.reader import bounded_stored_reads
from ..format.rows import FILE_ID, REWRITE
from ..format.schema import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY, quote
from ..spark.writer import by_rewrite_task, rewrite_task, run_write_job, write_empty_slice, write_stat

MATCHED = "_hudilite_matched"
Marker = Callable[[DataFrame], DataFrame]
# What predicates call the incoming row (dbt's name). It is one struct column beside the
# stored row's columns, not a second table: `SOURCE_ALIAS.c` reads its field c, and a column
# the predicate does not qualify is still the stored row's, as before the incoming row was named.
SOURCE_ALIAS = "DBT_INTERNAL_SOURCE"
_INCOMING_KEY = "_hudilite_incoming_key"


def where_marker(condition: Optional[str], table: str) -> Marker:
    """Rows for which a SQL condition is true (a null result does not match)."""
    def mark(stored: DataFrame) -> DataFrame:
        if condition is None or not condition.strip():
            return stored.withColumn(MATCHED, F.lit(True))
        return _analysed(lambda: stored.withColumn(MATCHED, F.coalesce(F.expr(condition), F.lit(False))),
                         table, f"condition `{condition}`")
    return mark


def key_marker(keys: DataFrame, key_columns: Sequence[str], predicates: Sequence[str], table: str) -> Marker:
    """Rows whose key columns equal those of a row of `keys` and that satisfy every predicate
    with such a row as `SOURCE_ALIAS` (delete+insert). Null key values never match, as in SQL."""
    def mark(stored: DataFrame) -> DataFrame:
        actual = {c.lower(): c for c in stored.columns}
        names = [actual[c.lower()] for c in key_columns]
        key_values = [F.col(quote(c)).alias(f"_key{i}") for i, c in enumerate(names)]
        if predicates:  # each stored row against the incoming rows of its key: matched once, if by any
            probe = keys.select(*key_values, incoming_row(keys))
            on = [stored[quote(c)] == probe[f"_key{i}"] for i, c in enumerate(names)]
            return _analysed(lambda: stored.join(probe, on + [accepted_by(predicates)], "left_semi")
                             .withColumn(MATCHED, F.lit(True)), table, f"incremental predicates {list(predicates)}")
        probe = keys.select(*key_values).distinct().dropna().withColumn(MATCHED, F.lit(True))
        joined = stored.join(probe, [stored[quote(c)] == probe[f"_key{i}"] for i, c in enumerate(names)], "left")
        matched = F.coalesce(F.col(MATCHED), F.lit(False)).alias(MATCHED)
        return joined.select(*[stored[quote(c)] for c in stored.columns], matched)
    return mark


def incoming_row(rows: DataFrame) -> Column:
    """`rows`' columns as one struct named as predicates call the incoming row."""
    return F.struct(*[F.col(quote(c)) for c in rows.columns]).alias(SOURCE_ALIAS)


def accepted_by(predicates: Sequence[str]) -> Column:
    """True where every predicate is (a null result rejects)."""
    accepted = F.lit(True)
    for predicate in predicates:
        accepted = accepted & F.coalesce(F.expr(predicate), F.lit(False))
    return accepted


def rows_accepted_by(batch: DataFrame, stored: DataFrame, predicates: Sequence[str], table: str) -> DataFrame:
    """The rows of `batch` (merge: keyed rows, `RECORD_KEY`) that every predicate accepts with
    their key's stored row (aliased as the predicates call it) and the row as `SOURCE_ALIAS`,
    and those of keys not stored. A rejected row does not match, and the table holds a key once,
    so it is dropped: its stored row stays as it is."""
    probe = batch.select(F.col(RECORD_KEY).alias(_INCOMING_KEY), incoming_row(batch))
    pairs = probe.join(stored, probe[_INCOMING_KEY] == stored[RECORD_KEY], "left")
    return _analysed(lambda: pairs.where(stored[RECORD_KEY].isNull() | accepted_by(predicates))
                     .select(f"{SOURCE_ALIAS}.*"), table, f"incremental predicates {list(predicates)}")


def stored_rows(stored: DataFrame, alias: Optional[str]) -> DataFrame:
    """The stored rows under the name predicates use for them, with their file group."""
    stored = stored.withColumn(FILE_ID, file_id_of(F.col(FILE_NAME)))
    return stored.alias(alias) if alias else stored


def _analysed(build: Callable[[], DataFrame], table: str, what: str) -> DataFrame:
    """Build a DataFrame whose SQL text came from the user: parse and analysis errors name it."""
    try:
        return build()
    except (AnalysisException, ParseException) as err:
        reason = str(err).strip().splitlines()[0]
        raise SchemaError(f"table {table}: {what} is not valid here: {reason}") from None


def matched_rows(marked: DataFrame) -> DataFrame:
    """(fileId, record key) of the rows a condition matched, evaluated once and kept: the
    condition may read `current_timestamp()`, `rand()` or a growing table, and the rewrite and
    the index tombstones must agree with the scan that found the matches."""
    return marked.where(F.col(MATCHED)).select(FILE_ID, RECORD_KEY).localCheckpoint(eager=True)


def matches_per_file_group(matched: DataFrame) -> List[Tuple[str, int]]:
    """(fileId, matched rows) of every file group holding a match."""
    return [(r[0], r[1]) for r in matched.groupBy(FILE_ID).count().collect()]


def with_matches(stored: DataFrame, matched: DataFrame) -> DataFrame:
    """The stored rows (`stored_rows`) flagged MATCHED where `matched` names them."""
    flags = matched.withColumn(MATCHED, F.lit(True))
    return stored.join(flags, [FILE_ID, RECORD_KEY], "left").withColumn(MATCHED, F.coalesce(F.col(MATCHED), F.lit(False)))


def check_assignments(assignments: Dict[str, str], data_schema: T.StructType, fixed: Sequence[str],
                      table: str) -> Dict[str, Tuple[str, str, Column]]:
    """{column: (table's spelling, SQL text, value)}; keys and partition columns cannot change in place."""
    by_lower = {f.name.lower(): f for f in data_schema.fields}
    fixed_lower = {c.lower() for c in fixed}
    out = {}
    for column, value in assignments.items():
        field = by_lower.get(column.lower())
        if field is None:
            raise SchemaError(f"table {table}: update sets column '{column}', which the table does not have "
                              f"(it has {', '.join(by_lower[k].name for k in by_lower)})")
        if column.lower() in fixed_lower:
            raise SchemaError(f"table {table}: column '{field.name}' is a record key or partition column and "
                              "cannot be updated in place (delete the rows and insert them again)")
        out[field.name.lower()] = (field.name, value, stored_as(F.expr(value), field, table))
    return out


def stored_as(value: Column, field: T.StructField, table: str) -> Column:
    """`value` in the column's type, as Spark's INSERT stores it: a value that does not fit (an
    overflow, a string that does not parse) fails the write naming the column, never a wrapped
    number or a null (SQL statements are checked first by the adapter, with Spark's type rules)."""
    stored = value.try_cast(field.dataType)
    return F.when(value.isNotNull() & stored.isNull(), F.raise_error(F.concat(
        F.lit(f"table {table}: [CAST_OVERFLOW_IN_TABLE_INSERT] column `{field.name}` "
              f"({field.dataType.simpleString()}) cannot hold the value "), value.cast("string"),
        F.lit("; nothing was written")))).otherwise(stored)


def rows_after(marked: DataFrame, data_schema: T.StructType, assignments: Optional[Dict[str, Tuple[str, str, Column]]],
               delete: bool, sizes: Dict[str, int], table: str) -> DataFrame:
    """The new content of the file groups in `marked`, in the `rows.REWRITE` layout:
    matched rows deleted or updated, the rest as they were. Columns the stored rows lack
    (the table schema grew) are null."""
    present = {c.lower(): c for c in marked.columns}
    matched = F.col(MATCHED)
    data = []
    for field in data_schema.fields:
        stored = F.col(quote(present[field.name.lower()])).cast(field.dataType) if field.name.lower() in present \
            else F.lit(None).cast(field.dataType)
        if assignments and field.name.lower() in assignments:
            stored = F.when(matched, assignments[field.name.lower()][2]).otherwise(stored)
        data.append(stored.alias(field.name))
    rows = marked.where(~matched) if delete else marked
    changed = F.lit(False) if delete else matched
    null = F.lit(None).cast("string")
    meta = {FILE_ID: F.col(FILE_ID), COMMIT_TIME: F.when(changed, null).otherwise(F.col(COMMIT_TIME)),
            COMMIT_SEQNO: F.when(changed, null).otherwise(F.col(COMMIT_SEQNO)),
            RECORD_KEY: F.col(RECORD_KEY), PARTITION_PATH: F.col(PARTITION_PATH)}
    out = _analysed(lambda: rows.select(*REWRITE.select(meta, data)), table, "update set " + ", ".join(f"{name} = {text}" for name, text, _ in (assignments or {}).values()))
    rows, _ = by_rewrite_task(out, FILE_ID, sizes)
    return rows.sortWithinPartitions(FILE_ID, RECORD_KEY)


def deleted_entries(matched: DataFrame) -> DataFrame:
    """Index tombstones for the matched (deleted) rows."""
    return matched.select(F.col(RECORD_KEY).alias("key"), F.col(FILE_ID).alias("file_id"), F.lit(True).alias("deleted"))


# ---- the operations ------------------------------------------------------------------------
def update(ctx: TableContext, assignments: Dict[str, str], where: Optional[str], alias: Optional[str]) -> Optional[str]:
    """See `HudiTable.update`."""
    data_schema = ctx.existing_schema()
    values = check_assignments(assignments, data_schema, ctx.config.record_key_fields + ctx.config.partition_fields,
                               ctx.name)
    return rewrite_matching(ctx, where_marker(where, ctx.name), UPSERT, data_schema, assignments=values, alias=alias)


def delete_where(ctx: TableContext, where: str, alias: Optional[str]) -> Optional[str]:
    """See `HudiTable.delete_where`."""
    return rewrite_matching(ctx, where_marker(where, ctx.name), DELETE, ctx.existing_schema(), delete=True,
                            alias=alias)


def delete_insert(ctx: TableContext, df: DataFrame, key_columns: Sequence[str], predicates: Sequence[str],
                  predicate_alias: Optional[str]) -> str:
    """See `HudiTable.delete_insert`."""
    if not ctx.config.auto_keys:
        raise ctx.error("delete+insert would duplicate its record keys; use upsert")
    data_schema = ctx.schema_after(df, EVOLVE)
    # The rows deleted and the rows inserted come from one evaluation, kept on local disk: in
    # the JVM's heap (the default) a batch of wide rows leaves too little for reading the stored ones.
    df = df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
    return rewrite_matching(ctx, key_marker(df, key_columns, predicates, ctx.name), INSERT, data_schema,
                            delete=True, inserts=df, alias=predicate_alias)


def delete_auto_keys(ctx: TableContext, keys: DataFrame) -> Optional[str]:
    """Delete by `_hoodie_record_key` on an auto-keyed table: only the file groups whose key
    runs hold a wanted key are read."""
    if RECORD_KEY not in keys.columns and len(keys.columns) != 1:
        raise ctx.error(f"its keys are auto-generated: delete takes one column of {RECORD_KEY} values "
                        f"(got {', '.join(keys.columns)})")
    keys = keys.select((F.col(RECORD_KEY) if RECORD_KEY in keys.columns else F.col(quote(keys.columns[0])))
                       .alias(RECORD_KEY)).localCheckpoint(eager=True)  # read by the lookup and the match
    ctx.ensure_index()
    return rewrite_matching(ctx, key_marker(keys, [RECORD_KEY], (), ctx.name), DELETE, ctx.existing_schema(),
                            delete=True, candidates=keys)


def rewrite_matching(ctx: TableContext, mark: Marker, operation: str, data_schema: T.StructType,
                     assignments: Optional[Dict[str, Tuple[str, str, Column]]] = None, delete: bool = False,
                     inserts: Optional[DataFrame] = None, candidates: Optional[DataFrame] = None,
                     alias: Optional[str] = None) -> Optional[str]:
    """One commit: the file groups holding rows `mark` matches get new slices (matched rows
    updated or deleted), then `inserts` are written as new file groups. With `candidates`
    (record keys), only the file groups the index says hold one of them are scanned."""
    with ctx.transaction(COMMIT) as txn:
        view = ctx.timeline.view()
        current = {g.file_id: g for g in view.live_groups()}

        def stored(groups) -> DataFrame:
            return stored_rows(ctx.read_files([current[f].latest for f in groups], file_instants=True), alias)

        if candidates is not None:
            scanned = sorted(ctx.index.holders(candidates, ctx.timeline.completed(), view))
        else:
            scanned = sorted(current)
        # Spark's reader decodes the stored rows in batches their width allows (`reader`).
        with bounded_stored_reads(ctx.spark, ctx.storage, [current[f].latest for f in scanned], ctx.name):
            matched = matched_rows(mark(stored(scanned))) if scanned else None
            touched = dict(matches_per_file_group(matched)) if matched is not None else {}
            if not touched and inserts is None:
                return None  # nothing to do: the transaction rolls its empty instant back
            spec = ctx.write_spec(txn.instant, prev_commits={f: current[f].latest.instant for f in touched},
                                  deletes_per_file_group=touched if delete else {})
            stats: List[WriteStat] = []
            change = IndexChange()
            if touched:
                rewritten = with_matches(stored(sorted(touched)), matched)
                sizes = {f: current[f].latest.size for f in touched}
                stats += run_write_job(rows_after(rewritten, data_schema, assignments, delete, sizes, ctx.name), spec,
                                       task=rewrite_task)
                arrow_schema = ctx.arrow_schema(data_schema)
                for file_id in sorted(set(touched) - {s.fileId for s in stats}):
                    stats.append(write_stat(write_empty_slice(spec, current[file_id].partition, file_id, arrow_schema)))
                if delete:
                    change.removed = deleted_entries(matched)
        if inserts is not None:
            change.inserted = run_write_job(ctx.rows_for_writer(inserts, data_schema), spec)
            stats += change.inserted
        change.written = stats
        ctx.commit(txn, operation, data_schema, stats, ctx.index_delta(txn.instant, change))
    ctx.after_commit()
    return txn.instant
