"""dbt features around the models: stored test failures, dbt show, persist_docs, grants,
dbt retry (dbt-tests-adapter's suites where one exists)."""

import json
import os
import subprocess
import sys

import pytest

from dbt.adapters.hudilite.table import HudiTable
from dbt.tests.adapter.dbt_show.test_dbt_show import BaseShowDoesNotHandleDoubleLimit, BaseShowLimit, BaseShowSqlHeader
from dbt.tests.adapter.persist_docs import test_persist_docs as persist
from dbt.tests.adapter.store_test_failures_tests import basic
from dbt.tests.adapter.store_test_failures_tests.test_store_test_failures import (
    BaseStoreTestFailures,
    BaseStoreTestFailuresLimit,
)
from dbt.tests.util import run_dbt, write_file

from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.functional.test_hudilite_models import HudiliteProject


class TestStoreTestFailures(BaseStoreTestFailures):
    """The suite as written: its problematic model unions `select *` of a table with six named
    columns, which holds because a hudilite table's `select *` is the model's columns."""

    def test_stored_failures_are_hudilite_tables(self, project, spark, clean_up):
        run_dbt(["test", "--store-failures"], expect_pass=False)
        root = project.adapter.config.credentials.location_root
        stored = HudiTable.open(spark, os.path.join(root, self.test_audit_schema, "failing_test"))
        assert stored.read().count() == 10 and stored.commit_metadata(stored.timeline()[-1]).operation == "INSERT"
        assert_hudi_rs_agrees(stored)


class TestStoreTestFailuresLimit(BaseStoreTestFailuresLimit):
    pass


class TestStoreTestFailuresAsInteractions(basic.StoreTestFailuresAsInteractions):
    pass


class TestStoreTestFailuresAsProjectLevelOff(basic.StoreTestFailuresAsProjectLevelOff):
    pass


class TestStoreTestFailuresAsProjectLevelView(basic.StoreTestFailuresAsProjectLevelView):
    pass


class TestStoreTestFailuresAsProjectLevelEphemeral(basic.StoreTestFailuresAsProjectLevelEphemeral):
    pass


class TestStoreTestFailuresAsGeneric(basic.StoreTestFailuresAsGeneric):
    pass


class TestStoreTestFailuresAsExceptions(basic.StoreTestFailuresAsExceptions):
    pass


class TestShowLimit(BaseShowLimit):
    pass


class TestShowSqlHeader(BaseShowSqlHeader):
    pass


class TestShowDoesNotHandleDoubleLimit(BaseShowDoesNotHandleDoubleLimit):
    DATABASE_ERROR_MESSAGE = "Syntax error at or near 'limit'"  # Spark's parser


class TestPersistDocs(persist.BasePersistDocs):
    def test_descriptions_survive_a_new_process(self, project):
        """`dbt docs generate` in its own process (a fresh SparkSession and catalog) shows them,
        with each hudilite table's stats."""
        done = subprocess.run([sys.executable, "-c", "from dbt.cli.main import cli; cli()", "docs", "generate",
                               "--project-dir", project.project_root, "--profiles-dir", project.profiles_dir],
                              capture_output=True, text=True, cwd=project.project_root, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:]
        with open(os.path.join(project.project_root, "target", "catalog.json")) as fp:
            node = json.load(fp)["nodes"]["model.test.table_model"]
        self._assert_has_table_comments(node)
        stats = node["stats"]
        assert stats["rows"]["value"] == 1 and stats["files"]["value"] == 1 and stats["bytes"]["value"] > 0
        assert stats["record_key"]["value"] == "auto-generated"
        assert stats["partitioned_by"]["value"] == "not partitioned"
        assert stats["last_commit"]["value"].endswith(" UTC)") and len(stats["last_commit"]["value"].split()[0]) == 17


class TestPersistDocsColumnMissing(persist.BasePersistDocsColumnMissing):
    pass


class TestPersistDocsAllColumnsMissing(persist.BasePersistDocsAllColumnsMissing):
    pass


class TestPersistDocsQuotedColumnCaseSensitive(persist.BasePersistDocsQuotedColumnCaseSensitive):
    pass


class TestGrantsAreRefusedBeforeAnythingIsWritten(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"granted.sql": "{{ config(materialized='table', grants={'select': ['analyst']}) }} select 1 as id",
                "granted_view.sql": "{{ config(materialized='view', grants={'select': ['analyst']}) }} select 1 as id",
                "plain.sql": "{{ config(materialized='table') }} select 1 as id"}

    def test_grants_fail_naming_the_model_and_write_nothing(self, project, spark):
        results = run_dbt(["run"], expect_pass=False)
        status = {r.node.name: r for r in results}
        assert status["plain"].status == "success"
        for name in ("granted", "granted_view"):
            assert status[name].status == "error"
            assert f"model '{name}': grants are not supported by hudilite" in status[name].message
        root = project.adapter.config.credentials.location_root
        assert sorted(os.listdir(os.path.join(root, project.test_schema))) == ["plain"]

    def test_a_table_that_gains_grants_keeps_its_rows(self, project, spark):
        run_dbt(["run", "--select", "plain"])
        before = self.table(project, spark, "plain").timeline()
        write_file("{{ config(materialized='table', grants={'select': ['analyst']}) }} select 2 as id",
                   "models", "plain.sql")
        run_dbt(["run", "--select", "plain"], expect_pass=False)
        assert self.table(project, spark, "plain").timeline() == before
        assert self.rows(project, "plain", "id") == [(1,)]


class TestRetryRunsWhatFailed(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"good.sql": "{{ config(materialized='table') }} select 1 as id",
                "flaky.sql": "{{ config(materialized='table') }} select id, no_such_column from {{ ref('good') }}",
                "downstream.sql": "{{ config(materialized='table') }} select id + 1 as id from {{ ref('flaky') }}"}

    def test_dbt_retry_builds_the_failed_and_skipped_models_only(self, project, spark):
        results = run_dbt(["run"], expect_pass=False)
        assert sorted((r.node.name, str(r.status)) for r in results) == [
            ("downstream", "skipped"), ("flaky", "error"), ("good", "success")]
        good = self.table(project, spark, "good").timeline()
        write_file("{{ config(materialized='table') }} select id from {{ ref('good') }}", "models", "flaky.sql")
        retried = run_dbt(["retry"])
        assert sorted(r.node.name for r in retried) == ["downstream", "flaky"]
        assert self.table(project, spark, "good").timeline() == good  # not built again
        assert self.rows(project, "downstream", "id") == [(2,)]
