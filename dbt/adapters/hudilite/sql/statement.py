"""What a SQL statement does to the tables it names (`Statement`), whoever read it: Spark's
parser in a classic session (`plan_reader`), its text over Spark Connect (`text_reader`).
`reader` chooses between them; the router (`dml`) acts on what they give."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Set, Tuple


# Kinds the router acts on, named as Spark's plan names them.
INSERT = "InsertIntoStatement"
UPDATE = "UpdateTable"
DELETE = "DeleteFromTable"
CREATE_AS_SELECT = "CreateTableAsSelect"
REPLACE_AS_SELECT = "ReplaceTableAsSelect"
MULTI_INSERT = "MultiInsert"  # FROM s INSERT INTO a ... INSERT INTO b ...: refused on a hudilite table
QUERY = "Query"  # anything that changes no table: reads, DESCRIBE, SHOW, USE, SET, ...
EXECUTE_IMMEDIATE = "EXECUTE IMMEDIATE"  # `inner` is the statement it runs
RENAME = "RENAME"  # ALTER TABLE/VIEW t RENAME TO `new_name`
DROP_VIEW = "DROP VIEW"
DROP_TABLE = "DROP TABLE"
SCRIPT = "SQL SCRIPT"  # BEGIN ... END: `more_targets` holds every table a statement in it writes


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
    new_name: Optional[List[str]] = None  # ALTER ... RENAME TO: the new name
    text: Optional[str] = None  # the text read: the statement with each IDENTIFIER(...) replaced by its name
    unknown_target: Optional[str] = None  # it may write a table no reading can name: why (refused)
    # EXECUTE IMMEDIATE: its statement's expression and USING values ((name or None, SQL)), read from the text
    immediate: Optional[Tuple[str, List[Tuple[Optional[str], str]]]] = None
    inner: Optional["Statement"] = None  # the statement an EXECUTE IMMEDIATE runs, as read
    inner_sql: Optional[str] = None  # its text, USING values bound
    explain: bool = False  # EXPLAIN EXECUTE IMMEDIATE: Spark runs the statement while it explains it
    into: bool = False  # EXECUTE IMMEDIATE ... INTO variables
