"""SQL statements aimed at hudilite tables: carried out by the table-format core, or refused.

Every statement a connection runs is read first (`statement`: Spark's own parser in a classic
session, the statement's text over Spark Connect), so the kind of statement and the table it
writes are known; a statement that writes a hudilite table never reaches Spark's own writer:
- `INSERT INTO t [(cols)] <query>` appends (a commit); `INSERT OVERWRITE [TABLE] t <query>`
  replaces the partitions present in the rows (the whole table when it is not partitioned);
- `UPDATE t [[AS] a] SET c = expr, ... [WHERE cond]` and `DELETE FROM t [[AS] a] [WHERE cond]`
  rewrite the file groups holding matched rows;
- `CREATE [OR REPLACE] TABLE t AS <query>` of a table that does not exist yet (no `USING`
  another format) makes a hudilite table, as a model's first build does;
- anything else that would change the table or its catalog entry (MERGE, TRUNCATE, DROP,
  ALTER, CREATE [OR REPLACE] TABLE/VIEW over it, LOAD DATA, INSERT with a PARTITION clause, a
  WITH before INSERT, ...) is refused with an error that says what to do instead.
Reads, DESCRIBE, SHOW, CACHE, statistics and EXPLAIN pass to Spark (Spark runs nothing of the
statement it explains, except the one an EXECUTE IMMEDIATE holds, which it runs while analysing
it: the text reader reads `EXPLAIN EXECUTE IMMEDIATE ...` as the EXECUTE IMMEDIATE).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import statement as st
from .reader import read_statement
from .text_reader import strip_comments
from ..table import ConfigurationError, is_connect, quote

_IDENT = r"(?:`(?:[^`]|``)+`|[^\s.`(),;]+)"
_TARGET = rf"{_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}}"
_UPDATE = re.compile(
    rf"^\s*update\s+{_TARGET}(?:\s+(?:as\s+)?(?!set\b){_IDENT})?\s+set\s+(?P<rest>.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_DELETE = re.compile(
    rf"^\s*delete\s+from\s+{_TARGET}(?:\s+(?:as\s+)?(?!where\b){_IDENT})?(?:\s+where\s+(?P<where>.*?))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def split_top_level(text: str, separator: str) -> List[str]:
    """Split SQL text at a separator (`,` or a keyword) outside quotes and parentheses."""
    parts, depth, quoting, start, i = [], 0, None, 0, 0
    keyword = separator.isalpha()
    while i < len(text):
        ch = text[i]
        if quoting:
            if ch == quoting:
                quoting = None
        elif ch in "'\"`":
            quoting = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and text[i:i + len(separator)].lower() == separator and (
                not keyword or (_boundary(text, i - 1) and _boundary(text, i + len(separator)))):
            parts.append(text[start:i])
            start = i = i + len(separator)
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _boundary(text: str, i: int) -> bool:
    return i < 0 or i >= len(text) or not (text[i].isalnum() or text[i] == "_")


def parse_update(sql: str) -> Tuple[Dict[str, str], Optional[str]]:
    """({column: SQL value}, WHERE condition or None) of an UPDATE statement."""
    m = _UPDATE.match(strip_comments(sql))
    if m is None:
        raise ConfigurationError(f"cannot read this UPDATE statement: {sql.strip()[:200]}")
    clauses = split_top_level(m["rest"], "where")
    if len(clauses) > 2:
        raise ConfigurationError(f"UPDATE with more than one WHERE: {sql.strip()[:200]}")
    assignments = {}
    for assignment in split_top_level(clauses[0], ","):
        column, sep, value = assignment.partition("=")
        if not sep or not value.strip():
            raise ConfigurationError(f"UPDATE assignment `{assignment}` is not `column = value`")
        assignments[_unquote(column.split(".")[-1])] = value.strip()
    return assignments, clauses[1] if len(clauses) == 2 else None


def parse_delete(sql: str) -> Optional[str]:
    """The WHERE condition of a DELETE statement (None: every row)."""
    m = _DELETE.match(strip_comments(sql))
    if m is None:
        raise ConfigurationError(f"cannot read this DELETE statement: {sql.strip()[:200]}")
    return m["where"]


def _unquote(identifier: str) -> str:
    identifier = identifier.strip()
    if identifier.startswith("`"):
        return identifier[1:-1].replace("``", "`")
    return identifier


# ---- routing ----------------------------------------------------------------------------------
def _hudilite_table(catalog, parts: Optional[List[str]]):
    """(schema, name, HudiTable) when `parts` name a hudilite table, else None."""
    key = catalog.table_key(parts) if parts else None
    key = catalog.stored_key(key) if key is not None else None  # Spark's names ignore case
    table = catalog.open(*key) if key is not None else None
    return None if table is None else (key[0], key[1], table)


def _remembered_view(catalog, parts: Optional[List[str]]) -> Optional[Tuple[str, str]]:
    """(schema, name) when `parts` name a view kept on storage (a dbt view model), else None."""
    key = catalog.table_key(parts) if parts else None
    key = catalog.stored_key(key) if key is not None else None
    return key if key is not None and catalog.is_view(*key) else None


def run_statement(catalog, sql: str) -> DataFrame:
    """Run one statement of a connection or a model: the hudilite tables and views it names
    are registered as of now, a write to one is carried out by the core (or refused), and
    everything else is Spark's."""
    statement = read_statement(catalog.spark, sql)
    if statement is not None:
        # the tables it writes too: a remembered view or a table not yet registered must hold its
        # name in Spark's catalog before Spark runs a CREATE of that name
        targets = [statement.target] + statement.more_targets if statement.writes else []
        catalog.resolve(list(statement.names) + [t for t in targets if t])
    routed = route_statement(catalog, sql, statement) if statement is not None else None
    if routed is not None:
        return routed
    # Spark runs the text as read: each IDENTIFIER(...) the name it was read as
    result = catalog.spark.sql(statement.text if statement is not None and statement.text else sql)
    if statement is None or statement.kind != st.QUERY or is_connect(catalog.spark):
        # whatever Spark ran (a statement misread, a script) left our entries ours: a query
        # read by Spark's own parser cannot change them
        catalog.check_entries()
    return result


def route_statement(catalog, sql: str, statement: Optional[st.Statement] = None) -> Optional[DataFrame]:
    """Carry out `sql` (read as `statement` when the caller has it) if it writes a hudilite
    table and return an empty result; refuse what the core cannot do; None when the statement
    is not for hudilite and Spark should run it."""
    spark = catalog.spark
    statement = statement or read_statement(spark, sql)
    if statement is None:
        return None
    if statement.kind == st.EXECUTE_IMMEDIATE and statement.inner is not None and not (statement.explain or
                                                                                       statement.into):
        # the statement it runs, as if written out (its names were resolved with the EXECUTE IMMEDIATE's)
        return route_statement(catalog, statement.inner_sql, statement.inner)
    if not statement.writes:
        return None
    if statement.unknown_target:
        raise ConfigurationError(
            f"{statement.description or 'this statement'} is refused: it may write a hudilite table and which one "
            f"cannot be told ({statement.unknown_target}); name the table in the statement")
    if statement.kind in (st.RENAME, st.DROP_VIEW, st.DROP_TABLE):
        # a remembered view's SQL goes (or moves) with its entry (Spark's DROP TABLE drops a view too)
        view = _remembered_view(catalog, statement.target)
        if view is not None and not (statement.kind == st.RENAME and statement.description.startswith("ALTER TABLE")):
            # (Spark renames no view through ALTER TABLE: it says so itself)
            if statement.kind != st.RENAME:
                catalog.drop_view(*view)
            else:
                new = list(statement.new_name or [])
                key = (view[0], new[0]) if len(new) == 1 else catalog.table_key(new)
                if key is None:
                    raise ConfigurationError(f"cannot rename view {view[0]}.{view[1]} to {'.'.join(new)}")
                catalog.rename_view(view[0], view[1], *key)
            return spark.createDataFrame([], "num_affected_rows long")
    found = _hudilite_table(catalog, statement.target)
    for more in statement.more_targets:
        found = found or _hudilite_table(catalog, more)
    if statement.kind == st.SCRIPT:  # its statements run in Spark, one by one: none may change ours
        view = next((v for v in map(lambda t: _remembered_view(catalog, t), [statement.target] +
                                    statement.more_targets) if v), None)
        if found or view:
            schema, name = found[:2] if found else view
            raise ConfigurationError(
                f"{schema}.{name} is a hudilite table or view: {statement.description} is not supported on it (Spark "
                "runs a script's statements itself); run them as separate statements")
        return None
    if statement.with_before:
        if found:
            raise _refused(found, "WITH before INSERT (put the WITH inside the SELECT)")
        return None
    kind = statement.kind
    if kind == st.EXECUTE_IMMEDIATE:  # EXPLAIN EXECUTE IMMEDIATE and EXECUTE IMMEDIATE ... INTO run it in Spark
        if found:
            raise _refused(found, statement.description + (" (Spark runs the statement it explains)"
                                                           if statement.explain else ""))
        return None
    if found is None:
        if kind in (st.CREATE_AS_SELECT, st.REPLACE_AS_SELECT) and statement.target:
            return _create_as_select(catalog, statement)
        return None
    if kind == st.CREATE_AS_SELECT and statement.if_not_exists:  # CREATE TABLE IF NOT EXISTS: it does
        return spark.createDataFrame([], "num_affected_rows long")
    schema, name, table = found
    text = statement.text or sql  # each IDENTIFIER(...) in it replaced by the name it stands for
    if kind == st.UPDATE:
        assignments, where = parse_update(text)
        table.update(_assigned_sql(spark, schema, name, table, assignments, statement.alias), where,
                     alias=statement.alias)
    elif kind == st.DELETE:
        table.delete_where(parse_delete(text) or "true", alias=statement.alias)
    elif kind == st.INSERT:
        if statement.partition_clause:
            raise _refused(found, "INSERT with a PARTITION clause (partition values come from the rows' columns)")
        _insert(statement, schema, name, table)
    else:
        raise _refused(found, statement.description)
    catalog.register(schema, name, table)
    return spark.createDataFrame([], "num_affected_rows long")


def _create_as_select(catalog, statement: st.Statement) -> Optional[DataFrame]:
    """`CREATE [OR REPLACE] TABLE s.t [USING hudi] AS <query>` of a new table: a hudilite
    table at <location_root>/s/t, as a model's first build makes (dbt's stored test failures
    create theirs this way). Another format (`USING parquet`) is Spark's to make."""
    if statement.provider is not None and statement.provider.lower() not in ("hudi", "hudilite"):
        return None
    key = catalog.table_key(statement.target)
    if key is None:
        return None
    schema, name = key
    if catalog.is_view(schema, name) or catalog.spark.catalog.tableExists(quote(schema, name)):
        return None  # Spark's own table or a view holds the name: Spark says it exists (or replaces its own)
    if statement.placement:
        raise ConfigurationError(f"create table {schema}.{name} as select: PARTITIONED BY, LOCATION, OPTIONS and "
                                 "TBLPROPERTIES are not supported here (a hudilite table lives at <location_root>/"
                                 "<schema>/<name>); build the table with a dbt model and partition_by or unique_key")
    catalog.create_table(schema, name, statement.query())
    return catalog.spark.createDataFrame([], "num_affected_rows long")


def _refused(found, what: str) -> ConfigurationError:
    schema, name, _ = found
    return ConfigurationError(
        f"{schema}.{name} is a hudilite table: {what} is not supported on it; use INSERT, UPDATE or DELETE, a dbt "
        "model (a full refresh rebuilds it), or the hudilite CLI")


def _insert(statement: st.Statement, schema: str, name: str, table) -> None:
    rows = statement.query()
    target_schema = table.schema()
    given = statement.columns
    if statement.by_name:
        names = rows.columns
    else:
        names = given or ([f.name for f in target_schema.fields] if target_schema else rows.columns)
        if len(names) != len(rows.columns):
            raise ConfigurationError(f"insert into {schema}.{name}: {len(rows.columns)} values per row for "
                                     f"{len(names)} columns ({', '.join(names)})")
        rows = rows.toDF(*names)
    if target_schema is not None:  # columns left out are null; values take the table's types
        present = {n.lower() for n in names}
        unknown = sorted(present - {f.name.lower() for f in target_schema.fields})
        if unknown:
            raise ConfigurationError(f"insert into {schema}.{name}: no column(s) {', '.join(unknown)} in the table")
        by_lower = {n.lower(): n for n in names}
        given_types = {f.name.lower(): f.dataType for f in rows.schema.fields}
        rows = rows.select(*[
            (store_assigned(F.col(quote(by_lower[f.name.lower()])), given_types[f.name.lower()], f.dataType,
                            f"{schema}.{name}", f.name) if f.name.lower() in present
             else F.lit(None).cast(f.dataType)).alias(f.name)
            for f in target_schema.fields
        ])
    if not statement.overwrite:
        table.insert(rows)
    elif table.config.partition_fields:
        table.insert_overwrite(rows)
    else:
        table.insert_overwrite_table(rows)


# ---- store assignment: what Spark's own INSERT does with a value of another type ---------------
# Spark's ANSI store assignment (spark.sql.storeAssignmentPolicy=ANSI, its default, whatever
# spark.sql.ansi.enabled says): some type pairs are refused before anything runs
# (INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST), the rest are cast as an ANSI cast casts, and
# a value that does not fit fails the statement (CAST_OVERFLOW_IN_TABLE_INSERT) instead of being
# wrapped or stored as null. One extension: strings are parsed into numbers, dates, timestamps
# and booleans (`sql_assignable`), a string that does not parse failing (CAST_INVALID_INPUT). `try_cast` is that cast with a null for a misfit, so a non-null value
# whose try_cast is null is exactly a value Spark's INSERT would refuse.
_NUMBER = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
_DATETIME = (T.DateType, T.TimestampType, T.TimestampNTZType)


def store_assignable(given: T.DataType, column: T.DataType) -> bool:
    """Spark's Cast.canANSIStoreAssign: a value of `given` type may be written to `column`."""
    if given == column or isinstance(given, T.NullType):
        return True
    if isinstance(given, _NUMBER) and isinstance(column, _NUMBER):
        return True
    if isinstance(column, T.StringType):
        return isinstance(given, T.AtomicType) or isinstance(given, T.CalendarIntervalType)
    if isinstance(given, _DATETIME) and isinstance(column, _DATETIME):
        return True
    if isinstance(given, T.ArrayType) and isinstance(column, T.ArrayType):
        return ((column.containsNull or not given.containsNull)
                and store_assignable(given.elementType, column.elementType))
    if isinstance(given, T.MapType) and isinstance(column, T.MapType):
        return ((column.valueContainsNull or not given.valueContainsNull)
                and store_assignable(given.keyType, column.keyType)
                and store_assignable(given.valueType, column.valueType))
    if isinstance(given, T.StructType) and isinstance(column, T.StructType):
        return len(given.fields) == len(column.fields) and all(
            (c.nullable or not g.nullable) and store_assignable(g.dataType, c.dataType)
            for g, c in zip(given.fields, column.fields))
    return False


def sql_assignable(given: T.DataType, column: T.DataType) -> bool:
    """`store_assignable`, and a string to a number, date, timestamp or boolean column, parsed as
    an ANSI cast parses it (a string that does not parse fails the statement): SQL writes dates
    as string literals (dbt's own adapter tests do), where Spark's INSERT asks for a cast."""
    return store_assignable(given, column) or (
        isinstance(given, T.StringType) and isinstance(column, _NUMBER + _DATETIME + (T.BooleanType,)))


def _type_name(data_type: T.DataType) -> str:
    return data_type.simpleString().upper()


def _check_assignable(given: T.DataType, column: T.DataType, table: str, name: str) -> None:
    if not sql_assignable(given, column):
        schema, _, table_name = table.partition(".")
        raise ConfigurationError(
            f"{table}: [INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST] Cannot write incompatible data for the table "
            f"`{schema}`.`{table_name}`: Cannot safely cast `{name}` \"{_type_name(given)}\" to "
            f"\"{_type_name(column)}\" (as Spark's own INSERT refuses it); cast the value in the statement")


def _overflow_message(given: T.DataType, column: T.DataType, table: str, name: str) -> str:
    if isinstance(given, T.StringType):
        return (f"{table}: [CAST_INVALID_INPUT] A value of the type \"STRING\" cannot be cast to "
                f"\"{_type_name(column)}\" for column `{name}` because it is malformed; nothing was written. Use "
                "`try_cast` on the input value to store NULL instead")
    return (f"{table}: [CAST_OVERFLOW_IN_TABLE_INSERT] Fail to assign a value of \"{_type_name(given)}\" type to the "
            f"\"{_type_name(column)}\" type column `{name}` due to an overflow; nothing was written. Use "
            "`try_cast` on the input value to tolerate overflow and store NULL instead")


def store_assigned(value: Column, given: T.DataType, column: T.DataType, table: str, name: str) -> Column:
    """`value` (of type `given`) as Spark's INSERT stores it in `column`, or an error naming the
    column: refused now when the types cannot be assigned, or when a row's value does not fit."""
    if given == column:
        return value
    _check_assignable(given, column, table, name)
    if isinstance(given, T.NullType):
        return value.cast(column)
    stored = value.try_cast(column)
    return F.when(value.isNotNull() & stored.isNull(),
                  F.raise_error(F.lit(_overflow_message(given, column, table, name)))).otherwise(stored)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _assigned_sql(spark, schema: str, name: str, table, assignments: Dict[str, str],
                  alias: Optional[str]) -> Dict[str, str]:
    """UPDATE's `column = expr` with each expression stored as Spark's INSERT would store it
    (see `store_assigned`): the types are read from an analysis over the table's columns, and
    the check is SQL, evaluated once per row (`transform` binds the value to a name)."""
    data_schema = table.schema()
    if data_schema is None or not assignments:
        return assignments
    columns = {f.name.lower(): f.dataType for f in data_schema.fields}
    empty = spark.createDataFrame([], data_schema)
    if alias:
        empty = empty.alias(alias)
    try:
        given = [f.dataType for f in empty.selectExpr(*assignments.values()).schema.fields]
    except Exception:  # noqa: BLE001 - the core reports what Spark cannot analyse
        return assignments
    out = {}
    for (column, value), given_type in zip(assignments.items(), given):
        column_type = columns.get(column.lower())
        if column_type is None or given_type == column_type:
            out[column] = value
            continue
        _check_assignable(given_type, column_type, f"{schema}.{name}", column)
        target = column_type.simpleString()
        message = _sql_string(_overflow_message(given_type, column_type, f"{schema}.{name}", column))
        out[column] = (f"transform(array(({value})), hudilite_value -> CASE WHEN hudilite_value IS NOT NULL AND "
                       f"try_cast(hudilite_value AS {target}) IS NULL THEN raise_error({message}) "
                       f"ELSE try_cast(hudilite_value AS {target}) END)[0]")
    return out
