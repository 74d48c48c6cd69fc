"""Every kind of table state hudilite's core writes, each built by a short history of writes
in a folder of its own. The referee tests read each back through other readers."""

import contextlib
import datetime as dt
import os
import zipfile
from decimal import Decimal

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.services.cleaner import (KEEP_LATEST_BY_HOURS, KEEP_LATEST_COMMITS,
                                                          KEEP_LATEST_FILE_VERSIONS)
from dbt.adapters.hudilite.table.spark.file_sizing import FileSizing

EVENTS = "id long, region string, ts long, v string"
FLAGGED = EVENTS + ", _hoodie_is_deleted boolean"
JAVA_FIXTURES = os.environ.get("HUDI_JAVA_FIXTURES", os.path.normpath(os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures", "hudi-java-tables")))


_VERSION = [6]  # the table version the states' tables are created at (`created_at`)


@contextlib.contextmanager
def created_at(version: int):
    """Build the states' tables at Hudi table `version` (6, 8 or 9) inside."""
    _VERSION[0] = version
    try:
        yield
    finally:
        _VERSION[0] = 6


def _create(spark, path, name, **options) -> HudiTable:
    return HudiTable.create(spark, path, name, table_version=_VERSION[0], **options)


HUDI_1X_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hudi-1x-tables")


def _rows(spark, rows, schema=EVENTS):
    return spark.createDataFrame(rows, schema)


def append_auto_keys(spark, path):
    t = _create(spark, path, "events", partition_by=["region"])
    t.insert(_rows(spark, [(1, "eu", 1, "a"), (2, "us", 1, "b")]))
    t.insert(_rows(spark, [(3, "eu", 2, "c"), (4, "apac", 2, "d")]))
    t.insert(_rows(spark, [(5, "us", 3, "e")]))
    return t


def insert_overwrite_partitions(spark, path):
    t = _create(spark, path, "events", partition_by=["region"])
    t.insert(_rows(spark, [(1, "eu", 1, "a"), (2, "us", 1, "b"), (3, "apac", 1, "c")]))
    t.insert_overwrite(_rows(spark, [(4, "eu", 2, "d"), (5, "eu", 2, "e")]))
    t.insert(_rows(spark, [(6, "us", 3, "f")]))
    t.insert_overwrite(_rows(spark, [(7, "us", 4, "g"), (8, "apac", 4, "h")]))
    return t


def table_rebuild(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    t.upsert(_rows(spark, [(1, "eu", 1, "a"), (2, "us", 1, "b")]))
    t.insert_overwrite_table(_rows(spark, [(3, "apac", 2, "c"), (1, "us", 2, "a2")]))
    t.upsert(_rows(spark, [(3, "apac", 3, "c3"), (9, "eu", 3, "z")]))
    return t


def upsert_simple_key(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"], precombine="ts")
    t.upsert(_rows(spark, [(i, ["eu", "us"][i % 2], 1, f"v{i}") for i in range(10)]))
    t.upsert(_rows(spark, [(1, "us", 0, "older"), (2, "eu", 5, "moved"), (11, "apac", 1, "new")]))
    t.upsert(_rows(spark, [(3, "us", 6, "x", True), (4, "eu", 6, "kept", False)], FLAGGED))
    t.delete(spark.createDataFrame([(5,), (6,)], "id long"))
    return t


def upsert_complex_key(spark, path):
    schema = "id long, name string, region string, day string, v long"
    t = _create(spark, path, "people", partition_by=["region", "day"], record_key=["id", "name"])
    t.upsert(spark.createDataFrame([(1, "a", "eu", "d1", 1), (1, "b", "eu", "d1", 2), (2, "a", "us", "d2", 3)], schema))
    t.upsert(spark.createDataFrame([(1, "b", "eu", "d1", 20), (2, "a", "us", "d3", 30), (3, "", "eu", "d2", 4)], schema))
    t.delete(spark.createDataFrame([(1, "a")], "id long, name string"))
    return t


def java_plain_partitioning(spark, path):
    """Hudi's Java writer made it (plain partition folders, `10/`); our upsert, insert and
    delete continue it."""
    name = "v6_simplekeygen_nonhivestyle"
    folder = JAVA_FIXTURES
    if _VERSION[0] != 6:  # the same table Hudi 1.0 wrote at version 8 (hudi-rs's twin of it)
        name, folder = "v8_simplekeygen_nonhivestyle", HUDI_1X_FIXTURES
    with zipfile.ZipFile(os.path.join(folder, name + ".zip")) as archive:
        members = [m for m in archive.namelist() if m.startswith(name + "/")]
        for member in members:
            target = os.path.join(path, member[len(name) + 1:])
            if member.endswith("/"):
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.open(member) as src, open(target, "wb") as dst:
                dst.write(src.read())
    t = HudiTable.open(spark, path)
    stored = t.read().drop(*[c for c in t.read().columns if c.startswith("_hoodie_")])
    first = stored.orderBy("id").limit(1)
    t.upsert(first.selectExpr("*").withColumn("name", first.name.substr(1, 1)))
    t.upsert(first.withColumn("id", first.id + 100))
    t.delete(stored.orderBy("id").select("id").limit(2).subtract(first.select("id")))
    return t


def non_partitioned(spark, path):
    t = _create(spark, path, "events", record_key=["id"], precombine="ts")
    t.upsert(_rows(spark, [(i, "eu", 1, f"v{i}") for i in range(6)]))
    t.upsert(_rows(spark, [(2, "us", 2, "b2"), (7, "eu", 2, "n")]))
    t.delete_where("v = 'v4'")
    t.update({"v": "upper(v)"}, "id < 2")
    return t


def small_file_top_ups(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    for n in range(3):  # each write tops up the partition's one small file group with a new slice
        t.insert(_rows(spark, [(10 * n + i, "eu", n, f"v{n}") for i in range(3)]))
    t.upsert(_rows(spark, [(1, "eu", 9, "changed"), (100, "eu", 9, "new")]))
    return t


def clustering(spark, path):
    t = _create(spark, path, "events", partition_by=["region"])
    t.file_sizing = FileSizing(small_file_limit=0)  # every insert a new file group
    for n in range(4):
        t.insert(_rows(spark, [(10 * n + i, ["eu", "us"][i % 2], n, f"v{n}") for i in range(4)]))
    t.file_sizing = FileSizing()
    assert t.cluster(["id"]) is not None
    t.insert(_rows(spark, [(99, "eu", 9, "after")]))
    return t


def _history(spark, t, writes=6):
    for n in range(writes):
        t.upsert(_rows(spark, [(n % 3, "eu", n, f"w{n}"), (10 + n, "us", n, f"n{n}")]))


def clean_latest_commits(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    _history(spark, t)
    t.clean(retain_commits=2, policy=KEEP_LATEST_COMMITS)
    return t


def clean_latest_file_versions(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    _history(spark, t)
    t.clean(policy=KEEP_LATEST_FILE_VERSIONS, retain_file_versions=1)
    return t


def clean_by_hours(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    _history(spark, t, 3)
    t.clean(policy=KEEP_LATEST_BY_HOURS, retain_hours=1)
    return t


def archival(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    _history(spark, t, 7)
    t.clean(retain_commits=2)
    assert t.archive(keep_min_commits=2, keep_max_commits=3)
    return t


def savepoint_and_restore(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    _history(spark, t, 2)
    saved = t.savepoint()
    _history(spark, t, 2)
    t.restore(saved)
    t.upsert(_rows(spark, [(1, "eu", 50, "after restore")]))
    return t


def schema_evolution(spark, path):
    t = _create(spark, path, "events", partition_by=["region"], record_key=["id"])
    t.upsert(spark.createDataFrame([(1, "eu", 1), (2, "us", 2)], "id long, region string, n int"))
    t.upsert(spark.createDataFrame([(3, "eu", 3, "added")], "id long, region string, n int, note string"))
    t.upsert(spark.createDataFrame([(1, "eu", 2 ** 40, "wide")], "id long, region string, n long, note string"),
             drop_missing_columns=True)
    return t


TYPES = ("id long, day date, at timestamp, amount decimal(12,3), blob binary, tags array<string>, "
         "scores map<string,int>, address struct<city:string,zip:int,geo:struct<lat:double,lon:double>>")


def _typed_rows(spark, n, version):
    return spark.createDataFrame([(
        i, dt.date(2026, 1, 1 + i), dt.datetime(2026, 1, 1, i, 30, 15, 123456), Decimal(f"{i}{version}.125"),
        bytes([i, version, 255]), [f"t{i}", None] if i % 2 else [], {"a": i, "b": None} if i % 2 else {},
        (f"city{i}", None if i == 1 else 1000 + i, (1.5 * i, -2.25)) if i != 2 else None,
    ) for i in range(n)], TYPES)


def _types(spark, path, encoding):
    t = _create(spark, path, "typed", record_key=["id"], parquet_encoding=encoding)
    t.upsert(_typed_rows(spark, 4, 1))
    t.upsert(_typed_rows(spark, 2, 2))
    return t


def types_compact(spark, path):
    return _types(spark, path, "compact")


def types_portable(spark, path):
    return _types(spark, path, "portable")


STATES = {f.__name__: f for f in (
    append_auto_keys, insert_overwrite_partitions, table_rebuild, upsert_simple_key, upsert_complex_key,
    java_plain_partitioning, non_partitioned, small_file_top_ups, clustering, clean_latest_commits,
    clean_latest_file_versions, clean_by_hours, archival, savepoint_and_restore, schema_evolution,
    types_compact, types_portable,
)}
