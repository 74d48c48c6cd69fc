"""What a SQL statement does to the tables it names, read once, whoever parses it.

A classic SparkSession reads statements with Spark's own parser (`spark_plan`); a Spark
Connect session has no parser on the client, so its statements are read from their text
(`sql_text`). Both give a `Statement`, and one router (`dml`) acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Set, Tuple

from .table.environment import is_connect

# Kinds the router acts on, named as Spark's plan names them.
INSERT = "InsertIntoStatement"
UPDATE = "UpdateTable"
DELETE = "DeleteFromTable"
CREATE_AS_SELECT = "CreateTableAsSelect"
REPLACE_AS_SELECT = "ReplaceTableAsSelect"
MULTI_INSERT = "MultiInsert"  # FROM s INSERT INTO a ... INSERT INTO b ...: refused on a hudilite table
QUERY = "Query"  # anything that changes no table: reads, DESCRIBE, SHOW, USE, SET, ...


@dataclass
class Statement:
    kind: str
    # Every table or view name it reads or acts on, as written (CTE names may be among them).
    names: Set[Tuple[str, ...]] = field(default_factory=set)
    target: Optional[List[str]] = None  # the table it writes or changes the entry of
    more_targets: List[List[str]] = field(default_factory=list)  # `FROM s INSERT INTO a ... INSERT INTO b ...`
    writes: bool = False  # it would change `target`'s rows or its catalog entry
    description: str = ""  # what a refusal calls it: "MERGE INTO", "TRUNCATE TABLE", ...
    with_before: bool = False  # `WITH ... INSERT`: the CTEs sit before the write
    alias: Optional[str] = None  # UPDATE / DELETE FROM t [AS] alias
    overwrite: bool = False  # INSERT OVERWRITE
    by_name: bool = False  # INSERT ... BY NAME
    columns: List[str] = field(default_factory=list)  # INSERT INTO t (columns)
    partition_clause: bool = False  # INSERT ... PARTITION (...)
    provider: Optional[str] = None  # CREATE TABLE ... USING provider
    if_not_exists: bool = False
    placement: bool = False  # CREATE TABLE with PARTITIONED BY, LOCATION, OPTIONS or TBLPROPERTIES
    query: Optional[Callable[[], object]] = None  # the rows an INSERT or CREATE ... AS writes (a DataFrame)


def read_statement(spark, sql: str) -> Optional[Statement]:
    """The statement `sql` is, or None when it cannot be read (Spark then reports its own
    error when it runs it)."""
    if is_connect(spark):
        from .sql_text import statement_from_text

        return statement_from_text(sql, spark.sql)
    from .spark_plan import statement_from_plan

    return statement_from_plan(spark, sql)
