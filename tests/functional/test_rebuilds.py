"""A rebuild replaces its table atomically, as `create or replace table ... as select` does on
Delta: one that fails or is killed leaves the previous table readable, with its history; one
that changes the layout (partition_by, unique_key) is built beside the table and swapped in."""

import os

import pytest

from dbt.tests.util import run_dbt
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.functional import test_hudilite_models
from tests.functional.test_hudilite_models import HudiliteProject

# run 1: partitioned by p; run 2: by id, and row 2 fails; run 3: by id, and it works.
RELAYOUT = """
{{ config(materialized='table', partition_by=(['p'] if var('run', 1) == 1 else ['id'])) }}
select id, 'a' as p {% if var('run', 1) == 2 %}, (case when id = 2 then raise_error('boom') else 1 end) as bad{% endif %}
from range(3) t(id)
"""
# An incremental model whose partition_by changes, rebuilt with --full-refresh.
INCREMENTAL_RELAYOUT = """
{{ config(materialized='incremental', unique_key='id', partition_by=(['p'] if var('run', 1) == 1 else ['id'])) }}
select id, 'a' as p {% if var('run', 1) == 2 %}, (case when id = 2 then raise_error('boom') else 1 end) as bad{% endif %}
from range(3) t(id)
"""
# A view (run 1), then a table (run 3, the killed run's vars).
WAS_VIEW = """
{{ config(materialized=('view' if var('run', 1) == 1 else 'table')) }}
select id from range(3) t(id)
"""
# Reads itself: a rebuild that drops first could not.
SELF_READING = """
{{ config(materialized='table', partition_by=(['p'] if var('run', 1) == 1 else ['id'])) }}
{% if var('run', 1) == 1 %} select id, 'a' as p from range(3) t(id)
{% else %} select id + 10 as id, p from {{ this }} {% endif %}
"""


class TestRebuilds(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"relayout.sql": RELAYOUT, "incremental_relayout.sql": INCREMENTAL_RELAYOUT,
                "self_reading.sql": SELF_READING, "was_view.sql": WAS_VIEW}

    def history(self, project, spark, name):
        table = self.table(project, spark, name)
        return [i.timestamp for i in table.timeline()], table.config.partition_fields

    @pytest.mark.parametrize("name, flags", [("relayout", []), ("incremental_relayout", ["--full-refresh"])])
    def test_a_failed_rebuild_with_a_new_layout_keeps_the_old_table(self, project, spark, name, flags):
        run_dbt(["run", "--select", name, "--vars", "{run: 1}"])
        before = self.history(project, spark, name)
        assert before[1] == ["p"]
        results = run_dbt(["run", "--select", name, "--vars", "{run: 2}"] + flags, expect_pass=False)
        assert "boom" in results[0].message
        assert self.history(project, spark, name) == before  # the same table, its history whole
        assert self.rows(project, name, "id, p") == [(0, "a"), (1, "a"), (2, "a")]
        schema_folder = os.path.join(project.adapter.config.credentials.location_root, project.test_schema)
        assert sorted(os.listdir(os.path.join(schema_folder, ".hudilite_rebuilds"))) == []  # the failed one is gone

        run_dbt(["run", "--select", name, "--vars", "{run: 3}"] + flags)
        timestamps, partitioned_by = self.history(project, spark, name)
        assert partitioned_by == ["id"] and len(timestamps) == 1 and timestamps[0] > before[0][-1]
        assert self.rows(project, name, "id, p") == [(0, "a"), (1, "a"), (2, "a")]
        table = self.table(project, spark, name)
        assert table.validate() == []
        assert_hudi_rs_agrees(table)
        assert os.listdir(os.path.join(schema_folder, ".hudilite_rebuilds")) == []  # nothing left beside the tables
        assert [f for _, _, files in os.walk(os.path.join(schema_folder, ".hudilite_swaps"))
                for f in files if f != "lock"] == []  # the swap's record is gone, its lock file stays

    def test_a_rebuild_reads_the_table_it_replaces(self, project, spark):
        run_dbt(["run", "--select", "self_reading", "--vars", "{run: 1}"])
        run_dbt(["run", "--select", "self_reading", "--vars", "{run: 2}"])
        assert self.rows(project, "self_reading", "id, p") == [(10, "a"), (11, "a"), (12, "a")]
        assert self.history(project, spark, "self_reading")[1] == ["id"]

    def test_a_view_killed_on_its_way_to_a_table_stays_a_view(self, project, spark):
        run_dbt(["run", "--select", "was_view", "--vars", "{run: 1}"])
        test_hudilite_models.TestAKilledDbtRun.kill(project, "run", "was_view", "before_publish")
        relations = {r.identifier: str(r.type) for r in project.adapter.list_relations_without_caching(
            project.adapter.Relation.create(schema=project.test_schema))}
        assert relations["was_view"] == "view"  # not an empty table over it
        assert self.rows(project, "was_view", "id") == [(0,), (1,), (2,)]
        run_dbt(["run", "--select", "was_view", "--vars", "{run: 3}"])
        relations = {r.identifier: str(r.type) for r in project.adapter.list_relations_without_caching(
            project.adapter.Relation.create(schema=project.test_schema))}
        assert relations["was_view"] == "table" and self.rows(project, "was_view", "id") == [(0,), (1,), (2,)]

    @pytest.mark.parametrize("phase, rebuilt", [("swap", True), ("before_publish", False)])
    def test_a_killed_rebuild_leaves_the_old_table_or_the_new(self, project, spark, phase, rebuilt):
        run_dbt(["run", "--select", "relayout", "--vars", "{run: 1}"])
        before = self.history(project, spark, "relayout")
        test_hudilite_models.TestAKilledDbtRun.kill(project, "run", "relayout", phase)  # with {run: 3}: a rebuild that works
        # A new process (as the next `dbt run`) sees one table: the old one, or the new one moved into place.
        assert self.rows(project, "relayout", "id, p") == [(0, "a"), (1, "a"), (2, "a")]
        after = self.history(project, spark, "relayout")
        assert after[1] == (["id"] if rebuilt else ["p"])
        assert (after == before) is not rebuilt
        table = self.table(project, spark, "relayout")
        assert table.validate() == []
        assert_hudi_rs_agrees(table)
        run_dbt(["run", "--select", "relayout", "--vars", "{run: 1}"])  # and the next rebuild works
        assert self.history(project, spark, "relayout")[1] == ["p"]


CHANGES_CSV = """id,region,version,name,_hoodie_is_deleted,batch
1,eu,1,ann,false,1
2,eu,1,bob,false,1
3,us,1,cy,false,1
1,eu,2,ann2,false,2
2,eu,2,bob,true,2
4,us,1,di,false,2
3,us,2,cy2,false,3
2,eu,3,bob-back,false,3
1,eu,1,ann-late,false,3
5,us,1,eve,false,3
5,us,2,eve,true,3
1,eu,3,ann3,false,4
"""
# The demo's customer_accounts shape: a merge with a precombine field and a delete flag, each
# run reading one batch; a full refresh reads every batch so far, so it sees every version.
ACCOUNTS = """
{{ config(materialized='incremental', unique_key='id', precombine_field='version', partition_by='region') }}
select id, region, version, name, _hoodie_is_deleted, batch from {{ ref('changes') }}
{% if is_incremental() %} where batch = {{ var('batch', 1) }} {% else %} where batch <= {{ var('batch', 1) }} {% endif %}
"""


class TestAMergeModelFullRefresh(HudiliteProject):
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"changes.csv": CHANGES_CSV}

    @pytest.fixture(scope="class")
    def models(self):
        return {"accounts.sql": ACCOUNTS}

    def test_a_full_refresh_equals_the_incremental_runs_of_the_same_rows(self, project, spark):
        run_dbt(["seed"])
        for batch in (1, 2, 3):
            run_dbt(["run", "--vars", f"{{batch: {batch}}}"])
        incremental = self.rows(project, "accounts", "id, region, version, name, batch")
        assert incremental == [(1, "eu", 2, "ann2", 2), (2, "eu", 3, "bob-back", 3), (3, "us", 2, "cy2", 3),
                               (4, "us", 1, "di", 2)]  # ann-late is older than ann2; eve came and went
        run_dbt(["run", "--full-refresh", "--vars", "{batch: 3}"])
        assert self.rows(project, "accounts", "id, region, version, name, batch") == incremental
        table = self.table(project, spark, "accounts")
        assert "_hoodie_is_deleted" not in table.schema().fieldNames()
        assert table.timeline()[-1].action == "replacecommit"
        run_dbt(["run", "--vars", "{batch: 4}"])  # and incremental runs go on
        assert self.rows(project, "accounts", "id, name") == [(1, "ann3"), (2, "bob-back"), (3, "cy2"), (4, "di")]
        assert table.validate() == []
        assert_hudi_rs_agrees(table)
