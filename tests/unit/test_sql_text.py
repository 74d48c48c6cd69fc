"""Reading statements from their text, as a Spark Connect session must (no Spark here)."""

import pytest

from dbt.adapters.hudilite.sql import statement as st
from dbt.adapters.hudilite.sql.dml import route_statement
from dbt.adapters.hudilite.sql.text_reader import names_in, statement_from_text, tokens
from dbt.adapters.hudilite.table import ConfigurationError

# One statement per line shape the router acts on, with what the text says it is:
# (sql, kind, target, writes)
CASES = [
    ("insert /* c */ into `9t` values (2, 'b')", st.INSERT, ["9t"], True),
    ("insert overwrite table spark_catalog.dml_s.`9t` select 3 as id, 'c' as v", st.INSERT,
     ["spark_catalog", "dml_s", "9t"], True),
    ("-- lead\ninsert into dml_s.`9t` (v, id) values ('d', 4)", st.INSERT, ["dml_s", "9t"], True),
    ("INSERT INTO s.t BY NAME SELECT 1 AS id", st.INSERT, ["s", "t"], True),
    ("insert into s.t (select 1 as id)", st.INSERT, ["s", "t"], True),
    ("update `9t` as x set v = upper(x.v) where x.id = 3", st.UPDATE, ["9t"], True),
    ("delete from spark_catalog.dml_s.`9t` t where t.id = 99", st.DELETE, ["spark_catalog", "dml_s", "9t"], True),
    ("merge into `9t` using (select 1 as id) s on `9t`.id = s.id when matched then delete", "MERGE INTO", ["9t"], True),
    ("truncate table `9t`", "TRUNCATE TABLE", ["9t"], True),
    ("drop table if exists dml_s.`9t`", "DROP TABLE", ["dml_s", "9t"], True),
    ("alter table `9t` add columns (x int)", "ALTER TABLE", ["9t"], True),
    ("load data local inpath '/tmp/x' overwrite into table dml_s.`9t`", "LOAD DATA", ["dml_s", "9t"], True),
    ("create or replace table dml_s.`9t` using parquet as select 1 as id", st.REPLACE_AS_SELECT, ["dml_s", "9t"], True),
    ("create table if not exists copied as select 99 as id", st.CREATE_AS_SELECT, ["copied"], True),
    ("create table s.plain (id int) using parquet", "CREATE TABLE", ["s", "plain"], True),
    ("create or replace view s.v as select * from s.t", "CREATE VIEW", ["s", "v"], True),
    ("create temporary view v as select 1", st.QUERY, None, False),
    ("with w as (select 6 as id) insert into `9t` select * from w", st.INSERT, ["9t"], True),
    ("with w (a) as (select 6), x as (select a from w) select * from x", st.QUERY, None, False),
    ("select * from `9t`", st.QUERY, None, False),
    ("from (select 7 as id, 'g' as v) src insert into `9t` select *", st.INSERT, ["9t"], True),
    ("from src insert into a select * insert into dml_s.`9t` select id, v", st.MULTI_INSERT, ["a"], True),
    ("from src select *", st.QUERY, None, False),
    ("describe table extended dml_s.`9t`", st.QUERY, None, False),
    ("show tables in s", st.QUERY, None, False),
    ("create schema if not exists s", st.QUERY, None, False),
    ("use s", st.QUERY, None, False),
    ("merge with schema evolution into s.t using (select 1 as id) src on s.t.id = src.id when matched then delete",
     "MERGE INTO", ["s", "t"], True),
    ("MERGE WITH SCHEMA EVOLUTION INTO s.t AS x USING s.src ON x.id = src.id WHEN MATCHED THEN DELETE", "MERGE INTO",
     ["s", "t"], True),
    # EXPLAIN plans a statement and runs none of it: a read of what it names, in every mode
    ("explain insert into s.t values (1)", st.QUERY, None, False),
    ("EXPLAIN EXTENDED INSERT OVERWRITE TABLE s.t SELECT 1 AS id", st.QUERY, None, False),
    ("explain formatted merge into s.t using (select 1 as id) src on s.t.id = src.id when matched then delete",
     st.QUERY, None, False),
    ("explain codegen delete from s.t where id = 1", st.QUERY, None, False),
    ("explain cost update s.t set id = 2", st.QUERY, None, False),
    ("/* why */ explain -- this\n truncate table s.t", st.QUERY, None, False),
    ("explain drop table s.t", st.QUERY, None, False),
    ("explain with w as (select 1 as id) insert into s.t select * from w", st.QUERY, None, False),
    ("explain from (select 1 as id) src insert into s.t select id", st.QUERY, None, False),
    ("explain create or replace table s.t as select 1 as id", st.QUERY, None, False),
    ("explain analyze table s.t compute statistics", st.QUERY, None, False),  # explains an ANALYZE: none runs
]


def test_kinds_and_targets():
    for sql, kind, target, writes in CASES:
        found = statement_from_text(sql, lambda q: q)
        assert (found.kind, found.target, found.writes) == (kind, target, writes), sql


def test_the_parts_the_router_needs():
    insert = statement_from_text("insert into s.t (`v w`, id) values ('d', 4);", lambda q: q)
    assert (insert.columns, insert.overwrite, insert.by_name, insert.query()) == (["v w", "id"], False, False,
                                                                                 "values ('d', 4);")
    assert statement_from_text("insert into s.t (select 1)", lambda q: q).query() == "(select 1)"
    parted = statement_from_text("insert overwrite table t partition (p = 'x') select 5", lambda q: q)
    assert parted.partition_clause and parted.overwrite and parted.query() == "select 5"
    multi = statement_from_text("from src insert into a select * insert into s.b select id", lambda q: q)
    assert multi.more_targets == [["s", "b"]]
    from_insert = statement_from_text("from (select 1 as id) src insert into t select id + 1", lambda q: q)
    assert from_insert.query() == "from (select 1 as id) src  select id + 1"
    assert statement_from_text("insert into t replace where id = 1 select 1", lambda q: q).kind == "INSERT REPLACE"
    assert statement_from_text("update s.t as x set a = 1", lambda q: q).alias == "x"
    assert statement_from_text("update s.t set a = 1", lambda q: q).alias is None
    assert statement_from_text("delete from s.t d where d.a = 1", lambda q: q).alias == "d"
    assert statement_from_text("delete from s.t where a = 1", lambda q: q).alias is None
    assert statement_from_text("with w as (select 1) insert into t select * from w", lambda q: q).with_before
    ctas = statement_from_text("create table if not exists s.t comment 'as select' using hudi as\nselect 1", lambda q: q)
    assert (ctas.if_not_exists, ctas.provider, ctas.placement, ctas.query()) == (True, "hudi", False, "select 1")
    for placed in ["create table t partitioned by (v) as select 1 as v", "create table t location '/x' as select 1",
                   "create table t options (a 'b') as select 1", "create table t tblproperties ('a'='b') as select 1"]:
        assert statement_from_text(placed, lambda q: q).placement, placed


def test_names_read_are_every_dotted_name_but_function_calls():
    sql = ("select count(*), s.t.v, `odd name`.x from spark_catalog.s.t join o on t.id = o.id "
           "where 'from fake' <> upper(v) -- from commented\n/* join hidden */")
    assert names_in(tokens(sql)) == {("s", "t", "v"), ("odd name", "x"), ("spark_catalog", "s", "t"), ("o",),
                                     ("t", "id"), ("o", "id"), ("v",), ("select",), ("from",), ("join",), ("on",),
                                     ("where",)}
    assert statement_from_text("select 1 from a.b", lambda q: q).names >= {("a", "b")}
    assert statement_from_text("  -- only a comment", lambda q: q) is None


def test_what_spark_lexes_differently_from_a_naive_reader():
    """Nested bracketed comments, `--` comments ending at \\r or continued over a trailing
    backslash, raw strings: a write hidden from the reader would reach Spark's own writer."""
    def read(sql):
        return statement_from_text(sql, lambda q: q)

    assert read("/* a /* b */ c */ insert into s.t values (1)").target == ["s", "t"]
    assert read("/* a /* b */ insert into s.t */ select 1").kind == st.QUERY
    assert read("-- note\rinsert into s.t values (1)").target == ["s", "t"]
    assert read("-- note \\\ninsert into s.t values (1)\nselect 1").kind == st.QUERY  # the comment goes on
    assert ("s", "t") in read("select r'\\' as a, b from s.t where c = 'x'").names
    assert read("insert with schema evolution into s.t values (1)").target == ["s", "t"]
    with_from = read("with w as (select 1 as id) from w insert into s.t select *")
    assert (with_from.kind, with_from.target, with_from.with_before) == (st.INSERT, ["s", "t"], True)
    no_as = read("with w (select 1 as id) insert into s.t select * from w")
    assert (no_as.target, no_as.with_before) == (["s", "t"], True)
    script = read("begin insert into s.t values (1); end")  # a shape not read: every name it holds is a target
    assert script.writes and ["s", "t"] in [script.target] + script.more_targets
    assert read("create table s.t select 1 as id").query() == "select 1 as id"
    assert read("create table s.t (a bigint) as select 1").kind == "CREATE TABLE"  # Spark refuses it itself
    assert read("create table s.t using org.apache.hudi as select 1").provider == "org.apache.hudi"


class _Catalog:
    """Just enough of a storage catalog for the router to refuse: `s.t` is a hudilite table."""
    spark = None

    def table_key(self, parts):
        parts = [p.lower() for p in parts]
        parts = parts[1:] if len(parts) == 3 and parts[0] == "spark_catalog" else parts
        return ("s", parts[0]) if len(parts) == 1 else tuple(parts) if len(parts) == 2 else None

    def stored_key(self, key):
        return key

    def open(self, schema, name):
        return object() if (schema, name) == ("s", "t") else None


def test_explain_passes_and_merge_with_schema_evolution_is_refused_naming_its_table():
    """Over Spark Connect an EXPLAIN of a write passes to Spark (it writes nothing: nothing to
    route), and a MERGE WITH SCHEMA EVOLUTION is refused as the MERGE INTO of its target it is."""
    def route(sql):
        return route_statement(_Catalog(), sql, statement_from_text(sql, lambda q: q))

    for sql in ["EXPLAIN INSERT INTO s.t VALUES (1)", "explain extended insert overwrite s.t select 1",
                "explain formatted merge into t using src on t.id = src.id when matched then delete",
                "explain drop table if exists spark_catalog.s.t", "explain truncate table t"]:
        assert route(sql) is None, sql  # Spark's to run
        names = statement_from_text(sql, lambda q: q).names  # s.t among them: registered, so Spark can plan it
        assert ("s", "t") in {_Catalog().table_key(n) for n in names}, sql
    for sql in ["MERGE WITH SCHEMA EVOLUTION INTO s.t USING src ON s.t.id = src.id WHEN MATCHED THEN DELETE",
                "merge with schema evolution into t as d using (select 1 as id) x on d.id = x.id "
                "when not matched then insert *"]:
        with pytest.raises(ConfigurationError, match=r"^s\.t is a hudilite table: MERGE INTO is not supported"):
            route(sql)


def test_explain_execute_immediate_is_read_as_the_execute_immediate():
    """Spark runs the statement an EXECUTE IMMEDIATE holds while it analyses it, under EXPLAIN
    too (tried: `EXPLAIN EXECUTE IMMEDIATE 'INSERT INTO s.t VALUES (2)'` adds the row), so an
    EXPLAIN of one is read exactly as the EXECUTE IMMEDIATE on its own."""
    def reading(sql):
        found = statement_from_text(sql, lambda q: q)
        return found.kind, found.target, found.more_targets, found.writes, found.description

    for inner in ["execute immediate 'insert into s.t values (2)'",
                  "EXECUTE IMMEDIATE 'TRUNCATE TABLE ' || 's.t'",
                  "execute immediate 'insert into s.t values (?)' using 1",
                  "execute immediate 'delete from s.t' -- then insert into s.t values (1)\n"]:
        for explain in ["explain", "EXPLAIN EXTENDED", "explain formatted /* c */", "explain codegen", "explain cost"]:
            assert reading(f"{explain} {inner}") == reading(inner), (explain, inner)


def test_double_quoted_names_are_read_as_names_under_the_ansi_flag():
    """`INSERT INTO "s"."t"` with spark.sql.ansi.doubleQuotedIdentifiers=true read its target as
    nothing, and Spark's writer got it (issue 30, item 2). The flag is asked only when the text
    holds a double-quoted token."""
    asked = []

    def flag(on):
        return lambda: asked.append(on) or on

    found = statement_from_text('INSERT INTO "s"."t" VALUES (1, "x")', lambda q: q, flag(True))
    assert (found.kind, found.target, asked) == (st.INSERT, ["s", "t"], [True])
    assert statement_from_text('update "s"."t" set v = 1', lambda q: q, flag(True)).target == ["s", "t"]
    assert statement_from_text('truncate table "a""b"', lambda q: q, flag(True)).target == ['a"b']
    assert statement_from_text('insert into "s"."t" values (1)', lambda q: q, flag(False)).target is None
    asked.clear()
    statement_from_text("insert into s.t values ('x')", lambda q: q, flag(True))
    assert asked == []


def test_execute_immediate_is_read_in_its_parts():
    """What an EXECUTE IMMEDIATE runs is computed by `statement.read_statement` (Spark evaluates
    its expression and values); the text gives the parts. It was read as a query."""
    found = statement_from_text("EXECUTE IMMEDIATE 'INSERT INTO ' || tn || ' VALUES (?)' INTO a, b "
                                "USING 5, 'x' AS n, (1 + 2) m", lambda q: q)
    assert (found.kind, found.into, found.explain) == (st.EXECUTE_IMMEDIATE, True, False)
    assert found.immediate == ("'INSERT INTO ' || tn || ' VALUES (?)'", [(None, "5"), ("n", "'x'"), ("m", "(1 + 2)")])
    explained = statement_from_text("explain /* c */ execute immediate stmt", lambda q: q)
    assert (explained.kind, explained.explain, explained.immediate) == (st.EXECUTE_IMMEDIATE, True, ("stmt", []))


def test_strings_as_spark_lexes_them():
    """Spark 4 reads `''` inside a literal as a quote (the reader cut `'it''s'` in two)."""
    from dbt.adapters.hudilite.sql.text_reader import string_value
    from dbt.adapters.hudilite.sql.reader import bind_parameters

    assert [t.text for t in tokens("select 'it''s', \"a\"\"b\"")] == ["select", "'it''s'", ",", '"a""b"']
    assert [string_value(t) for t in ["'it''s'", "'a\\'b'", "'a\\nb'", "r'a\\n'", "'\\u0041'"]] == [
        "it's", "a'b", "a\nb", "a\\n", "A"]
    assert bind_parameters("insert into t values (?, ':n', :n) -- ?\n", [(None, "1"), ("n", "'x'")]) == \
        "insert into t values (1, ':n', 'x') -- ?\n"


def test_a_rename_names_the_new_name():
    found = statement_from_text("ALTER VIEW s.v RENAME TO s.w", lambda q: q)
    assert (found.kind, found.target, found.new_name, found.writes) == (st.RENAME, ["s", "v"], ["s", "w"], True)
    assert statement_from_text("alter table t rename to u", lambda q: q).new_name == ["u"]
