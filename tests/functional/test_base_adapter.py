"""dbt-tests-adapter's base suites against the hudilite profile."""

import datetime as dt
import getpass
import os

import pytest
from dbt.artifacts.schemas.results import RunStatus
from dbt.tests.util import run_dbt

from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.caching.test_caching import BaseCachingLowercaseModel, BaseCachingUppercaseModel
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental, BaseIncrementalNotSchemaChange
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_validate_connection import BaseValidateConnection
from dbt.tests.adapter.incremental.test_incremental_merge_exclude_columns import BaseMergeExcludeColumns
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.adapter.incremental.test_incremental_unique_id import BaseIncrementalUniqueKey
from dbt.tests.adapter.incremental.test_incremental_microbatch import BaseMicrobatch
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange


class TestSimpleMaterializations(BaseSimpleMaterializations):
    pass


class TestSingularTests(BaseSingularTests):
    pass


class TestSingularTestsEphemeral(BaseSingularTestsEphemeral):
    pass


class TestEmpty(BaseEmpty):
    pass


class TestEphemeral(BaseEphemeral):
    pass


class TestIncremental(BaseIncremental):
    pass


class TestGenericTests(BaseGenericTests):
    pass


class TestAdapterMethod(BaseAdapterMethod):
    pass


class TestValidateConnection(BaseValidateConnection):
    pass


class TestIncrementalNotSchemaChange(BaseIncrementalNotSchemaChange):
    pass


class TestIncrementalOnSchemaChange(BaseIncrementalOnSchemaChange):
    pass


# Microbatch replaces the partitions of each batch, so the model names its partition column
# (as dbt-spark's own suite does).
class TestMicrobatch(BaseMicrobatch):
    @pytest.fixture(scope="class")
    def microbatch_model_sql(self) -> str:
        return """
{{ config(materialized='incremental', incremental_strategy='microbatch', partition_by=['date_day'],
          event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1, 0, 0, 0)) }}
select *, cast(event_time as date) as date_day from {{ ref('input_model') }}
"""


class StatsOnStorage:
    """The catalog stats of a hudilite table, as its files and timeline on storage say when
    the catalog is compared (the table is built after the expected catalog is made)."""

    def __init__(self, project, name):
        self.folder = os.path.join(project.adapter.config.credentials.location_root, project.test_schema, name)

    def expected(self):
        files = [f for f in os.listdir(self.folder) if f.endswith(".parquet")]
        commits = sorted(f.split(".")[0] for f in os.listdir(os.path.join(self.folder, ".hoodie"))
                         if f.endswith(".commit") or f.endswith(".replacecommit"))
        when = dt.datetime.strptime(commits[-1][:14], "%Y%m%d%H%M%S").strftime("%Y-%m-%d %H:%M:%S")
        stats = {"has_stats": {"id": "has_stats", "label": "Has Stats?", "value": True, "include": False,
                               "description": "Indicates whether there are statistics for this table"}}
        for key, label, value in [
            ("rows", "Rows", 1), ("files", "Files", len(files)),
            ("bytes", "Bytes", sum(os.path.getsize(os.path.join(self.folder, f)) for f in files)),
            ("last_commit", "Last commit", f"{commits[-1]} ({when} UTC)"), ("record_key", "Record key", "auto-generated"),
            ("partitioned_by", "Partitioned by", "not partitioned"),
        ]:
            stats[key] = {"id": key, "label": label, "value": value, "include": True, "description": None}
        return stats

    def __eq__(self, other):
        return self.expected() == other

    def __repr__(self):
        return repr(self.expected())


class TestDocsGenerate(BaseDocsGenerate):
    """Spark's type names; tables and views as Spark's catalog describes them, meta columns
    hidden; the seed (a hudilite table) with its stats."""

    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return expected_catalog.base_expected_catalog(
            project,
            role=getpass.getuser(),
            id_type="bigint",
            text_type="string",
            time_type="timestamp",
            view_type="view",
            table_type="table",
            model_stats=expected_catalog.no_stats(),
            seed_stats=StatsOnStorage(project, "seed"),
        )


class TestMergeExcludeColumns(BaseMergeExcludeColumns):
    pass


class TestIncrementalPredicatesDeleteInsert(BaseIncrementalPredicates):
    pass


class TestPredicatesDeleteInsert(BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+predicates": ["id != 2"], "+incremental_strategy": "delete+insert"}}


class TestIncrementalPredicatesMerge(BaseIncrementalPredicates):
    """With merge the unique_key is the record key, one row per key: the stored row of id 2,
    which the predicate keeps from matching, stays, and the new row for id 2 is not applied
    (delete+insert, above, keeps both)."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_predicates": ["dbt_internal_dest.id != 2"], "+incremental_strategy": "merge"}}

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"expected_delete_insert_incremental_predicates.csv":
                "id,msg,color\n1,hey,blue\n2,goodbye,red\n3,anyway,purple\n"}

    def test__incremental_predicates(self, project):
        expected = self.get_expected_fields(relation="expected_delete_insert_incremental_predicates", seed_rows=3)
        actual = self.get_test_fields(project, seed="expected_delete_insert_incremental_predicates",
                                      incremental_model="delete_insert_incremental_predicates", update_sql_file=None)
        self.check_scenario_correctness(expected, actual, project)


class TestIncrementalUniqueKey(BaseIncrementalUniqueKey):
    """The unique_key of a merge model is its Hudi record key, checked from the first build on.
    The base suite lets a first build pass with a key column the model lacks or with
    duplicate keys (its seed has two rows for NY) and only later applies the key; hudilite
    refuses both at once, with the column or the key named. The other cases run as written."""

    def _first_build_fails(self, model: str) -> str:
        run_dbt(["seed", "--select", "seed", "--full-refresh"])
        result = run_dbt(["run", "--select", model, "--full-refresh"], expect_pass=False).results[0]
        assert result.status == RunStatus.Error
        return result.message

    def test__bad_unique_key(self, project):
        assert "unique_key names column 'thisisnotacolumn'" in self._first_build_fails("not_found_unique_key")

    def test__bad_unique_key_list(self, project):
        assert "unique_key names column 'thisisnotacolumn'" in self._first_build_fails("not_found_unique_key_list")

    def _duplicate_keys_refused(self, project, model: str) -> None:
        message = self._first_build_fails(model)
        assert f"model '{model}'" in message and "record key 'NY' more than once" in message
        assert not project.adapter.catalog.is_table(project.test_schema, model)

    # The base versions build these models over a seed with two NY rows and expect the
    # first build to keep both; hudilite refuses the duplicate key at once, naming it.
    def test__one_unique_key(self, project):
        self._duplicate_keys_refused(project, "str_unique_key")

    def test__unary_unique_key_list(self, project):
        self._duplicate_keys_refused(project, "unary_unique_key_list")

    def test__duplicated_unary_unique_key_list(self, project):
        self._duplicate_keys_refused(project, "duplicated_unary_unique_key_list")


class TestSnapshotCheckCols(BaseSnapshotCheckCols):
    pass


class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    pass


def _two_runs_keep_one_relation(project):
    """dbt-tests-adapter's caching check without its `database` comparison, which no Spark
    adapter passes (Spark relations have no database: None has no lower())."""
    relations = []
    for _ in range(2):
        run_dbt(["run"])
        assert len(project.adapter.cache.relations) == 1
        relations.append(list(project.adapter.cache.relations).pop())
    first, second = relations
    assert first.schema == project.test_schema.lower()
    assert (first.schema.lower(), first.identifier.lower()) == (second.schema.lower(), second.identifier.lower())


class TestCachingUppercaseModel(BaseCachingUppercaseModel):
    """A model file `MODEL.sql` (issue 44, item 9): its second run found `MODEL` on storage while
    dbt searched for `model`, and failed with an approximate match."""

    def test_cache(self, project):
        _two_runs_keep_one_relation(project)


class TestCachingLowercaseModel(BaseCachingLowercaseModel):
    def test_cache(self, project):
        _two_runs_keep_one_relation(project)
