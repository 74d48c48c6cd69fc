"""dbt Python models on hudilite: dbt-tests-adapter's python_model suites and our own."""

import pytest

from dbt.tests.adapter.python_model.test_python_model import (
    BasePythonEmptyTests,
    BasePythonIncrementalTests,
    BasePythonMetaGetTests,
    BasePythonModelTests,
    BasePythonSampleTests,
)
from dbt.tests.adapter.python_model import test_spark
from dbt.tests.util import run_dbt, write_file

from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.functional.test_hudilite_models import HudiliteProject


class TestPythonModel(BasePythonModelTests):
    pass


class TestPythonIncremental(BasePythonIncrementalTests):
    pass


class TestPythonMetaGet(BasePythonMetaGetTests):
    pass


class TestPythonEmpty(BasePythonEmptyTests):
    pass


class TestPythonSample(BasePythonSampleTests):
    pass


class TestPySparkDataFrames(test_spark.BasePySparkTests):
    @pytest.fixture(scope="class")
    def models(self):
        # Koalas is pandas-on-Spark's old Databricks package, not installable beside pyspark 4.
        return {"pandas_df.py": test_spark.PANDAS_MODEL, "pyspark_df.py": test_spark.PYSPARK_MODEL,
                "pandas_on_spark_df.py": test_spark.PANDAS_ON_SPARK_MODEL}

    def test_different_dataframes(self, project):
        results = run_dbt(["run"])  # the suite's own test expects the fourth, Koalas, model
        assert len(results) == 3
        for name in ("pandas_df", "pyspark_df", "pandas_on_spark_df"):
            rows = project.run_sql(f"select City, Latitude from {project.test_schema}.{name} order by City", fetch="all")
            assert rows[0] == ("Bogota", 4.60) and len(rows) == 5


ORDERS_PY = """
def model(dbt, session):
    dbt.config(materialized="incremental", unique_key="order_id", partition_by="region", precombine_field="version")
    orders = dbt.ref("raw_orders")
    if dbt.is_incremental:
        # only versions newer than what the table holds: read `dbt.this` in plain SQL
        newest = session.sql(f"select max(version) from {dbt.this}").collect()[0][0]
        orders = orders.where(orders.version > newest)
    return orders
"""

RAW_ORDERS_SQL = """
{% if var('batch', 1) == 1 %}
select 1 as order_id, 'eu' as region, 10 as amount, 1 as version union all select 2, 'us', 20, 1
{% else %}
select 1 as order_id, 'eu' as region, 10 as amount, 1 as version union all select 2, 'us', 20, 1
union all select 2, 'us', 25, 2 union all select 3, 'eu', 30, 2
{% endif %}
"""


class TestAnIncrementalPythonModelMergesThroughTheCore(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"raw_orders.sql": RAW_ORDERS_SQL, "orders.py": ORDERS_PY}

    def test_merge_rows_timeline_and_hudi_rs(self, project, spark):
        run_dbt(["run"])
        run_dbt(["run", "--vars", "{batch: 2}"])
        assert self.rows(project, "orders", "order_id, region, amount, version") == [
            (1, "eu", 10, 1), (2, "us", 25, 2), (3, "eu", 30, 2)]
        table = self.table(project, spark, "orders")
        last = table.commit_metadata(table.timeline()[-1])
        assert last.operation == "UPSERT" and {s.partitionPath for s in last.write_stats} == {"region=us", "region=eu"}
        assert table.config.record_key_fields == ["order_id"] and table.config.precombine_field == "version"
        assert_hudi_rs_agrees(table)

    def test_an_error_in_the_model_names_it_and_its_line_and_changes_nothing(self, project, spark):
        run_dbt(["run"])
        table = self.table(project, spark, "orders")
        before = table.timeline()
        write_file("def model(dbt, session):\n    orders = dbt.ref('raw_orders')\n    return orders.nope\n",
                   "models", "orders.py")
        (failed,) = run_dbt(["run", "--select", "orders"], expect_pass=False)
        assert "model 'orders': " in failed.message and "AttributeError" in failed.message and "line 3: return orders.nope" in failed.message
        write_file("def model(dbt, session):\n    return [1, 2]\n", "models", "orders.py")
        (failed,) = run_dbt(["run", "--select", "orders"], expect_pass=False)
        assert "model 'orders': model() returned a builtins.list; return a Spark DataFrame" in failed.message
        assert table.timeline() == before
        write_file(ORDERS_PY, "models", "orders.py")
