"""A model's column that changes type between runs, under each `on_schema_change`: `ignore` and
`append_new_columns` store the new values as the table's type (a value that does not fit fails
the build, naming the column, and the table stays as it was); `sync_all_columns` widens the
table's type, and every reader (snapshot, time travel, hudi-rs) reads the stored files as it."""

import os

import pytest

from dbt.tests.util import run_dbt
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.functional.test_hudilite_models import HudiliteProject

# Run 1: int, float, decimal(10,2), date. Run 2: bigint, double, decimal(12,2), timestamp (what a
# sum() or a new upstream cast produces). Run 3: a bigint that no int holds.
COLUMNS = {
    1: "cast(id as int) as i, cast(id + 0.5 as float) as f, cast(id + 0.25 as decimal(10,2)) as d, date'2026-01-01' as dt",
    2: "cast(id + 100 as bigint) as i, cast(id + 0.125 as double) as f, cast(id + 0.75 as decimal(12,2)) as d, "
       "timestamp'2026-01-02 00:00:00' as dt",
    3: "cast(id as bigint) + 4000000000 as i, cast(id as double) as f, cast(id as decimal(12,2)) as d, "
       "timestamp'2026-01-03 00:00:00' as dt",
}
RANGES = {1: "range(3)", 2: "range(2, 4)", 3: "range(5, 6)"}


def model(config, columns=COLUMNS):
    body = " ".join(f"{{% {'if' if run == 1 else 'elif'} var('run', 1) == {run} %}} select id, {columns[run]} from "
                    f"{RANGES[run]} t(id)" for run in columns)
    return f"{{{{ config(materialized='incremental', {config}) }}}}\n{body} {{% endif %}}"


WIDE = {run: ", ".join(c for c in cols.split(", ") if " as dt" not in c) for run, cols in COLUMNS.items()}
DATES = {run: cols.split(", ")[-1] for run, cols in COLUMNS.items()}
MODELS = {
    "kept_ignore.sql": model("unique_key='id'"),  # on_schema_change defaults to ignore
    "kept_append.sql": model("on_schema_change='append_new_columns'"),
    "widened.sql": model("unique_key='id', on_schema_change='sync_all_columns'", WIDE),
    "widened_date.sql": model("on_schema_change='sync_all_columns'", DATES),
}


class TestTypeChanges(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def types(self, project, relation):
        return {r[0]: r[1] for r in project.run_sql(f"describe {project.test_schema}.{relation}", fetch="all")
                if r[0] and not r[0].startswith("#")}

    def test_types_kept_or_widened(self, project, spark):
        run_dbt(["run", "--vars", "{run: 1}"])
        results = {r.node.name: r for r in run_dbt(["run", "--vars", "{run: 2}"], expect_pass=False)}
        assert {n for n, r in results.items() if r.status != "success"} == {"widened_date"}
        assert "date" in results["widened_date"].message and "--full-refresh" in results["widened_date"].message

        narrow = {"id": "bigint", "i": "int", "f": "float", "d": "decimal(10,2)", "dt": "date"}
        for name in ("kept_ignore", "kept_append"):  # the table's types; the new rows cast to them
            assert self.types(project, name) == narrow
        assert self.rows(project, "kept_ignore", "id, i, f, d, cast(dt as string)") == [
            (0, 0, 0.5, 0.25, "2026-01-01"), (1, 1, 1.5, 1.25, "2026-01-01"),
            (2, 102, 2.125, 2.75, "2026-01-02"), (3, 103, 3.125, 3.75, "2026-01-02")]
        assert len(self.rows(project, "kept_append", "id")) == 5

        assert self.types(project, "widened") == {"id": "bigint", "i": "bigint", "f": "double", "d": "decimal(12,2)"}
        assert self.rows(project, "widened", "id, i, f, d") == [
            (0, 0, 0.5, 0.25), (1, 1, 1.5, 1.25), (2, 102, 2.125, 2.75), (3, 103, 3.125, 3.75)]
        table = self.table(project, spark, "widened")
        first = table.timeline()[0].timestamp
        before = project.adapter.hudilite_as_of(project.adapter.Relation.create(
            schema=project.test_schema, identifier="widened"), first)
        assert sorted(tuple(r) for r in project.run_sql(f"select id, i, f, d from {before}", fetch="all")) == [
            (0, 0, 0.5, 0.25), (1, 1, 1.5, 1.25), (2, 2, 2.5, 2.25)]
        assert table.validate() == []
        assert_hudi_rs_agrees(table)

        # A value the table's type cannot hold fails, naming the column, and changes nothing.
        kept = self.table(project, spark, "kept_ignore").timeline()
        failed = {r.node.name: r for r in run_dbt(["run", "--select", "kept_ignore", "--vars", "{run: 3}"],
                                                   expect_pass=False)}
        assert "column 'i'" in failed["kept_ignore"].message and "does not fit the table's type int" in \
            failed["kept_ignore"].message
        assert self.table(project, spark, "kept_ignore").timeline() == kept
        run_dbt(["run", "--select", "widened", "--vars", "{run: 3}"])  # the widened column holds it
        assert self.rows(project, "widened", "id, i")[-1] == (5, 4000000005)


# Issue 44: a key or partition column widened under sync_all_columns (items 4), a misspelt
# merge_update_columns (6), a dropped column added back (7). Each failed silently before: dbt
# exited 0 with every key stored twice, the column never updated, or the dropped values back.
TRUST_MODELS = {
    "key_widened.sql": "{{ config(materialized='incremental', unique_key='k', on_schema_change='sync_all_columns') }}\n"
                       "select {% if var('run', 1) == 1 %}cast(id as int){% else %}cast(id as double){% endif %} as k, "
                       "'v' || id as v from range(3) t(id)",
    "partition_widened.sql": "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', "
                             "partition_by='p', on_schema_change='sync_all_columns') }}\n"
                             "select id, {% if var('run', 1) == 1 %}1{% else %}1.0d{% endif %} as p from range(2) t(id)",
    "misspelt_update.sql": "{{ config(materialized='incremental', unique_key='id', "
                           "merge_update_columns=['plan', 'updated_ta']) }}\n"
                           "select id, 'team' as plan, {{ var('run', 1) }} as updated_at from range(2) t(id)",
    # appends, no small file topped up: the first run's file keeps its e-mails after the drop
    "dropped_email.sql": "{{ config(materialized='incremental', on_schema_change='sync_all_columns', "
                         "small_file_limit=0) }}\n"
                         "select id{% if var('run', 1) != 2 %}, concat('user', id, '@example.com') as email{% endif %} "
                         "from range({{ var('run', 1) * 2 - 2 }}, {{ var('run', 1) * 2 }}) t(id)",
    # item 5: the second run's session is in another time zone (a profile's spark_conf, or a hook)
    "timestamp_keyed.sql": "{{ config(materialized='incremental', unique_key='ts', pre_hook=\"set "
                           "spark.sql.session.timeZone = {{ 'America/New_York' if var('run', 1) == 2 else 'UTC' }}\", "
                           "post_hook='set spark.sql.session.timeZone = UTC') }}\n"
                           "select timestamp_seconds(1704112496 + id) as ts, 'v{{ var(\"run\", 1) }}' as v "
                           "from range(3) t(id)",
}


class TestTypeChangesOfKeysAndDroppedColumns(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return TRUST_MODELS

    def test_each_fails_naming_the_column_and_the_table_stays(self, project, spark):
        first = {r.node.name: r for r in run_dbt(["run", "--vars", "{run: 1}"], expect_pass=False)}
        assert first["misspelt_update"].status == "error"  # before anything is written
        assert "merge_update_columns names column 'updated_ta', which the model does not produce" in \
            first["misspelt_update"].message
        assert not os.path.exists(os.path.join(project.adapter.config.credentials.location_root,
                                               project.test_schema, "misspelt_update"))
        kept = {n: self.table(project, spark, n).timeline() for n in ("key_widened", "partition_widened")}

        second = {r.node.name: r for r in run_dbt(["run", "--vars", "{run: 2}"], expect_pass=False)}
        assert "record key column 'k' cannot change type from int to double" in second["key_widened"].message
        assert "partition column 'p' cannot change type from int to double" in second["partition_widened"].message
        assert all("--full-refresh" in second[n].message for n in kept)
        for name, timeline in kept.items():
            assert self.table(project, spark, name).timeline() == timeline
        assert self.rows(project, "key_widened", "k, v") == [(0, "v0"), (1, "v1"), (2, "v2")]
        assert self.rows(project, "partition_widened", "id, p") == [(0, 1), (1, 1)]
        assert second["timestamp_keyed"].status == "success"  # the same three keys, updated in place
        assert self.rows(project, "timestamp_keyed", "unix_seconds(ts), v") == [
            (1704112496, "v2"), (1704112497, "v2"), (1704112498, "v2")]
        assert sorted(r._hoodie_record_key for r in self.table(project, spark, "timestamp_keyed").read().collect()) == [
            "1704112496000000", "1704112497000000", "1704112498000000"]
        assert second["dropped_email"].status == "success"
        assert self.rows(project, "dropped_email", "*") == [(0,), (1,), (2,), (3,)]

        third = {r.node.name: r for r in run_dbt(["run", "--select", "dropped_email", "--vars", "{run: 3}"],
                                                 expect_pass=False)}
        assert "column 'email' was dropped, but files still in the table hold the values it had before" in \
            third["dropped_email"].message
        assert self.rows(project, "dropped_email", "*") == [(0,), (1,), (2,), (3,)]  # no e-mail came back
        table = self.table(project, spark, "dropped_email")
        before_drop = project.adapter.hudilite_as_of(project.adapter.Relation.create(
            schema=project.test_schema, identifier="dropped_email"), table.timeline()[0].timestamp)
        assert sorted(tuple(r) for r in project.run_sql(f"select id, email from {before_drop}", fetch="all")) == [
            (0, "user0@example.com"), (1, "user1@example.com")]  # time travel still reads what was there

        run_dbt(["run", "--select", "key_widened", "partition_widened", "dropped_email", "--full-refresh",
                 "--vars", "{run: 3}"])  # the way out the errors name
        assert self.rows(project, "key_widened", "k") == [(0.0,), (1.0,), (2.0,)]
        assert self.rows(project, "partition_widened", "id, p") == [(0, 1.0), (1, 1.0)]
        assert self.rows(project, "dropped_email", "*") == [(4, "user4@example.com"), (5, "user5@example.com")]
        for name in ("key_widened", "partition_widened", "dropped_email"):
            assert self.table(project, spark, name).validate() == []
            assert_hudi_rs_agrees(self.table(project, spark, name))
