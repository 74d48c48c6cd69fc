"""Model contracts and constraints: dbt-tests-adapter's suites, with Spark's type names.

hudilite has no CREATE TABLE statement to put constraints in: a build hands the contract's
SELECT to the core, and `not_null` and `check` are checked on every row inside the write job,
before the commit. So the "DDL" the runtime-enforcement suites compare is the SELECT that was
built, headed by the constraints enforced on it.
"""

import pytest

from dbt.tests.adapter.constraints import fixtures
from dbt.tests.adapter.constraints.test_constraints import (
    BaseConstraintQuotedColumn,
    BaseConstraintsRollback,
    BaseConstraintsRuntimeDdlEnforcement,
    BaseIncrementalConstraintsColumnsEqual,
    BaseIncrementalConstraintsRollback,
    BaseIncrementalConstraintsRuntimeDdlEnforcement,
    BaseModelConstraintsRuntimeEnforcement,
    BaseTableConstraintsColumnsEqual,
    BaseViewConstraintsColumnsEqual,
)
from dbt.tests.util import relation_from_name, run_dbt, write_file

from tests.functional.test_hudilite_models import HudiliteProject


class SparkTypes:
    @pytest.fixture
    def string_type(self):
        return "string"

    @pytest.fixture
    def int_type(self):
        return "int"

    @pytest.fixture
    def data_types(self):
        # value, contract data_type, what the mismatch error calls it
        return [
            ["1", "int", "int"],
            ["'1'", "string", "string"],
            ["true", "boolean", "boolean"],
            ["cast('2019-01-01' as date)", "date", "date"],
            ["cast('2013-11-03 00:00:00' as timestamp)", "timestamp", "timestamp"],
            ["array('a','b','c')", "array<string>", "array<string>"],
            ["array(1,2,3)", "array<int>", "array<int>"],
            ["cast(1 as decimal(10,2))", "decimal(10,2)", "decimal(10,2)"],
            ["map('a', 1)", "map<string,int>", "map<string,int>"],
        ]


class TestTableConstraintsColumnsEqual(SparkTypes, BaseTableConstraintsColumnsEqual):
    pass


class TestViewConstraintsColumnsEqual(SparkTypes, BaseViewConstraintsColumnsEqual):
    pass


class TestIncrementalConstraintsColumnsEqual(SparkTypes, BaseIncrementalConstraintsColumnsEqual):
    pass


BUILT_SQL = """
-- enforced on every row before the commit: not_null(id)
-- enforced on every row before the commit: check((id > 0))
-- enforced on every row before the commit: check(id >= 1)
select id, color, date_day from (
    -- depends_on: <foreign_key_model_identifier>
    select 'blue' as color, 1 as id, '2019-01-01' as date_day
) as model_subq
"""


class TestTableConstraintsRuntimeDdlEnforcement(BaseConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def expected_sql(self):
        return BUILT_SQL


class TestIncrementalConstraintsRuntimeDdlEnforcement(BaseIncrementalConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def expected_sql(self):
        return BUILT_SQL


class TestModelConstraintsRuntimeEnforcement(BaseModelConstraintsRuntimeEnforcement):
    @pytest.fixture(scope="class")
    def expected_sql(self):
        return BUILT_SQL


class TestConstraintQuotedColumn(BaseConstraintQuotedColumn):
    @pytest.fixture(scope="class")
    def models(self):
        # In Spark "from" is a string: the quoted name is `from`.
        schema = fixtures.model_quoted_column_schema_yml.replace(
            """("from" = 'blue')""", "(`from` = 'blue')").replace("""'"from"'""", "'`from`'")
        return {"my_model.sql": fixtures.my_model_with_quoted_column_name_sql, "constraints_schema.yml": schema}

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return """
-- enforced on every row before the commit: not_null(id)
-- enforced on every row before the commit: not_null(from)
-- enforced on every row before the commit: check((`from` = 'blue'))
select id, `from`, date_day from (
    select 'blue' as `from`, 1 as id, '2019-01-01' as date_day
) as model_subq
"""


class RollbackLeavesTheTable(HudiliteProject):
    """The suites' rollback test reads `select *`, whose second column is a Hudi meta column
    here: the same steps, reading the model's columns, and the table's timeline unchanged."""

    def test__constraints_enforcement_rollback(self, project, spark, expected_color, expected_error_messages,
                                               null_model_sql):
        (result,) = run_dbt(["run", "-s", "my_model"])
        table = self.table(project, spark, "my_model")
        before = table.timeline()
        write_file(null_model_sql, "models", "my_model.sql")
        (failed,) = run_dbt(["run", "-s", "my_model"], expect_pass=False)
        assert all(message in failed.message for message in expected_error_messages), failed.message
        assert "model 'my_model'" in failed.message and "Traceback" not in failed.message
        relation = relation_from_name(project.adapter, "my_model")
        assert project.run_sql(f"select id, color from {relation}", fetch="all") == [(1, expected_color)]
        assert table.timeline() == before  # nothing published, nothing left in flight


class TestTableConstraintsRollback(RollbackLeavesTheTable, BaseConstraintsRollback):
    pass


class TestIncrementalConstraintsRollback(RollbackLeavesTheTable, BaseIncrementalConstraintsRollback):
    pass


ORDERS_SQL = """
{{ config(materialized='incremental', unique_key='order_id', partition_by='region', on_schema_change='fail') }}
{% if var('batch', 1) == 1 %}
select 1 as order_id, 'eu' as region, 10 as amount union all select 2, 'us', 20
{% else %}
select 1 as order_id, 'eu' as region, 11 as amount union all select 3, 'us', -5 union all select 4, 'eu', 40
{% endif %}
"""

ORDERS_YML = """
version: 2
models:
  - name: orders
    config:
      contract: {enforced: true}
    constraints:
      - type: check
        name: amount_not_negative
        expression: amount >= 0
    columns:
      - {name: order_id, data_type: int, constraints: [{type: not_null}]}
      - {name: region, data_type: string}
      - {name: amount, data_type: int}
"""


class TestACheckBrokenByOneRowOfAMergeChangesNothing(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": ORDERS_SQL, "orders.yml": ORDERS_YML}

    def test_the_merge_fails_naming_the_constraint_and_the_table_keeps_its_rows(self, project, spark):
        run_dbt(["run"])
        table = self.table(project, spark, "orders")
        before = table.timeline()
        (failed,) = run_dbt(["run", "--vars", "{batch: 2}"], expect_pass=False)
        assert "model 'orders': a row violates check constraint \"amount_not_negative\"" in failed.message
        assert self.rows(project, "orders", "order_id, region, amount") == [(1, "eu", 10), (2, "us", 20)]
        assert table.timeline() == before
        assert sorted(f.path for f in table.latest_base_files()) == sorted(
            f.path for f in table.latest_base_files(as_of=before[-1].timestamp))
