"""What the statement corpus (tests/functional/test_statement_corpus.py) found in a classic
session, one test each: every one of these failed before its fix."""

import os

import pytest

from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
from dbt.adapters.hudilite.sql.dml import run_statement
from dbt.adapters.hudilite.table import ConfigurationError, HudiTable


@pytest.fixture
def lake(spark, tmp_path):
    root = tmp_path / "lakehouse"
    table = HudiTable.create(spark, str(root / "rs" / "t"), "t")
    table.insert(spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").coalesce(1))
    catalog = StorageCatalog(spark, str(root))
    catalog.create_namespaces()
    yield catalog, table, root
    for sql in ["DROP TEMPORARY VARIABLE IF EXISTS rs_name", "DROP TEMPORARY VARIABLE IF EXISTS rs_statement",
                "DROP VIEW IF EXISTS rs_cached", "DROP NAMESPACE IF EXISTS rs CASCADE"]:
        spark.sql(sql)


def rows(sql_or_table, catalog=None):
    if catalog is not None:
        return sorted(tuple(r) for r in run_statement(catalog, sql_or_table).collect())
    return sorted(tuple(r) for r in sql_or_table.read().select("id", "v").collect())


def test_execute_immediate_and_identifier_expressions_write_through_the_core(spark, lake):
    """EXECUTE IMMEDIATE (a literal, a variable, USING values) and IDENTIFIER() of an expression
    reached Spark's writer (refused there by the read-only registration: nothing was written)."""
    catalog, table, _ = lake
    sql = lambda text: run_statement(catalog, text).collect()  # noqa: E731
    sql("DECLARE OR REPLACE VARIABLE rs_name STRING DEFAULT 'rs.t'")
    sql("DECLARE OR REPLACE VARIABLE rs_statement STRING DEFAULT 'DELETE FROM rs.t WHERE id = 1'")
    sql("EXECUTE IMMEDIATE 'INSERT INTO rs.t VALUES (3, ''c'')'")
    sql("EXECUTE IMMEDIATE 'INSERT INTO IDENTIFIER(:target) VALUES (?, ?)' USING 4, 'd', 'rs.t' AS target")
    sql("INSERT INTO IDENTIFIER('rs.' || 't') VALUES (5, 'e')")
    sql("UPDATE IDENTIFIER(rs_name) SET v = upper(v) WHERE id = 5")
    sql("UPDATE IDENTIFIER('rs.t') SET v = 'B' WHERE id = 2")  # was: cannot read this UPDATE statement
    sql("EXECUTE IMMEDIATE rs_statement")
    assert rows(table) == [(2, "B"), (3, "c"), (4, "d"), (5, "E")]
    assert [i.action for i in table.timeline()] == ["commit"] * 7
    assert table.validate() == []
    sql("CACHE TABLE rs_cached AS SELECT * FROM IDENTIFIER(rs_name)")  # Spark alone refuses a variable here
    assert rows("SELECT id, v FROM rs_cached", catalog) == rows(table)


@pytest.mark.parametrize("statement", [
    "INSERT INTO rs.t REPLACE WHERE id = 1 VALUES (1, 'r')",  # was carried out as a plain INSERT
    "EXECUTE IMMEDIATE 'DROP TABLE rs.t'",  # Spark dropped the entry
    "ALTER TABLE IDENTIFIER('rs.' || 't') SET LOCATION '/tmp/hudilite-nowhere'",  # Spark moved the entry: 0 rows
    "EXECUTE IMMEDIATE 'ALTER TABLE IDENTIFIER(:n) RENAME TO rs.u' USING 'rs.t' AS n",
    "EXPLAIN EXECUTE IMMEDIATE 'ALTER TABLE rs.t SET TBLPROPERTIES (''a'' = ''b'')'",  # Spark ran it
    "EXPLAIN EXECUTE IMMEDIATE 'INSERT INTO rs.t VALUES (9, ''x'')'",
])
def test_what_would_change_the_table_or_its_entry_is_refused_naming_it(spark, lake, statement):
    catalog, table, root = lake
    before = sorted(os.listdir(root / "rs" / "t"))
    with pytest.raises(ConfigurationError, match=r"^rs\.t is a hudilite table: "):
        run_statement(catalog, statement)
    assert sorted(os.listdir(root / "rs" / "t")) == before and len(table.timeline()) == 1
    assert rows("SELECT id, v FROM rs.t", catalog) == [(1, "a"), (2, "b")]  # the session reads the table


def test_a_create_if_not_exists_over_a_remembered_view_leaves_it(spark, lake):
    """The view was not in Spark's catalog yet (nothing had named it): Spark made a managed table
    of that name, and the session read that table for the view ever after."""
    catalog, _, _ = lake
    catalog.remember_view("rs", "v", "select id * 10 as id10 from rs.t")
    run_statement(catalog, "CREATE TABLE IF NOT EXISTS rs.v AS SELECT 99 AS id10").collect()
    assert rows("SELECT id10 FROM rs.v", catalog) == [(10,), (20,)]
    assert [t.tableType for t in spark.catalog.listTables("rs") if t.name == "v"] == ["VIEW"]


def test_renaming_or_dropping_a_remembered_view_moves_or_forgets_its_sql(spark, lake):
    """ALTER VIEW ... RENAME renamed Spark's entry only (the stored SQL stayed under the old name,
    which came back on the next look, and the new name was gone in a new session); DROP VIEW
    left the stored SQL, so the view came back."""
    catalog, _, root = lake
    catalog.remember_view("rs", "v", "select id * 10 as id10 from rs.t")
    catalog.set_docs("rs", "v", "tens", {"id10": "ten times id"})
    assert rows("SELECT id10 FROM rs.v", catalog) == [(10,), (20,)]
    run_statement(catalog, "ALTER VIEW rs.v RENAME TO rs.w").collect()
    fresh = StorageCatalog(spark, str(root))  # what a new session sees
    assert rows("SELECT id10 FROM rs.w", fresh) == [(10,), (20,)]
    assert fresh.views("rs") == ["w"] and fresh.docs("rs", "w") == ("tens", {"id10": "ten times id"})
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        run_statement(catalog, "SELECT * FROM rs.v").collect()
    run_statement(catalog, "DROP VIEW IF EXISTS rs.w").collect()
    assert catalog.views("rs") == [] and not spark.catalog.tableExists("rs.w")
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        run_statement(catalog, "SELECT * FROM rs.w").collect()


def test_a_long_script_is_read_whole_every_time(spark):
    """The script reader walked the plan by Python proxy ids; a freed proxy's id, reused by the
    next, made it skip nodes at random, so a script's INSERT in a branch went unseen and reached
    Spark's writer (the CI corpus caught one in about 1,900 statements)."""
    from dbt.adapters.hudilite.sql.plan_reader import statement_from_plan

    tables = [f"rs.t{i}" for i in range(40)]
    script = "BEGIN " + " ".join(f"IF {i} > 0 THEN INSERT INTO {t} VALUES (1); END IF;"
                                 for i, t in enumerate(tables)) + " END"
    for _ in range(10):
        found = statement_from_plan(spark, script)
        assert found.writes
        assert sorted(".".join(t) for t in [found.target] + found.more_targets) == sorted(tables)
