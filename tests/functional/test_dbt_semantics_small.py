"""Issue 31, item 6: composite keys that would collide are refused, `incremental_predicates`
may name both sides, a seed's bad header says what a seed can do, and adding a unique_key to
an append model says why it needs --full-refresh."""

import pytest

from dbt.tests.util import run_dbt
from tests.core.test_bad_input import files_of
from tests.functional.test_hudilite_models import HudiliteProject

# Each run's rows of a model keyed by (k1, k2). Run 1 holds values that are harmless: a comma
# without a key part's label after it, a value holding the first field's label (never written
# after a comma), a null part. Runs 2-4 would make keys other rows make too.
COMPOSITE_KEYS = """
{{ config(materialized='incremental', unique_key=['k1', 'k2']) }}
{% set batches = {
  1: "('x', 'y', 'first'), ('a,b', 'c', 'a comma'), ('d', 'e,k1:f', 'the first label'), (null, 'n', 'a null part')",
  2: "('x,k2:y', 'z', 'collides')",
  3: "('x', 'y,k2:z', 'collides too')",
  4: "('__null__', 'n', 'the null placeholder')",
} %}
select k1, k2, v from values {{ batches[var('run', 1)] }} as t(k1, k2, v)
"""
KEY_PARTS = "coalesce(k1, 'null'), k2, v"


class TestCompositeKeysThatWouldCollide(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"pairs.sql": COMPOSITE_KEYS}

    def test_a_value_making_an_ambiguous_key_is_refused_and_nothing_changes(self, project, spark):
        run_dbt(["run", "--vars", "{run: 1}"])
        table = self.table(project, spark, "pairs")
        before = (table.timeline(), files_of(table.path))
        first = [("a,b", "c", "a comma"), ("d", "e,k1:f", "the first label"), ("null", "n", "a null part"),
                 ("x", "y", "first")]
        assert self.rows(project, "pairs", KEY_PARTS) == first
        keys = sorted(r._hoodie_record_key for r in table.read().collect())
        assert keys == ["k1:__null__,k2:n", "k1:a,b,k2:c", "k1:d,k2:e,k1:f", "k1:x,k2:y"]

        for run, column, value in [(2, "k1", "x,k2:y"), (3, "k2", "y,k2:z"), (4, "k1", "__null__")]:
            (failed,) = run_dbt(["run", "--vars", f"{{run: {run}}}"], expect_pass=False)
            assert f"table pairs: record key column '{column}' has the value '{value}'" in failed.message, failed.message
            table = self.table(project, spark, "pairs")
            assert (table.timeline(), files_of(table.path)) == before  # exactly as it was
            assert self.rows(project, "pairs", KEY_PARTS) == first


# The batch names both sides: a row is applied only over an older stored version, and never to id 9.
PREDICATES = ["DBT_INTERNAL_SOURCE.version > DBT_INTERNAL_DEST.version", "DBT_INTERNAL_DEST.id <> 9",
              "dbt_internal_source.v is not null", "version >= 0"]  # any case; unqualified: the stored row
VERSIONED = """
{{{{ config(materialized='incremental', incremental_strategy='{strategy}', unique_key='id',
            incremental_predicates={predicates}) }}}}
{{% if var('run', 1) == 1 %}} select * from values (1, 1, 'a'), (2, 1, 'b'), (9, 1, 'i') as t(id, version, v)
{{% else %}} select * from values (1, 2, 'a2'), (2, 0, 'b0'), (3, 1, 'c'), (9, 5, 'i5') as t(id, version, v)
{{% endif %}}
"""


class TestPredicatesOnBothSides(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {f"versions_{name}.sql": VERSIONED.format(strategy=strategy, predicates=PREDICATES)
                for name, strategy in [("merge", "merge"), ("delete_insert", "delete+insert")]}

    def test_a_predicate_may_name_the_incoming_row(self, project):
        run_dbt(["run", "--vars", "{run: 1}"])
        run_dbt(["run", "--vars", "{run: 2}"])
        # merge: a predicate is part of the match; an unmatched stored row stays and its batch row is dropped.
        assert self.rows(project, "versions_merge", "id, version, v") == [
            (1, 2, "a2"), (2, 1, "b"), (3, 1, "c"), (9, 1, "i")]
        # delete+insert: a stored row goes when a batch row with its key passes the predicates with it.
        assert self.rows(project, "versions_delete_insert", "id, version, v") == [
            (1, 2, "a2"), (2, 0, "b0"), (2, 1, "b"), (3, 1, "c"), (9, 1, "i"), (9, 5, "i5")]


class TestSeedHeaderWithASpace(HudiliteProject):
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"people.csv": "id,first name\n1,Ann\n"}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        # Neither keeps the seed from failing: both leave the column's name as the header has it.
        return {"seeds": {"+quote_columns": True, "+column_types": {"first name": "string"}}}

    def test_the_error_says_to_rename_the_csv_header(self, project):
        (failed,) = run_dbt(["seed"], expect_pass=False)
        assert "column 'first name' cannot be named in Avro" in failed.message
        assert "a seed: rename its CSV header" in failed.message, failed.message


GROWS_A_KEY = """
{{ config(materialized='incremental', unique_key=(none if var('run', 1) == 1 else 'id')) }}
select * from values (1, 'a'), (2, 'b') as t(id, v)
"""


class TestAddingAUniqueKeyToAnAppendModel(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"grows_a_key.sql": GROWS_A_KEY}

    def test_the_error_says_what_a_merge_would_do(self, project):
        run_dbt(["run", "--vars", "{run: 1}"])
        (failed,) = run_dbt(["run", "--vars", "{run: 2}"], expect_pass=False)
        assert "its rows have auto-generated record keys" in failed.message, failed.message
        assert "would duplicate" in failed.message and "run with --full-refresh" in failed.message
        assert self.rows(project, "grows_a_key", "id, v") == [(1, "a"), (2, "b")]
        run_dbt(["run", "--vars", "{run: 2}", "--full-refresh"])
        run_dbt(["run", "--vars", "{run: 2}"])  # now a merge by id
        assert self.rows(project, "grows_a_key", "id, v") == [(1, "a"), (2, "b")]
