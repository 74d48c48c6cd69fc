"""dbt's relation cache after a run: it holds every relation the run built (table, incremental,
view, seed, snapshot) with its kind as storage has it, so `get_relation` answers from it
without listing storage again; a model that changes kind, and the adapter's drop and rename,
keep it in step with storage."""

import pytest

from dbt.adapters.hudilite.impl import HudiliteAdapter
from dbt.tests.util import run_dbt
from tests.functional.test_hudilite_models import HudiliteProject

MODELS = {
    "built_table.sql": "{{ config(materialized='table') }} select event_id, page from {{ ref('raw_events') }}",
    "built_incremental.sql": "{{ config(materialized='incremental', unique_key='event_id') }}\n"
                             "select event_id, page from {{ ref('raw_events') }}",
    "built_view.sql": "{{ config(materialized='view') }} select event_id from {{ ref('built_table') }}",
    # a view or a table, as the run's vars say
    "changes_kind.sql": "{{ config(materialized=var('kind', 'view')) }} select 1 as id",
}

SNAPSHOT = """
{% snapshot built_snapshot %}
{{ config(unique_key='event_id', strategy='check', check_cols=['page'], target_schema=schema) }}
select event_id, page from {{ ref('raw_events') }}
{% endsnapshot %}
"""

BUILT = {"raw_events": "table", "built_table": "table", "built_incremental": "table", "built_view": "view",
         "built_snapshot": "table", "changes_kind": "view"}

_LIST = HudiliteAdapter.list_relations_without_caching


@pytest.fixture
def listings(monkeypatch):
    """The schemas storage is listed for, call by call (every adapter instance: dbt makes a
    new one for each invocation)."""
    calls = []

    def counted(adapter, schema_relation):
        calls.append(schema_relation.schema)
        return _LIST(adapter, schema_relation)

    monkeypatch.setattr(HudiliteAdapter, "list_relations_without_caching", counted)
    return calls


class TestRelationCache(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"built_snapshot.sql": SNAPSHOT}

    @staticmethod
    def cached(project, adapter):
        return {r.inner.identifier: str(r.inner.type) for r in adapter.cache.relations.values()
                if r.inner.schema == project.test_schema}

    @staticmethod
    def on_storage(project, adapter):
        with adapter.connection_named("storage"):
            listed = _LIST(adapter, adapter.Relation.create(schema=project.test_schema))
        return {r.identifier: str(r.type) for r in listed}

    @staticmethod
    def run(project, *args):
        """`dbt <args>` in this process; the adapter that ran it (the factory's, which
        `project.adapter` returns: a new instance per invocation)."""
        before = project.adapter
        run_dbt(list(args))
        adapter = project.adapter
        assert adapter is not before
        return adapter

    def test_a_run_leaves_what_it_built_in_the_cache(self, project, listings):
        adapter = self.run(project, "build")
        assert listings == [project.test_schema]  # storage listed once, when the run began
        assert self.cached(project, adapter) == BUILT == self.on_storage(project, adapter)
        listings.clear()
        with adapter.connection_named("after"):
            for name, kind in BUILT.items():
                relation = adapter.get_relation(None, project.test_schema, name)
                assert (relation.identifier, str(relation.type)) == (name, kind)
            assert adapter.get_relation(None, project.test_schema, "never_built") is None
        assert listings == []  # answered by the cache

        # a model that was a view becomes a table, and a view again: the cache follows
        adapter = self.run(project, "run", "--vars", "{kind: table}")
        assert self.cached(project, adapter) == {**BUILT, "changes_kind": "table"} == self.on_storage(project, adapter)
        with adapter.connection_named("after"):
            assert adapter.get_relation(None, project.test_schema, "changes_kind").is_table
        adapter = self.run(project, "run", "--select", "changes_kind")
        assert self.cached(project, adapter) == BUILT == self.on_storage(project, adapter)

    def test_drop_and_rename_keep_the_cache_in_step(self, project, listings):
        adapter = self.run(project, "build")
        schema = project.test_schema

        def relation(name, kind="table"):
            return adapter.Relation.create(schema=schema, identifier=name, type=kind)

        listings.clear()
        with adapter.connection_named("renames"):
            adapter.rename_relation(relation("built_table"), relation("renamed_table"))
            expected = {**{k: v for k, v in BUILT.items() if k != "built_table"}, "renamed_table": "table"}
            assert self.cached(project, adapter) == expected

            adapter.rename_relation(relation("renamed_table"), relation("built_incremental"))  # onto a table
            expected.pop("renamed_table")
            assert self.cached(project, adapter) == expected

            adapter.rename_relation(relation("built_snapshot"), relation("changes_kind"))  # onto a view
            expected.pop("built_snapshot")
            expected["changes_kind"] = "table"
            assert self.cached(project, adapter) == expected

            adapter.drop_relation(relation("built_view", "view"))
            adapter.drop_relation(relation("built_incremental"))
            expected = {"raw_events": "table", "changes_kind": "table"}
            assert self.cached(project, adapter) == expected
            assert adapter.get_relation(None, schema, "built_view") is None
            assert adapter.get_relation(None, schema, "changes_kind").is_table
        assert listings == []
        assert self.on_storage(project, adapter) == expected
        rows = project.run_sql(f"select event_id from {schema}.changes_kind", fetch="all")  # the snapshot's rows
        assert sorted(r[0] for r in rows) == [1, 2, 3, 4, 5]
        with adapter.connection_named("drop"):  # the view the rename replaced is gone too: nothing holds the name
            adapter.drop_relation(relation("changes_kind"))
        assert self.cached(project, adapter) == {"raw_events": "table"} == self.on_storage(project, adapter)
