"""SQL INSERT and UPDATE on a hudilite table store values as Spark's own INSERT does (ANSI store
assignment, whatever spark.sql.ansi.enabled says): a value that does not fit its column fails
the statement naming the column, and nothing is committed (issue 44, item 8: they were wrapped
or stored as NULL)."""

import pytest

from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
from dbt.adapters.hudilite.sql.dml import run_statement, store_assignable
from dbt.adapters.hudilite.table import HudiTable
from tests.core.hudi_rs import assert_hudi_rs_agrees


@pytest.fixture
def orders(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "sa" / "orders"), "orders")
    table.insert(spark.createDataFrame([(1, 10, None, None)], "id int, qty int, d date, price decimal(5,2)"))
    catalog = StorageCatalog(spark, str(tmp_path))
    yield catalog, table
    spark.sql("DROP NAMESPACE IF EXISTS sa CASCADE")


def _rows(table):
    return sorted(tuple(r) for r in table.read().select("id", "qty", "d", "price").collect())


@pytest.mark.parametrize("ansi", ["false", "true"])
@pytest.mark.parametrize("statement, error", [
    ("UPDATE sa.orders SET qty = 3000000000", r"CAST_OVERFLOW_IN_TABLE_INSERT.*\"BIGINT\" type to the \"INT\" type "
                                             r"column `qty`"),
    ("UPDATE sa.orders SET qty = qty * 1000000000L WHERE id = 1", r"CAST_OVERFLOW_IN_TABLE_INSERT.*column `qty`"),
    ("UPDATE sa.orders SET price = 1234.5", r"CAST_OVERFLOW_IN_TABLE_INSERT.*column `price`"),
    ("UPDATE sa.orders SET d = '2026-13-45'", r"CAST_INVALID_INPUT.*\"STRING\" cannot be cast to \"DATE\" for "
                                              r"column `d`"),
    ("UPDATE sa.orders SET d = array(1)", r"CANNOT_SAFELY_CAST.*`d` \"ARRAY<INT>\" to \"DATE\""),
    ("INSERT INTO sa.orders SELECT 7, 5000000000, NULL, NULL", r"CAST_OVERFLOW_IN_TABLE_INSERT.*column `qty`"),
    ("INSERT INTO sa.orders SELECT 7, 5, '2026-13-45', NULL", r"CAST_INVALID_INPUT.*column `d`"),
    ("INSERT INTO sa.orders SELECT 7, '5x', NULL, NULL", r"CAST_INVALID_INPUT.*\"INT\" for column `qty`"),
    ("INSERT INTO sa.orders (id, qty) VALUES (7, cast('NaN' as double))", r"CAST_OVERFLOW_IN_TABLE_INSERT.*`qty`"),
    ("INSERT INTO sa.orders (id, qty) VALUES (7, true)", r"CANNOT_SAFELY_CAST.*`qty` \"BOOLEAN\" to \"INT\""),
    ("INSERT OVERWRITE sa.orders (id, price) VALUES (7, 1000)", r"CAST_OVERFLOW_IN_TABLE_INSERT.*`price`"),
])
def test_a_value_that_does_not_fit_fails_naming_the_column_and_commits_nothing(spark, orders, statement, error, ansi):
    catalog, table = orders
    before = ([i.timestamp for i in table.timeline()], _rows(table))
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        with pytest.raises(Exception, match=r"sa\.orders: \[") as raised:
            run_statement(catalog, statement).collect()
        import re
        assert re.search(error, str(raised.value)), str(raised.value)[:500]
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert ([i.timestamp for i in table.timeline()], _rows(table)) == before
    assert table.validate() == []


def test_values_that_fit_are_stored_as_sparks_insert_stores_them(spark, orders):
    import datetime as dt
    from decimal import Decimal

    catalog, table = orders
    for sql in ["INSERT INTO sa.orders SELECT 2L, 2147483647L, timestamp'2026-01-05 10:00:00', 1.005d",
                "INSERT INTO sa.orders VALUES (4, '7', '2026-03-01', '1.5')",  # strings parsed, as dbt's tests write them
                "INSERT INTO sa.orders (id, qty, price) VALUES (3, 1.9d, 999.99)",
                "UPDATE sa.orders SET qty = qty + 1L, price = 12 WHERE id = 1",
                "UPDATE sa.orders SET d = date'2026-02-01', qty = NULL WHERE id = 3"]:
        run_statement(catalog, sql).collect()
    assert _rows(table) == [(1, 11, None, Decimal("12.00")), (2, 2147483647, dt.date(2026, 1, 5), Decimal("1.01")),
                            (3, None, dt.date(2026, 2, 1), Decimal("999.99")), (4, 7, dt.date(2026, 3, 1), Decimal("1.50"))]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_the_rule_is_sparks_can_ansi_store_assign(spark):
    """The Python rule agrees with Spark's own Cast.canANSIStoreAssign on every pair of types here."""
    from pyspark.sql import types as T

    types = [T.ByteType(), T.IntegerType(), T.LongType(), T.DoubleType(), T.FloatType(), T.DecimalType(5, 2),
             T.StringType(), T.BooleanType(), T.DateType(), T.TimestampType(), T.TimestampNTZType(), T.BinaryType(),
             T.NullType(), T.ArrayType(T.IntegerType()), T.ArrayType(T.StringType()),
             T.StructType([T.StructField("a", T.LongType())]), T.MapType(T.StringType(), T.IntegerType())]
    cast = spark._jvm.org.apache.spark.sql.catalyst.expressions.Cast

    def jvm(data_type):
        return spark._jsparkSession.parseDataType(data_type.json())

    for given in types:
        for column in types:
            if isinstance(column, T.NullType):
                continue
            assert store_assignable(given, column) == cast.canANSIStoreAssign(jvm(given), jvm(column)), (given, column)
