"""`select * from {{ ref('m') }}` returns the model's columns, on every materialization: a
hudilite table is registered with its data columns only, and Hudi's meta columns are one macro
away (`hudilite_with_meta`), as are time travel and changes reads."""

import pytest

from dbt.tests.util import run_dbt

MODELS = {
    "t1.sql": "{{ config(materialized='table') }} select id, 'a' as v from range(3) t(id)",
    "u1.sql": "{{ config(materialized='incremental', unique_key='id') }} select id, 'b' as w from range(3) t(id)",
    # Both sides carry the same five meta column names if `select *` reads them: COLUMN_ALREADY_EXISTS.
    "joined.sql": "{{ config(materialized='view') }} select * from {{ ref('t1') }} join {{ ref('u1') }} using (id)",
    "tbl_copy.sql": "{{ config(materialized='table') }} select * from {{ ref('t1') }}",
    "keys.sql": "{{ config(materialized='table') }}\n"
                "select _hoodie_record_key as record_key, _hoodie_commit_time is not null as committed, id\n"
                "from {{ hudilite_with_meta(ref('u1')) }}",
}
# Equal data in two tables: no row differs (the meta columns of each would make every row differ).
EQUAL_TEST = "select * from {{ ref('t1') }} except select * from {{ ref('tbl_copy') }}"


class TestSelectStar:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @pytest.fixture(scope="class")
    def tests(self):
        return {"t1_equals_its_copy.sql": EQUAL_TEST}

    def test_select_star_returns_the_models_columns(self, project):
        run_dbt(["build"])  # the view, the tables and the singular test
        schema = project.test_schema
        columns = lambda relation: [r[0] for r in project.run_sql(f"describe {schema}.{relation}", fetch="all")  # noqa: E731
                                    if r[0] and not r[0].startswith("#")]
        assert columns("t1") == ["id", "v"] and columns("u1") == ["id", "w"]
        assert columns("joined") == ["id", "v", "w"]
        assert sorted(project.run_sql(f"select * from {schema}.joined", fetch="all")) == [(0, "a", "b"), (1, "a", "b"),
                                                                                         (2, "a", "b")]
        assert sorted(tuple(r) for r in project.run_sql(f"select * from {schema}.keys", fetch="all")) == [
            ("0", True, 0), ("1", True, 1), ("2", True, 2)]
        run_dbt(["run", "--select", "u1"])  # and again, incrementally: the merge reads its table the same way
        assert columns("u1") == ["id", "w"]
