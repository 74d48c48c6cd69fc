"""Catalog sync's pure parts, without an engine or a catalog: the entry Hudi's sync writes for a
schema, partition values from paths and metastore names, which partitions the commits since a
sync point touched, and the sync operation's calls against a catalog kept in memory."""

import json
from typing import Dict, Tuple

import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite.catalog_sync import CatalogSettings, CatalogSyncError, sync_table
from dbt.adapters.hudilite.catalog_sync.changes import SyncPoint, partition_changes
from dbt.adapters.hudilite.catalog_sync.client import CatalogTable
from dbt.adapters.hudilite.catalog_sync.entry import (CatalogTypeError, catalog_type, partition_values, spark_schema,
                                                      table_entry, values_of_name)
from dbt.adapters.hudilite.table import CommitMetadata, Instant, WriteStat
from dbt.adapters.hudilite.table.format.file_group import FileSystemView

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("Amount", T.DecimalType(10, 2)),
    T.StructField("at", T.TimestampType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("attrs", T.MapType(T.StringType(), T.IntegerType())),
    T.StructField("Address", T.StructType([T.StructField("City", T.StringType()), T.StructField("zip", T.ShortType())])),
    T.StructField("day", T.DateType()),
    T.StructField("region", T.StringType()),
])


def test_the_entry_is_what_hudis_sync_writes():
    entry = table_entry("db", "orders", "s3://lake/db/orders", SCHEMA, ["region", "day"], spark_version="4.1.0")
    assert [c for c, _ in entry.columns[:5]] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                                 "_hoodie_partition_path", "_hoodie_file_name"]
    assert entry.columns[5:] == (("id", "bigint"), ("Amount", "decimal(10,2)"), ("at", "timestamp"),
                                 ("tags", "array<string>"), ("attrs", "map<string,int>"),
                                 ("Address", "struct<city:string,zip:smallint>"))
    assert entry.partition_keys == (("region", "string"), ("day", "date"))  # in partition_by's order
    assert entry.parameters["EXTERNAL"] == "TRUE" and entry.parameters["spark.sql.sources.provider"] == "hudi"
    assert entry.parameters["spark.sql.create.version"] == "4.1.0"
    assert [entry.parameters[f"spark.sql.sources.schema.partCol.{i}"] for i in (0, 1)] == ["region", "day"]
    assert entry.serde_parameters == {"serialization.format": "1", "path": "s3://lake/db/orders",
                                      "hoodie.query.as.ro.table": "false"}
    # Spark's schema: meta columns, data columns, then the partition columns, names as they are
    fields = spark_schema(entry.parameters).fields
    assert [f.name for f in fields][5:] == ["id", "Amount", "at", "tags", "attrs", "Address", "region", "day"]
    assert entry.partition_location("region=eu/day=2026-11-28") == "s3://lake/db/orders/region=eu/day=2026-11-28"


def test_a_long_schema_is_cut_into_parts_and_read_back_whole():
    wide = T.StructType([T.StructField(f"column_with_a_long_name_{i}", T.StringType()) for i in range(200)])
    entry = table_entry("db", "wide", "file:/t", wide, [], meta_columns=False)
    parts = int(entry.parameters["spark.sql.sources.schema.numParts"])
    assert parts > 1 and all(len(entry.parameters[f"spark.sql.sources.schema.part.{i}"]) <= 4000 for i in range(parts))
    assert spark_schema(entry.parameters) == wide
    assert "spark.sql.sources.schema.numPartCols" not in entry.parameters
    assert json.loads("".join(entry.parameters[f"spark.sql.sources.schema.part.{i}"] for i in range(parts)))["type"] == "struct"


def test_types_a_catalog_cannot_hold_are_refused_naming_the_column():
    with pytest.raises(CatalogTypeError, match="table db.t: column 'nothing'"):
        table_entry("db", "t", "file:/t", T.StructType([T.StructField("nothing", T.NullType())]), [])
    assert catalog_type(T.TimestampNTZType()) == "timestamp"


def test_partition_values_from_paths_and_names():
    assert partition_values("region=eu/day=2026-11-28", ["region", "day"]) == ["eu", "2026-11-28"]
    assert partition_values("eu/2026-11-28", ["region", "day"]) == ["eu", "2026-11-28"]  # not hive style
    assert partition_values("v=a=b", ["v"]) == ["a=b"]
    with pytest.raises(ValueError, match="one folder per partition field"):
        partition_values("2026/11/28", ["day"])
    assert values_of_name("region=e%3Du/day=50%25") == ("e=u", "50%")


def test_the_layout_check_names_a_new_entry():
    entry = table_entry("db", "t", "file:/lake/t", SCHEMA, ["region"])
    assert entry.same_layout([("REGION", "STRING")], "file:///lake/t/")
    assert not entry.same_layout([("day", "date")], "file:/lake/t")
    assert not entry.same_layout([("region", "string")], "file:/lake/other")


def test_settings_refuse_what_cannot_work():
    with pytest.raises(CatalogSyncError, match="metastore_uri"):
        CatalogSettings("hive")
    with pytest.raises(CatalogSyncError, match="must be one of"):
        CatalogSettings("unity")
    assert CatalogSettings("glue", database="Lake_{schema}").database_of("Sales") == "lake_sales"


# ---- which partitions changed -------------------------------------------------------------------
def commit(time: str, writes: Dict[str, str], replaced: Dict[str, list] = None, completed: str = None):
    """An instant writing file group `writes[partition]` in each partition, replacing `replaced`."""
    stats = [WriteStat(fileId=f, path=f"{p}/{f}_{time}.parquet", partitionPath=p, numWrites=1) for p, f in writes.items()]
    metadata = CommitMetadata("INSERT_OVERWRITE" if replaced else "INSERT", stats, replaced or {})
    return Instant(time, "replacecommit" if replaced else "commit", "COMPLETED", completed), metadata


class Timeline:
    """What `partition_changes` reads of the core's timeline, over given commits."""

    def __init__(self, commits, pending=(), by_completion=False):
        self._commits, self._pending, self.orders_by_completion = commits, list(pending), by_completion

    def commits(self):
        return self._commits

    def pending(self):
        return [Instant(t, "commit", "INFLIGHT") for t in self._pending]

    def view(self):
        return FileSystemView(self._commits)


def test_a_first_sync_and_a_point_off_the_timeline_compare_every_partition():
    timeline = Timeline([commit("001", {"a": "f1", "b": "f2"}), commit("002", {"b": "f3"}, {"a": ["f1"]})])
    first = partition_changes(timeline, SyncPoint())
    assert first.full and first.live == {"b"} and first.point == SyncPoint("002", "002", None)
    assert partition_changes(timeline, SyncPoint("000")).full  # archived, rolled back, or another table's


def test_an_incremental_sync_adds_what_holds_files_and_drops_what_was_replaced_away():
    timeline = Timeline([commit("001", {"a": "f1", "b": "f2"}), commit("002", {"c": "f3"}),
                         commit("003", {"c": "f4"}, {"a": ["f1"], "c": ["f3"]})])
    changes = partition_changes(timeline, SyncPoint("001"))
    assert not changes.full and changes.live == {"c"} and changes.emptied == {"a"}
    nothing = partition_changes(timeline, SyncPoint("003"))
    assert (nothing.live, nothing.emptied, nothing.full) == (frozenset(), frozenset(), False)


def test_a_write_pending_at_the_last_sync_is_synced_when_it_completes():
    # 002 was requested before 003 but completed after the sync that recorded 003
    timeline = Timeline([commit("001", {"a": "f1"}), commit("002", {"late": "f2"}), commit("003", {"b": "f3"})])
    assert partition_changes(timeline, SyncPoint("003", "003", "002")).live == {"late", "b"}
    # at layout 2 the completion time says it too
    by_completion = Timeline([commit("001", {"a": "f1"}, completed="004"), commit("002", {"late": "f2"}, completed="009"),
                              commit("003", {"b": "f3"}, completed="005")], by_completion=True)
    assert partition_changes(by_completion, SyncPoint("003", "005")).live == {"late"}


# ---- the sync operation, against a catalog in memory --------------------------------------------
class MemoryCatalog:
    kind, where = "memory", "a catalog in memory"

    def __init__(self):
        self.tables: Dict[Tuple[str, str], dict] = {}
        self.calls = []

    def ensure_database(self, name):
        self.calls.append("ensure_database")

    def get_table(self, database, name):
        self.calls.append("get_table")
        t = self.tables.get((database, name))
        return None if t is None else CatalogTable(t["entry"].partition_keys, t["entry"].location, dict(t["parameters"]),
                                                  t["entry"].columns, "EXTERNAL_TABLE", dict(t["entry"].serde_parameters))

    def create_table(self, entry):
        self.calls.append("create_table")
        self.tables[(entry.database, entry.name)] = {"entry": entry, "parameters": dict(entry.parameters), "partitions": set()}

    def alter_table(self, entry, parameters, cascade):
        self.calls.append("alter_table")
        t = self.tables[(entry.database, entry.name)]
        t["entry"], t["parameters"] = entry, dict(parameters)

    def drop_table(self, database, name):
        self.calls.append("drop_table")
        return self.tables.pop((database, name), None) is not None

    def partitions(self, entry):
        self.calls.append("partitions")
        return set(self.tables[(entry.database, entry.name)]["partitions"])

    def add_partitions(self, entry, paths):
        if paths:
            self.calls.append("add_partitions")
        self.tables[(entry.database, entry.name)]["partitions"] |= set(paths)

    def drop_partitions(self, entry, values):
        values = set(values)
        if values:
            self.calls.append("drop_partitions")
        self.tables[(entry.database, entry.name)]["partitions"] -= values


class Table:
    """What `sync_table` reads of a HudiTable."""

    def __init__(self, timeline, partition_fields=("region",), path="/lake/db/t"):
        self.path = path
        self.context = type("Context", (), {"timeline": timeline})()
        self.config = type("Config", (), {"partition_fields": list(partition_fields), "virtual_keys": False})()

    def schema(self):
        return T.StructType([T.StructField("id", T.LongType()), T.StructField("region", T.StringType())])


def test_a_small_commit_costs_four_calls_and_a_second_sync_none_that_change_anything():
    commits = [commit("001", {"region=a": "f1", "region=b": "f2"})]
    catalog, table = MemoryCatalog(), Table(Timeline(commits))
    first = sync_table(catalog, table, "db", "t")
    assert first.created and first.full and first.added == 2
    assert catalog.tables[("db", "t")]["partitions"] == {("a",), ("b",)}
    assert catalog.tables[("db", "t")]["entry"].location == "file:/lake/db/t"
    commits.append(commit("002", {"region=c": "f3"}, {"region=a": ["f1"]}))
    catalog.calls.clear()
    second = sync_table(catalog, table, "db", "t")
    assert (second.full, second.added, second.dropped) == (False, 1, 1)
    assert catalog.calls == ["get_table", "add_partitions", "drop_partitions", "alter_table"]
    assert catalog.tables[("db", "t")]["partitions"] == {("b",), ("c",)}
    assert catalog.tables[("db", "t")]["parameters"]["last_commit_time_sync"] == "002"
    catalog.calls.clear()
    sync_table(catalog, table, "db", "t")
    assert catalog.calls == ["get_table"]  # nothing new: nothing changed


def test_a_new_layout_makes_the_entry_again_and_a_full_sync_drops_what_storage_no_longer_has():
    catalog = MemoryCatalog()
    sync_table(catalog, Table(Timeline([commit("001", {"region=a": "f1"})])), "db", "t")
    catalog.tables[("db", "t")]["partitions"].add(("stale",))
    rebuilt = Table(Timeline([commit("005", {"day=1": "g1"})]), partition_fields=("day",))
    result = sync_table(catalog, rebuilt, "db", "t")
    assert result.created and catalog.tables[("db", "t")]["partitions"] == {("1",)}
    # the same layout, another table's timeline (a rebuild swapped in): a full sync
    catalog.tables[("db", "t")]["partitions"].add(("stale",))
    again = sync_table(catalog, Table(Timeline([commit("009", {"day=2": "h1"})]), partition_fields=("day",)), "db", "t")
    assert again.full and not again.created and catalog.tables[("db", "t")]["partitions"] == {("2",)}
