"""SQL writes aimed at hudilite tables, carried out by the table-format core.

`INSERT INTO t [(cols)] <query>` appends (a commit); `INSERT OVERWRITE [TABLE] t <query>`
replaces the partitions present in the rows (the whole table when it is not partitioned).
Other DML on a hudilite table is refused with a clear error instead of letting Spark write
files the timeline does not know.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

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
    head = _OTHER_DML.match(sql)
    if head is None:
        return None
    schema, name = _split_target(head["target"])
    table = catalog.open(schema, name)
    if table is None:
        return None
    insert = _INSERT.match(sql)
    if insert is None:
        raise ValueError(
            f"{schema}.{name} is a hudilite table: `{head['verb'].lower()}` is not supported on it "
            "(use INSERT INTO / INSERT OVERWRITE ... SELECT or VALUES, or a dbt model)"
        )
    rows = catalog.spark.sql(insert["query"])
    target_schema = table.schema()
    names = _columns(insert["columns"]) or ([f.name for f in target_schema.fields] if target_schema else rows.columns)
    if len(names) != len(rows.columns):
        raise ValueError(
            f"insert into {schema}.{name}: {len(rows.columns)} values per row for {len(names)} columns ({', '.join(names)})"
        )
    rows = rows.toDF(*names)
    if target_schema is not None:  # columns left out are null; values take the table's types
        given = {n.lower() for n in names}
        unknown = sorted(given - {f.name.lower() for f in target_schema.fields})
        if unknown:
            raise ValueError(f"insert into {schema}.{name}: no column(s) {', '.join(unknown)} in the table")
        rows = rows.select(
            *[
                (F.col(f"`{f.name}`") if f.name.lower() in given else F.lit(None)).cast(f.dataType).alias(f.name)
                for f in target_schema.fields
            ]
        )
    if insert["mode"].lower() == "into":
        table.insert(rows)
    elif table.config.partition_fields:
        table.insert_overwrite(rows)
    else:
        table.insert_overwrite_table(rows)
    catalog.register(schema, name, table)
    return catalog.spark.createDataFrame([], "num_affected_rows long")
