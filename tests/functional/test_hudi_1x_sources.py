"""A dbt project whose source is a table Hudi 1.1 made with its defaults (table version 9, the
metadata table on): models read it through `source()`, `hudilite_as_of` and `hudilite_changes`,
and what they build equals what the core and hudi-rs read from it."""

import os
import zipfile

import pytest

from dbt.tests.util import run_dbt
from tests.core.hudi_rs import hudi_rs_snapshot, rows_of_arrow
from tests.core.test_hudi_1x_tables import FIXTURES
from tests.functional.test_hudilite_models import HudiliteProject

SOURCE = "v9_txns_simple_meta"  # txn_id key, region partitions; insert, update, delete, overwrite, clustering
SOURCES_YML = f"""
version: 2
sources:
  - name: lake
    schema: "{{{{ target.schema }}}}"
    tables:
      - name: {SOURCE}
"""
FIRST_INSTANT = "20260307162434124"  # its first commit: 8 rows


class TestHudi1xTableAsASource(HudiliteProject):
    @pytest.fixture(scope="class")
    def seeds(self):
        return {}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": SOURCES_YML,
            "txns.sql": "{{ config(materialized='table') }} select txn_id, region, amount, txn_type "
                        f"from {{{{ source('lake', '{SOURCE}') }}}}",
            "txns_at_start.sql": "{{ config(materialized='table') }} select txn_id from "
                                 f"{{{{ hudilite_as_of(source('lake', '{SOURCE}'), '{FIRST_INSTANT}') }}}}",
            "txns_changed.sql": "{{ config(materialized='incremental', unique_key='txn_id') }} "
                                f"select txn_id, _hoodie_commit_time as seen_in from "
                                f"{{{{ hudilite_changes(source('lake', '{SOURCE}')) }}}}",
        }

    def test_models_read_a_hudi_1x_source_as_hudi_rs_reads_it(self, project, spark):
        root = os.path.join(project.adapter.config.credentials.location_root, project.test_schema)
        with zipfile.ZipFile(os.path.join(FIXTURES, SOURCE + ".zip")) as archive:
            archive.extractall(root, [m for m in archive.namelist() if not m.startswith("__MACOSX")])
        source = self.table(project, spark, SOURCE)
        theirs = rows_of_arrow(hudi_rs_snapshot(source.path), ["txn_id", "region", "txn_type"])
        run_dbt(["run"])
        assert self.rows(project, "txns", "txn_id, region, txn_type") == theirs and len(theirs) == 12
        assert self.rows(project, "txns_at_start", "txn_id") == [(f"TXN-00{n}",) for n in range(1, 9)]
        # the first build reads every change; its checkpoint is the source's last completion time
        latest = max(i.completed_at for i in source.timeline() if i.is_completed)
        changed = self.table(project, spark, "txns_changed")
        assert self.rows(project, "txns_changed", "txn_id") == [(t,) for t, _, _ in theirs]
        upstream = f"{project.test_schema}.{SOURCE}"
        assert changed.checkpoint(upstream) == latest
        # nothing new upstream: the next build resumes from that completion time and reads nothing
        before = [i.timestamp for i in changed.timeline() if i.is_completed]
        run_dbt(["run", "--select", "txns_changed"])
        assert [i.timestamp for i in changed.timeline() if i.is_completed] == before
        assert changed.checkpoint(upstream) == latest
        assert self.rows(project, "txns_changed", "txn_id") == [(t,) for t, _, _ in theirs]
        assert source.validate() == []
