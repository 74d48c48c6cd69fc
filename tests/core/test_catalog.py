"""Storage as catalog: tables under a location_root become Spark tables with exact file lists."""

from pyspark.sql import functions as F

from dbt.adapters.hudilite.catalog import StorageCatalog
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
    catalog.sync()
    rows = spark.sql("select id, p from cat_a.odd_values order by id").collect()
    assert [(r.id, r.p) for r in rows] == [(1, "a,b"), (2, "{x}"), (3, "c*[d]?"), (5, "plain")]
    assert spark.sql("select * from cat_a.empty").columns[-1] == "x"
    assert spark.sql("select count(*) from cat_a.empty").first()[0] == 0

    catalog.remember_view("cat_a", "v", "select count(*) as n from cat_a.odd_values")
    spark.sql("drop view if exists cat_a.v")
    catalog.sync()  # a fresh process re-creates remembered views
    assert spark.sql("select n from cat_a.v").first().n == 4

    catalog.drop_schema("cat_a")
    assert not (root / "cat_a").exists()
