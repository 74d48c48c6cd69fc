"""A generated corpus of SQL statements aimed at hudilite tables, and the checks run after each.

Every DML and DDL form (`FORMS`, SQL scripts among them) is spelled every way a name can be
(`SPELLINGS`), and run plain and under EXPLAIN, through the adapter's router (`run_statement`) on a table with one
base file and on a partitioned one with several. After each statement the table on storage
is unchanged, or changed by exactly one core commit that did what the statement says; the
expected outcome of each statement is derived from its form and spelling (`expected`).

Checks are batched where that loses nothing: a listing of the table's files (sizes and
modification times, `.hoodie/` included) before and after each statement tells whether it
changed anything; the instants, `validate()` and the rows (as hudi-rs reads the latest
snapshot) are read only when it did. Once per group (a form on a table; the commits of a
group accumulate): the core's read of the table must equal hudi-rs's, hudi-rs's snapshot as
of each commit the group made must hold the rows read after it (for the forms in
FULL_HUDI_RS, every snapshot and changes range is compared through the core's reader too),
and the session must still resolve the table and read its rows through Spark; when that
fails, the group is run again with that check after every statement, to name the statement
that broke it. A table is put back (copied from a pristine copy) only before a group that
follows one that changed it.

Spark's DataFrame writer (`WRITER_FORMS`: saveAsTable in every mode, insertInto, writeTo,
save(path), and session.sql as a Python model runs it) is aimed at each table too, followed by
the check the adapter runs after a Python model.

Every group and every writer form starts on the pristine table (a group or a form that changed
it put it back): the rows the core read of the pristine table once are where each starts.

The same code runs in a classic session (in the pytest process) and over Spark Connect (in a
process of its own: `python -m tests.functional.statement_corpus <url> <folder> <sample>`,
which writes the report as JSON).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from tests.core.hudi_rs import assert_hudi_rs_agrees, hudi_rs_snapshot, rows_of_arrow

SCHEMA = "corpus_s"
VIEW = "corpus_v"  # a view over the table, kept as a dbt view model keeps it
TABLES = {"one_file": None, "several_files": "p"}  # name -> partition column
BASE_ROWS = [(i, f"v{i}", "xyz"[i % 3]) for i in range(1, 41)]

# Outcomes a statement can have
COMMIT = "commit"  # no error; exactly one new completed instant; the rows the statement says
REFUSED = "refused"  # an error that names the table; storage unchanged
ERROR = "error"  # an error (Spark's own: a view is not writable, a CTE cannot precede it); storage unchanged
OK = "ok"  # no error; storage unchanged
UNCHANGED = "unchanged"  # error or not; storage unchanged


@dataclass
class Form:
    name: str
    template: str  # {t}: the table as spelled; {k}: a number unique to the statement in its group
    outcome: str  # COMMIT, REFUSED, OK or UNCHANGED
    effect: Optional[Callable[[List[tuple], int, Optional[str]], List[tuple]]] = None  # rows after a COMMIT
    cte_outcome: str = ERROR  # with a CTE in front


def _append(row):
    return lambda rows, k, part: rows + [row(k)]


def _overwrite(row):
    def effect(rows, k, part):
        new = row(k)
        return [new] if part is None else [r for r in rows if r[2] != new[2]] + [new]
    return effect


def _update(rows, k, part):
    return [(i, f"u{k}", p) if i == k else (i, v, p) for i, v, p in rows]


def _delete(rows, k, part):
    return [r for r in rows if r[0] != k]


FORMS: List[Form] = [
    Form("insert values", "INSERT INTO {t} VALUES ({k}00, 'n{k}', 'x')", COMMIT, _append(lambda k: (k * 100, f"n{k}", "x")),
         cte_outcome=REFUSED),
    Form("insert column list", "INSERT INTO TABLE {t} (v, p, id) SELECT 'c{k}', 'z', {k}02", COMMIT,
         _append(lambda k: (k * 100 + 2, f"c{k}", "z")), cte_outcome=REFUSED),
    Form("insert overwrite", "INSERT OVERWRITE {t} VALUES ({k}04, 'o{k}', 'x')", COMMIT,
         _overwrite(lambda k: (k * 100 + 4, f"o{k}", "x")), cte_outcome=REFUSED),
    Form("insert overwrite table column list", "INSERT OVERWRITE TABLE {t} (id, p, v) SELECT {k}05, 'y', 'w{k}'",
         COMMIT, _overwrite(lambda k: (k * 100 + 5, f"w{k}", "y")), cte_outcome=REFUSED),
    Form("insert partition", "INSERT INTO {t} PARTITION (p = 'x') VALUES ({k}06, 'q{k}')", REFUSED,
         cte_outcome=REFUSED),
    Form("insert overwrite partition column list",
         "INSERT OVERWRITE TABLE {t} PARTITION (p = 'x') (id, v) VALUES ({k}07, 'q{k}')", REFUSED,
         cte_outcome=REFUSED),
    Form("insert replace where", "INSERT INTO {t} REPLACE WHERE id = {k} VALUES ({k}, 'r{k}', 'x')", REFUSED,
         cte_outcome=REFUSED),
    Form("update", "UPDATE {t} SET v = 'u{k}' WHERE id = {k}", COMMIT, _update),
    Form("delete", "DELETE FROM {t} WHERE id = {k}", COMMIT, _delete),
    Form("merge", "MERGE INTO {t} AS d USING (SELECT {k} AS id) AS src ON d.id = src.id WHEN MATCHED THEN DELETE",
         REFUSED),
    Form("truncate", "TRUNCATE TABLE {t}", REFUSED),
    Form("drop", "DROP TABLE {t}", REFUSED),
    Form("drop if exists", "DROP TABLE IF EXISTS {t}", REFUSED),
    Form("alter add columns", "ALTER TABLE {t} ADD COLUMNS (extra_{k} INT)", REFUSED),
    Form("alter rename", "ALTER TABLE {t} RENAME TO corpus_s.renamed_{k}", REFUSED),
    Form("alter set location", "ALTER TABLE {t} SET LOCATION '/tmp/hudilite-corpus-elsewhere-{k}'", REFUSED),
    Form("alter set tblproperties", "ALTER TABLE {t} SET TBLPROPERTIES ('corpus' = '{k}')", REFUSED),
    Form("create or replace as select", "CREATE OR REPLACE TABLE {t} AS SELECT {k} AS id", REFUSED),
    Form("replace table", "REPLACE TABLE {t} (id BIGINT) USING parquet", REFUSED),
    Form("replace table as select", "REPLACE TABLE {t} AS SELECT {k} AS id", REFUSED),
    Form("create table as select", "CREATE TABLE {t} AS SELECT {k} AS id", REFUSED),
    Form("create table if not exists as select", "CREATE TABLE IF NOT EXISTS {t} AS SELECT {k} AS id", OK),
    Form("create table", "CREATE TABLE {t} (id BIGINT) USING parquet", REFUSED),
    Form("load data", "LOAD DATA LOCAL INPATH '/tmp/hudilite-corpus-none' INTO TABLE {t}", REFUSED),
    Form("load data overwrite", "LOAD DATA INPATH '/tmp/hudilite-corpus-none' OVERWRITE INTO TABLE {t}", REFUSED),
    Form("cache", "CACHE TABLE {t}", OK),
    Form("cache lazy", "CACHE LAZY TABLE {t}", OK),
    Form("uncache", "UNCACHE TABLE IF EXISTS {t}", OK),
    Form("cache as select", "CACHE TABLE corpus_cached_{k} AS SELECT * FROM {t}", OK),
    Form("refresh", "REFRESH TABLE {t}", OK),
    Form("select", "SELECT * FROM {t} WHERE id > {k}", OK, cte_outcome=OK),
    # Spark runs a script's statements itself: one that writes the table is refused (issue 44, item 2)
    Form("sql script", "BEGIN DROP TABLE {t}; CREATE TABLE {t} AS SELECT {k} AS id; END", REFUSED,
         cte_outcome=UNCHANGED),
    Form("sql script in a branch", "BEGIN IF {k} > 0 THEN INSERT INTO {t} VALUES ({k}08, 's{k}', 'x'); END IF; END",
         REFUSED, cte_outcome=UNCHANGED),
]
FORMS_BY_NAME = {f.name: f for f in FORMS}
# Forms whose group also compares every snapshot and every changes range with hudi-rs through
# the core's reader (`assert_hudi_rs_agrees`; the other groups compare hudi-rs's snapshot as of
# each commit with the rows the core read after it)
FULL_HUDI_RS = {"update"}


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _with_comments(sql: str) -> str:
    """Every space outside quotes a comment: bracketed and `--` ones in turn."""
    out, quote, n = [], None, 0
    for ch in sql:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'`\"":
            quote = ch
        elif ch == " ":
            n += 1
            out.append(" /* c */ " if n % 2 else " -- c\n ")
            continue
        out.append(ch)
    return "".join(out)


@dataclass
class Spelling:
    name: str
    spell: Callable[[str, str, str], Tuple[List[str], str, List[str]]]  # (template, schema, table) -> (setup, sql, teardown)
    through_view: bool = False
    cte: bool = False


def _name(render: Callable[[str, str], str], setup: Callable[[str, str], List[str]] = lambda s, t: [],
           teardown: Callable[[str, str], List[str]] = lambda s, t: []):
    return lambda template, s, t: (setup(s, t), template.format(t=render(s, t), k="{k}"), teardown(s, t))


def _execute_literal(template, s, t):
    return [], "EXECUTE IMMEDIATE " + _sql_string(template.format(t=f"{s}.{t}", k="{k}")), []


def _execute_variable(template, s, t):
    inner = template.format(t=f"{s}.{t}", k="{k}")
    return ([f"DECLARE OR REPLACE VARIABLE corpus_statement STRING DEFAULT {_sql_string(inner)}"],
            "EXECUTE IMMEDIATE corpus_statement", [])


def _execute_using(template, s, t):
    inner = template.format(t="IDENTIFIER(:corpus_target)", k="{k}")
    return [], f"EXECUTE IMMEDIATE {_sql_string(inner)} USING '{s}.{t}' AS corpus_target", []


SPELLINGS: List[Spelling] = [
    Spelling("plain", _name(lambda s, t: f"{s}.{t}")),
    Spelling("unqualified", _name(lambda s, t: t)),  # the corpus runs after USE <schema>
    Spelling("backticks", _name(lambda s, t: f"`{s}`.`{t}`")),
    Spelling("catalog prefix", _name(lambda s, t: f"spark_catalog.{s}.{t}")),
    Spelling("identifier literal", _name(lambda s, t: f"IDENTIFIER('{s}.{t}')")),
    Spelling("identifier concatenated", _name(lambda s, t: f"IDENTIFIER('{s}.' || '{t}')")),
    Spelling("identifier variable", _name(lambda s, t: "IDENTIFIER(corpus_name)", setup=lambda s, t: [
        f"DECLARE OR REPLACE VARIABLE corpus_name STRING DEFAULT '{s}.{t}'"])),
    Spelling("double quotes", _name(lambda s, t: f'"{s}"."{t}"',
                                    setup=lambda s, t: ["SET spark.sql.ansi.doubleQuotedIdentifiers=true"],
                                    teardown=lambda s, t: ["SET spark.sql.ansi.doubleQuotedIdentifiers=false"])),
    Spelling("comments", lambda template, s, t: ([], _with_comments(template.format(t=f"{s}/* c */./* c */{t}",
                                                                                    k="{k}")), [])),
    Spelling("cte in front", lambda template, s, t: (
        [], "WITH corpus_w AS (SELECT 1 AS one) " + template.format(t=f"{s}.{t}", k="{k}"), []), cte=True),
    Spelling("execute immediate literal", _execute_literal),
    Spelling("execute immediate variable", _execute_variable),
    Spelling("execute immediate using", _execute_using),
    Spelling("view over the table", _name(lambda s, t: f"{s}.{VIEW}"), through_view=True),
]


# ---- Spark's DataFrame writer, aimed at a table's entry or folder (issue 44, items 1 and 3) -------
DETECTED = "detected"  # written behind the core: the check after a Python model names the table; nothing committed


@dataclass
class WriterForm:
    name: str
    write: Callable[..., None]  # (spark, rows, "schema.table", the table's folder)
    outcome: str


WRITER_FORMS: List[WriterForm] = [
    WriterForm("saveAsTable append", lambda spark, rows, t, path: rows.write.mode("append").saveAsTable(t), REFUSED),
    WriterForm("saveAsTable append parquet", lambda spark, rows, t, path:
               rows.write.format("parquet").mode("append").saveAsTable(t), REFUSED),
    WriterForm("saveAsTable append into its folder", lambda spark, rows, t, path:
               rows.write.mode("append").option("path", path).saveAsTable(t), REFUSED),
    WriterForm("saveAsTable overwrite", lambda spark, rows, t, path: rows.write.mode("overwrite").saveAsTable(t),
               REFUSED),  # Spark drops and re-creates the entry: found by the check, registered again
    WriterForm("saveAsTable errorifexists", lambda spark, rows, t, path: rows.write.saveAsTable(t), REFUSED),
    WriterForm("saveAsTable ignore", lambda spark, rows, t, path: rows.write.mode("ignore").saveAsTable(t), OK),
    WriterForm("insertInto", lambda spark, rows, t, path: rows.write.insertInto(t), ERROR),  # MULTI_PATH
    WriterForm("insertInto overwrite", lambda spark, rows, t, path: rows.write.insertInto(t, overwrite=True), ERROR),
    WriterForm("writeTo append", lambda spark, rows, t, path: rows.writeTo(t).append(), REFUSED),
    WriterForm("writeTo overwritePartitions", lambda spark, rows, t, path: rows.writeTo(t).overwritePartitions(),
               REFUSED),
    WriterForm("writeTo create", lambda spark, rows, t, path: rows.writeTo(t).create(), REFUSED),
    WriterForm("writeTo createOrReplace", lambda spark, rows, t, path: rows.writeTo(t).createOrReplace(), REFUSED),
    WriterForm("writeTo replace", lambda spark, rows, t, path: rows.writeTo(t).replace(), REFUSED),
    WriterForm("session.sql drop and create", lambda spark, rows, t, path: [
        spark.sql(f"DROP TABLE {t}"), spark.sql(f"CREATE TABLE {t} USING parquet AS SELECT 1 AS id")], REFUSED),
    WriterForm("session.sql set location", lambda spark, rows, t, path:
               spark.sql(f"ALTER TABLE {t} SET LOCATION '/tmp/hudilite-corpus-elsewhere'"), REFUSED),
    # no entry is involved: files land in the table's folder, committed nowhere; the check names them
    WriterForm("save(path) append", lambda spark, rows, t, path: rows.write.mode("append").parquet(path), DETECTED),
]


def expected(form: Form, spelling: Spelling, explain: bool) -> str:
    if explain:
        return UNCHANGED  # EXPLAIN runs nothing (an EXPLAIN EXECUTE IMMEDIATE of a write is refused)
    if spelling.through_view:  # Spark writes no view; it caches one, and DROP TABLE drops one
        return OK if form.outcome == OK or form.name.startswith("drop") else ERROR
    if spelling.cte:
        return form.cte_outcome
    return form.outcome


@dataclass
class Case:
    form: Form
    spelling: Spelling
    explain: bool

    @property
    def label(self) -> str:
        return f"{self.form.name} | {self.spelling.name}{' | EXPLAIN' if self.explain else ''}"


def generate(sample: Optional[int] = None) -> List[Case]:
    """The cross product (forms x spellings x plain/EXPLAIN); with `sample`, per form the plain
    statement in `sample` spellings (rotating, so that every spelling is among them across the
    forms) and its EXPLAIN in one."""
    cases = []
    for i, form in enumerate(FORMS):
        if sample is None:
            chosen = [(s, e) for s in SPELLINGS for e in (False, True)]
        else:
            picks = [SPELLINGS[(i * sample + j) % len(SPELLINGS)] for j in range(sample)]
            chosen = [(s, False) for s in picks] + [(SPELLINGS[(i * 5 + 3) % len(SPELLINGS)], True)]
        cases += [Case(form, s, e) for s, e in chosen]
    return cases


# ---- running ------------------------------------------------------------------------------------
@dataclass
class Report:
    mode: str
    statements: int = 0
    commits: int = 0
    outcomes: Counter = field(default_factory=Counter)
    failures: List[str] = field(default_factory=list)
    seconds: float = 0.0
    group_seconds: Dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"mode": self.mode, "statements": self.statements, "commits": self.commits,
                           "outcomes": dict(self.outcomes), "failures": self.failures, "seconds": self.seconds,
                           "group_seconds": self.group_seconds})


def _listing(path: str) -> Dict[str, Tuple[int, int]]:
    found = {}
    for folder, _, files in os.walk(path):
        for f in files:
            full = os.path.join(folder, f)
            st = os.stat(full)
            found[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns)
    return found


def _rs_rows(path: str, instant: Optional[str] = None) -> List[tuple]:
    arrow = hudi_rs_snapshot(path, instant)
    return [] if arrow is None else rows_of_arrow(arrow, ["id", "v", "p"])


def _message(err: BaseException) -> str:
    return str(err).replace("`", "").replace("spark_catalog.", "").lower()


class Corpus:
    def __init__(self, spark, folder: str, mode: str):
        from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog

        self.spark, self.mode = spark, mode
        self.root = os.path.join(folder, "lake")
        self.pristine = os.path.join(folder, "pristine")
        self.report = Report(mode)
        for name, part in TABLES.items():
            self._create(name, part)
        self.catalog = StorageCatalog(spark, self.root)
        self.catalog.create_namespaces()
        self.sql(f"USE {SCHEMA}")
        for name in TABLES:  # registered once: the read-only companions are made, and are in the pristine copy
            self.sql(f"SELECT count(*) FROM {SCHEMA}.{name}").collect()
            shutil.copytree(self.path(name), os.path.join(self.pristine, name))
        self.pristine_rows = {name: self.rows(name) for name in TABLES}  # where every group and writer form starts
        self.dirty = set()

    def close(self):
        for sql in ["USE default", "SET spark.sql.ansi.doubleQuotedIdentifiers=false",
                    "DROP TEMPORARY VARIABLE IF EXISTS corpus_name", "DROP TEMPORARY VARIABLE IF EXISTS corpus_statement",
                    "CLEAR CACHE", f"DROP NAMESPACE IF EXISTS {SCHEMA} CASCADE"]:
            self.spark.sql(sql)

    def path(self, name: str) -> str:
        return os.path.join(self.root, SCHEMA, name)

    def _create(self, name: str, part: Optional[str]):
        from dbt.adapters.hudilite.table import HudiTable

        table = HudiTable.create(self.spark, self.path(name), name, partition_by=part, database=SCHEMA)
        rows = self.spark.createDataFrame(BASE_ROWS, "id bigint, v string, p string")
        table.insert(rows.coalesce(1) if part is None else rows.repartition(1, "p"))
        assert len(table.latest_base_files()) == (1 if part is None else 3), name

    def sql(self, text: str):
        from dbt.adapters.hudilite.sql.dml import run_statement

        return run_statement(self.catalog, text)

    def table(self, name: str):
        from dbt.adapters.hudilite.table import HudiTable

        return HudiTable.open(self.spark, self.path(name))

    def rows(self, name: str) -> List[tuple]:
        return sorted(tuple(r) for r in self.table(name).read().select("id", "v", "p").collect())

    def restore(self, name: str):
        shutil.rmtree(self.path(name))
        shutil.copytree(os.path.join(self.pristine, name), self.path(name))
        self.dirty.discard(name)

    def view(self, name: str):
        self.catalog.remember_view(SCHEMA, VIEW, f"select * from {SCHEMA}.{name}")
        self.catalog.forget_entry(SCHEMA, VIEW)  # made again from storage when named

    # one statement ---------------------------------------------------------------------------
    def run_case(self, case: Case, name: str, k: int, state: dict) -> None:
        """Run `case` on table `name`; `state` holds the table's rows, listing and instants as
        the previous statement left them, and is brought up to date."""
        setup, sql, teardown = case.spelling.spell(case.form.template, SCHEMA, name)
        sql = sql.replace("{k}", str(k))
        setup = [s.replace("{k}", str(k)) for s in setup]
        if case.explain:
            sql = "EXPLAIN " + sql
        for s in setup:
            self.sql(s).collect()
        before = state["listing"]
        error = None
        try:
            result = self.sql(sql)
            result.collect()
        except Exception as err:  # noqa: BLE001 - judged below
            error = err
        finally:
            for s in teardown:
                self.sql(s).collect()
        self.report.statements += 1
        after = _listing(self.path(name))
        changed = after != before
        want = expected(case.form, case.spelling, case.explain)
        what = f"[{self.mode}] {name}: {case.label}: {sql!r}"
        named = error is not None and f"{SCHEMA}.{name}" in _message(error)
        got = COMMIT if changed and error is None else OK if error is None else REFUSED if named else ERROR
        self.report.outcomes[want if want == got or want == UNCHANGED else f"{want}->{got}"] += 1
        problems = []
        if changed:
            self.dirty.add(name)
            table = self.table(name)
            instants = [i for i in table.timeline() if i.is_completed]
            new = [i for i in instants if i.timestamp not in state["instants"]]
            if want != COMMIT:
                problems.append(f"changed storage ({len(new)} new instant(s)), expected {want}"
                                + (f"; error: {str(error)[:300]}" if error else ""))
            elif error is not None:
                problems.append(f"changed storage and failed: {str(error)[:300]}")
            if len(new) != 1 or len(instants) != len(state["instants"]) + 1:
                problems.append(f"{len(new)} new instants (of {len(instants)}), expected one core commit")
            rows = _rs_rows(self.path(name))  # hudi-rs reads it
            if want == COMMIT:
                expect = sorted(case.form.effect(state["rows"], k, TABLES[name]))
                if rows != expect:
                    problems.append(f"rows after: {rows[:8]}... ({len(rows)}), expected {expect[:8]}... ({len(expect)})")
            bad = table.validate()
            if bad:
                problems.append(f"validate(): {bad}")
            missing = [f for f, v in before.items() if not f.startswith(".hoodie") and after.get(f) != v]
            if missing:
                problems.append(f"committed files changed or gone: {missing[:3]}")
            self.report.commits += len(new)
            state.update(rows=rows, instants={i.timestamp for i in instants})
            if len(new) == 1:
                state["history"][new[0].timestamp] = rows
        else:
            if want == COMMIT:
                problems.append(f"not carried out (storage unchanged); error: {str(error)[:300] if error else None}")
            elif want == OK and error is not None:
                problems.append(f"failed: {str(error)[:300]}")
            elif want in (REFUSED, ERROR) and error is None:
                problems.append("passed, expected an error")
            elif want == REFUSED and not named:
                problems.append(f"refused without naming {SCHEMA}.{name}: {str(error)[:300]}")
        state["listing"] = after
        if problems:
            self.report.failures.append(f"{what}: " + "; ".join(problems))

    def resolves(self, name: str, rows: List[tuple]) -> Optional[str]:
        """None when a statement naming the table reads its rows through Spark, else what went wrong."""
        try:
            seen = sorted(tuple(r) for r in self.sql(f"SELECT id, v, p FROM {SCHEMA}.{name}").collect())
        except Exception as err:  # noqa: BLE001
            return f"the session no longer resolves {SCHEMA}.{name}: {str(err)[:300]}"
        return None if seen == rows else f"Spark reads {len(seen)} rows of {SCHEMA}.{name}, the table holds {len(rows)}"

    # a group: one form on one table --------------------------------------------------------
    def run_group(self, cases: List[Case], name: str, check_each: bool = False) -> None:
        """Run a form's cases on table `name`, then check what they left once: the table's rows
        as the core reads them and as Spark reads them through the session (which still
        resolves it), and hudi-rs's snapshot as of every commit the group made (all its reads,
        changes ranges too, for the forms in FULL_HUDI_RS)."""
        if name in self.dirty:
            self.restore(name)
        table = self.table(name)
        state = {"listing": _listing(self.path(name)), "rows": self.pristine_rows[name], "history": {},
                 "instants": {i.timestamp for i in table.timeline() if i.is_completed}}
        failures = len(self.report.failures)
        commits = self.report.commits
        if cases[0].form.name == "cache as select":  # the cached views of the last group
            for k in range(1, len(cases) + 1):
                self.spark.catalog.dropTempView(f"corpus_cached_{k}")
        for k, case in enumerate(cases, 1):
            if case.spelling.through_view:
                self.view(name)
            self.run_case(case, name, k, state)
            if check_each:
                broken = self.resolves(name, state["rows"])
                if broken:
                    self.report.failures.append(f"[{self.mode}] {name}: {case.label}: {broken}")
                    return
        label = f"[{self.mode}] {name}: {cases[0].form.name}"
        core_rows = self.rows(name)
        if core_rows != state["rows"]:
            self.report.failures.append(f"{label}: the core reads {len(core_rows)} rows, hudi-rs {len(state['rows'])}")
        broken = self.resolves(name, core_rows)
        if broken and not check_each:
            self.report.failures = self.report.failures[:failures]
            self.report.commits = commits
            self.restore(name)
            self.run_group(cases, name, check_each=True)  # which statement broke it
            return
        for instant, rows in state["history"].items():
            seen = _rs_rows(self.path(name), instant)
            if seen != rows:
                self.report.failures.append(f"{label}: hudi-rs as of {instant} reads {len(seen)} rows, "
                                            f"the core read {len(rows)}")
        if state["history"] and cases[0].form.name in FULL_HUDI_RS:
            try:
                assert_hudi_rs_agrees(self.table(name))
            except AssertionError as err:
                self.report.failures.append(f"{label}: hudi-rs disagrees: {err}")

    # Spark's DataFrame writer ---------------------------------------------------------------
    def run_writer(self, form: WriterForm, name: str, k: int) -> None:
        """`form` aimed at table `name`, then the check the adapter runs after a Python model
        (`StorageCatalog.check_entries`); then the session must still read the table's rows."""
        if name in self.dirty:
            self.restore(name)
        before, rows_before = _listing(self.path(name)), self.pristine_rows[name]
        instants = {i.timestamp for i in self.table(name).timeline() if i.is_completed}
        rows = self.spark.createDataFrame([(k * 100 + 9, f"w{k}", "x")], "id bigint, v string, p string")
        error = None
        try:
            form.write(self.spark, rows, f"{SCHEMA}.{name}", self.path(name))
        except Exception as err:  # noqa: BLE001 - judged below
            error = err
        try:
            self.catalog.check_entries(files=True)
        except Exception as err:  # noqa: BLE001 - the error the model would fail with
            error = error or err
        self.report.statements += 1
        after = _listing(self.path(name))
        named = error is not None and f"{SCHEMA}.{name}" in _message(error)
        got = OK if error is None else REFUSED if named else ERROR
        changed = after != before
        rows_after = self.rows(name)
        problems = []
        if form.outcome == DETECTED:
            self.dirty.add(name)
            new = {i.timestamp for i in self.table(name).timeline() if i.is_completed} - instants
            kept = all(after.get(f) == v for f, v in before.items())
            if not (changed and named and not new and kept and rows_after == rows_before):
                problems.append(f"expected files written beside the table, named by the check, nothing committed: "
                                f"changed={changed}, new instants={len(new)}, committed files kept={kept}, "
                                f"error={str(error)[:300] if error else None}")
            got = DETECTED if not problems else got
        elif changed:
            self.dirty.add(name)
            problems.append(f"changed storage: {sorted(set(after) - set(before))[:3]}")
        elif got != form.outcome:
            problems.append(f"{got}, expected {form.outcome}: {str(error)[:300] if error else None}")
        self.report.outcomes[form.outcome if got == form.outcome else f"{form.outcome}->{got}"] += 1
        broken = self.resolves(name, rows_after)
        if broken:
            problems.append(broken)
        if problems:
            self.report.failures.append(f"[{self.mode}] {name}: DataFrame writer {form.name}: " + "; ".join(problems))
        if name in self.dirty:  # before the next form, which checks every table's folder
            self.restore(name)

    def run(self, cases: List[Case], writers: List[WriterForm] = WRITER_FORMS) -> Report:
        start = time.time()
        by_form: Dict[str, List[Case]] = {}
        for case in cases:
            by_form.setdefault(case.form.name, []).append(case)
        try:
            for name in TABLES:
                for form, group in by_form.items():
                    began = time.time()
                    self.run_group(group, name)
                    self.report.group_seconds[f"{name}: {form}"] = round(time.time() - began, 2)
                began = time.time()
                for k, writer in enumerate(writers, 1):
                    self.run_writer(writer, name, k)
                self.report.group_seconds[f"{name}: DataFrame writers"] = round(time.time() - began, 2)
        finally:
            self.close()
        self.report.seconds = round(time.time() - start, 1)
        return self.report


def main(argv: List[str]) -> None:
    """`python -m tests.functional.statement_corpus <url> <folder> <sample>`: over Spark Connect
    at <url>, or in a fresh classic session of its own for the url `local` (sample 0: the whole
    product); the report goes to <folder>/report.json."""
    url, folder, sample = argv[0], argv[1], int(argv[2])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if url == "local":
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2,2]").appName("hudilite-corpus")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.sql.catalogImplementation", "in-memory")
                 .config("spark.python.sql.dataFrameDebugging.enabled", "false")  # as the suite's and the embedded sessions have it
                 .config("spark.sql.warehouse.dir", os.path.join(folder, "warehouse"))  # saveAsTable's own tables
                 .config("spark.pyspark.python", sys.executable).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        mode = "classic"
    else:
        from dbt.adapters.hudilite.session import connect_session

        spark, mode = connect_session(url), "connect"
    report = Corpus(spark, folder, mode).run(generate(sample or None))
    with open(os.path.join(folder, "report.json"), "w") as f:
        f.write(report.to_json())


if __name__ == "__main__":
    main(sys.argv[1:])
