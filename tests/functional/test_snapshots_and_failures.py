"""Snapshots with `hard_deletes='new_record'` as dbt's docs describe them (the deletion record
carries the deleted row's values; it is closed when the key comes back), with and without
`dbt_valid_to_current`; and `store_failures_as: view` kept on storage like every other view,
so that a later process reads the failing rows."""

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from dbt.tests.util import run_dbt
from tests.functional.test_hudilite_models import HudiliteProject

# run 1: keys 1, 2, 3; run 2: key 2 deleted in the source; run 3: key 2 back, changed, with an
# updated_at later than the deletion (a timestamp snapshot closes the deletion record at it).
SOURCE = """
{{ config(materialized='table') }}
select id, name, cast(updated_at as timestamp) as updated_at from values
  (1, 'a', '2026-01-01 00:00:00'),
  {% if var('run', 1) == 3 %} (2, 'b2', '2099-01-01 00:00:00'), {% elif var('run', 1) == 1 %} (2, 'b', '2026-01-01 00:00:00'), {% endif %}
  (3, 'c', '2026-01-01 00:00:00')
  as t(id, name, updated_at)
"""

# dbt's canonical form: `select *` of the source.
TIMESTAMP_SNAPSHOT = """
{% snapshot snap_ts %}
{{ config(unique_key='id', strategy='timestamp', updated_at='updated_at', hard_deletes='new_record',
          target_schema=schema) }}
select * from {{ ref('src') }}
{% endsnapshot %}
"""

CHECK_SNAPSHOT_CURRENT = """
{% snapshot snap_check %}
{{ config(unique_key='id', strategy='check', check_cols=['name'], hard_deletes='new_record',
          dbt_valid_to_current="to_date('9999-12-31')", target_schema=schema) }}
select id, name, updated_at from {{ ref('src') }}
{% endsnapshot %}
"""

T1 = dt.datetime(2026, 1, 1)
T3 = dt.datetime(2099, 1, 1)  # after the snapshots' own times
FOREVER = dt.datetime(9999, 12, 31)


class SnapshotProject(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"src.sql": SOURCE}

    @staticmethod
    def step(run, snapshot):
        run_dbt(["run", "--vars", f"{{run: {run}}}"])
        run_dbt(["snapshot", "--select", snapshot])

    @staticmethod
    def versions(project, snapshot):
        """(id, name, updated_at, dbt_valid_from, dbt_valid_to, dbt_is_deleted) of every version,
        by id, then dbt_valid_from."""
        rows = project.run_sql(
            f"select id, name, updated_at, dbt_valid_from, dbt_valid_to, dbt_is_deleted "
            f"from {project.test_schema}.{snapshot} order by id, dbt_valid_from", fetch="all")
        return [tuple(r) for r in rows]

    @staticmethod
    def columns(project, snapshot):
        return [r[0] for r in project.run_sql(f"describe {project.test_schema}.{snapshot}", fetch="all")
                if r[0] and not r[0].startswith("#")]


class TestHardDeletesNewRecordTimestampSelectStar(SnapshotProject):
    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap_ts.sql": TIMESTAMP_SNAPSHOT}

    def test_deletion_record_carries_the_row_and_is_closed_when_the_key_returns(self, project):
        self.step(1, "snap_ts")
        assert self.versions(project, "snap_ts") == [
            (1, "a", T1, T1, None, "False"), (2, "b", T1, T1, None, "False"), (3, "c", T1, T1, None, "False")]

        self.step(2, "snap_ts")  # key 2 deleted in the source
        versions = self.versions(project, "snap_ts")
        deleted_at = max(v[3] for v in versions)  # the snapshot's time: the deletion record's valid_from
        assert T1 < deleted_at < T3, versions
        assert versions == [
            (1, "a", T1, T1, None, "False"),
            (2, "b", T1, T1, deleted_at, "False"),        # closed when the row went away
            (2, "b", T1, deleted_at, None, "True"),        # the deleted row's values, flagged deleted
            (3, "c", T1, T1, None, "False")]

        self.step(3, "snap_ts")  # key 2 back, changed
        assert self.versions(project, "snap_ts") == [
            (1, "a", T1, T1, None, "False"),
            (2, "b", T1, T1, deleted_at, "False"),
            (2, "b", T1, deleted_at, T3, "True"),          # the deletion record is closed (timestamp: at updated_at)
            (2, "b2", T3, T3, None, "False"),              # and the returned row is current
            (3, "c", T1, T1, None, "False")]

        run_dbt(["snapshot", "--select", "snap_ts"])  # nothing changed: no new version, nothing closed
        assert len(self.versions(project, "snap_ts")) == 5
        assert self.columns(project, "snap_ts") == [
            "id", "name", "updated_at", "dbt_scd_id", "dbt_updated_at", "dbt_valid_from", "dbt_valid_to",
            "dbt_is_deleted"]


class TestHardDeletesNewRecordWithValidToCurrent(SnapshotProject):
    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"snap_check.sql": CHECK_SNAPSHOT_CURRENT}

    def test_current_versions_carry_the_configured_valid_to(self, project):
        self.step(1, "snap_check")
        first = self.versions(project, "snap_check")
        built_at = first[0][3]
        assert first == [(1, "a", T1, built_at, FOREVER, "False"), (2, "b", T1, built_at, FOREVER, "False"),
                         (3, "c", T1, built_at, FOREVER, "False")]

        self.step(2, "snap_check")  # key 2 deleted in the source
        versions = self.versions(project, "snap_check")
        deleted_at = max(v[3] for v in versions)
        assert deleted_at > built_at, versions
        assert versions == [
            (1, "a", T1, built_at, FOREVER, "False"),
            (2, "b", T1, built_at, deleted_at, "False"),
            (2, "b", T1, deleted_at, FOREVER, "True"),
            (3, "c", T1, built_at, FOREVER, "False")]

        self.step(3, "snap_check")  # key 2 back, changed
        versions = self.versions(project, "snap_check")
        returned_at = max(v[3] for v in versions)  # check strategy: the snapshot's time
        assert returned_at > deleted_at, versions
        assert versions == [
            (1, "a", T1, built_at, FOREVER, "False"),
            (2, "b", T1, built_at, deleted_at, "False"),
            (2, "b", T1, deleted_at, returned_at, "True"),
            (2, "b2", T3, returned_at, FOREVER, "False"),
            (3, "c", T1, built_at, FOREVER, "False")]

        run_dbt(["snapshot", "--select", "snap_check"])  # nothing changed
        assert self.versions(project, "snap_check") == versions


# ---- store_failures_as: view ---------------------------------------------------------------
AMOUNTS = """
{{ config(materialized='table') }}
select id, amount from values (1, 5), (2, -3), (3, -1) as t(id, amount)
"""
NEGATIVE_AMOUNTS = """
{{ config(store_failures_as='view') }}
select id, amount from {{ ref('amounts') }} where amount < 0
"""


class TestStoreFailuresAsView(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {"amounts.sql": AMOUNTS}

    @pytest.fixture(scope="class")
    def tests(self):
        return {"negative_amounts.sql": NEGATIVE_AMOUNTS}

    def test_a_later_process_reads_the_failures_view(self, project):
        run_dbt(["run"])
        for _ in range(2):  # the second run replaces the view kept by the first
            results = run_dbt(["test"], expect_pass=False)
            assert [(r.node.name, r.status, r.failures) for r in results] == [("negative_amounts", "fail", 2)]

        audit = f"{project.test_schema}_dbt_test__audit"
        root = project.adapter.config.credentials.location_root
        kept = os.path.join(root, audit, ".hudilite_views", "negative_amounts.sql")
        assert os.path.isfile(kept), f"no {kept}; {audit}/ holds {_listing(os.path.join(root, audit))}"
        with open(kept) as f:
            assert "amount < 0" in f.read()
        relation = project.adapter.Relation.create(schema=audit, identifier="negative_amounts")
        with project.adapter.connection_named("__test"):
            listed = project.adapter.list_relations_without_caching(relation)
        assert [(r.identifier, str(r.type)) for r in listed] == [("negative_amounts", "view")]

        # A new process (its own JVM and Spark session, nothing registered) reads the failures.
        fresh = subprocess.run(
            [sys.executable, "-c", "from dbt.cli.main import cli; cli()", "--quiet", "--log-format", "json",
             "show", "--inline", f"select id, amount from {audit}.negative_amounts order by id",
             "--output", "json", "--project-dir", str(project.project_root),
             "--profiles-dir", str(project.profiles_dir)],
            capture_output=True, text=True, timeout=600, cwd=str(project.project_root))
        assert fresh.returncode == 0, fresh.stdout[-3000:] + fresh.stderr[-3000:]
        shown = _shown_rows(fresh.stdout)
        assert shown == [{"id": 2, "amount": -3}, {"id": 3, "amount": -1}], fresh.stdout[-3000:]


def _listing(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)


def _shown_rows(stdout):
    """The rows `dbt show --output json --log-format json` printed."""
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        preview = (event.get("data") or {}).get("preview")
        if preview is not None:
            return json.loads(preview)
    return None
