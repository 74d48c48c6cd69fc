"""What a SQL statement is and which tables it names, read from its text (Spark Connect).

A Spark Connect client has no SQL parser, and sending a statement to the server runs it, so
statements are read here from their tokens: comments, quoted strings, backticks, catalog
prefixes and parenthesised subqueries are handled as Spark handles them. The reading is of
the statement's head (what it is, which table it writes, its INSERT column list or CREATE
options); the query inside it is sent to Spark as its own text. The names a statement reads
are over-counted on purpose (every dotted name that is not a function call): the catalog
registers only those that are tables or views on storage, so a column that is not one costs a
lookup, and a table is never missed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Tuple

from . import statement as st

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>--(?:\\\n|[^\r\n])*)
  | (?P<string>[rR]'[^']*(?:'|\Z)|[rR]"[^"]*(?:"|\Z)|'(?:[^'\\]|\\.|'')*(?:'|\Z)|"(?:[^"\\]|\\.|"")*(?:"|\Z))
  | (?P<quoted>`(?:[^`]|``)*(?:`|\Z))
  | (?P<word>[^\W]+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
_QUERY_STARTS = {"select", "with", "values", "from", "table", "("}
_PLACEMENT = {"partitioned", "clustered", "location", "options", "tblproperties"}


@dataclass
class Token:
    kind: str  # word, quoted, string or other (one character)
    text: str
    start: int

    @property
    def value(self) -> str:
        """An identifier's name: backticks (or, under spark.sql.ansi.doubleQuotedIdentifiers,
        double quotes) removed."""
        if self.kind != "quoted":
            return self.text
        mark = self.text[0]
        return self.text[1:-1].replace(mark + mark, mark)

    @property
    def keyword(self) -> str:
        """Lower-cased text of a bare word or a punctuation mark; '' for anything quoted."""
        return self.text.lower() if self.kind in ("word", "other") else ""


def _pieces(sql: str) -> Iterator[Tuple[str, str, int]]:
    """(kind, text, start) of everything in `sql`, spaces and comments too, as Spark's lexer
    cuts it: `--` comments run to the end of the line (and on over a `\\` at its end),
    bracketed comments nest, `r'...'` strings have no escapes."""
    i = 0
    while i < len(sql):
        if sql.startswith("/*", i):
            end = _comment_end(sql, i)
            yield "comment", sql[i:end], i
            i = end
            continue
        m = _TOKEN.match(sql, i)
        yield m.lastgroup, m.group(), i
        i = m.end()


def tokens(sql: str, double_quoted: bool = False) -> List[Token]:
    """The tokens of `sql`; with `double_quoted` (spark.sql.ansi.doubleQuotedIdentifiers), a
    `"..."` is a quoted identifier, as a backticked one is."""
    found = []
    for kind, text, start in _pieces(sql):
        if kind in ("space", "comment"):
            continue
        if double_quoted and kind == "string" and text.startswith('"'):
            kind = "quoted"
        found.append(Token(kind, text, start))
    return found


def pieces_of(sql: str) -> List[Tuple[str, str, int]]:
    """(kind, text, start) of everything in `sql`, spaces and comments too."""
    return list(_pieces(sql))


def significant(pieces: List[Tuple[str, str, int]]) -> List[int]:
    """The indexes of the pieces that are not spaces or comments."""
    return [i for i, (kind, _, _) in enumerate(pieces) if kind not in ("space", "comment")]


_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def string_value(text: str) -> str:
    """The value of one Spark string literal: `'it''s'`, `'a\\'b'`, `r'raw\\n'`."""
    if text[:1] in "rR":
        return text[2:-1]
    mark, body = text[0], text[1:-1]
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == mark and i + 1 < len(body) and body[i + 1] == mark:
            out.append(mark)
            i += 2
        elif ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2:i + 6]):
                out.append(chr(int(body[i + 2:i + 6], 16)))
                i += 6
                continue
            if re.fullmatch(r"[0-3][0-7][0-7]", body[i + 1:i + 4]):
                out.append(chr(int(body[i + 1:i + 4], 8)))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def strip_comments(sql: str) -> str:
    """`sql` with each comment a space."""
    return "".join(" " if kind == "comment" else text for kind, text, _ in _pieces(sql))


def _comment_end(sql: str, i: int) -> int:
    depth = 0
    while i < len(sql):
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return i


class _Reader:
    def __init__(self, sql: str, double_quoted: Callable[[], bool] = lambda: False):
        self.sql = sql
        self.tokens = tokens(sql)
        if any(t.kind == "string" and t.text.startswith('"') for t in self.tokens) and double_quoted():
            self.tokens = tokens(sql, double_quoted=True)
        self.i = 0

    def peek(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.tokens[j].keyword if j < len(self.tokens) else ""

    def accept(self, *words: str) -> bool:
        """Step over `words` when they come next."""
        if all(self.peek(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def name(self) -> Optional[List[str]]:
        """A dotted name (`a`, `s.t`, ``spark_catalog.`s`.t``) starting here, stepped over."""
        parts: List[str] = []
        while self.i < len(self.tokens) and self.tokens[self.i].kind in ("word", "quoted"):
            parts.append(self.tokens[self.i].value)
            self.i += 1
            if self.peek() != "." or self.i + 1 >= len(self.tokens):
                break
            self.i += 1
        return parts or None

    def skip_parentheses(self) -> None:
        """Step over a balanced `( ... )` starting here."""
        depth = 0
        while self.i < len(self.tokens):
            depth += {"(": 1, ")": -1}.get(self.peek(), 0)
            self.i += 1
            if depth == 0:
                return

    def rest(self) -> str:
        """The text from the current token on."""
        return self.sql[self.tokens[self.i].start:] if self.i < len(self.tokens) else ""

    def at_query(self) -> bool:
        return self.peek() in _QUERY_STARTS


def names_in(toks: List[Token]) -> set:
    """Every dotted name that is not a function call (see the module's note); `INTO t (a, b)`
    is a table and its columns."""
    found, i = set(), 0
    while i < len(toks):
        if toks[i].kind not in ("word", "quoted") or (i and toks[i - 1].keyword == "."):
            i += 1
            continue
        parts, j = [toks[i].value], i + 1
        while j + 1 < len(toks) and toks[j].keyword == "." and toks[j + 1].kind in ("word", "quoted"):
            parts.append(toks[j + 1].value)
            j += 2
        call = j < len(toks) and toks[j].keyword == "(" and not (i and toks[i - 1].keyword in ("into", "table"))
        if not call and len(parts) <= 3:
            found.add(tuple(parts))
        i = j
    return found


def statement_from_text(sql: str, run_query: Callable[[str], object],
                        double_quoted: Callable[[], bool] = lambda: False) -> Optional[st.Statement]:
    """The statement `sql` is; `run_query(text)` makes the DataFrame of a query inside it;
    `double_quoted()` tells whether `"a"."b"` is a name (asked only when the text holds one)."""
    reader = _Reader(sql, double_quoted)
    if not reader.tokens:
        return None
    names = names_in(reader.tokens)
    head = reader.peek()
    if head == "begin" or (reader.peek(1) == ":" and reader.peek(2) == "begin"):
        return _script(reader, names)
    if head == "execute" and reader.peek(1) == "immediate":
        return _execute_immediate(reader, names)
    if head == "insert":
        return _insert(reader, names, run_query)
    if head == "with":
        return _with(reader, names, run_query)
    if head == "from":
        return _from_insert(reader, names, run_query)
    if head in ("update", "delete"):
        return _update_or_delete(reader, names)
    if head == "create":
        return _create(reader, names, run_query)
    if head == "explain":
        return _explain(reader, names, run_query)
    if reader.accept("load", "data"):  # LOAD DATA [LOCAL] INPATH 'p' [OVERWRITE] INTO TABLE t
        while reader.i < len(reader.tokens) and not reader.accept("into", "table"):
            reader.i += 1
        return st.Statement("LOAD DATA", names, reader.name(), writes=True, description="LOAD DATA")
    for words, what in _WRITES:
        if reader.accept(*words):
            if words == ("alter",) and not (reader.accept("table") or reader.accept("view")):
                return st.Statement(st.QUERY, names)
            view = words == ("alter",) and reader.tokens[reader.i - 1].keyword == "view"
            if words[0] == "drop":
                reader.accept("if", "exists")
            found = st.Statement(what, names, reader.name(), writes=True, description=what)
            if words == ("alter",) and reader.accept("rename", "to"):
                found.kind, found.new_name = st.RENAME, reader.name()
                found.description = "ALTER VIEW ... RENAME" if view else "ALTER TABLE ... RENAME"
            return found
    return _unread_write(reader, names)


def _unread_write(reader: _Reader, names: set) -> st.Statement:
    """A statement read as a query, unless a write's keyword stands at its top level (a SQL
    script's BEGIN ... END, a shape this reader does not know): then a write of every table it
    names, so one that is a hudilite table is refused rather than left to Spark's writer."""
    depth = 0
    for token in reader.tokens:
        depth += {"(": 1, ")": -1}.get(token.keyword, 0)
        if depth == 0 and token.keyword in _WRITE_WORDS:
            targets = sorted(list(n) for n in names)
            return st.Statement("UNREAD WRITE", names, targets[0] if targets else None, more_targets=targets[1:],
                                writes=True, description=f"this statement ({token.keyword.upper()} where it was not read)")
    return st.Statement(st.QUERY, names)


_WRITE_WORDS = {"insert", "merge", "update", "delete", "truncate", "drop", "alter", "load"}
# In a SQL script, words that begin a statement that may change a table or its entry.
_SCRIPT_WRITE_WORDS = _WRITE_WORDS | {"create", "replace", "msck", "repair", "comment"}


def _script(reader: _Reader, names: set) -> st.Statement:
    """A SQL script (`[label:] BEGIN ... END`): Spark runs its statements itself, so it is read
    as a write of every table it names when any statement in it may write (each name a
    possible target); an EXECUTE IMMEDIATE in it runs a statement no reading can name."""
    toks = reader.tokens
    words = {t.keyword for i, t in enumerate(toks)  # not a function's name: replace(...)
             if t.kind == "word" and not (i + 1 < len(toks) and toks[i + 1].keyword == "(")}
    found = st.Statement(st.SCRIPT, names, description="a SQL script (BEGIN ... END)")
    if "execute" in words and "immediate" in words:
        found.writes, found.unknown_target = True, "a SQL script holding EXECUTE IMMEDIATE"
    written = sorted(words & _SCRIPT_WRITE_WORDS)
    if written:
        targets = sorted(list(n) for n in names)
        found.writes = True
        found.target, found.more_targets = (targets[0] if targets else None), targets[1:]
        found.description = f"a SQL script (BEGIN ... END) holding {', '.join(w.upper() for w in written)}"
    return found


# Statements (by their first words) that change the table they name; anything not here or
# above reads (SELECT, DESCRIBE, SHOW, CACHE, ANALYZE, REFRESH, USE, SET, ...).
_WRITES: List[Tuple[Tuple[str, ...], str]] = [
    (("merge", "into"), "MERGE INTO"), (("merge", "with", "schema", "evolution", "into"), "MERGE INTO"),
    (("truncate", "table"), "TRUNCATE TABLE"), (("drop", "table"), "DROP TABLE"),
    (("drop", "view"), "DROP VIEW"), (("alter",), "ALTER TABLE"), (("msck", "repair", "table"), "REPAIR TABLE"),
    (("repair", "table"), "REPAIR TABLE"), (("comment", "on", "table"), "COMMENT ON TABLE"),
]


# EXPLAIN's modes in Spark's grammar (LOGICAL parses, and Spark then refuses it). Spark has no
# EXPLAIN ANALYZE: `EXPLAIN ANALYZE TABLE t ...` explains an ANALYZE, which does not run.
_EXPLAIN_MODES = {"extended", "codegen", "cost", "formatted", "logical"}


def _explain(reader: _Reader, names: set, run_query) -> st.Statement:
    """`EXPLAIN [mode] <statement>`: Spark plans the statement and runs none of it (an INSERT,
    a MERGE, a DROP, a CREATE ... AS explained change nothing), so it reads the tables it names.
    The one exception is `EXECUTE IMMEDIATE`: Spark runs the statement it holds while it
    analyses it, under EXPLAIN too, so `EXPLAIN EXECUTE IMMEDIATE ...` is read as the EXECUTE
    IMMEDIATE on its own is."""
    reader.accept("explain")
    if reader.peek() in _EXPLAIN_MODES:
        reader.i += 1
    if reader.peek() == "execute" and reader.peek(1) == "immediate":
        found = _execute_immediate(reader, names)
        found.explain = True
        return found
    return st.Statement(st.QUERY, names)


def _execute_immediate(reader: _Reader, names: set) -> st.Statement:
    """`EXECUTE IMMEDIATE <expr> [INTO var, ...] [USING expr [AS name], ...]`: the parts, as text.
    What the statement it runs is, is read once the expression and values are computed
    (`statement.read_statement`)."""
    reader.accept("execute", "immediate")
    start, depth, into, using = reader.i, 0, None, None
    for j in range(reader.i, len(reader.tokens)):
        word = reader.tokens[j].keyword
        depth += {"(": 1, ")": -1}.get(word, 0)
        if depth == 0 and word == "into" and into is None and using is None:
            into = j
        elif depth == 0 and word == "using" and using is None:
            using = j
    end = min(x for x in (into, using, len(reader.tokens)) if x is not None)
    expression = _text_between(reader, start, end)
    args: List[Tuple[Optional[str], str]] = []
    if using is not None:
        for arg in _split_commas(reader, using + 1, len(reader.tokens)):
            name = None
            if len(arg) >= 3 and arg[-2].keyword == "as" and arg[-1].kind in ("word", "quoted"):
                name, arg = arg[-1].value, arg[:-2]
            elif len(arg) >= 2 and arg[-1].kind in ("word", "quoted") and (
                    arg[-2].kind == "string" or arg[-2].text == ")" or arg[-2].text[:1].isdigit()):
                name, arg = arg[-1].value, arg[:-1]
            args.append((name, reader.sql[arg[0].start:arg[-1].start + len(arg[-1].text)] if arg else ""))
    found = st.Statement(st.EXECUTE_IMMEDIATE, names, description="EXECUTE IMMEDIATE")
    found.immediate, found.into = (expression, args), into is not None
    return found


def _text_between(reader: _Reader, start: int, end: int) -> str:
    if start >= end:
        return ""
    last = reader.tokens[end - 1]
    return reader.sql[reader.tokens[start].start:last.start + len(last.text)]


def _split_commas(reader: _Reader, start: int, end: int) -> List[List[Token]]:
    parts, current, depth = [], [], 0
    for token in reader.tokens[start:end]:
        depth += {"(": 1, ")": -1}.get(token.keyword, 0)
        if depth == 0 and token.keyword == ";":
            break
        if depth == 0 and token.keyword == ",":
            parts.append(current)
            current = []
            continue
        current.append(token)
    if current:
        parts.append(current)
    return parts


def _insert(reader: _Reader, names: set, run_query) -> st.Statement:
    reader.accept("insert")
    reader.accept("with", "schema", "evolution")
    found = st.Statement(st.INSERT, names, writes=True, description="INSERT")
    if reader.accept("overwrite"):
        found.overwrite = True
    else:
        reader.accept("into")
    reader.accept("table")
    found.target = reader.name()
    if reader.peek() == "partition":
        found.partition_clause = True
        reader.i += 1
        reader.skip_parentheses()
    reader.accept("if", "not", "exists")
    if reader.accept("by", "name"):
        found.by_name = True
    elif reader.peek() == "(" and reader.peek(1) not in _QUERY_STARTS:
        reader.i += 1
        while reader.i < len(reader.tokens) and reader.peek() != ")":
            if reader.peek() != ",":
                found.columns.append(reader.tokens[reader.i].value)
            reader.i += 1
        reader.i += 1
    if reader.peek() == "replace":
        found.kind, found.description = "INSERT REPLACE", "INSERT ... REPLACE"
        return found
    query = reader.rest()
    found.query = lambda: run_query(query)
    return found


def _with(reader: _Reader, names: set, run_query) -> st.Statement:
    """`WITH a AS (...), b AS (...) <statement>`: a query, or a write with its CTEs before it."""
    reader.accept("with")
    reader.accept("recursive")
    while reader.i < len(reader.tokens):
        reader.name()
        if reader.peek() == "(" and reader.peek(1) not in _QUERY_STARTS:  # a column list
            reader.skip_parentheses()
        reader.accept("as")  # Spark does not require it
        reader.skip_parentheses()
        if not reader.accept(","):
            break
    if reader.peek() == "insert":
        inner = _insert(reader, names, run_query)
    elif reader.peek() == "from":
        inner = _from_insert(reader, names, run_query, start=reader.i)
    else:
        return _unread_write(reader, names)
    inner.with_before = inner.writes
    return inner


def _from_insert(reader: _Reader, names: set, run_query, start: int = 0) -> st.Statement:
    """`FROM s [SELECT ...]`: a query; `FROM s INSERT INTO t SELECT ...`: an INSERT of
    `FROM s SELECT ...`; with several INSERTs, a write of all their tables."""
    inserts, depth = [], 0
    for j, token in enumerate(reader.tokens[start:], start):
        depth += {"(": 1, ")": -1}.get(token.keyword, 0)
        if depth == 0 and token.keyword == "insert":
            inserts.append(j)
    if not inserts:
        return st.Statement(st.QUERY, names)
    source = reader.sql[reader.tokens[start].start:reader.tokens[inserts[0]].start]
    statements = []
    for j in inserts:
        reader.i = j
        statements.append(_insert(reader, names, lambda query: run_query(f"{source} {query}")))
    if len(statements) == 1:
        return statements[0]
    return st.Statement(st.MULTI_INSERT, names, statements[0].target, more_targets=[s.target for s in statements[1:]],
                        writes=True, description="an INSERT into several tables")


def _update_or_delete(reader: _Reader, names: set) -> st.Statement:
    delete = reader.accept("delete")
    if delete:
        reader.accept("from")
    else:
        reader.accept("update")
    found = st.Statement(st.DELETE if delete else st.UPDATE, names, reader.name(), writes=True,
                         description="DELETE" if delete else "UPDATE")
    reader.accept("as")
    if reader.i < len(reader.tokens) and reader.peek() not in ("set", "where", ";") and \
            reader.tokens[reader.i].kind in ("word", "quoted"):
        found.alias = reader.tokens[reader.i].value
    return found


def _create(reader: _Reader, names: set, run_query) -> st.Statement:
    reader.accept("create")
    replace = reader.accept("or", "replace")
    temporary = False
    while reader.peek() in ("global", "temporary", "temp", "external"):
        temporary = temporary or reader.peek() != "external"
        reader.i += 1
    if reader.accept("view"):
        if temporary:  # a session's own name, in no schema: no table of ours
            return st.Statement(st.QUERY, names)
        reader.accept("if", "not", "exists")
        return st.Statement("CREATE VIEW", names, reader.name(), writes=True,
                            description="CREATE OR REPLACE VIEW" if replace else "CREATE VIEW")
    if not reader.accept("table"):
        return st.Statement(st.QUERY, names)  # a schema, a function, ...: names no table
    found = st.Statement(st.REPLACE_AS_SELECT if replace else st.CREATE_AS_SELECT, names, writes=True)
    found.if_not_exists = reader.accept("if", "not", "exists")
    found.target = reader.name()
    columns, after_name = False, reader.i
    while reader.i < len(reader.tokens):
        word = reader.peek()
        if word == "(" and reader.peek(1) not in _QUERY_STARTS:
            columns = columns or reader.i == after_name  # a column list: with a query, Spark refuses it itself
            reader.skip_parentheses()
        elif word in _QUERY_STARTS or (word == "as" and reader.peek(1) in _QUERY_STARTS):
            reader.accept("as")  # Spark does not require it
            query = reader.rest()
            found.query = None if columns else (lambda: run_query(query))
            break
        elif word == "using":
            reader.i += 1
            provider = reader.name()
            found.provider = ".".join(provider) if provider else None
        else:
            found.placement = found.placement or word in _PLACEMENT
            reader.i += 1
    if found.query is None:  # CREATE TABLE without AS: a table of its own
        found.kind = "REPLACE TABLE" if replace else "CREATE TABLE"
    found.description = ("REPLACE TABLE" if replace else "CREATE TABLE") + (" AS SELECT" if found.query else "")
    return found
