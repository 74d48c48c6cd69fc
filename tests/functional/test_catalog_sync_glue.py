"""Catalog sync to AWS Glue, against moto's local Glue server (a mock: no engine reads through
it here; tests/referee/test_catalog_sync.py has the readers, through a real Hive metastore). What
is checked is what Glue holds after each build: the table as Hudi's Glue sync writes it, its
partitions added and dropped, the sync point, and the per-model settings."""

import os

import pytest

from dbt.tests.util import run_dbt
from tests.core.s3_proxy import start_moto_server
from tests.functional.test_hudilite_models import HudiliteProject

REGIONS = """
{{ config(materialized='table', partition_by='region') }}
select region, {{ var('day', 1) }} as day from values
{% if var('day', 1) == 1 %} ('north'), ('south') {% else %} ('south'), ('west') {% endif %} t(region)
"""
CUSTOMERS = """
{{ config(materialized='incremental', unique_key='customer_id', catalog_database='marts') }}
select id as customer_id, {{ var('day', 1) }} as seen from range({{ var('day', 1) }}, {{ var('day', 1) }} + 3) t(id)
"""
EVOLVING = """
{{ config(materialized='incremental', partition_by='region', on_schema_change='append_new_columns') }}
select 'north' as region, {{ var('day', 1) }} as day{% if var('day', 1) > 1 %}, 'web' as channel{% endif %}
"""
UNSYNCED = """
{{ config(materialized='table', catalog_sync=false) }}
select 1 as id
"""


@pytest.fixture(scope="module")
def glue_endpoint():
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    process, endpoint = start_moto_server()
    try:
        yield endpoint
    finally:
        process.terminate()
        process.wait()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class TestSyncedToGlue(HudiliteProject):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory, glue_endpoint):
        return {"type": "hudilite", "method": "session", "host": "local", "threads": 1,
                "location_root": str(tmp_path_factory.mktemp("lakehouse")),
                "catalog_sync": "glue", "glue_region": "us-east-1", "glue_endpoint": glue_endpoint}

    @pytest.fixture(scope="class")
    def models(self):
        return {"regions.sql": REGIONS, "customers.sql": CUSTOMERS, "unsynced.sql": UNSYNCED, "evolving.sql": EVOLVING}

    def test_glue_holds_each_build(self, project, glue_endpoint):
        import boto3

        glue = boto3.client("glue", region_name="us-east-1", endpoint_url=glue_endpoint)
        database = project.test_schema.lower()

        def partitions(db, name):
            return sorted(tuple(p["Values"]) for p in glue.get_partitions(DatabaseName=db, TableName=name)["Partitions"])

        run_dbt(["run", "--vars", "{day: 1}"])
        table = glue.get_table(DatabaseName=database, Name="regions")["Table"]
        sd = table["StorageDescriptor"]
        assert table["TableType"] == "EXTERNAL_TABLE"
        assert sd["InputFormat"] == "org.apache.hudi.hadoop.HoodieParquetInputFormat"
        assert sd["SerdeInfo"]["SerializationLibrary"] == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
        location = "file:" + os.path.join(project.adapter.config.credentials.location_root, project.test_schema, "regions")
        assert sd["Location"] == location and sd["SerdeInfo"]["Parameters"]["path"] == location
        assert [c["Name"] for c in sd["Columns"]] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                                     "_hoodie_partition_path", "_hoodie_file_name", "day"]
        assert table["PartitionKeys"] == [{"Name": "region", "Type": "string"}]
        regions = self.table(project, None, "regions")
        assert table["Parameters"]["last_commit_time_sync"] == regions.timeline()[-1].timestamp
        assert table["Parameters"]["hudi.metadata-listing-enabled"] == "FALSE"
        assert table["Parameters"]["spark.sql.sources.provider"] == "hudi"
        assert partitions(database, "regions") == [("north",), ("south",)]
        # a model's own database; a model kept out of the catalog
        assert glue.get_table(DatabaseName="marts", Name="customers")["Table"]["PartitionKeys"] == []
        with pytest.raises(glue.exceptions.EntityNotFoundException):
            glue.get_table(DatabaseName=database, Name="unsynced")

        run_dbt(["run", "--vars", "{day: 2}"])
        assert partitions(database, "regions") == [("south",), ("west",)]  # north's files were replaced
        # a new column reaches the table and its partition (Athena compares the two schemas)
        (north,) = glue.get_partitions(DatabaseName=database, TableName="evolving")["Partitions"]
        table_columns = glue.get_table(DatabaseName=database, Name="evolving")["Table"]["StorageDescriptor"]["Columns"]
        assert [c["Name"] for c in table_columns][-2:] == ["day", "channel"]
        assert north["StorageDescriptor"]["Columns"] == table_columns
        assert glue.get_table(DatabaseName=database, Name="regions")["Table"]["Parameters"]["last_commit_time_sync"] \
            == self.table(project, None, "regions").timeline()[-1].timestamp
