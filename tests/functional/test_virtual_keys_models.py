"""The model config `populate_meta_fields=false`: a merge model's table with virtual keys
(Hudi's hoodie.populate.meta.fields=false), kept by every run; refused where no record key is."""

import os

import pyarrow.parquet as pq
import pytest

from dbt.tests.util import run_dbt
from tests.core.hudi_rs import hudi_rs_snapshot, rows_of_arrow, rows_of_df
from tests.functional.test_hudilite_models import BATCH_FILTER, HudiliteProject

VIRTUAL = ("{{ config(materialized='incremental', unique_key='event_id', partition_by='day', "
           "populate_meta_fields=false) }}\nselect * from {{ ref('raw_events') }}")


class TestVirtualKeyModels(HudiliteProject):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "virtual_events.sql": VIRTUAL + BATCH_FILTER,
            "virtual_append.sql": "{{ config(materialized='incremental', populate_meta_fields=false) }}\n"
                                  "select * from {{ ref('raw_events') }}",
        }

    def test_a_merge_model_with_virtual_keys(self, project, spark):
        run_dbt(["seed"])
        run_dbt(["run", "--select", "virtual_events"])
        run_dbt(["run", "--select", "virtual_events", "--vars", "{batch: 2}"])
        table = self.table(project, spark, "virtual_events")
        assert table.config.virtual_keys and [i.action for i in table.timeline()] == ["commit", "commit"]
        assert table.commit_metadata(table.timeline()[-1]).operation == "UPSERT"
        assert self.rows(project, "virtual_events") == [(1,), (2,), (3,), (4,), (5,)]
        for f in table.latest_base_files():
            stored = pq.read_table(os.path.join(table.path, f.path))
            assert stored.column("_hoodie_record_key").null_count == stored.num_rows
        df = table.read()
        assert sorted(r._hoodie_record_key for r in df.collect()) == ["1", "2", "3", "4", "5"]
        assert table.validate() == []
        columns = ["event_id", "day", "page"]
        assert rows_of_df(df, columns) == rows_of_arrow(hudi_rs_snapshot(table.path), columns)

    def test_without_a_record_key_it_is_refused(self, project):
        (result,) = run_dbt(["run", "--select", "virtual_append"], expect_pass=False)
        assert "Compilation Error" in result.message and "populate_meta_fields=false" in result.message
        root = project.adapter.config.credentials.location_root
        assert not os.path.exists(os.path.join(root, project.test_schema, "virtual_append"))
