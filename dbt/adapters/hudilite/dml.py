"""SQL writes aimed at hudilite tables, carried out by the table-format core.

`INSERT INTO t [(cols)] <query>` appends (a commit); `INSERT OVERWRITE [TABLE] t <query>`
replaces the partitions present in the rows (the whole table when it is not partitioned).
`UPDATE t SET c = expr, ... [WHERE cond]` and `DELETE FROM t [WHERE cond]` rewrite the file
groups holding matched rows. MERGE and TRUNCATE on a hudilite table are refused with a clear
error instead of letting Spark write files the timeline does not know.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .table import ConfigurationError, quote

_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)"
_INSERT = re.compile(
    rf"^\s*insert\s+(?P<mode>into|overwrite)\s+(?:table\s+)?(?P<target>{_IDENT}\s*\.\s*{_IDENT})\s*"
    rf"(?:\((?P<columns>[^)]*)\))?\s*(?P<query>(?:values|select|with|from|\().*)$",
    re.IGNORECASE | re.DOTALL,
)
_OTHER_DML = re.compile(
    rf"^\s*(?P<verb>update|delete\s+from|merge\s+into|truncate\s+table|insert\s+(?:into|overwrite)(?:\s+table)?)\s+"
    rf"(?P<target>{_IDENT}\s*\.\s*{_IDENT})",
    re.IGNORECASE,
)


_LEADING_COMMENTS = re.compile(r"^(?:\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/))*", re.DOTALL)
_UPDATE = re.compile(
    rf"^\s*update\s+{_IDENT}\s*\.\s*{_IDENT}\s+(?:as\s+{_IDENT}\s+)?set\s+(?P<rest>.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_DELETE = re.compile(
    rf"^\s*delete\s+from\s+{_IDENT}\s*\.\s*{_IDENT}(?:\s+(?:as\s+)?(?!where\b){_IDENT})?"
    rf"(?:\s+where\s+(?P<where>.*?))?\s*;?\s*$",
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
    m = _UPDATE.match(sql)
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
    m = _DELETE.match(sql)
    if m is None:
        raise ConfigurationError(f"cannot read this DELETE statement: {sql.strip()[:200]}")
    return m["where"]


def _unquote(identifier: str) -> str:
    identifier = identifier.strip()
    if identifier.startswith("`"):
        return identifier[1:-1].replace("``", "`")
    return identifier


def _split_target(target: str) -> Tuple[str, str]:
    parts = re.findall(_IDENT, target)
    return _unquote(parts[0]), _unquote(parts[1])


def _columns(text: Optional[str]) -> List[str]:
    return [_unquote(c) for c in text.split(",")] if text and text.strip() else []


def route_statement(catalog, sql: str) -> Optional[DataFrame]:
    """Carry out `sql` if it writes a hudilite table and return an empty result; None when
    the statement is not for hudilite and Spark should run it."""
    sql = _LEADING_COMMENTS.sub("", sql)
    head = _OTHER_DML.match(sql)
    if head is None:
        return None
    schema, name = _split_target(head["target"])
    table = catalog.open(schema, name)
    if table is None:
        return None
    verb = head["verb"].lower()
    if verb == "update":
        table.update(*parse_update(sql))
        return _done(catalog, schema, name, table)
    if verb.startswith("delete"):
        where = parse_delete(sql)
        table.delete_where(where if where is not None else "true")
        return _done(catalog, schema, name, table)
    insert = _INSERT.match(sql)
    if insert is None:
        raise ConfigurationError(
            f"{schema}.{name} is a hudilite table: `{verb}` is not supported on it "
            "(use INSERT, UPDATE or DELETE, or a dbt model)"
        )
    rows = catalog.spark.sql(insert["query"])
    target_schema = table.schema()
    names = _columns(insert["columns"]) or ([f.name for f in target_schema.fields] if target_schema else rows.columns)
    if len(names) != len(rows.columns):
        raise ConfigurationError(
            f"insert into {schema}.{name}: {len(rows.columns)} values per row for {len(names)} columns ({', '.join(names)})"
        )
    rows = rows.toDF(*names)
    if target_schema is not None:  # columns left out are null; values take the table's types
        given = {n.lower() for n in names}
        unknown = sorted(given - {f.name.lower() for f in target_schema.fields})
        if unknown:
            raise ConfigurationError(f"insert into {schema}.{name}: no column(s) {', '.join(unknown)} in the table")
        rows = rows.select(
            *[
                (F.col(quote(f.name)) if f.name.lower() in given else F.lit(None)).cast(f.dataType).alias(f.name)
                for f in target_schema.fields
            ]
        )
    if insert["mode"].lower() == "into":
        table.insert(rows)
    elif table.config.partition_fields:
        table.insert_overwrite(rows)
    else:
        table.insert_overwrite_table(rows)
    return _done(catalog, schema, name, table)


def _done(catalog, schema: str, name: str, table) -> DataFrame:
    catalog.register(schema, name, table)
    return catalog.spark.createDataFrame([], "num_affected_rows long")
