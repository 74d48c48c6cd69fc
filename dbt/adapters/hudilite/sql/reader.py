"""Reading a statement, whoever parses it.

A classic SparkSession reads statements with Spark's own parser (`plan_reader`); a Spark
Connect session has no parser on the client, so its statements are read from their text
(`text_reader`). Both give a `Statement`, and one router (`dml`) acts on it.

Two things Spark resolves only when it runs a statement are resolved here first, the same
way in both modes, by evaluating what Spark would evaluate (constant expressions and session
variables, in a `SELECT` that changes nothing):
- `IDENTIFIER(<expr>)`: the name it stands for replaces it in the text that is read, so a
  name built from strings or a variable is the table it names;
- `EXECUTE IMMEDIATE <expr> [INTO ...] [USING ...]`: the statement it runs (its `USING`
  values bound into the text, as Spark binds them) is read as that statement, and the router
  acts on it as it would on the statement written out.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from .text_reader import pieces_of, significant, statement_from_text, string_value, tokens
from .plan_reader import statement_from_plan
from .statement import EXECUTE_IMMEDIATE, Statement
from ..table import ConfigurationError, is_connect


_MAX_DEPTH = 8  # EXECUTE IMMEDIATE of an EXECUTE IMMEDIATE of ...


def read_statement(spark, sql: str, depth: int = 0) -> Optional[Statement]:
    """The statement `sql` is, or None when it cannot be read (Spark then reports its own
    error when it runs it)."""
    text = expand_identifiers(spark, sql)
    if is_connect(spark):
        found = statement_from_text(text, spark.sql, lambda: double_quoted_identifiers(spark))
    else:
        found = statement_from_plan(spark, text)
        if found is not None and found.kind == EXECUTE_IMMEDIATE:  # its parts, from the text
            parts = statement_from_text(text, spark.sql)
            if parts is None or parts.immediate is None:
                raise ConfigurationError(f"cannot read this EXECUTE IMMEDIATE statement: {sql.strip()[:200]}")
            found.immediate, found.into = parts.immediate, parts.into
    if found is None:
        return None
    found.text = text
    if found.kind == EXECUTE_IMMEDIATE:
        _read_immediate(spark, found, depth)
    return found


def double_quoted_identifiers(spark) -> bool:
    """`"a"."b"` names a table in this session (spark.sql.ansi.doubleQuotedIdentifiers)."""
    return str(spark.conf.get("spark.sql.ansi.doubleQuotedIdentifiers", "false")).strip().lower() == "true"


def evaluate(spark, expression: str, what: str) -> object:
    """The value of a constant SQL expression (literals, session variables), as Spark computes it."""
    try:
        return spark.sql(f"SELECT ({expression}) AS value").collect()[0][0]
    except Exception as err:  # noqa: BLE001 - Spark's reason, named
        raise ConfigurationError(f"cannot tell what {what} is: {_first_line(err)}") from None


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


# ---- IDENTIFIER(...) ----------------------------------------------------------------------------
def expand_identifiers(spark, sql: str) -> str:
    """`sql` with each `IDENTIFIER(<expr>)` replaced by the backticked name its value is (Spark
    reads the value as a dotted name), so that every reading sees the table it names."""
    if "identifier" not in sql.lower():
        return sql
    pieces = pieces_of(sql)
    keep = significant(pieces)
    out, last, j = [], 0, 0
    while j < len(keep):
        kind, text, start = pieces[keep[j]]
        if kind == "word" and text.lower() == "identifier" and j + 1 < len(keep) and pieces[keep[j + 1]][1] == "(":
            depth, k = 0, j + 1
            while k < len(keep):
                mark = pieces[keep[k]][1] if pieces[keep[k]][0] == "other" else ""
                depth += {"(": 1, ")": -1}.get(mark, 0)
                if depth == 0:
                    break
                k += 1
            if k < len(keep):
                inner_start = pieces[keep[j + 1]][2] + 1
                close = pieces[keep[k]][2]
                expression = sql[inner_start:close]
                out.append(sql[last:start])
                out.append(quote_name(name_parts(spark, _identifier_value(spark, expression, pieces, keep[j + 2:k]))))
                last, j = close + 1, k + 1
                continue
        j += 1
    out.append(sql[last:])
    return "".join(out)


def _identifier_value(spark, expression: str, pieces, inside) -> str:
    if len(inside) == 1 and pieces[inside[0]][0] == "string" and pieces[inside[0]][1].startswith("'"):
        return string_value(pieces[inside[0]][1])
    value = evaluate(spark, f"CAST(({expression}) AS STRING)", f"IDENTIFIER({expression.strip()})")
    if value is None:
        raise ConfigurationError(f"IDENTIFIER({expression.strip()}) is null")
    return value


def name_parts(spark, value: str) -> List[str]:
    """The parts of a dotted name as Spark reads IDENTIFIER's string: `a.b`, `` `a.b`.c ``."""
    toks = tokens(value)
    parts: List[str] = []
    for i, token in enumerate(toks):
        if i % 2 == 0 and token.kind in ("word", "quoted"):
            parts.append(token.value)
        elif i % 2 == 1 and token.text == ".":
            continue
        else:
            raise ConfigurationError(f"IDENTIFIER('{value}') is not a name")
    if not parts or len(toks) % 2 == 0:
        raise ConfigurationError(f"IDENTIFIER('{value}') is not a name")
    return parts


def quote_name(parts: List[str]) -> str:
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


# ---- EXECUTE IMMEDIATE --------------------------------------------------------------------------
def _read_immediate(spark, found: Statement, depth: int) -> None:
    """Read the statement an EXECUTE IMMEDIATE runs into `found.inner`, and take its targets."""
    expression, args = found.immediate
    what = "EXPLAIN EXECUTE IMMEDIATE" if found.explain else "EXECUTE IMMEDIATE"
    if depth >= _MAX_DEPTH:
        raise ConfigurationError(f"{what} nested more than {_MAX_DEPTH} deep")
    statement_text = _statement_text(spark, expression)
    if statement_text is None:  # Spark cannot compute it either: it reports its own error
        return
    try:
        values = bound_values(spark, args)
        inner_sql = bind_parameters(statement_text, values)
        inner = read_statement(spark, inner_sql, depth + 1)
    except ConfigurationError as err:
        found.writes, found.unknown_target = True, str(err)
        found.description = what
        return
    if inner is None:
        return
    found.inner, found.inner_sql = inner, inner_sql
    found.names = set(inner.names)
    found.writes, found.target, found.more_targets = inner.writes, inner.target, list(inner.more_targets)
    found.unknown_target = inner.unknown_target
    found.description = f"{what} of {inner.description or inner.kind}"


def _statement_text(spark, expression: str) -> Optional[str]:
    pieces = pieces_of(expression)
    keep = significant(pieces)
    if len(keep) == 1 and pieces[keep[0]][0] == "string" and pieces[keep[0]][1].startswith("'"):
        return string_value(pieces[keep[0]][1])
    try:
        value = evaluate(spark, f"CAST(({expression}) AS STRING)", "the statement of EXECUTE IMMEDIATE")
    except ConfigurationError:
        return None
    return value


def bound_values(spark, args: List[Tuple[Optional[str], str]]) -> List[Tuple[Optional[str], str]]:
    """Each USING value as a SQL literal of its type (as Spark binds it), named or positional."""
    if not args:
        return []
    select = ", ".join(f"({expression}) AS `v{i}`" for i, (_, expression) in enumerate(args))
    try:
        frame = spark.sql(f"SELECT {select}")
        row = frame.collect()[0]
    except Exception as err:  # noqa: BLE001 - Spark's reason, named
        raise ConfigurationError("cannot tell what the USING values of EXECUTE IMMEDIATE are: "
                                 f"{_first_line(err)}") from None
    return [(name, sql_literal(row[i], frame.schema.fields[i].dataType)) for i, (name, _) in enumerate(args)]


_CAST_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "date")


def sql_literal(value, data_type) -> str:
    type_name = data_type.simpleString()
    if type_name == "string":
        if value is None:
            return "CAST(NULL AS STRING)"
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if type_name in _CAST_TYPES or type_name.startswith("decimal"):
        if value is None:
            return f"CAST(NULL AS {type_name})"
        text = (repr(value) if isinstance(value, float) else str(value).lower() if isinstance(value, bool)
                else str(value))
        return f"CAST('{text}' AS {type_name})"
    if type_name == "void":
        return "NULL"
    raise ConfigurationError(f"EXECUTE IMMEDIATE ... USING a value of type {type_name}: hudilite's router binds "
                             "strings, numbers, booleans and dates; write the value into the statement instead")


def bind_parameters(sql: str, values: List[Tuple[Optional[str], str]]) -> str:
    """`sql` with its parameter markers (`?` in turn, `:name`) replaced by the values bound to them."""
    if not values:
        return sql
    positional = [v for n, v in values if n is None]
    named = {n.lower(): v for n, v in values if n is not None}
    pieces = pieces_of(sql)
    out, used, i = [], 0, 0
    previous = ""
    while i < len(pieces):
        kind, text, _ = pieces[i]
        if kind == "other" and text == "?" and positional:
            if used >= len(positional):
                raise ConfigurationError("EXECUTE IMMEDIATE: more ? markers than USING values")
            out.append(positional[used])
            used += 1
        elif (kind == "other" and text == ":" and previous != ":" and i + 1 < len(pieces)
              and pieces[i + 1][0] == "word" and pieces[i + 1][1].lower() in named):
            out.append(named[pieces[i + 1][1].lower()])
            i += 1
        else:
            out.append(text)
        if kind not in ("space", "comment"):
            previous = text
        i += 1
    return "".join(out)
