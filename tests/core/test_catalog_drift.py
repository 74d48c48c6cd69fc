"""Spark's catalog cannot drift from hudilite's (issue 44, items 1-3): a DataFrame writer or a
statement Spark runs itself (a SQL script, session.sql in a Python model) that drops, replaces,
re-points or writes through a hudilite table's entry is refused, or found after it and named,
and the entry is registered again; the table on storage is never changed."""

import os

import pytest

from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
from dbt.adapters.hudilite.sql.dml import run_statement
from dbt.adapters.hudilite.table import ConfigurationError, HudiTable


@pytest.fixture
def lake(spark, tmp_path):
    root = tmp_path / "lakehouse"
    table = HudiTable.create(spark, str(root / "dr" / "pages"), "pages")
    table.insert(spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").coalesce(1))
    catalog = StorageCatalog(spark, str(root))
    run_statement(catalog, "select * from dr.pages").collect()  # registered
    yield catalog, table, root
    spark.sql("DROP NAMESPACE IF EXISTS dr CASCADE")


def _files(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs
                  if not os.path.relpath(d, path).startswith(".hoodie"))


def _spark_rows(spark, catalog):
    return sorted(tuple(r) for r in run_statement(catalog, "select id, v from dr.pages").collect())


def test_a_dataframe_append_through_the_entry_is_refused_before_it_writes_a_file(spark, lake):
    """saveAsTable in append mode wrote part files into a folder named after the entry's glob,
    inside the table's folder (item 3): the rows were committed nowhere."""
    catalog, table, _ = lake
    before = _files(table.path)
    rows = spark.createDataFrame([(3, "c")], "id long, v string")
    for write in [lambda: rows.write.mode("append").saveAsTable("dr.pages"),
                  lambda: rows.write.format("parquet").mode("append").saveAsTable("dr.pages"),
                  lambda: rows.write.insertInto("dr.pages"), lambda: rows.write.insertInto("dr.pages", overwrite=True),
                  lambda: rows.writeTo("dr.pages").append(), lambda: rows.writeTo("dr.pages").overwritePartitions(),
                  lambda: rows.writeTo("dr.pages").createOrReplace(), lambda: rows.writeTo("dr.pages").create(),
                  lambda: rows.write.mode("error").saveAsTable("dr.pages")]:
        with pytest.raises(Exception):
            write()
        catalog.check_entries(files=True)  # nothing to report: the entry is ours, the folder clean
    assert _files(table.path) == before
    assert _spark_rows(spark, catalog) == [(1, "a"), (2, "b")] and table.validate() == []


@pytest.mark.parametrize("change", [
    lambda spark: spark.createDataFrame([(9, "z")], "id long, v string").write.mode("overwrite").saveAsTable("dr.pages"),
    lambda spark: [spark.sql("DROP TABLE dr.pages"), spark.sql("CREATE TABLE dr.pages USING parquet AS SELECT 9L AS id, "
                                                                "'z' AS v")],
    lambda spark: spark.sql("ALTER TABLE dr.pages SET LOCATION '/tmp/hudilite-drift-elsewhere'"),
    lambda spark: spark.sql("DROP TABLE dr.pages"),
], ids=["saveAsTable overwrite", "drop and create", "set location", "drop"])
def test_an_entry_replaced_behind_the_router_fails_naming_the_table_and_is_registered_again(spark, lake, change):
    """`df.write.mode("overwrite").saveAsTable(...)` (or DROP + CREATE, SET LOCATION) in a
    Python model or through session.sql left Spark's own table under the name (item 1): a
    downstream ref() read it."""
    catalog, table, _ = lake
    before = _files(table.path)
    change(spark)
    with pytest.raises(ConfigurationError, match=r"dr\.pages: its Spark catalog entry was dropped, replaced or "
                                                 r"re-pointed .* registered again"):
        catalog.check_entries()
    catalog.check_entries()  # registered again: ours
    assert _spark_rows(spark, catalog) == [(1, "a"), (2, "b")]
    assert _files(table.path) == before and table.validate() == []


def test_a_statement_spark_runs_is_checked_after_it_runs(spark, lake):
    """A statement the router hands to Spark is followed by the check: EXECUTE IMMEDIATE of a
    DROP in a script's handler-free body that the reader cannot name is refused, and whatever
    reaches Spark and replaces the entry fails the statement."""
    catalog, table, _ = lake
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW dr_other AS SELECT 1 AS x")
    spark.sql("DROP TABLE dr.pages")  # behind the router's back, as a Python model's session.sql would
    with pytest.raises(ConfigurationError, match=r"dr\.pages: its Spark catalog entry"):
        run_statement(catalog, "SET spark.sql.shuffle.partitions = 4")  # any statement Spark runs
    assert _spark_rows(spark, catalog) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize("script", [
    "BEGIN DROP TABLE dr.pages; CREATE TABLE dr.pages AS SELECT 9 AS id, 'z' AS v; END",
    "BEGIN DECLARE n INT DEFAULT 1; IF n = 1 THEN INSERT INTO dr.pages VALUES (9, 'z'); END IF; END",
    "BEGIN WHILE false DO DELETE FROM pages; END WHILE; END",
    "BEGIN DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN TRUNCATE TABLE dr.pages; END; SELECT 1; END",
    "BEGIN EXECUTE IMMEDIATE 'ALTER TABLE dr.pages SET LOCATION ''/tmp/x'''; END",
    "BEGIN DECLARE s STRING DEFAULT 'DROP TABLE dr.pages'; EXECUTE IMMEDIATE s; END",
])
def test_a_sql_script_that_writes_a_hudilite_table_is_refused(spark, lake, script):
    """A script was read as a harmless query; Spark then dropped the entry and made its own
    table under the name (item 2)."""
    catalog, table, _ = lake
    spark.sql("USE dr")
    try:
        before = _files(table.path)
        with pytest.raises(ConfigurationError, match=r"dr\.pages is a hudilite table or view: a SQL script|"
                                                     r"refused: it may write a hudilite table"):
            run_statement(catalog, script)
    finally:
        spark.sql("USE default")
    catalog.check_entries()  # the entry was never touched
    assert _spark_rows(spark, catalog) == [(1, "a"), (2, "b")] and _files(table.path) == before


def test_a_script_that_only_reads_hudilite_tables_runs(spark, lake):
    catalog, _, _ = lake
    run_statement(catalog, "BEGIN CREATE TABLE dr.spark_own USING parquet AS SELECT * FROM dr.pages; END")
    assert sorted(tuple(r) for r in spark.sql("select id, v from dr.spark_own").collect()) == [(1, "a"), (2, "b")]
    spark.sql("DROP TABLE dr.spark_own")


def test_the_text_reader_refuses_scripts_too():
    """Over Spark Connect a script is read from its text: any statement in it that may write
    makes every name in it a target; EXECUTE IMMEDIATE makes its target unknown."""
    from dbt.adapters.hudilite.sql import statement as st
    from dbt.adapters.hudilite.sql.text_reader import statement_from_text

    for sql in ["BEGIN DROP TABLE s.pages; CREATE TABLE s.pages AS SELECT 1 AS id; END",
                "lbl: BEGIN CREATE OR REPLACE TABLE s.pages AS SELECT 1 AS id; END",
                "BEGIN IF true THEN INSERT INTO s.pages VALUES (1); END IF; END"]:
        found = statement_from_text(sql, lambda q: q)
        assert found.kind == st.SCRIPT and found.writes and ["s", "pages"] in [found.target] + found.more_targets, sql
    found = statement_from_text("BEGIN EXECUTE IMMEDIATE 'DROP TABLE s.pages'; END", lambda q: q)
    assert found.writes and found.unknown_target
    found = statement_from_text("BEGIN SELECT replace(v, 'a') FROM s.pages; END", lambda q: q)
    assert not found.writes


def test_another_sessions_registration_of_a_newer_commit_is_ours(spark, lake, tmp_path):
    """Several dbt processes on one Spark Connect server share its catalog: an entry another
    hudilite session registered (after its own commit) is not a drift; a look-alike is."""
    catalog, table, root = lake
    other = StorageCatalog(spark, str(root))  # another session's catalog, on the same Spark catalog
    table.insert(spark.createDataFrame([(3, "c")], "id long, v string"))
    other.register("dr", "pages")
    catalog.check_entries()
    assert _spark_rows(spark, catalog) == [(1, "a"), (2, "b"), (3, "c")]
    location = spark.sql("DESCRIBE TABLE EXTENDED dr.pages").where("col_name = 'Location'").collect()[0].data_type
    spark.sql("DROP TABLE dr.pages")  # the same glob, made by Spark: not a registration of ours
    spark.catalog.createTable("dr.pages", path=location.replace("file:", ""), source="parquet",
                              schema=table.schema())
    with pytest.raises(ConfigurationError, match=r"dr\.pages: its Spark catalog entry"):
        catalog.check_entries()
