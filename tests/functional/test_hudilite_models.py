"""hudilite's own dbt tests: each strategy's rows, timeline and what hudi-rs reads."""

import os

import pytest

from dbt.adapters.hudilite.table import HudiTable
from dbt.tests.util import run_dbt, run_dbt_and_capture
from tests.core.hudi_rs import assert_hudi_rs_agrees

EVENTS_CSV = """event_id,day,page
1,2026-11-01,/
2,2026-11-01,/docs
3,2026-11-02,/
4,2026-11-02,/pricing
5,2026-11-03,/
"""

# `batch` 1 reads days 01-02; batch 2 reads days 02-03 (day 02 again, with one row less).
BATCH_FILTER = """
{% if var('batch', 1) == 1 %} where day <= '2026-11-02' {% else %} where day >= '2026-11-02' and event_id <> 4 {% endif %}
"""

MODELS = {
    "events_append.sql": "{{ config(materialized='incremental', partition_by='day') }}\n"
                         "select * from {{ ref('raw_events') }}" + BATCH_FILTER,
    "events_keyed.sql": "{{ config(materialized='incremental', unique_key='event_id') }}\n"
                        "select * from {{ ref('raw_events') }}" + BATCH_FILTER,
    "daily_overwrite.sql": "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by='day') }}\n"
                           "select * from {{ ref('raw_events') }}" + BATCH_FILTER,
    "whole_overwrite.sql": "{{ config(materialized='incremental', incremental_strategy='insert_overwrite') }}\n"
                           "select * from {{ ref('raw_events') }}" + BATCH_FILTER,
    "page_counts.sql": "{{ config(materialized='table') }}\n"
                       "select page, count(*) as views from {{ ref('raw_events') }}" + BATCH_FILTER + " group by page",
}

BAD_MODELS = {
    "bad_strategy.sql": "{{ config(materialized='incremental', incremental_strategy='upsert_everything') }} select 1 as id",
    "bad_partition.sql": "{{ config(materialized='incremental', partition_by='dt') }} select 1 as id",
    "bad_key.sql": "{{ config(materialized='table', unique_key='customer_id') }} select 1 as id",
    "merge_without_key.sql": "{{ config(materialized='incremental', incremental_strategy='merge') }} select 1 as id",
}


class HudiliteProject:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"raw_events.csv": EVENTS_CSV}

    @staticmethod
    def table(project, spark, name):
        root = project.adapter.config.credentials.location_root
        return HudiTable.open(spark, os.path.join(root, project.test_schema, name))

    @staticmethod
    def rows(project, relation, columns="event_id"):
        return sorted(tuple(r) for r in project.run_sql(f"select {columns} from {project.test_schema}.{relation}", fetch="all"))


class TestStrategies(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def test_two_runs_take_each_strategys_path(self, project, spark):
        run_dbt(["seed"])
        run_dbt(["run"])
        first = {name: self.table(project, spark, name).timeline()[-1].timestamp
                 for name in ("events_append", "daily_overwrite", "whole_overwrite", "page_counts")}
        run_dbt(["run", "--vars", "{batch: 2}"])

        # append, auto keys: every row of both batches, two commits.
        append = self.table(project, spark, "events_append")
        assert [i.action for i in append.timeline()] == ["commit", "commit"]
        assert self.rows(project, "events_append") == [(1,), (2,), (3,), (3,), (4,), (5,)]
        keys = [r[0] for r in project.run_sql(  # the meta columns through their macro's view
            f"select _hoodie_record_key from {project.adapter.hudilite_with_meta(project.adapter.Relation.create(schema=project.test_schema, identifier='events_append'))}",
            fetch="all")]
        assert len(set(keys)) == 6 and all(k.count("_") == 2 for k in keys)  # RFC-76 auto keys
        assert append.config.record_key_fields == []

        # a unique_key and no strategy: merge, with that key as the record key.
        keyed = self.table(project, spark, "events_keyed")
        assert keyed.config.record_key_fields == ["event_id"]
        assert sorted(r._hoodie_record_key for r in keyed.read().collect()) == ["1", "2", "3", "4", "5"]
        assert keyed.commit_metadata(keyed.timeline()[-1]).operation == "UPSERT"

        # insert_overwrite with partition_by: day 02 replaced, day 01 kept, day 03 added.
        daily = self.table(project, spark, "daily_overwrite")
        assert [i.action for i in daily.timeline()] == ["commit", "replacecommit"]
        replaced = daily.commit_metadata(daily.timeline()[-1]).replaced_file_ids
        assert set(replaced) == {"day=2026-11-02"}
        assert set(replaced["day=2026-11-02"]) == {
            f.file_id for f in daily.latest_base_files(as_of=first["daily_overwrite"]) if f.partition == "day=2026-11-02"}
        assert self.rows(project, "daily_overwrite") == [(1,), (2,), (3,), (5,)]

        # insert_overwrite without partition_by: the whole table.
        whole = self.table(project, spark, "whole_overwrite")
        assert whole.commit_metadata(whole.timeline()[-1]).operation == "INSERT_OVERWRITE_TABLE"
        assert self.rows(project, "whole_overwrite") == [(3,), (5,)]

        # table: a rebuild is a replacecommit; the first build stays readable by time travel.
        table = self.table(project, spark, "page_counts")
        assert [i.action for i in table.timeline()] == ["commit", "replacecommit"]
        assert self.rows(project, "page_counts", "page, views") == [("/", 2)]
        assert sorted(tuple(r) for r in table.read(as_of=first["page_counts"]).select("page", "views").collect()) == [
            ("/", 2), ("/docs", 1), ("/pricing", 1)]

        for name in MODELS:
            assert_hudi_rs_agrees(self.table(project, spark, name[: -len(".sql")]))

        # dbt's column handling never sees the meta columns; SQL still can.
        relation = project.adapter.Relation.create(schema=project.test_schema, identifier="events_append")
        with project.adapter.connection_named("__test"):
            columns = [c.name for c in project.adapter.get_columns_in_relation(relation)]
        assert columns == ["event_id", "day", "page"]

    def test_full_refresh_replaces_the_table_and_keeps_history(self, project, spark):
        run_dbt(["seed"])
        run_dbt(["run", "--select", "events_append"])
        before = self.table(project, spark, "events_append").timeline()
        run_dbt(["run", "--select", "events_append", "--full-refresh"])
        after = self.table(project, spark, "events_append")
        assert after.timeline()[:-1] == before
        assert after.commit_metadata(after.timeline()[-1]).operation == "INSERT_OVERWRITE_TABLE"
        assert self.rows(project, "events_append") == [(1,), (2,), (3,), (4,)]


class EventsProject(HudiliteProject):
    """One appended `events` model over the seed, built once before the test."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": MODELS["events_append.sql"]}

    @pytest.fixture
    def built(self, project):
        run_dbt(["seed"])
        run_dbt(["run"])


class TestTimeTravelAndChangesInSql(EventsProject):
    def test_as_of_and_changes_macros(self, project, spark, built):
        first = self.table(project, spark, "events").timeline()[-1].timestamp
        run_dbt(["run", "--vars", "{batch: 2}"])
        models_dir = os.path.join(project.project_root, "models")
        with open(os.path.join(models_dir, "events_then.sql"), "w") as f:
            f.write("{{ config(materialized='table') }}\n"
                    f"select event_id from {{{{ hudilite_as_of(ref('events'), '{first}') }}}}")
        with open(os.path.join(models_dir, "events_new.sql"), "w") as f:
            f.write("{{ config(materialized='table') }}\n"
                    f"select event_id from {{{{ hudilite_changes(ref('events'), '{first}') }}}}")
        run_dbt(["run", "--select", "events_then", "events_new"])
        assert self.rows(project, "events_then") == [(1,), (2,), (3,), (4,)]
        assert self.rows(project, "events_new") == [(3,), (5,)]


class TestChangesSinceTheLastBuild(EventsProject):
    """`hudilite_changes(ref(...))` without a start: each build reads what the upstream table
    committed since the checkpoint the model's previous commit kept (Hudi's streamer keeps its
    checkpoint the same way, in the commit's extraMetadata)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": MODELS["events_append.sql"],
                "events_log.sql": "{{ config(materialized='incremental') }}\n"
                                  "select event_id, _hoodie_commit_time as seen_in from {{ hudilite_changes(ref('events')) }}"}

    def test_each_build_reads_only_what_changed_since_its_checkpoint(self, project, spark, built):
        events, log = self.table(project, spark, "events"), self.table(project, spark, "events_log")
        first = events.timeline()[-1].timestamp
        assert log.checkpoint(f"{project.test_schema}.events") == first
        assert self.rows(project, "events_log") == [(1,), (2,), (3,), (4,)]

        run_dbt(["run", "--vars", "{batch: 2}"])  # events appends 3 and 5 again
        second = events.timeline()[-1].timestamp
        assert self.rows(project, "events_log", "event_id, seen_in") == sorted(
            [(i, first) for i in (1, 2, 3, 4)] + [(3, second), (5, second)])
        assert log.checkpoint(f"{project.test_schema}.events") == second
        metadata = log.commit_metadata(log.timeline()[-1])
        assert metadata.extra[f"hudilite.checkpoint.{project.test_schema}.events"] == second

        log_instants = log.timeline()
        run_dbt(["run", "--select", "events_log"])  # nothing new upstream: nothing read, nothing committed
        assert log.timeline() == log_instants
        assert len(self.rows(project, "events_log")) == 6

        run_dbt(["run", "--select", "events_log", "--full-refresh"])  # a rebuild reads every row again
        assert self.rows(project, "events_log", "event_id, seen_in") == sorted(
            [(i, first) for i in (1, 2, 3, 4)] + [(3, second), (5, second)])
        assert log.checkpoint(f"{project.test_schema}.events") == second
        assert_hudi_rs_agrees(log)

        # The upstream restored to before the checkpoint: which rows changed cannot be told.
        events.restore(first)
        before = log.timeline()
        (failed,) = run_dbt(["run", "--select", "events_log"], expect_pass=False)
        assert f"model 'events_log': its checkpoint {second} is no longer an instant of {project.test_schema}.events" \
            in failed.message and "--full-refresh" in failed.message
        assert log.timeline() == before
        run_dbt(["run", "--select", "events_log", "--full-refresh"])
        assert self.rows(project, "events_log") == [(1,), (2,), (3,), (4,)]

    def test_an_ephemeral_model_cannot_keep_a_checkpoint(self, project, built):
        models_dir = os.path.join(project.project_root, "models")
        with open(os.path.join(models_dir, "events_eph.sql"), "w") as f:
            f.write("{{ config(materialized='ephemeral') }} select event_id from {{ hudilite_changes(ref('events')) }}")
        with open(os.path.join(models_dir, "events_from_eph.sql"), "w") as f:
            f.write("{{ config(materialized='incremental') }} select * from {{ ref('events_eph') }}")
        (failed,) = run_dbt(["run", "--select", "events_from_eph"], expect_pass=False)
        assert "model 'events_eph': hudilite_changes without a start keeps its checkpoint" in failed.message


class TestConfigErrors(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return BAD_MODELS

    @pytest.mark.parametrize("model, message", [
        ("bad_strategy", "model 'bad_strategy': unknown incremental_strategy 'upsert_everything'"),
        ("bad_partition", "model 'bad_partition': partition_by names column 'dt', which the model does not produce"),
        ("bad_key", "model 'bad_key': unique_key names column 'customer_id'"),
        ("merge_without_key", "model 'merge_without_key': incremental_strategy 'merge' needs a unique_key"),
    ])
    def test_bad_config_fails_with_the_models_name_and_writes_nothing(self, project, model, message):
        (result,) = run_dbt(["run", "--select", model], expect_pass=False)
        assert "Compilation Error" in result.message and message in result.message
        root = project.adapter.config.credentials.location_root
        assert not os.path.exists(os.path.join(root, project.test_schema, model))


class TestSqlDmlGoesThroughTheCore(EventsProject):
    def test_insert_update_and_delete(self, project, spark, built):
        schema = project.test_schema
        project.run_sql(f"insert into {schema}.events (event_id, day) values (9, '2026-11-09')")
        project.run_sql(f"insert overwrite table {schema}.events select 10, '2026-11-01', '/new'")
        table = self.table(project, spark, "events")
        assert [i.action for i in table.timeline()] == ["commit", "commit", "replacecommit"]
        assert self.rows(project, "events", "event_id, cast(day as string), page") == [
            (3, "2026-11-02", "/"), (4, "2026-11-02", "/pricing"), (9, "2026-11-09", None), (10, "2026-11-01", "/new")]
        project.run_sql(f"update {schema}.events set page = concat('/p', event_id) where page is null or event_id = 3")
        project.run_sql(f"delete from {schema}.events where day = '2026-11-01'")
        assert [i.action for i in table.timeline()][3:] == ["commit", "commit"]
        assert self.rows(project, "events", "event_id, page") == [(3, "/p3"), (4, "/pricing"), (9, "/p9")]
        with pytest.raises(Exception, match="is a hudilite table: MERGE INTO is not supported"):
            project.run_sql(f"merge into {schema}.events t using {schema}.events s on t.event_id = s.event_id "
                            "when matched then delete")
        assert_hudi_rs_agrees(table)


MICROBATCH_INPUT = """
{{ config(materialized='table', event_time='event_time') }}
select 1 as id, timestamp '2020-01-01 10:00:00' as event_time
union all select 2, timestamp '2020-01-02 10:00:00'
union all select 3, timestamp '2020-01-02 11:00:00'
"""

MICROBATCH = """
{{ config(materialized='incremental', incremental_strategy='microbatch', partition_by='event_day',
          event_time='event_time', batch_size='day', begin=modules.datetime.datetime(2020, 1, 1)) }}
select id, event_time, cast(event_time as date) as event_day from {{ ref('microbatch_input') }}
"""


class TestMicrobatchTimeline(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"microbatch_input.sql": MICROBATCH_INPUT, "batched.sql": MICROBATCH}

    def test_each_batch_replaces_its_partition(self, project, spark):
        from dbt.tests.util import patch_microbatch_end_time

        with patch_microbatch_end_time("2020-01-02 18:00:00"):
            run_dbt(["run"])
        table = self.table(project, spark, "batched")
        assert [i.action for i in table.timeline()] == ["commit", "replacecommit"]
        assert self.rows(project, "batched", "id, cast(event_day as string)") == [
            (1, "2020-01-01"), (2, "2020-01-02"), (3, "2020-01-02")]
        with patch_microbatch_end_time("2020-01-02 18:00:00"):
            run_dbt(["run", "--select", "batched", "--event-time-start", "2020-01-02", "--event-time-end", "2020-01-03"])
        last = table.commit_metadata(table.timeline()[-1])
        assert last.operation == "INSERT_OVERWRITE" and set(last.replaced_file_ids) == {"event_day=2020-01-02"}
        assert self.rows(project, "batched", "id") == [(1,), (2,), (3,)]
        assert_hudi_rs_agrees(table)


MERGE_MODEL = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id', partition_by='day',
          precombine_field='version') }}
{% if var('batch', 1) == 1 %}
select event_id, day, page, 1 as version, false as _hoodie_is_deleted from {{ ref('raw_events') }}
{% elif var('batch') == 2 %}
select 2 as event_id, date '2026-11-01' as day, '/docs/v2' as page, 2 as version, false as _hoodie_is_deleted
union all select 4, date '2026-11-02', '/pricing', 1, true
union all select 6, date '2026-11-04', '/new', 1, false
{% else %}
select 2 as event_id, date '2026-11-03' as day, '/stale-move' as page, 1 as version, false as _hoodie_is_deleted
union all select 6, date '2026-11-04', '/new', 0, true
union all select 5, date '2026-11-03', '/dup-old', 2, false
union all select 5, date '2026-11-03', '/dup-new', 3, false
union all select 3, date '2026-11-02', '/tie', 1, false
{% endif %}
"""


class TestMerge(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"events_merged.sql": MERGE_MODEL}

    def test_merge_updates_inserts_and_deletes_through_the_index(self, project, spark):
        run_dbt(["seed"])
        run_dbt(["run"])
        table = self.table(project, spark, "events_merged")
        first = table.timeline()[-1].timestamp
        holder = {r.event_id: r._hoodie_file_name.split("_")[0] for r in table.read().collect()}
        run_dbt(["run", "--vars", "{batch: 2}"])
        assert self.rows(project, "events_merged", "event_id, page") == [
            (1, "/"), (2, "/docs/v2"), (3, "/"), (5, "/"), (6, "/new")]
        last = table.timeline()[-1]
        stats = table.commit_metadata(last).write_stats
        rewritten = {s.partitionPath: s for s in stats if s.prevCommit}
        assert set(rewritten) == {"day=2026-11-01", "day=2026-11-02"}  # day 03 untouched
        assert rewritten["day=2026-11-01"].fileId == holder[2] and rewritten["day=2026-11-02"].fileId == holder[4]
        assert all(s.prevCommit == first for s in rewritten.values())
        assert [s.partitionPath for s in stats if not s.prevCommit] == ["day=2026-11-04"]
        assert "_hoodie_is_deleted" not in [f.name for f in table.schema().fields]
        assert table.validate() == []
        assert_hudi_rs_agrees(table)

    def test_older_rows_change_nothing_and_duplicates_keep_the_latest(self, project, spark):
        """Batch 3 after batches 1 and 2: a stale row moving partition, a stale delete, a key twice
        in the batch, and a tie (an equal precombine value: the incoming row wins, as in Hudi)."""
        run_dbt(["seed"])
        run_dbt(["run"])
        run_dbt(["run", "--vars", "{batch: 2}"])
        table = self.table(project, spark, "events_merged")
        before = {r.event_id: r for r in table.read().collect()}
        run_dbt(["run", "--vars", "{batch: 3}"])
        after = {r.event_id: r for r in table.read().collect()}
        assert sorted((k, str(r.day), r.page, r.version) for k, r in after.items()) == [
            (1, "2026-11-01", "/", 1), (2, "2026-11-01", "/docs/v2", 2), (3, "2026-11-02", "/tie", 1),
            (5, "2026-11-03", "/dup-new", 3), (6, "2026-11-04", "/new", 1)]
        for unchanged in (1, 2, 6):  # same row, same commit time: not rewritten as a change
            assert after[unchanged].asDict() == before[unchanged].asDict()
        last = table.timeline()[-1].timestamp
        assert {k for k, r in after.items() if r._hoodie_commit_time == last} == {3, 5}
        assert table.validate() == []
        assert_hudi_rs_agrees(table)


SNAPSHOT = """
{% snapshot pages_snapshot %}
{{ config(unique_key='event_id', strategy='check', check_cols=['page'], target_schema=schema) }}
select event_id, day, page from {{ ref('raw_events') }}
{% endsnapshot %}
"""


class TestSnapshot(HudiliteProject):
    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"pages_snapshot.sql": SNAPSHOT}

    def test_a_change_closes_one_version_in_place_and_adds_one(self, project, spark):
        run_dbt(["seed"])
        run_dbt(["snapshot"])
        table = self.table(project, spark, "pages_snapshot")
        first = table.timeline()[-1].timestamp
        project.run_sql(f"update {project.test_schema}.raw_events set page = '/moved' where event_id = 2")
        run_dbt(["snapshot"])
        versions = self.rows(project, "pages_snapshot", "event_id, page, dbt_valid_to is null")
        assert versions == [(1, "/", True), (2, "/docs", False), (2, "/moved", True), (3, "/", True),
                            (4, "/pricing", True), (5, "/", True)]
        assert table.config.record_key_fields == ["dbt_scd_id"]
        stats = table.commit_metadata(table.timeline()[-1]).write_stats
        assert [(s.prevCommit, s.numUpdateWrites) for s in stats if s.prevCommit] == [(first, 1)]
        assert [s.numInserts for s in stats if not s.prevCommit] == [1]
        run_dbt(["snapshot"])  # nothing changed: no new version
        assert len(self.rows(project, "pages_snapshot")) == 6
        assert table.validate() == []
        assert_hudi_rs_agrees(table)


CLEANED_MODELS = {
    "page_views.sql": "{{ config(materialized='table', retain_commits=2) }}\n"
                      "select page, count(*) as views, {{ var('run', 1) }} as run from {{ ref('raw_events') }} group by page",
    "recent_pages.sql": "{{ config(materialized='view') }}\nselect * from {{ ref('page_views') }} where views > 0",
    "page_report.sql": "{{ config(materialized='table') }}\n"
                       "select count(*) as pages, max(run) as run from {{ ref('recent_pages') }}",
    "hourly_views.sql": "{{ config(materialized='incremental', partition_by='day', retain_commits=2, "
                        "keep_min_commits=3, keep_max_commits=4) }}\n"
                        "select day, page, {{ var('run', 1) }} as run from {{ ref('raw_events') }}",
}


class TestCleanerAndAFreshProcess(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return CLEANED_MODELS

    def test_retain_commits_cleans_what_no_retained_instant_reads(self, project, spark):
        from dbt.adapters.hudilite.table import TimelineError

        run_dbt(["seed"])
        for run in range(1, 5):
            run_dbt(["run", "--select", "page_views", "--vars", f"{{run: {run}}}"])
        table = self.table(project, spark, "page_views")
        instants = [i.timestamp for i in table.timeline()]
        assert len(instants) == 4 and table.earliest_readable_instant() == instants[2]
        on_disk = sorted(os.path.relpath(os.path.join(d, f), table.path) for d, _, fs in os.walk(table.path)
                         for f in fs if f.endswith(".parquet") and ".hoodie" not in d)
        assert on_disk == sorted(f.path for t in instants[2:] for f in table.latest_base_files(t))
        with pytest.raises(TimelineError, match="was cleaned"):
            table.read(as_of=instants[0])
        assert self.rows(project, "page_views", "distinct run") == [(4,)]
        assert_hudi_rs_agrees(table)

    def test_every_build_archives_the_timeline_past_keep_max_commits(self, project, spark):
        run_dbt(["seed"])
        per_run = len(self.rows(project, "raw_events", "page"))
        for run in range(1, 8):
            run_dbt(["run", "--select", "hourly_views", "--vars", f"{{run: {run}}}"])
            table = self.table(project, spark, "hourly_views")
            assert len(table.timeline()) <= 4
        archived = table.context.timeline.archived()
        assert archived.count == 7 - len(table.timeline()) and archived.count >= 3
        assert os.listdir(os.path.join(table.path, ".hoodie", "archived"))
        counts = project.run_sql(f"select run, count(*) from {project.test_schema}.hourly_views group by run", fetch="all")
        assert sorted(tuple(r) for r in counts) == [(r, per_run) for r in range(1, 8)]
        # Small-file handling: seven runs, and each day partition still has the file groups of the first.
        first_run = {}
        for f in table.latest_base_files():
            first_run[f.partition] = first_run.get(f.partition, 0) + 1
        assert max(first_run.values()) <= 2, first_run
        assert table.validate() == []
        assert_hudi_rs_agrees(table)

    def test_run_operations_savepoint_and_restore_a_model(self, project, spark):
        run_dbt(["seed"])
        run_dbt(["run", "--select", "page_views", "--vars", "{run: 10}"])
        run_dbt(["run-operation", "hudilite_savepoint", "--args", "{model: page_views, comments: before runs 11-14}"])
        table = self.table(project, spark, "page_views")
        (savepoint,) = table.savepoints()
        assert savepoint == table.timeline()[-1].timestamp
        for run in range(11, 15):
            run_dbt(["run", "--select", "page_views", "--vars", f"{{run: {run}}}"])
        table = self.table(project, spark, "page_views")
        assert table.earliest_readable_instant() > savepoint  # retain_commits=2 cleaned past it, but for it
        assert {r.run for r in table.read(as_of=savepoint).collect()} == {10}
        run_dbt(["run-operation", "hudilite_restore", "--args", f"{{model: page_views, instant: '{savepoint}'}}"])
        assert self.rows(project, "page_views", "distinct run") == [(10,)]
        table = self.table(project, spark, "page_views")
        assert table.timeline()[-1].timestamp == savepoint and table.validate() == []
        run_dbt(["run-operation", "hudilite_delete_savepoint", "--args", f"{{model: page_views, instant: '{savepoint}'}}"])
        assert self.table(project, spark, "page_views").savepoints() == []
        _, log = run_dbt_and_capture(["run-operation", "hudilite_restore", "--args",
                                      "{model: no_such_model, instant: '2026'}"], expect_pass=False)
        assert "no_such_model': not a hudilite table" in log
        assert_hudi_rs_agrees(self.table(project, spark, "page_views"))

    def test_a_fresh_process_resolves_tables_and_views_without_rebuilding_them(self, project, spark):
        import subprocess
        import sys

        run_dbt(["seed"])
        run_dbt(["run", "--select", "page_views", "recent_pages"])
        built = {name: [i.timestamp for i in self.table(project, spark, name).timeline()]
                 for name in ("page_views", "raw_events")}
        fresh = subprocess.run(
            [sys.executable, "-c", "from dbt.cli.main import cli; cli()", "run", "--select", "page_report",
             "--project-dir", str(project.project_root), "--profiles-dir", str(project.profiles_dir)],
            capture_output=True, text=True, timeout=600, cwd=str(project.project_root))
        assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
        assert built == {name: [i.timestamp for i in self.table(project, spark, name).timeline()] for name in built}
        report = self.table(project, spark, "page_report").read().collect()
        assert [(r.pages, r.run) for r in report] == [(len(self.rows(project, "page_views", "page")), 1)]


KILLED_MODELS = {
    "events_keyed.sql": MODELS["events_keyed.sql"],
    "events_append.sql": MODELS["events_append.sql"],
    "daily_overwrite.sql": MODELS["daily_overwrite.sql"],
    "page_views.sql": CLEANED_MODELS["page_views.sql"],
    "first_build.sql": "{{ config(materialized='incremental', unique_key='event_id', partition_by='day') }}\n"
                       "select * from {{ ref('raw_events') }}",
}

# (dbt command, node, phase): the killed command builds only that node; `crash` marks the slower rest.
KILLED_COMMANDS = [
    pytest.param("run", "events_keyed", "task", marks=pytest.mark.crash),
    ("run", "events_keyed", "before_publish"),
    pytest.param("run", "events_keyed", "after_publish", marks=pytest.mark.crash),
    ("snapshot", "pages_snapshot", "after_publish"),
    pytest.param("snapshot", "pages_snapshot", "before_publish", marks=pytest.mark.crash),
    pytest.param("snapshot", "pages_snapshot", "task", marks=pytest.mark.crash),
    pytest.param("run", "daily_overwrite", "task", marks=pytest.mark.crash),
    pytest.param("run", "daily_overwrite", "before_publish", marks=pytest.mark.crash),
    pytest.param("run", "daily_overwrite", "after_publish", marks=pytest.mark.crash),
    pytest.param("run", "page_views", "clean", marks=pytest.mark.crash),
]


class TestAKilledDbtRun(HudiliteProject):
    """A dbt command killed (SIGKILL) inside a model's write or the cleaner after it: the next
    plain command succeeds and the table holds the rows before the killed write or after it,
    never a mix; the other tables are untouched."""

    @pytest.fixture(scope="class")
    def models(self):
        return KILLED_MODELS

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"pages_snapshot.sql": SNAPSHOT}

    @staticmethod
    def kill(project, command, node, phase):
        """`dbt <command> --select <node>` in a new process that kills itself at `phase`."""
        import signal
        import subprocess
        import sys

        killed = subprocess.run(
            [sys.executable, "-c", "import os; os.environ['HUDILITE_KILL_PID'] = str(os.getpid()); "
             "from dbt.cli.main import cli; cli()", command, "--select", node, "--vars", "{batch: 2, run: 3}",
             "--project-dir", str(project.project_root), "--profiles-dir", str(project.profiles_dir)],
            env=dict(os.environ, HUDILITE_KILL_AT=phase), capture_output=True, text=True, timeout=600,
            cwd=str(project.project_root), start_new_session=True)
        assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]

    @pytest.mark.parametrize("phase", ["before_publish", pytest.param("requested", marks=pytest.mark.crash)])
    def test_a_killed_first_build_is_built_by_the_next_run(self, project, spark, phase):
        import shutil

        run_dbt(["seed"])
        table_path = os.path.join(project.adapter.config.credentials.location_root, project.test_schema, "first_build")
        assert not os.path.exists(table_path)
        self.kill(project, "run", "first_build", phase)
        assert os.path.exists(os.path.join(table_path, ".hoodie", "hoodie.properties"))  # created, nothing committed
        run_dbt(["run", "--select", "first_build"])
        assert self.rows(project, "first_build", "event_id, cast(day as string)") == [
            (1, "2026-11-01"), (2, "2026-11-01"), (3, "2026-11-02"), (4, "2026-11-02"), (5, "2026-11-03")]
        table = self.table(project, spark, "first_build")
        assert [i.state for i in table.timeline()] == ["COMPLETED"]
        assert table.config.partition_fields == ["day"] and table.config.record_key_fields == ["event_id"]
        assert table.validate() == []
        assert_hudi_rs_agrees(table)
        shutil.rmtree(table_path)  # the next case starts without it

    @pytest.mark.parametrize("command, node, phase", KILLED_COMMANDS)
    def test_the_next_run_recovers(self, project, spark, command, node, phase):
        run_dbt(["seed"])
        run_dbt(["run", "--full-refresh", "--vars", "{run: 1}", "--exclude", "first_build"])
        run_dbt(["snapshot"])
        run_dbt(["run", "--select", "page_views", "--vars", "{run: 2}"])
        if command == "snapshot":
            project.run_sql(f"update {project.test_schema}.raw_events set page = '/moved' where event_id = 2")
        tables = ("events_keyed", "events_append", "daily_overwrite", "page_views", "pages_snapshot")
        before = {name: self.rows(project, name, "*") for name in tables}
        versions = self.rows(project, "pages_snapshot", "event_id, page, dbt_valid_to is null")
        self.kill(project, command, node, phase)
        run_dbt([command, "--select", node, "--vars", "{batch: 2, run: 3}"])  # the next plain command
        after = {
            "events_keyed": [(1,), (2,), (3,), (4,), (5,)],  # merged once, killed or not
            "daily_overwrite": [(1,), (2,), (3,), (5,)],  # days 02 and 03 replaced once
            "page_views": [(3,)],
            # the snapshot lives across cases: event 2's current version closes, '/moved' opens
            "pages_snapshot": sorted([(e, p, now and e != 2) for e, p, now in versions] + [(2, "/moved", True)]),
        }
        columns = {"page_views": "distinct run", "pages_snapshot": "event_id, page, dbt_valid_to is null"}
        assert self.rows(project, node, columns.get(node, "event_id")) == after[node]
        assert {name: self.rows(project, name, "*") for name in tables if name != node} == \
            {name: rows for name, rows in before.items() if name != node}
        for name in tables:
            table = self.table(project, spark, name)
            assert table.validate() == []
            assert_hudi_rs_agrees(table)
        if node == "page_views":  # the killed clean was finished: only the retained instants' files remain
            table = self.table(project, spark, node)
            retained = [i.timestamp for i in table.timeline()][-2:]
            assert table.earliest_readable_instant() == retained[0]
            on_disk = sorted(os.path.relpath(os.path.join(d, f), table.path) for d, _, fs in os.walk(table.path)
                             for f in fs if f.endswith(".parquet") and ".hoodie" not in d)
            assert on_disk == sorted(f.path for t in retained for f in table.latest_base_files(t))


JAVA_TABLE = "v6_simplekeygen_nonhivestyle"  # written by Hudi's own Spark writer: key id, partition byteField
JAVA_CONTINUED = """
{{ config(materialized='incremental', unique_key='id', partition_by='byteField', precombine_field='longField') }}
select id, name, isActive, intField, longField + 1000 as longField, floatField, doubleField, decimalField, dateField,
       timestampField, binaryField, arrayField, mapField, structField, byteField, shortField
from {{ this }} where id = 1
union all
select 10, 'Zed', isActive, intField, longField, floatField, doubleField, decimalField, dateField,
       timestampField, binaryField, arrayField, mapField, structField, byteField, shortField
from {{ this }} where id = 1
"""


class TestIncrementalModelsOverJavaAndPortableTables(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            f"{JAVA_TABLE}.sql": JAVA_CONTINUED,
            "portable_events.sql": "{{ config(materialized='incremental', unique_key='event_id', partition_by='day', "
                                   "parquet_encoding='portable') }}\nselect * from {{ ref('raw_events') }}" + BATCH_FILTER,
        }

    def test_a_merge_model_continues_a_table_hudis_java_writer_wrote(self, project, spark):
        import zipfile

        from tests.core.test_java_tables import FIXTURES

        root = os.path.join(project.adapter.config.credentials.location_root, project.test_schema)
        with zipfile.ZipFile(os.path.join(FIXTURES, JAVA_TABLE + ".zip")) as archive:
            archive.extractall(root, [m for m in archive.namelist() if not m.startswith("__MACOSX")])
        table = self.table(project, spark, JAVA_TABLE)
        java_instants = [i.timestamp for i in table.timeline()]
        alice = table.read().where("id = 1").first()
        run_dbt(["run", "--select", JAVA_TABLE])
        rows = {r.id: r for r in table.read().collect()}
        assert len(rows) == 5 and rows[1].longField == alice.longField + 1000
        assert (rows[1]._hoodie_record_key, rows[1]._hoodie_partition_path) == (alice._hoodie_record_key,
                                                                                 alice._hoodie_partition_path)
        assert (rows[10]._hoodie_record_key, rows[10]._hoodie_partition_path) == ("10", alice._hoodie_partition_path)
        assert [i.timestamp for i in table.timeline()][:2] == java_instants
        assert table.commit_metadata(table.timeline()[-1]).operation == "UPSERT"
        assert table.validate() == []
        assert_hudi_rs_agrees(table)

    def test_parquet_encoding_portable_is_kept_by_every_run(self, project, spark):
        from tests.core.test_java_tables import _encodings_and_codecs

        run_dbt(["seed"])
        run_dbt(["run", "--select", "portable_events"])
        run_dbt(["run", "--select", "portable_events", "--vars", "{batch: 2}"])
        table = self.table(project, spark, "portable_events")
        assert table.config.parquet_encoding == "portable" and len(table.timeline()) == 2
        encodings, codecs = _encodings_and_codecs(table.path)
        # (the one-value meta columns are stored uncompressed, which every reader reads)
        assert codecs == {"SNAPPY", "UNCOMPRESSED"} and not [c for c, e in encodings if e == "DELTA_BYTE_ARRAY"]
        assert self.rows(project, "portable_events") == [(1,), (2,), (3,), (4,), (5,)]
        assert_hudi_rs_agrees(table)
