"""Rows chosen by a condition, changed in place: SQL UPDATE, DELETE ... WHERE, delete+insert.

These work on any table, auto-keyed ones included: the rows' own `_hoodie_file_name` says
which file groups hold matches, so no index is needed. The whole snapshot is scanned once to
find them (a WHERE clause can name any column); only the file groups with a match are read
again and rewritten as new slices of the same fileId (Copy-On-Write). Unmatched rows keep
their commit time and seqno; updated rows get the instant's.

A condition is a function from the stored rows (a DataFrame aliased `DBT_INTERNAL_DEST`, so
dbt-style predicates resolve) to the same rows with a boolean `MATCHED` column.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.errors import AnalysisException, ParseException

from .record_index import file_id_of
from .schema import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY, SchemaError, quote

MATCHED = "_hudilite_matched"
FILE_ID = "_hudilite_file_id"
DEST_ALIAS = "DBT_INTERNAL_DEST"
Marker = Callable[[DataFrame], DataFrame]


def where_marker(condition: Optional[str], table: str) -> Marker:
    """Rows for which a SQL condition is true (a null result does not match)."""
    def mark(stored: DataFrame) -> DataFrame:
        if condition is None or not condition.strip():
            return stored.withColumn(MATCHED, F.lit(True))
        return _analysed(lambda: stored.withColumn(MATCHED, F.coalesce(F.expr(condition), F.lit(False))),
                         table, f"condition `{condition}`")
    return mark


def key_marker(keys: DataFrame, key_columns: Sequence[str], predicates: Sequence[str], table: str) -> Marker:
    """Rows whose key columns equal those of a row of `keys` and satisfy every predicate
    (delete+insert). Null key values never match, as in SQL."""
    def mark(stored: DataFrame) -> DataFrame:
        actual = {c.lower(): c for c in stored.columns}
        names = [actual[c.lower()] for c in key_columns]
        probe = keys.select(*[F.col(quote(c)).alias(f"_key{i}") for i, c in enumerate(names)]).distinct()
        probe = probe.dropna().withColumn(MATCHED, F.lit(True))
        joined = stored.join(probe, [stored[quote(c)] == probe[f"_key{i}"] for i, c in enumerate(names)], "left")
        matched = F.coalesce(F.col(MATCHED), F.lit(False)) & accepted_by(predicates)
        return _analysed(lambda: joined.select(*[stored[quote(c)] for c in stored.columns], matched.alias(MATCHED)),
                         table, f"incremental predicates {list(predicates)}")
    return mark


def accepted_by(predicates: Sequence[str]) -> Column:
    """True where every predicate is (a null result rejects)."""
    accepted = F.lit(True)
    for predicate in predicates:
        accepted = accepted & F.coalesce(F.expr(predicate), F.lit(False))
    return accepted


def keys_rejected_by(stored: DataFrame, predicates: Sequence[str], table: str) -> DataFrame:
    """Record keys of the stored rows some predicate rejects (merge: rows that may not match)."""
    return _analysed(lambda: as_dest(stored).where(~accepted_by(predicates)).select(RECORD_KEY), table,
                     f"incremental predicates {list(predicates)}")


def as_dest(stored: DataFrame) -> DataFrame:
    return stored.alias(DEST_ALIAS)


def _analysed(build: Callable[[], DataFrame], table: str, what: str) -> DataFrame:
    """Build a DataFrame whose SQL text came from the user: parse and analysis errors name it."""
    try:
        return build()
    except (AnalysisException, ParseException) as err:
        reason = str(err).strip().splitlines()[0]
        raise SchemaError(f"table {table}: {what} is not valid here: {reason}") from None


def with_file_id(stored: DataFrame) -> DataFrame:
    return stored.withColumn(FILE_ID, file_id_of(F.col(FILE_NAME)))


def matches_per_file_group(marked: DataFrame) -> List[Tuple[str, int]]:
    """(fileId, matched rows) of every file group holding a match."""
    return [(r[0], r[1]) for r in marked.where(F.col(MATCHED)).groupBy(FILE_ID).count().collect()]


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
        out[field.name.lower()] = (field.name, value, F.expr(value).cast(field.dataType))
    return out


def rows_after(marked: DataFrame, data_schema: T.StructType, assignments: Optional[Dict[str, Tuple[str, str, Column]]],
               delete: bool, num_file_groups: int, table: str) -> DataFrame:
    """The new content of the file groups in `marked`, laid out for `writer.rewrite_task`:
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
    out = _analysed(lambda: rows.select(
        F.col(FILE_ID), F.when(changed, null).otherwise(F.col(COMMIT_TIME)).alias(COMMIT_TIME),
        F.when(changed, null).otherwise(F.col(COMMIT_SEQNO)).alias(COMMIT_SEQNO),
        F.col(RECORD_KEY), F.col(PARTITION_PATH), *data,
    ), table, "update set " + ", ".join(f"{name} = {text}" for name, text, _ in (assignments or {}).values()))
    return out.repartition(max(1, min(num_file_groups, 200)), FILE_ID).sortWithinPartitions(FILE_ID, RECORD_KEY)


def deleted_entries(marked: DataFrame) -> DataFrame:
    """Index tombstones for the matched (deleted) rows."""
    return marked.where(F.col(MATCHED)).select(F.col(RECORD_KEY).alias("key"), F.col(FILE_ID).alias("file_id"),
                                               F.lit(True).alias("deleted"))
