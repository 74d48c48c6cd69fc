"""What Spark's own parser says a SQL statement is and which tables it names.

The parse is Spark's (comments, backticks, `USE`, catalog prefixes, CTEs and subqueries all
handled as Spark handles them); nothing is resolved against the catalog, so it is cheap and
works before any table is registered.
"""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

# Plan nodes that name a table or view, and the field that holds the name.
NAME_FIELDS = {"UnresolvedRelation": "multipartIdentifier", "UnresolvedTable": "multipartIdentifier",
               "UnresolvedTableOrView": "multipartIdentifier", "UnresolvedIdentifier": "nameParts"}
# Names a statement reads or acts on (not the name a CREATE gives).
_READ_NAMES = {"UnresolvedRelation", "UnresolvedTable", "UnresolvedTableOrView"}


def seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.length())]


def parse_plan(spark, sql: str):
    """Spark's unresolved plan of `sql`, or None when Spark cannot parse it (Spark then reports
    its own parse error when it runs the statement)."""
    try:
        return spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    except Exception:  # noqa: BLE001 - see above
        return None


def name_parts(node) -> Optional[List[str]]:
    """The table a plan node names, or None."""
    try:
        kind = node.getClass().getSimpleName()
    except Exception:  # noqa: BLE001 - a plain value among the node's fields
        return None
    if kind in NAME_FIELDS:
        return seq(getattr(node, NAME_FIELDS[kind])())
    if kind == "SubqueryAlias":
        return name_parts(node.child())
    return None


def names_read(plan) -> Set[Tuple[str, ...]]:
    """Every table or view name `plan` reads or acts on: in its children, CTE definitions,
    subqueries of expressions and an INSERT's target. CTE names are among them (the parse
    cannot tell them from tables)."""
    found: Set[Tuple[str, ...]] = set()
    stack = [plan] if plan is not None else []
    while stack:
        node = stack.pop()
        kind = node.getClass().getSimpleName()
        if kind in _READ_NAMES:
            found.add(tuple(seq(getattr(node, NAME_FIELDS[kind])())))
            continue
        if kind == "InsertIntoStatement":
            stack.append(node.table())
        stack.extend(seq(node.children()))
        stack.extend(seq(node.innerChildren()))
        stack.extend(seq(node.subqueries()))
    return found
