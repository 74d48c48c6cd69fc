"""What Spark's own parser says a SQL statement is and which tables it names (a classic
session, whose JVM is in this process).

The parse is Spark's (comments, backticks, `USE`, catalog prefixes, CTEs and subqueries all
handled as Spark handles them); nothing is resolved against the catalog, so it is cheap and
works before any table is registered. What only Spark's analysis would resolve is resolved
before the parse, by `statement.read_statement`: `IDENTIFIER(<expr>)` and the statement an
`EXECUTE IMMEDIATE` runs are computed (a SELECT of the expression) and read in their place.
Spark's own analysis is not used to classify: analysing `EXECUTE IMMEDIATE` runs its statement
(Spark 4's ResolveExecuteImmediate executes it, under EXPLAIN too), and analysing a write to a
registration already fails (the read-only registration: UNSUPPORTED_INSERT.MULTI_PATH). A view
needs no resolving here: Spark writes through no view.
"""

from __future__ import annotations

import re
from typing import List, Optional, Set, Tuple

from . import statement as st

# Plan nodes that name a table or view, and the field that holds the name.
NAME_FIELDS = {"UnresolvedRelation": "multipartIdentifier", "UnresolvedTable": "multipartIdentifier",
               "UnresolvedTableOrView": "multipartIdentifier", "UnresolvedIdentifier": "nameParts"}
# Names a statement reads or acts on (not the name a CREATE gives).
_READ_NAMES = {"UnresolvedRelation", "UnresolvedTable", "UnresolvedTableOrView"}
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
    cannot tell them from tables). A plan's inner children are its subqueries unless its kind
    says otherwise (Spark's QueryPlan): the same subqueries are walked once, not twice at
    every level of nesting."""
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
        inner, subqueries = node.innerChildren(), node.subqueries()
        stack.extend(seq(inner))
        if subqueries.length() and not _same(inner, subqueries):
            stack.extend(seq(subqueries))
    return found


def _same(a, b) -> bool:
    """Two Scala sequences of plans are equal (the same plans, as a node's inner children
    and its subqueries are unless its kind says otherwise)."""
    try:
        return bool(a.equals(b))
    except Exception:  # noqa: BLE001 - walk both
        return False


def statement_from_plan(spark, sql: str) -> Optional[st.Statement]:
    plan = parse_plan(spark, sql)
    if plan is None:
        return None
    return _from_plan(spark, plan)


def _from_plan(spark, plan) -> st.Statement:
    names = names_read(plan)
    kind = plan.getClass().getSimpleName()
    if kind == "CompoundBody":  # a SQL script: BEGIN ... END
        return _script(spark, plan)
    if kind == "ExplainCommand":  # Spark plans the statement and runs none of it, but for one
        if plan.logicalPlan().getClass().getSimpleName() == "UnresolvedExecuteImmediate":
            return st.Statement(st.EXECUTE_IMMEDIATE, names, description="EXPLAIN EXECUTE IMMEDIATE", explain=True)
        return st.Statement(st.QUERY, names)
    if kind == "UnresolvedExecuteImmediate":  # `statement` reads what it runs
        return st.Statement(st.EXECUTE_IMMEDIATE, names, description="EXECUTE IMMEDIATE")
    if kind == "UnresolvedInsert":  # its table is an IDENTIFIER(...) left unresolved
        return st.Statement(st.INSERT, names, writes=True, description="INSERT",
                            unknown_target="its table is named by an expression")
    if kind == "Union":
        inserts = seq(plan.children())
        if inserts and all(i.getClass().getSimpleName() == st.INSERT for i in inserts):
            targets = [_target(i) for i in inserts]
            return st.Statement(st.MULTI_INSERT, names, targets[0], more_targets=targets[1:], writes=True,
                                description="an INSERT into several tables")
    if kind in _HARMLESS or (kind not in _WRITES and not _is_command(spark, plan)):
        return st.Statement(st.QUERY, names)
    if kind == "UnresolvedWith":
        inner = plan.child()
        if inner.getClass().getSimpleName() not in _WRITES:
            return st.Statement(st.QUERY, names)
        return st.Statement("InsertIntoStatement", names, _target(inner), writes=True, with_before=True)
    found = st.Statement(kind, names, _target(plan), writes=True, description=_statement_name(kind))
    if kind in (st.UPDATE, st.DELETE):
        table = plan.table()
        found.alias = table.alias() if table.getClass().getSimpleName() == "SubqueryAlias" else None
    elif kind == "RenameTable":  # ALTER TABLE/VIEW t RENAME TO u
        found.kind, found.new_name = st.RENAME, seq(plan.newName())
        found.description = "ALTER VIEW ... RENAME" if plan.isView() else "ALTER TABLE ... RENAME"
    elif kind in ("DropView", "DropTable"):
        found.kind = st.DROP_VIEW if kind == "DropView" else st.DROP_TABLE
    elif kind == st.INSERT and plan.replaceCriteriaOpt().isDefined():  # INSERT ... REPLACE WHERE / USING
        found.kind, found.description = "INSERT REPLACE", "INSERT ... REPLACE"
    elif kind == st.INSERT:
        found.overwrite, found.by_name = plan.overwrite(), plan.byName()
        found.columns = seq(plan.userSpecifiedCols())
        found.partition_clause = not plan.partitionSpec().isEmpty()
        found.query = lambda: _query_rows(spark, plan.query())
    elif kind in (st.CREATE_AS_SELECT, st.REPLACE_AS_SELECT):
        spec = plan.tableSpec()  # Spark 4: UnresolvedTableSpec(properties, provider, optionExpression, location, ...)
        provider = spec.provider()
        found.provider = provider.get() if provider.isDefined() else None
        found.if_not_exists = kind == st.CREATE_AS_SELECT and plan.ignoreIfExists()
        found.placement = (not plan.partitioning().isEmpty() or spec.location().isDefined()
                           or not spec.properties().isEmpty() or not spec.optionExpression().options().isEmpty())
        found.query = lambda: _query_rows(spark, plan.query())
    return found


def _script(spark, plan) -> st.Statement:
    """A SQL script read statement by statement (those in loops, branches and handlers too): it
    writes every table one of them writes. An EXECUTE IMMEDIATE in it runs a statement that
    cannot be read before the script runs (unless it is a literal): its table is unknown."""
    found = st.Statement(st.SCRIPT, set(), description="a SQL script (BEGIN ... END)")
    targets: List[List[str]] = []
    writes: List[str] = []
    for inner in _script_statements(plan):
        kind = inner.getClass().getSimpleName()
        if kind == "ExplainCommand":
            inner = inner.logicalPlan()
            kind = inner.getClass().getSimpleName()
        if kind == "UnresolvedExecuteImmediate":
            text = _literal_text(inner)
            parsed = parse_plan(spark, text) if text is not None else None
            if parsed is None:
                found.unknown_target = "a SQL script holding EXECUTE IMMEDIATE of a statement not written out"
                continue
            inner = parsed
        statement = _from_plan(spark, inner)
        found.names |= statement.names
        if statement.unknown_target:
            found.unknown_target = statement.unknown_target
        if statement.writes:
            writes.append(statement.description or _statement_name(statement.kind))
            targets += [t for t in [statement.target] + statement.more_targets if t]
    if writes or found.unknown_target:
        found.writes = True
        found.target, found.more_targets = (targets[0] if targets else None), targets[1:]
        found.description = f"a SQL script (BEGIN ... END) holding {', '.join(sorted(set(writes))) or 'EXECUTE IMMEDIATE'}"
    return found


def _script_statements(plan) -> list:
    """The plans of every statement a script holds: each `SingleStatement` among the fields of
    its compound statements (bodies, conditions, loops, handlers), walked whatever their kind.
    `seen` holds each visited proxy, not only its id: a freed proxy's id is reused by the next
    one made, which would then be skipped as seen (statements went missing at random)."""
    found, stack, seen = [], [plan], {}
    while stack:
        node = stack.pop()
        try:
            name = node.getClass().getName()
        except Exception:  # noqa: BLE001 - a Python value (str, bool, int) among the fields
            continue
        if name.endswith(".SingleStatement"):
            found.append(node.parsedPlan())
            continue
        if id(node) in seen:
            continue
        seen[id(node)] = node
        try:
            if name == "scala.Some":
                values = node.iterator()
            elif name.startswith("scala.collection.") and "Map" not in name:
                values = node.iterator()
            elif name.startswith("org.apache.spark.sql.catalyst.plans.logical."):
                values = node.productIterator()
            else:
                continue
        except Exception:  # noqa: BLE001 - not a collection or a case class: holds no statement
            continue
        while values.hasNext():
            stack.append(values.next())
    return found


def _literal_text(execute_immediate) -> Optional[str]:
    """The statement of `EXECUTE IMMEDIATE '<literal>'`, else None."""
    fields = execute_immediate.productIterator()
    while fields.hasNext():
        value = fields.next()
        try:
            if value.getClass().getSimpleName() == "Literal" and value.value() is not None:
                return str(value.value().toString())
        except Exception:  # noqa: BLE001 - not a JVM object
            continue
    return None


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


def _statement_name(kind: str) -> str:
    """`MergeIntoTable` -> `MERGE INTO`, `SetTableLocation` -> `SET TABLE LOCATION`."""
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", kind).upper()
    return "MERGE INTO" if kind == "MergeIntoTable" else words.replace(" STATEMENT", "")


def _query_rows(spark, query_plan):
    """The rows of an INSERT's (or CREATE ... AS's) query, as a DataFrame over the plan Spark parsed."""
    from pyspark.sql import DataFrame

    jvm = spark._jvm
    try:
        dataset = jvm.org.apache.spark.sql.classic.Dataset  # Spark 4
        jdf = dataset.ofRows(spark._jsparkSession, query_plan)
    except Exception:  # noqa: BLE001 - Spark 3.5 keeps Dataset in the parent package
        jdf = jvm.org.apache.spark.sql.Dataset.ofRows(spark._jsparkSession, query_plan)
    return DataFrame(jdf, spark)
