"""Issue 44, items 1-3 through dbt: a Python model that replaces or appends to a hudilite
table's Spark entry, and a hook running a SQL script that drops and re-creates it, fail their
node naming the table; the table on storage keeps its rows, and the next node reads them."""

import os

import pytest
from dbt.tests.util import run_dbt, write_file

from tests.functional.test_hudilite_models import HudiliteProject

PAGES_SQL = "{{ config(materialized='table') }}\nselect 1 as id, 'a' as v union all select 2, 'b'"
DOWNSTREAM_SQL = "-- depends_on: {{ ref('clobber') }}\nselect id, v from {{ ref('pages') }}"
CLOBBER_PY = """
def model(dbt, session):
    pages = dbt.ref("pages")
    name = f"{dbt.this.schema}.pages"
    rows = session.createDataFrame([(9, "spark")], "id int, v string")
    {write}
    return pages
"""


def _files(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs
                  if not os.path.relpath(d, path).startswith(".hoodie"))


class TestADataFrameWriteThroughAnEntryFailsItsModel(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"pages.sql": PAGES_SQL, "clobber.py": CLOBBER_PY.replace("{write}", "pass"),
                "downstream.sql": DOWNSTREAM_SQL}

    @pytest.mark.parametrize("write", [
        'rows.write.mode("overwrite").saveAsTable(name)',
        'rows.write.mode("append").saveAsTable(name)',
        'session.sql(f"DROP TABLE {name}"); rows.write.saveAsTable(name)',
        """session.sql(f"ALTER TABLE {name} SET LOCATION '/tmp/hudilite-drift-nowhere'")""",
        """session.sql(f"BEGIN DROP TABLE {name}; CREATE TABLE {name} AS SELECT 9 AS id, 'spark' AS v; END")""",
    ], ids=["saveAsTable overwrite", "saveAsTable append", "drop and saveAsTable", "set location", "script"])
    def test_the_model_fails_naming_the_table_and_the_table_keeps_its_rows(self, project, spark, write):
        run_dbt(["run", "--select", "pages"])
        table = self.table(project, spark, "pages")
        before = (_files(table.path), [i.timestamp for i in table.timeline()])
        write_file(CLOBBER_PY.replace("{write}", write), "models", "clobber.py")
        results = run_dbt(["run", "--select", "clobber", "downstream"], expect_pass=False)
        failed = {r.node.name: r for r in results}
        assert failed["clobber"].status == "error", failed["clobber"].message
        assert f"{project.test_schema}.pages" in failed["clobber"].message, failed["clobber"].message
        assert failed["downstream"].status == "skipped"
        assert (_files(table.path), [i.timestamp for i in table.timeline()]) == before
        assert table.validate() == []
        write_file(CLOBBER_PY.replace("{write}", "pass"), "models", "clobber.py")
        run_dbt(["run", "--select", "clobber", "downstream"])
        assert self.rows(project, "downstream", "id, v") == [(1, "a"), (2, "b")]


class TestAHookRunningAScriptIsRefused(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        hook = ("{{ config(post_hook=\"BEGIN DROP TABLE \" ~ this.schema ~ \".pages; CREATE TABLE \" ~ this.schema ~ "
                "\".pages AS SELECT 9 AS id, 'spark' AS v; END\") }}\nselect 1 as x")
        return {"pages.sql": PAGES_SQL, "hooked.sql": "-- depends_on: {{ ref('pages') }}\n" + hook}

    def test_the_hook_fails_and_the_table_stays(self, project, spark):
        run_dbt(["run", "--select", "pages"])
        (result,) = run_dbt(["run", "--select", "hooked"], expect_pass=False)
        assert f"{project.test_schema}.pages is a hudilite table or view: a SQL script" in result.message, result.message
        assert self.rows(project, "pages", "id, v") == [(1, "a"), (2, "b")]
