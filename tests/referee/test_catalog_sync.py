"""Catalog sync proven by readers that find tables by name: a dbt project synced to a real Hive
metastore (Hive's standalone server on Derby), read after every build by Trino 476's Hudi
connector and by Hudi's own Spark reader (pyspark 3.5 with the Hudi bundle, a metastore client),
both equal to what hudilite reads. The metastore's partitions are checked one by one, and a sync
that cannot reach the metastore fails the build but keeps its commit."""

import os
import subprocess
import sys

import pytest

from dbt.tests.util import run_dbt
from tests.functional.demo_project import assert_two_demo_days, dbt_build
from tests.functional.test_hudilite_models import HudiliteProject
from tests.referee.catalog_servers import free_port, hive_metastore, trino_server
from tests.referee.hudi_spark import HudiSpark
from tests.referee.values import plain_rows

READER_VERSION = "0.15.0"  # Hudi's Spark reader; the tables are at version 6, which it reads natively

# Day `day` of a project: each model's rows are a function of the day, so every reader's rows are known.
EVENTS = """
{{ config(materialized='incremental', partition_by='day') }}
select id, concat('e', cast(id as string)) as name, date_add(date'2026-11-20', {{ var('day', 1) }}) as day,
       cast(id * 1.25 as decimal(10, 2)) as amount, timestamp'2026-11-20 10:00:00' + make_interval(0, 0, 0, 0, 0, cast(id as int)) as at
from range({{ var('day', 1) }} * 10, {{ var('day', 1) }} * 10 + 4) t(id)
"""
DAILY = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by='day') }}
select d as day, count(*) as n, {{ var('day', 1) }} as written_on
from (select date_add(date'2026-11-20', {{ var('day', 1) }} - cast(id % 2 as int)) as d from range(6) t(id))
group by d
"""
REGIONS = """
{{ config(materialized='table', partition_by='region') }}
select region, {{ var('day', 1) }} as day from values
{% if var('day', 1) == 1 %} ('north'), ('south') {% else %} ('south'), ('west') {% endif %} t(region)
"""
CUSTOMERS = """
{{ config(materialized='incremental', unique_key='customer_id') }}
select id as customer_id, concat('c', cast(id as string), '-', '{{ var('day', 1) }}') as name, {{ var('day', 1) }} as seen
from range({{ var('day', 1) }}, {{ var('day', 1) }} + 3) t(id)
"""
RELAYOUT = """
{{ config(materialized='incremental', unique_key='id', partition_by=(['q'] if var('relayout', false) else ['p'])) }}
select id, concat('p', cast(id % 2 as string)) as p, concat('q', cast(id % 3 as string)) as q
from range(0, 4 + {{ var('day', 1) }}) t(id)
"""
EVOLVING = """
{{ config(materialized='incremental', unique_key='id', on_schema_change='append_new_columns') }}
select id, cast(id * 10 as int) as amount{% if var('day', 1) > 1 %}, concat('ch', cast(id as string)) as channel{% endif %}
from range({{ var('day', 1) }}, {{ var('day', 1) }} + 2) t(id)
"""
MODELS = {"evolving.sql": EVOLVING, "events.sql": EVENTS, "daily.sql": DAILY, "regions.sql": REGIONS, "customers.sql": CUSTOMERS,
          "relayout.sql": RELAYOUT}
COLUMNS = {"evolving": None, "events": "id, name, day, amount, at", "daily": "day, n, written_on", "regions": "region, day",
           "customers": "customer_id, name, seen", "relayout": "id, p, q"}


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory):
    """A metastore, Trino over it, and Hudi's Spark reader as its client, started side by side."""
    folder = tmp_path_factory.mktemp("catalogs")
    with hive_metastore(folder / "metastore") as uri:
        reader = HudiSpark(READER_VERSION, conf={"spark.sql.catalogImplementation": "hive",
                                                 "spark.hadoop.hive.metastore.uris": uri},
                           log_name="hudi-catalog-reader.log", wait=False)
        try:
            with trino_server(folder / "trino", uri) as trino_port:
                yield uri, trino_port, reader.wait_ready()
        finally:
            reader.close()


def trino_rows(port: int, query: str):
    import trino

    connection = trino.dbapi.connect(host="127.0.0.1", port=port, user="hudilite-tests", catalog="hudi")
    try:
        cursor = connection.cursor()
        cursor.execute(query)
        rows = cursor.fetchall()
        columns = [d[0] for d in cursor.description]
    finally:
        connection.close()
    return plain_rows([dict(zip(columns, r)) for r in rows], columns)


def client_tables(uri: str):
    client = metastore(uri)
    try:
        return client.tables("analytics")
    finally:
        client.close()


def metastore(uri: str):
    from dbt.adapters.hudilite.catalog_sync import CatalogSettings, connect

    return connect(CatalogSettings("hive", uri))


class TestSyncedToAHiveMetastore(HudiliteProject):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory, catalogs):
        return {"type": "hudilite", "method": "session", "host": "local", "threads": 1,
                "location_root": str(tmp_path_factory.mktemp("lakehouse")),
                "catalog_sync": "hive", "metastore_uri": catalogs[0]}

    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def ours(self, project, name):
        df = project.adapter.catalog.spark.sql(f"select {COLUMNS[name] or '*'} from {project.test_schema}.{name}")
        return df.columns, plain_rows(df.collect(), df.columns)

    def assert_readers_agree(self, project, catalogs):
        uri, trino_port, reader = catalogs
        database = project.test_schema.lower()
        for name in COLUMNS:
            names, ours = self.ours(project, name)
            columns = ", ".join(names)  # the model's columns as they are now (evolving: a new one on day 2)
            assert ours, name
            assert trino_rows(trino_port, f"select {columns} from {database}.{name}") == ours, f"Trino read {name}"
            reader.sql(f"refresh table {database}.{name}")  # a long-lived session caches a table's files
            assert reader.sql(f"select {columns} from {database}.{name}")[1] == ours, f"Hudi's Spark reader read {name}"

    def partitions(self, uri, project, name):
        from dbt.adapters.hudilite.catalog_sync.entry import table_entry

        table = self.table(project, project.adapter.catalog.spark, name)
        client = metastore(uri)
        try:
            entry = table_entry(project.test_schema.lower(), name, "", table.schema(), table.config.partition_fields)
            return sorted(client.partitions(entry)), client.get_table(project.test_schema.lower(), name)
        finally:
            client.close()

    def test_every_build_is_read_by_name_by_trino_and_hudis_spark_reader(self, project, catalogs):
        uri, trino_port, reader = catalogs
        run_dbt(["run", "--vars", "{day: 1}"])
        self.assert_readers_agree(project, catalogs)
        regions, entry = self.partitions(uri, project, "regions")
        assert regions == [("north",), ("south",)]
        assert entry.parameters["spark.sql.sources.provider"] == "hudi"
        assert entry.parameters["last_commit_time_sync"] == self.table(project, None, "regions").timeline()[-1].timestamp
        assert entry.columns[:2] == (("_hoodie_commit_time", "string"), ("_hoodie_commit_seqno", "string"))

        run_dbt(["run", "--vars", "{day: 2}"])
        self.assert_readers_agree(project, catalogs)
        assert self.ours(project, "evolving")[0] == ["id", "amount", "channel"]  # the new column, read by name too
        # the table rebuild replaced region north: its partition is dropped, west is added
        assert self.partitions(uri, project, "regions")[0] == [("south",), ("west",)]
        assert [v for v, in self.partitions(uri, project, "daily")[0]] == ["2026-11-20", "2026-11-21", "2026-11-22"]
        assert len(self.partitions(uri, project, "events")[0]) == 2

        # A second sync of the same commits changes nothing.
        before = {n: self.partitions(uri, project, n) for n in COLUMNS}
        synced = subprocess.run([sys.executable, "-m", "dbt.adapters.hudilite.cli", "sync",
                                 project.adapter.config.credentials.location_root, "--catalog", "hive",
                                 "--metastore-uri", uri], capture_output=True, text=True)
        assert synced.returncode == 0, synced.stderr
        assert synced.stdout.count("(+0 -0 partitions)") == len(COLUMNS), synced.stdout
        after = {n: self.partitions(uri, project, n) for n in COLUMNS}
        for name in COLUMNS:
            assert after[name][0] == before[name][0]
            assert {k: v for k, v in after[name][1].parameters.items() if k != "transient_lastDdlTime"} == \
                {k: v for k, v in before[name][1].parameters.items() if k != "transient_lastDdlTime"}

        # --full-refresh with a new layout: the entry is made again with the new partition keys.
        run_dbt(["run", "--vars", "{day: 3, relayout: true}", "--full-refresh", "--select", "relayout"])
        run_dbt(["run", "--vars", "{day: 3}", "--exclude", "relayout"])
        self.assert_readers_agree(project, catalogs)
        relayout, entry = self.partitions(uri, project, "relayout")
        assert [k for k, _ in entry.partition_keys] == ["q"] and relayout == [("q0",), ("q1",), ("q2",)]

    def test_a_dropped_model_leaves_the_catalog(self, project, catalogs):
        uri = catalogs[0]
        run_dbt(["run", "--vars", "{day: 1}", "--select", "customers"])
        relation = project.adapter.Relation.create(schema=project.test_schema, identifier="customers")
        with project.adapter.connection_named("drop"):
            project.adapter.drop_relation(relation)
        client = metastore(uri)
        try:
            assert client.get_table(project.test_schema.lower(), "customers") is None
        finally:
            client.close()


class TestASyncThatFailsKeepsTheCommit(HudiliteProject):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory):
        return {"type": "hudilite", "method": "session", "host": "local", "threads": 1,
                "location_root": str(tmp_path_factory.mktemp("lakehouse")),
                "catalog_sync": "hive", "metastore_uri": f"thrift://127.0.0.1:{free_port()}"}  # nothing listens

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS}

    def test_the_build_fails_the_table_holds_it_and_a_sync_brings_the_catalog_in_step(self, project, catalogs):
        uri, trino_port, _ = catalogs
        results = run_dbt(["run", "--vars", "{day: 1}"], expect_pass=False)
        message = results[0].message
        assert "committed at" in message and "cannot be reached" in message and "hudilite sync" in message, message
        table = self.table(project, None, "customers")
        assert len(table.timeline()) == 1  # the commit stands
        root = project.adapter.config.credentials.location_root
        synced = subprocess.run([sys.executable, "-m", "dbt.adapters.hudilite.cli", "sync", root, "--catalog", "hive",
                                 "--metastore-uri", uri], capture_output=True, text=True)
        assert synced.returncode == 0, synced.stderr
        rows = trino_rows(trino_port, f"select customer_id, name from {project.test_schema.lower()}.customers")
        assert rows == [{"customer_id": i, "name": f"c{i}-1"} for i in (1, 2, 3)]
        project.adapter.config.credentials.metastore_uri = uri  # the teardown's drop of the schema syncs too


def test_the_demo_projects_synced_target_is_read_by_name(spark, tmp_path, catalogs):
    """The demo's `synced` target: after two days, Trino reads every table it builds by name as
    the demo's own checks expect them, and Hudi's Spark reader finds each with its rows."""
    uri, trino_port, reader = catalogs
    lakehouse = tmp_path / "lakehouse"
    env = dict(os.environ, HUDILITE_METASTORE_URI=uri, HUDILITE_LOCATION_ROOT=str(lakehouse))
    for run_date in ("2026-11-20", "2026-11-21"):
        build = dbt_build(tmp_path, env, run_date, "--target", "synced", "--exclude-resource-type", "test")
        assert build.returncode == 0, build.stdout[-5000:]
    assert_two_demo_days(spark, lakehouse, rows=lambda name: trino_rows(trino_port, f"select * from analytics.{name}"))
    tables = [t for t in os.listdir(lakehouse / "analytics") if not t.startswith(".")]
    client = metastore(uri)
    try:
        assert sorted(client.tables("analytics")) == sorted(t.lower() for t in tables if os.path.isdir(lakehouse / "analytics" / t / ".hoodie"))
    finally:
        client.close()
    for name in client_tables(uri):
        reader.sql(f"refresh table analytics.{name}")
        count = reader.sql(f"select count(*) as n from analytics.{name}")[1][0]["n"]
        assert count == trino_rows(trino_port, f"select count(*) as n from analytics.{name}")[0]["n"], name
