"""A dbt view model is kept on storage as its SQL: renaming it through the adapter (with a
relation type or without) moves that SQL with the view (it stayed under the old name, which
came back, and the new name was gone in the next session; without a type dbt-spark's macro
refused), and a drop forgets it."""

import pytest

from dbt.tests.util import run_dbt
from tests.functional.test_hudilite_models import HudiliteProject

MODELS = {
    "base_rows.sql": "{{ config(materialized='table') }} select event_id, page from {{ ref('raw_events') }}",
    "page_view.sql": "{{ config(materialized='view') }} select event_id * 10 as id10 from {{ ref('base_rows') }}",
}


class TestViewRelations(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def test_rename_and_typeless_drop_of_a_view_model(self, project):
        run_dbt(["build"])
        schema = project.test_schema
        adapter = project.adapter
        catalog = adapter.catalog
        assert catalog.views(schema) == ["page_view"]
        with adapter.connection_named("rename"):
            adapter.rename_relation(adapter.Relation.create(schema=schema, identifier="page_view", type="view"),
                                    adapter.Relation.create(schema=schema, identifier="renamed_view", type="view"))
            assert catalog.views(schema) == ["renamed_view"]
            rows = project.run_sql(f"select id10 from {schema}.renamed_view", fetch="all")
            assert sorted(r[0] for r in rows) == [10, 20, 30, 40, 50]
            with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
                project.run_sql(f"select id10 from {schema}.page_view", fetch="all")
            # dbt passes relations without a type (e.g. from a name it only knows as a string)
            adapter.rename_relation(adapter.Relation.create(schema=schema, identifier="renamed_view"),
                                    adapter.Relation.create(schema=schema, identifier="page_view"))
            assert catalog.views(schema) == ["page_view"]
            rows = project.run_sql(f"select id10 from {schema}.page_view", fetch="all")
            assert sorted(r[0] for r in rows) == [10, 20, 30, 40, 50]
            adapter.drop_relation(adapter.Relation.create(schema=schema, identifier="page_view", type="view"))
            assert catalog.views(schema) == []
            with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
                project.run_sql(f"select id10 from {schema}.page_view", fetch="all")
        run_dbt(["run", "--select", "page_view"])  # the model builds again
        assert catalog.views(schema) == ["page_view"]

    def test_a_typeless_drop_of_a_view_model(self, project):
        run_dbt(["build"])
        schema, adapter = project.test_schema, project.adapter
        with adapter.connection_named("drop"):
            adapter.drop_relation(adapter.Relation.create(schema=schema, identifier="page_view"))
            assert adapter.catalog.views(schema) == []
            with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
                project.run_sql(f"select id10 from {schema}.page_view", fetch="all")
