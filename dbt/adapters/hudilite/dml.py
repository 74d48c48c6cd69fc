"""SQL statements aimed at hudilite tables: carried out by the table-format core, or refused.

Spark's own parser reads every statement a connection runs (comments, backticks, `USE`,
`spark_catalog.` prefixes and all), so the kind of statement and the table it writes are
known exactly; a statement that writes a hudilite table never reaches Spark's own writer:
- `INSERT INTO t [(cols)] <query>` appends (a commit); `INSERT OVERWRITE [TABLE] t <query>`
  replaces the partitions present in the rows (the whole table when it is not partitioned);
- `UPDATE t [[AS] a] SET c = expr, ... [WHERE cond]` and `DELETE FROM t [[AS] a] [WHERE cond]`
  rewrite the file groups holding matched rows;
- `CREATE [OR REPLACE] TABLE t AS <query>` of a table that does not exist yet (no `USING`
  another format) makes a hudilite table, as a model's first build does;
- anything else that would change the table or its catalog entry (MERGE, TRUNCATE, DROP,
  ALTER, CREATE [OR REPLACE] TABLE/VIEW over it, LOAD DATA, INSERT with a PARTITION clause, a
  WITH before INSERT, ...) is refused with an error that says what to do instead.
Reads, DESCRIBE, SHOW, CACHE and statistics pass to Spark.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .spark_plan import name_parts, names_read, parse_plan, seq
from .table import ConfigurationError, quote

# Statements that may name a table and change nothing in it.
_HARMLESS = {
    "DescribeRelation", "DescribeColumn", "ShowColumns", "ShowCreateTable", "ShowTableProperties", "ShowPartitions",
    "ShowTableExtended", "CacheTable", "CacheTableAsSelect", "UncacheTable", "RefreshTable", "AnalyzeTable",
    "AnalyzeTables", "AnalyzeColumn",
}
# Writes that are not `Command`s in Spark's plan hierarchy.
_WRITES = {
    "InsertIntoStatement", "CreateTableAsSelect", "ReplaceTableAsSelect", "CreateTable", "ReplaceTable",
    "UpdateTable", "DeleteFromTable", "MergeIntoTable", "UnresolvedWith",
}

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


def strip_comments(sql: str) -> str:
    """`sql` without `-- ...` and `/* ... */` comments outside quotes."""
    out, i, quoting = [], 0, None
    while i < len(sql):
        ch = sql[i]
        if quoting:
            out.append(ch)
            if ch == quoting:
                quoting = None
            i += 1
        elif ch in "'\"`":
            quoting = ch
            out.append(ch)
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = len(sql) if end < 0 else end + 2
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


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


# ---- Spark's parse of a statement ------------------------------------------------------------
def _target(plan) -> Optional[List[str]]:
    """The table a statement acts on: the first of its fields that names one."""
    fields = plan.productIterator()
    while fields.hasNext():
        parts = name_parts(fields.next())
        if parts is not None:
            return parts
    return None


def _is_command(spark, plan) -> bool:
    command = spark._jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    return command.isInstance(plan)


def _hudilite_table(catalog, parts: List[str]):
    """(schema, name, HudiTable) when `parts` name a hudilite table, else None."""
    key = catalog.table_key(parts)
    table = catalog.open(*key) if key is not None else None
    return None if table is None else (key[0], key[1], table)


def run_statement(catalog, sql: str) -> DataFrame:
    """Run one statement of a connection or a model: the hudilite tables and views it names
    are registered as of now, a write to one is carried out by the core (or refused), and
    everything else is Spark's."""
    plan = parse_plan(catalog.spark, sql)
    catalog.resolve(names_read(plan) if plan is not None else ())
    routed = route_statement(catalog, sql, plan) if plan is not None else None
    return routed if routed is not None else catalog.spark.sql(sql)


def route_statement(catalog, sql: str, plan=None) -> Optional[DataFrame]:
    """Carry out `sql` (parsed as `plan` when the caller has it) if it writes a hudilite table
    and return an empty result; refuse what the core cannot do; None when the statement is
    not for hudilite and Spark should run it."""
    spark = catalog.spark
    plan = plan if plan is not None else parse_plan(spark, sql)
    if plan is None:
        return None
    kind = plan.getClass().getSimpleName()
    if kind in _HARMLESS or (kind not in _WRITES and not _is_command(spark, plan)):
        return None
    if kind == "UnresolvedWith":
        inner = plan.child()
        kind, parts = inner.getClass().getSimpleName(), _target(inner)
        found = _hudilite_table(catalog, parts) if kind in _WRITES and parts else None
        if found:
            raise _refused(found, "WITH before INSERT (put the WITH inside the SELECT)")
        return None
    parts = _target(plan)
    found = _hudilite_table(catalog, parts) if parts else None
    if found is None:
        if kind in ("CreateTableAsSelect", "ReplaceTableAsSelect") and parts:
            return _create_as_select(catalog, plan, parts)
        return None
    if kind == "CreateTableAsSelect" and plan.ignoreIfExists():  # CREATE TABLE IF NOT EXISTS: it does
        return spark.createDataFrame([], "num_affected_rows long")
    schema, name, table = found
    if kind == "UpdateTable":
        assignments, where = parse_update(sql)
        table.update(assignments, where, alias=_alias(plan.table()))
    elif kind == "DeleteFromTable":
        table.delete_where(parse_delete(sql) or "true", alias=_alias(plan.table()))
    elif kind == "InsertIntoStatement":
        if not plan.partitionSpec().isEmpty():
            raise _refused(found, "INSERT with a PARTITION clause (partition values come from the rows' columns)")
        _insert(catalog, plan, schema, name, table)
    else:
        raise _refused(found, _statement_name(kind))
    catalog.register(schema, name, table)
    return spark.createDataFrame([], "num_affected_rows long")


def _create_as_select(catalog, plan, parts: List[str]) -> Optional[DataFrame]:
    """`CREATE [OR REPLACE] TABLE s.t [USING hudi] AS <query>` of a new table: a hudilite
    table at <location_root>/s/t, as a model's first build makes (dbt's stored test failures
    create theirs this way). Another format (`USING parquet`) is Spark's to make."""
    provider = plan.tableSpec().provider()
    if provider.isDefined() and provider.get().lower() not in ("hudi", "hudilite"):
        return None
    key = catalog.table_key(parts)
    if key is None:
        return None
    schema, name = key
    if catalog.is_view(schema, name) or catalog.spark.catalog.tableExists(quote(schema, name)):
        return None  # Spark's own table or a view holds the name: Spark says it exists (or replaces its own)
    spec = plan.tableSpec()  # Spark 4: UnresolvedTableSpec(properties, provider, optionExpression, location, ...)
    options = spec.optionExpression().options()
    if not plan.partitioning().isEmpty() or spec.location().isDefined() or not spec.properties().isEmpty() \
            or not options.isEmpty():
        raise ConfigurationError(f"create table {schema}.{name} as select: PARTITIONED BY, LOCATION, OPTIONS and "
                                 "TBLPROPERTIES are not supported here (a hudilite table lives at <location_root>/"
                                 "<schema>/<name>); build the table with a dbt model and partition_by or unique_key")
    rows = _query_rows(catalog.spark, plan.query())
    catalog.create_table(schema, name, rows)
    return catalog.spark.createDataFrame([], "num_affected_rows long")


def _alias(table_node) -> Optional[str]:
    return table_node.alias() if table_node.getClass().getSimpleName() == "SubqueryAlias" else None


def _statement_name(kind: str) -> str:
    """`MergeIntoTable` -> `MERGE INTO`, `SetTableLocation` -> `SET TABLE LOCATION`."""
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", kind).upper()
    return "MERGE INTO" if kind == "MergeIntoTable" else words.replace(" STATEMENT", "")


def _refused(found, what: str) -> ConfigurationError:
    schema, name, _ = found
    return ConfigurationError(
        f"{schema}.{name} is a hudilite table: {what} is not supported on it; use INSERT, UPDATE or DELETE, a dbt "
        "model (a full refresh rebuilds it), or the hudilite CLI")


def _insert(catalog, plan, schema: str, name: str, table) -> None:
    rows = _query_rows(catalog.spark, plan.query())
    target_schema = table.schema()
    given = seq(plan.userSpecifiedCols())
    if plan.byName():
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
        rows = rows.select(*[
            (F.col(quote(by_lower[f.name.lower()])) if f.name.lower() in present else F.lit(None))
            .cast(f.dataType).alias(f.name)
            for f in target_schema.fields
        ])
    if not plan.overwrite():
        table.insert(rows)
    elif table.config.partition_fields:
        table.insert_overwrite(rows)
    else:
        table.insert_overwrite_table(rows)


def _query_rows(spark, query_plan) -> DataFrame:
    """The rows of an INSERT's query, as a DataFrame over the plan Spark parsed."""
    jvm = spark._jvm
    try:
        dataset = jvm.org.apache.spark.sql.classic.Dataset  # Spark 4
        jdf = dataset.ofRows(spark._jsparkSession, query_plan)
    except Exception:  # noqa: BLE001 - Spark 3.5 keeps Dataset in the parent package
        jdf = jvm.org.apache.spark.sql.Dataset.ofRows(spark._jsparkSession, query_plan)
    return DataFrame(jdf, spark)
