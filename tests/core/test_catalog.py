"""Storage as catalog: tables under a location_root become Spark tables with exact file lists."""

from pyspark.sql import functions as F

from dbt.adapters.hudilite.catalog.spark_entries import table_state
from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
from dbt.adapters.hudilite.sql.dml import run_statement
from dbt.adapters.hudilite.table import HudiTable


def test_tables_on_storage_are_registered_with_exactly_their_snapshot(spark, tmp_path):
    root = tmp_path / "lakehouse"
    odd = HudiTable.create(spark, str(root / "cat_a" / "odd_values"), "odd_values", partition_by="p")
    odd.insert(spark.createDataFrame([(1, "a,b"), (2, "{x}"), (3, "c*[d]?"), (4, "plain")], "id long, p string"))
    odd.insert_overwrite(spark.createDataFrame([(5, "plain")], "id long, p string"))
    empty = HudiTable.create(spark, str(root / "cat_a" / "empty"), "empty")
    empty.insert(spark.range(0).select(F.col("id").alias("x")))
    (root / "cat_a" / "not_a_table").mkdir()

    catalog = StorageCatalog(spark, str(root))
    assert catalog.schemas() == ["cat_a"]
    assert catalog.tables("cat_a") == ["empty", "odd_values"]
    assert not spark.catalog.tableExists("cat_a.odd_values")  # nothing registered up front

    def sql(text):
        return run_statement(catalog, text).collect()

    rows = sql("select id, p from cat_a.odd_values order by id")
    assert [(r.id, r.p) for r in rows] == [(1, "a,b"), (2, "{x}"), (3, "c*[d]?"), (5, "plain")]
    assert not spark.catalog.tableExists("cat_a.empty")
    assert sql("select * from cat_a.empty") == [] and spark.table("cat_a.empty").columns[-1] == "x"

    catalog.remember_view("cat_a", "v", "select count(*) as n from cat_a.odd_values")
    catalog.remember_view("cat_a", "w", "select n * 10 as n10 from cat_a.v")
    spark.sql("drop view if exists cat_a.v")
    fresh = StorageCatalog(spark, str(root))  # a fresh process re-creates remembered views, views of views too
    assert [r.n10 for r in run_statement(fresh, "select n10 from cat_a.w").collect()] == [40]

    # Another writer (another process or host) commits: the next statement reads its commit.
    HudiTable.open(spark, str(root / "cat_a" / "odd_values")).insert(spark.createDataFrame([(6, "new")], "id long, p string"))
    assert [r.n10 for r in run_statement(fresh, "select n10 from cat_a.w").collect()] == [50]
    assert sql("select max(id) as m from cat_a.odd_values")[0].m == 6
    catalog.drop_schema("cat_a")
    assert not (root / "cat_a").exists()


def test_every_sql_write_to_a_hudilite_table_goes_through_the_core_or_is_refused(spark, tmp_path):
    """Spark's own writer never touches a hudilite table (issue 12, defect 1): unqualified names
    after USE, catalog prefixes, backticks, digit-leading names, comments between keywords."""
    import os

    import pytest

    from dbt.adapters.hudilite.sql.dml import route_statement
    from dbt.adapters.hudilite.table import ConfigurationError
    from tests.core.hudi_rs import assert_hudi_rs_agrees

    root = tmp_path / "lakehouse"
    table = HudiTable.create(spark, str(root / "dml_s" / "9t"), "9t")
    table.insert(spark.createDataFrame([(1, "a")], "id long, v string"))
    catalog = StorageCatalog(spark, str(root))
    catalog.create_namespaces()

    def run(sql):
        result = route_statement(catalog, sql)
        assert result is not None, f"not routed: {sql}"  # None would hand the statement to Spark
        return result

    spark.sql("use dml_s")
    try:
        run("insert /* c */ into `9t` values (2, 'b')")
        run("insert overwrite table spark_catalog.dml_s.`9t` select 3 as id, 'c' as v")
        run("-- lead\ninsert into dml_s.`9t` (v, id) values ('d', 4)")
        run("update `9t` as x set v = upper(x.v) where x.id = 3")
        run("delete from spark_catalog.dml_s.`9t` t where t.id = 99")
        run("from (select 5 as id, 'e' as v) src insert into `9t` select *")
        run("insert into DML_S.`9T` values (6, 'f')")  # Spark's names ignore case: still the core's
        run("delete from `9T` where id = 6")
        run("delete from `9t` where id = 5")
        for sql, what in [("merge into `9t` using (select 1 as id) s on `9t`.id = s.id when matched then delete", "MERGE"),
                          ("truncate table `9t`", "TRUNCATE"), ("drop table dml_s.`9t`", "DROP"),
                          ("alter table `9t` add columns (x int)", "ADD COLUMNS"),
                          ("create or replace table dml_s.`9t` using parquet as select 1 as id", "REPLACE TABLE"),
                          ("insert overwrite table `9t` partition (v='x') select 5", "PARTITION clause"),
                          ("with w as (select 6 as id, 'f' as v) insert into `9t` select * from w", "WITH before INSERT"),
                          ("from (select 1 as id) s insert into dml_s.spark_other select id insert into `9t` select id, 'x'",
                           "an INSERT into several tables"),
                          ("alter table `9t` set location '/tmp/elsewhere'", "SET TABLE LOCATION")]:
            with pytest.raises(ConfigurationError, match=f"dml_s.9t is a hudilite table: .*{what}"):
                route_statement(catalog, sql)
        assert route_statement(catalog, "select * from `9t`") is None  # reads go to Spark
        assert route_statement(catalog, "describe dml_s.`9t`") is None
        # A new table made by CREATE TABLE AS SELECT is a hudilite table; another format is Spark's.
        run("create table copied as select id, v from `9t` where id = 4")
        copied = HudiTable.open(spark, str(root / "dml_s" / "copied"))
        assert [(r.id, r.v) for r in copied.read().collect()] == [(4, "d")]
        assert [(r.id, r.v) for r in spark.sql("select id, v from dml_s.copied").collect()] == [(4, "d")]
        assert_hudi_rs_agrees(copied)
        assert route_statement(catalog, "create table plain using parquet as select 1 as id") is None
        spark.sql(f"create table dml_s.spark_own using parquet location '{tmp_path / 'own'}' as select 1 as id")
        assert route_statement(catalog, "create table spark_own as select 2 as id") is None  # Spark: already exists
        run("create table if not exists copied as select 99 as id, 'z' as v")  # exists: nothing happens
        assert [(r.id, r.v) for r in HudiTable.open(spark, str(root / "dml_s" / "copied")).read().collect()] == [(4, "d")]
        with pytest.raises(ConfigurationError, match="LOCATION, OPTIONS and TBLPROPERTIES are not supported"):
            route_statement(catalog, "create table placed location '/tmp/elsewhere' as select 1 as id")
        with pytest.raises(ConfigurationError, match="dml_s.parted as select: PARTITIONED BY, LOCATION, OPTIONS"):
            route_statement(catalog, "create table parted partitioned by (v) as select 1 as id, 'a' as v")
        assert not os.path.exists(root / "dml_s" / "parted")
    finally:
        spark.sql("drop table if exists dml_s.spark_own")  # a name Spark's own table holds, above
        spark.sql("use default")
    assert sorted((r.id, r.v) for r in table.read().collect()) == [(3, "C"), (4, "d")]
    assert [i.action for i in table.timeline()] == ["commit", "commit", "replacecommit"] + ["commit"] * 6
    assert table.validate() == []
    assert not [f for f in os.listdir(table.path) if f.startswith("part-")]
    assert_hudi_rs_agrees(table)


def test_the_text_reader_of_spark_connect_agrees_with_sparks_parser(spark):
    """Over Spark Connect statements are read from their text: for every shape the router acts
    on, the text gives the same kind, target and parts as Spark's parser, and at least its names."""
    from dbt.adapters.hudilite.sql import statement as st
    from dbt.adapters.hudilite.sql.plan_reader import statement_from_plan
    from dbt.adapters.hudilite.sql.text_reader import statement_from_text
    from tests.unit.test_sql_text import CASES

    extra = ["insert into t partition (p = 'x') select 1", "insert into s.t by name select 1 as id",
             "update s.t set a = 1 where b in (select b from s.u)", "delete from s.t d where d.a = 1",
             "create table t partitioned by (v) as select 1 as v", "create table t using hudi as select 1 as v",
             "select * from (select * from s.a) x join s.b on x.id = b.id where x.id in (select id from c)"]
    for sql in [case[0] for case in CASES] + extra:
        plan, text = statement_from_plan(spark, sql), statement_from_text(sql, lambda q: q)
        # the table it would change (a write naming no table changes none of ours)
        assert (text.target if text.writes else None) == (plan.target if plan.writes else None), sql
        if plan.kind in (st.INSERT, st.UPDATE, st.DELETE, st.CREATE_AS_SELECT, st.REPLACE_AS_SELECT):
            assert text.kind == plan.kind, sql
        assert plan.names <= text.names, sql
        fields = ["with_before", "alias", "overwrite", "by_name", "columns", "partition_clause", "if_not_exists",
                  "placement"]
        assert [getattr(text, f) for f in fields] == [getattr(plan, f) for f in fields], sql
        if plan.kind in (st.CREATE_AS_SELECT, st.REPLACE_AS_SELECT):
            assert (text.provider or "").lower() == (plan.provider or "").lower(), sql


def test_no_spark_write_aimed_straight_at_a_registration_changes_storage(spark, tmp_path):
    """Whatever the router misses reaches Spark, and Spark's file writers refuse a relation of
    more than one path: a registration always names the two empty companions beside its files,
    so even a one-file table (the data loss of issue 30, item 1) and an empty one are refused."""
    import os

    import pytest

    root = tmp_path / "lakehouse"
    one = HudiTable.create(spark, str(root / "s" / "one"), "one")
    one.insert(spark.createDataFrame([(1, "a")], "id long, v string").coalesce(1))
    HudiTable.create(spark, str(root / "s" / "empty"), "empty", schema=spark.range(0).schema)
    catalog = StorageCatalog(spark, str(root))

    def files():
        return sorted((os.path.relpath(os.path.join(d, f), root), os.path.getsize(os.path.join(d, f)))
                      for d, _, fs in os.walk(root) for f in fs if "/.hoodie" not in d and not d.endswith(".hoodie"))

    run_statement(catalog, "select * from s.one, s.empty").collect()  # both registered
    assert len(one.latest_base_files()) == 1
    before = files()
    statements = ["insert into s.one values (9, 'x')", "insert overwrite s.one values (9, 'x')",
                  "insert overwrite table s.one select * from s.one", "insert into s.empty values (9)",
                  "insert overwrite s.empty values (9)", "truncate table s.one"]
    for statement in statements:  # straight to Spark, as a statement the router missed would go
        with pytest.raises(Exception, match="MULTI_PATH|TRUNCATE"):
            spark.sql(statement)
    # EXECUTE IMMEDIATE straight to Spark (the router carries it out through the core): refused the same way.
    with pytest.raises(Exception, match="MULTI_PATH"):
        spark.sql("EXECUTE IMMEDIATE 'INSERT OVERWRITE s.one (id, v) VALUES (9, ''x'')'")
    assert files() == before
    assert [(r.id, r.v) for r in one.read().collect()] == [(1, "a")] and one.validate() == []
    assert [tuple(r) for r in run_statement(catalog, "select id, v from s.one").collect()] == [(1, "a")]


def test_an_entry_dropped_behind_the_routers_back_is_made_again(spark, tmp_path):
    """`EXECUTE IMMEDIATE 'DROP TABLE s.t'` (or `DROP TABLE IDENTIFIER('s.t')` over Connect)
    reaches Spark's catalog: every later statement naming s.t failed with TABLE_OR_VIEW_NOT_FOUND."""
    root = tmp_path / "lakehouse"
    HudiTable.create(spark, str(root / "s" / "t"), "t").insert(spark.createDataFrame([(1,)], "id long"))
    catalog = StorageCatalog(spark, str(root))
    catalog.remember_view("s", "v", "select id * 10 as id10 from s.t")
    assert [r.id10 for r in run_statement(catalog, "select id10 from s.v").collect()] == [10]
    spark.sql("EXECUTE IMMEDIATE 'DROP TABLE s.t'")  # behind the router's back (through it, it is refused)
    spark.sql("drop view s.v")
    assert [r.id10 for r in run_statement(catalog, "select id10 from s.v").collect()] == [10]
    assert [r.id for r in run_statement(catalog, "select id from s.t").collect()] == [1]


def test_an_entry_already_as_of_the_latest_commit_is_not_made_again(spark, tmp_path):
    """A build that changed nothing keeps the entry it has; a commit (an older writer's that
    completes after a newer one's too), or the entry's loss behind our back, makes it again."""
    root = tmp_path / "lakehouse"
    table = HudiTable.create(spark, str(root / "s" / "t"), "t")
    table.insert(spark.createDataFrame([(1,)], "id long"))
    catalog = StorageCatalog(spark, str(root))
    identity = lambda: catalog.entries._identities[("s", "t")]  # noqa: E731 - its token is new at each registration
    catalog.register("s", "t", table)
    made = identity()
    catalog.register("s", "t", table, unless_current=True)
    assert identity() == made
    table.insert(spark.createDataFrame([(2,)], "id long"))
    catalog.register("s", "t", table, unless_current=True)
    assert identity() != made and sorted(r.id for r in spark.table("s.t").collect()) == [1, 2]
    made = identity()
    spark.sql("EXECUTE IMMEDIATE 'DROP TABLE s.t'")
    catalog.register("s", "t", table, unless_current=True)
    assert identity() != made and spark.catalog.tableExists("s.t")
    latest = table.context.timeline.latest_completed()
    state = table_state(table)
    assert state[2:4] == (latest.timestamp, latest.action)
    assert table_state(HudiTable.open(spark, str(root / "s" / "t"))) == state


# ---- rebuilds with a new layout, swapped in (StorageCatalog.swap_in) ---------------------------
def _rebuild(spark, catalog, name):
    """`a.<name>` partitioned by p with rows 1-3, and a committed rebuild of it, not partitioned,
    with rows 10-11 (the rebuild's instant)."""
    schema = "id long, p string"
    old = HudiTable.create(spark, catalog.table_path("a", name), name, partition_by="p")
    old.insert(spark.createDataFrame([(1, "x"), (2, "y"), (3, "x")], schema))
    staged = HudiTable.create(spark, catalog.swaps.rebuild_path("a", name), name)
    return old, staged.insert(spark.createDataFrame([(10, "x"), (11, "y")], schema))


def _ids(table):
    return sorted(r.id for r in table.read().collect())


def test_a_write_that_began_on_the_table_a_rebuild_replaced_publishes_nothing(spark, tmp_path):
    """A writer opened the old table and was writing when the rebuild was swapped in: under the
    table lock it finds hoodie.properties is not the one it began with, and publishes nothing
    into the new table."""
    import pytest
    from dbt.adapters.hudilite.table import TableReplacedError
    catalog = StorageCatalog(spark, str(tmp_path))
    old, instant = _rebuild(spark, catalog, "t")
    ctx = old.context
    publish = ctx.commit

    def swap_then_publish(txn, *args, **kwargs):
        ctx.commit = publish
        catalog.swap_in("a", "t", instant)
        return publish(txn, *args, **kwargs)

    ctx.commit = swap_then_publish
    with pytest.raises(TableReplacedError, match="dropped or replaced by a rebuild"):
        old.insert(spark.createDataFrame([(4, "x")], "id long, p string"))
    with pytest.raises(TableReplacedError):  # and again with that handle: refused before anything is written
        old.insert(spark.createDataFrame([(5, "x")], "id long, p string"))
    new = catalog.open("a", "t")
    assert _ids(new) == [10, 11] and [i.timestamp for i in new.timeline()] == [instant]
    assert new.config.partition_fields == [] and new.validate() == []


def test_a_swap_cut_short_is_finished_by_the_next_look_or_the_next_rebuild(spark, tmp_path, monkeypatch):
    """Cut with the old table deleted and the rebuild not moved in (locally a rename), the name
    holds no table: the next look finishes the swap; so does the next rebuild's `rebuild_path`
    before it empties the rebuild folder. A rebuild that is not the one committed at the
    instant given (another rebuild took its place) is refused and the table left as it was."""
    import pytest
    from dbt.adapters.hudilite.table import ConfigurationError
    from dbt.adapters.hudilite.table.storage import faults

    class Cut(Exception):
        pass

    def cut(phase):
        if phase == "swap":
            raise Cut()

    catalog = StorageCatalog(spark, str(tmp_path))
    for name, finish in (("by_look", lambda c: c.open("a", "by_look")),
                         ("by_rebuild", lambda c: c.swaps.rebuild_path("a", "by_rebuild"))):
        _, instant = _rebuild(spark, catalog, name)
        monkeypatch.setattr(faults, "reach", cut)
        with pytest.raises(Cut):
            catalog.swap_in("a", name, instant)
        monkeypatch.undo()
        assert not HudiTable.exists(catalog.table_path("a", name))
        finish(StorageCatalog(spark, str(tmp_path)))  # a new process
        table = HudiTable.open(spark, catalog.table_path("a", name))
        assert _ids(table) == [10, 11] and table.validate() == [], name
        assert not (tmp_path / "a" / ".hudilite_swaps" / name / "swap.json").exists()

    old, instant = _rebuild(spark, catalog, "stale")
    with pytest.raises(ConfigurationError, match="its rebuild is gone"):
        catalog.swap_in("a", "stale", "20000101000000000")  # not the instant the rebuild committed
    assert _ids(catalog.open("a", "stale")) == [1, 2, 3]


def test_a_rename_onto_a_name_that_holds_files_is_refused_and_moves_nothing(spark, tmp_path):
    from dbt.adapters.hudilite.table import ConfigurationError
    import pytest
    catalog = StorageCatalog(spark, str(tmp_path))
    _, instant = _rebuild(spark, catalog, "src")
    (tmp_path / "a" / "dst").mkdir()
    (tmp_path / "a" / "dst" / "stray.txt").write_text("not a table")
    with pytest.raises(ConfigurationError, match=r"cannot rename table a.src to a.dst: the name is taken .*a/dst holds files"):
        catalog.rename_table("a", "src", "a", "dst")
    assert _ids(catalog.open("a", "src")) == [1, 2, 3]
    (tmp_path / "a" / "dst" / "stray.txt").unlink()
    (tmp_path / "a" / "dst").rmdir()
    catalog.rename_table("a", "src", "a", "dst")
    assert _ids(catalog.open("a", "dst")) == [1, 2, 3] and not HudiTable.exists(catalog.table_path("a", "src"))
    assert not (tmp_path / "a" / "dst" / ".hoodie" / ".hudilite" / "lock").exists()  # the moved lock went


def test_names_are_lower_case_on_storage_and_capitalised_folders_stay_readable(spark, tmp_path):
    """Issue 44, item 9: one case rule for folders, the catalog and dbt's cache. New tables and
    views go to lower-case folders and files, as Spark's catalog names them; a table an older
    hudilite made in a capitalised folder (`Sales/MODEL`) is found under any spelling."""
    root = tmp_path / "lakehouse"
    legacy = HudiTable.create(spark, str(root / "Sales" / "MODEL"), "MODEL")
    legacy.insert(spark.createDataFrame([(1,)], "id long"))
    catalog = StorageCatalog(spark, str(root))
    for schema, name in [("Sales", "MODEL"), ("sales", "model"), ("SALES", "Model")]:
        assert catalog.is_table(schema, name)
        assert catalog.table_path(schema, name) == str(root / "Sales" / "MODEL")
    assert [r.id for r in run_statement(catalog, "select id from sales.model").collect()] == [1]
    run_statement(catalog, "insert into SALES.Model values (2)")
    assert sorted(r.id for r in HudiTable.open(spark, str(root / "Sales" / "MODEL")).read().collect()) == [1, 2]

    created = catalog.create_table("Sales", "NewOne", spark.createDataFrame([(3,)], "id long"))
    assert created.path == str(root / "Sales" / "newone")
    catalog.remember_view("Sales", "MyView", "select id from sales.newone")
    assert (root / "Sales" / ".hudilite_views" / "myview.sql").exists()
    assert catalog.is_view("sales", "MYVIEW")
    assert [r.id for r in run_statement(catalog, "select id from sales.myview").collect()] == [3]
    assert catalog.tables("sales") == ["MODEL", "newone"]
    catalog.drop_table("sales", "model")
    assert not (root / "Sales" / "MODEL").exists() and not catalog.is_table("Sales", "MODEL")
    again = catalog.create_table("Sales", "MODEL", spark.createDataFrame([(4,)], "id long"))
    assert again.path == str(root / "Sales" / "model")  # a name made again is lower case
