"""Catalog sync's pure parts, without an engine or a catalog: the entry Hudi's sync writes for a
schema, partition values from paths and metastore names, which partitions the commits since a
sync point touched, and the sync operation's calls against a catalog kept in memory."""

import json
from typing import Dict, Tuple

import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite.catalog_sync import (CatalogRefusal, CatalogSettings, CatalogSyncError, mark_unsynced,
                                                sync_table, synced_as)
from dbt.adapters.hudilite.catalog_sync.changes import SyncPoint, partition_changes
from dbt.adapters.hudilite.catalog_sync.client import CatalogTable
from dbt.adapters.hudilite.catalog_sync.entry import (CatalogTypeError, catalog_type, partition_values, spark_schema,
                                                      table_entry, values_of_name)
from dbt.adapters.hudilite.table import CommitMetadata, Instant, Storage, WriteStat
from dbt.adapters.hudilite.table.format.properties import TableConfig
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


def test_partition_columns_take_the_schemas_spelling_and_formatted_ones_are_strings():
    entry = table_entry("db", "t", "file:/t", SCHEMA, ["REGION", "day"], formatted_fields=["day"])
    assert entry.partition_keys == (("region", "string"), ("day", "string"))
    assert entry.parameters["spark.sql.sources.schema.partCol.0"] == "region"
    assert [f.name for f in spark_schema(entry.parameters).fields][-2:] == ["region", "day"]


def test_types_a_catalog_cannot_hold_are_refused_naming_the_column():
    with pytest.raises(CatalogTypeError, match="table db.t: column 'nothing'"):
        table_entry("db", "t", "file:/t", T.StructType([T.StructField("nothing", T.NullType())]), [])
    assert catalog_type(T.TimestampNTZType()) == "timestamp"


def test_partition_values_from_paths_and_names():
    assert partition_values("region=eu/day=2026-11-28", ["region", "day"]) == ["eu", "2026-11-28"]
    assert partition_values("eu/2026-11-28", ["region", "day"]) == ["eu", "2026-11-28"]  # not hive style
    assert partition_values("v=a=b", ["v"]) == ["a=b"]
    assert partition_values("a=b", ["region"]) == ["a=b"]  # a plain folder's value keeps its '='
    assert partition_values("2026/11/28", ["day"]) == ["2026-11-28"]  # a timestamp key generator's folders
    with pytest.raises(ValueError, match="one folder per partition field"):
        partition_values("2026/11/28", ["day", "hour"])
    assert values_of_name("region=e%3Du/day=50%25") == ("e=u", "50%")


def test_the_layout_check_names_a_new_entry():
    entry = table_entry("db", "t", "file:/lake/t", SCHEMA, ["region"])
    assert entry.same_layout([("REGION", "STRING")], "file:///lake/t/")
    assert not entry.same_layout([("day", "date")], "file:/lake/t")
    assert not entry.same_layout([("region", "string")], "file:/lake/other")
    s3 = table_entry("db", "t", "s3://lake/t", SCHEMA, ["region"])
    assert s3.same_layout([("region", "string")], "s3a://lake/t")  # Hudi's own sync wrote its writer's spelling


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
        self.tables[(entry.database, entry.name)] = {"entry": entry, "parameters": dict(entry.parameters), "partitions": {}}

    def alter_table(self, entry, parameters, cascade):
        self.calls.append("alter_table")
        t = self.tables[(entry.database, entry.name)]
        t["entry"], t["parameters"] = entry, dict(parameters)

    def drop_table(self, database, name):
        self.calls.append("drop_table")
        return self.tables.pop((database, name), None) is not None

    def partitions(self, entry):
        self.calls.append("partitions")
        return dict(self.tables[(entry.database, entry.name)]["partitions"])

    def add_partitions(self, entry, paths):
        if paths:
            self.calls.append("add_partitions")
        for values, path in paths.items():
            self.tables[(entry.database, entry.name)]["partitions"].setdefault(values, entry.partition_location(path))

    def drop_partitions(self, entry, values):
        values = set(values)
        if values:
            self.calls.append("drop_partitions")
        for v in values:
            self.tables[(entry.database, entry.name)]["partitions"].pop(v, None)

    def held(self, database="db", name="t"):
        return set(self.tables[(database, name)]["partitions"])


class Table:
    """What `sync_table` reads of a HudiTable: a real config and storage, a given timeline."""

    def __init__(self, timeline, folder, partition_fields=("region",)):
        self.path = str(folder)
        self.storage = Storage(self.path)
        self.context = type("Context", (), {"timeline": timeline})()
        self.config = TableConfig("t", partition_fields=list(partition_fields))

    def schema(self):
        return T.StructType([T.StructField("id", T.LongType()), T.StructField("region", T.StringType()),
                             T.StructField("day", T.StringType())])


def test_a_small_commit_costs_four_calls_and_a_second_sync_none_that_change_anything(tmp_path):
    commits = [commit("001", {"region=a": "f1", "region=b": "f2"})]
    catalog, table = MemoryCatalog(), Table(Timeline(commits), tmp_path)
    first = sync_table(catalog, table, "db", "t")
    assert first.created and first.full and first.added == 2
    assert catalog.held() == {("a",), ("b",)}
    assert catalog.tables[("db", "t")]["entry"].location == f"file:{tmp_path}"
    assert synced_as(table) == ("memory", "db", "t", f"file:{tmp_path}")
    commits.append(commit("002", {"region=c": "f3"}, {"region=a": ["f1"]}))
    catalog.calls.clear()
    second = sync_table(catalog, table, "db", "t")
    assert (second.full, second.added, second.dropped) == (False, 1, 1)
    assert catalog.calls == ["get_table", "drop_partitions", "add_partitions", "alter_table"]
    assert catalog.held() == {("b",), ("c",)}
    assert catalog.tables[("db", "t")]["parameters"]["last_commit_time_sync"] == "002"
    catalog.calls.clear()
    sync_table(catalog, table, "db", "t")
    assert catalog.calls == ["get_table"]  # nothing new: nothing changed


def test_a_new_layout_makes_the_entry_again_and_a_full_sync_drops_what_storage_no_longer_has(tmp_path):
    catalog = MemoryCatalog()
    sync_table(catalog, Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path), "db", "t")
    catalog.tables[("db", "t")]["partitions"][("stale",)] = "file:/elsewhere"
    rebuilt = Table(Timeline([commit("005", {"day=1": "g1"})]), tmp_path, partition_fields=("day",))
    result = sync_table(catalog, rebuilt, "db", "t")
    assert result.created and catalog.held() == {("1",)}
    # the same layout, another table's timeline (a rebuild swapped in): a full sync, which also
    # moves a partition held at another folder (the rebuild named its folders otherwise)
    catalog.tables[("db", "t")]["partitions"][("stale",)] = "file:/elsewhere"
    catalog.tables[("db", "t")]["partitions"][("2",)] = f"file:{tmp_path}/2"
    again = sync_table(catalog, Table(Timeline([commit("009", {"day=2": "h1"})]), tmp_path, partition_fields=("day",)),
                       "db", "t")
    assert again.full and not again.created
    assert catalog.tables[("db", "t")]["partitions"] == {("2",): f"file:{tmp_path}/day=2"}


def test_a_write_pending_at_the_last_sync_and_archived_since_makes_a_full_sync():
    timeline = Timeline([commit("003", {"b": "f3"}), commit("004", {"c": "f4"})])
    assert partition_changes(timeline, SyncPoint("003", "003", "002")).full


def test_an_entry_that_is_not_this_tables_is_refused_and_a_moved_one_is_removed(tmp_path):
    catalog = MemoryCatalog()
    table = Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path)
    other = Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path / "other")
    sync_table(catalog, other, "db", "t")
    with pytest.raises(CatalogSyncError, match=f"db.t is a table at file:{tmp_path}/other, not this table"):
        sync_table(catalog, table, "db", "t")
    sync_table(catalog, table, "db", "mine")
    sync_table(catalog, table, "marts", "mine")  # the model's catalog_database changed
    assert ("db", "mine") not in catalog.tables and ("marts", "mine") in catalog.tables
    assert ("db", "t") in catalog.tables  # the other table's entry is left alone


def test_a_change_the_catalog_refuses_makes_the_entry_again(tmp_path):
    class Refusing(MemoryCatalog):
        def alter_table(self, entry, parameters, cascade):
            if cascade:
                raise CatalogRefusal("The following columns have types incompatible with the existing columns")
            super().alter_table(entry, parameters, cascade)

    catalog = Refusing()
    table = Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path)
    sync_table(catalog, table, "db", "t")
    table.schema = lambda: T.StructType([T.StructField("id", T.StringType()), T.StructField("region", T.StringType())])
    result = sync_table(catalog, table, "db", "t")
    assert result.created and result.full
    assert dict(catalog.tables[("db", "t")]["entry"].columns)["id"] == "string" and catalog.held() == {("a",)}


def test_a_timeout_is_not_a_refusal_and_an_entry_this_table_made_elsewhere_is_moved(tmp_path):
    class TimingOut(MemoryCatalog):
        def alter_table(self, entry, parameters, cascade):
            if cascade:
                raise CatalogSyncError("Hive metastore h:9083: alter_table_with_environment_context: timed out")
            super().alter_table(entry, parameters, cascade)

    catalog = TimingOut()
    table = Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path / "old")
    sync_table(catalog, table, "db", "t")
    table.schema = lambda: T.StructType([T.StructField("id", T.StringType()), T.StructField("region", T.StringType())])
    with pytest.raises(CatalogSyncError, match="timed out"):
        sync_table(catalog, table, "db", "t")
    assert catalog.held() == {("a",)}  # the entry is not dropped for a call that did not answer
    # the table's folder moved (its record travels with it): its own entry is registered again
    (tmp_path / "old").rename(tmp_path / "new")
    moved = Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path / "new")
    assert sync_table(catalog, moved, "db", "t").created
    assert catalog.tables[("db", "t")]["entry"].location == f"file:{tmp_path}/new"


def test_a_table_kept_out_of_catalogs_is_recorded_so(tmp_path):
    table = Table(Timeline([commit("001", {"region=a": "f1"})]), tmp_path)
    mark_unsynced(table)
    assert synced_as(table)[0] == "none"
