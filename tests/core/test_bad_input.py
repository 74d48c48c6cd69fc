"""The bad-input matrix: each case fails with an error naming the table, column, key or file,
and leaves the table as it was (timeline and every file outside hudilite's private folder,
byte for byte); or, for inputs that are not errors, round-trips exactly with hudi-rs agreeing."""

import datetime as dt
import hashlib
import os
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import ConfigurationError, CorruptTableError, DataError, HudiTable, SchemaError
from tests.core.hudi_rs import assert_hudi_rs_agrees

PRIVATE = os.path.join(".hoodie", ".hudilite")


def files_of(path):
    """Every file of the table but hudilite's private state, with a digest of its bytes."""
    out = {}
    for folder, _, names in os.walk(path):
        rel = os.path.relpath(folder, path)
        if rel == PRIVATE or rel.startswith(PRIVATE + os.sep):
            continue
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                out[os.path.normpath(os.path.join(rel, name))] = hashlib.sha1(f.read()).hexdigest()
    return out


def keyed(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "k"), "customers", record_key="id", partition_by="region")
    table.upsert(spark.createDataFrame([(1, "a", "eu"), (2, "b", "us")], "id long, name string, region string"))
    return table


def rows(spark, data, ddl="id long, name string, region string"):
    return spark.createDataFrame(data, ddl)


# (write, the error, what it names); rows are checked by Spark tasks (`raise_error`), which
# surface as Spark's own exception carrying the message
BAD_WRITES = {
    "null key": (lambda s, t: t.upsert(rows(s, [(None, "x", "eu")])), Exception,
                 "table customers: record key column 'id' is null or empty"),
    "duplicate key without precombine": (lambda s, t: t.upsert(rows(s, [(3, "x", "eu"), (3, "y", "eu")])), DataError,
                                         "table customers: the new rows hold record key '3' more than once"),
    "incompatible type change": (lambda s, t: t.upsert(rows(s, [(3, 7, "eu")], "id long, name int, region string")),
                                 SchemaError, "table customers: column 'name' is string in the table but int"),
    "missing key column": (lambda s, t: t.upsert(rows(s, [("x", "eu")], "name string, region string")), SchemaError,
                           "table customers: record key column 'id' is not among the new rows' columns"),
    "partition value with '/'": (lambda s, t: t.upsert(rows(s, [(3, "x", "eu/west")])), Exception,
                                 "table customers: partition column 'region' has a value that cannot be a folder name"),
    "insert of a stored key": (lambda s, t: t.insert(rows(s, [(2, "again", "eu")])), DataError,
                               "table customers: some new rows have record keys the table holds already"),
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_bad_writes_name_the_problem_and_change_nothing(spark, tmp_path, case):
    table = keyed(spark, tmp_path)
    before = files_of(table.path)
    write, error, message = BAD_WRITES[case]
    with pytest.raises(error, match=message):
        write(spark, table)
    assert files_of(table.path) == before
    assert table.validate() == []
    assert sorted((r.id, r.name) for r in table.read().collect()) == [(1, "a"), (2, "b")]


def test_an_empty_key_is_refused_like_a_null_one(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "s"), "codes", record_key="code")
    table.upsert(spark.createDataFrame([("a", 1)], "code string, n long"))
    before = files_of(table.path)
    with pytest.raises(Exception, match="table codes: record key column 'code' is null or empty"):
        table.upsert(spark.createDataFrame([("", 2)], "code string, n long"))
    assert files_of(table.path) == before


def test_an_empty_batch_is_a_no_op(spark, tmp_path):
    table = keyed(spark, tmp_path)
    before = files_of(table.path)
    assert table.upsert(rows(spark, [])) is None
    assert table.insert_overwrite(rows(spark, [])) is None
    auto = HudiTable.create(spark, str(tmp_path / "a"), "events", partition_by="region")
    auto.insert(rows(spark, [(1, "a", "eu")]))
    auto_before = files_of(auto.path)
    assert auto.insert(rows(spark, [])) is None
    assert files_of(table.path) == before and files_of(auto.path) == auto_before  # no instant, no empty file group
    empty = HudiTable.create(spark, str(tmp_path / "e"), "empty")
    assert empty.insert(rows(spark, [])) is not None  # a first write records the schema, rows or not
    assert empty.schema().fieldNames() == ["id", "name", "region"]


def test_wide_and_nested_rows_round_trip_exactly(spark, tmp_path):
    wide = HudiTable.create(spark, str(tmp_path / "w"), "wide", record_key="c0")
    columns = [F.col("id").alias("c0")] + [(F.col("id") * i).alias(f"c{i}") for i in range(1, 500)]
    wide.upsert(spark.range(5).select(*columns))
    wide.upsert(spark.range(3, 8).select(*columns))
    assert wide.read().count() == 8 and len(wide.schema().fields) == 500
    assert_hudi_rs_agrees(wide)

    ddl = ("id long, amount decimal(20,4), at timestamp, day date, tags array<string>, "
           "address struct<city:string,geo:struct<lat:double,lon:double>>, attrs map<string,bigint>, "
           "points array<struct<x:int,y:int>>")
    data = [(1, Decimal("12345678.1234"), dt.datetime(2026, 11, 23, 10, 0, 0, 123456), dt.date(2026, 11, 23),
             ["a", "b"], ("oslo", (59.9, 10.7)), {"k": 1, "j": 2}, [(1, 2), (3, 4)]),
            (2, None, None, None, [], None, {}, None)]
    nested = HudiTable.create(spark, str(tmp_path / "n"), "nested", record_key="id")
    nested.upsert(spark.createDataFrame(data, ddl))
    got = {r.id: r for r in nested.read().collect()}
    assert got[1].amount == Decimal("12345678.1234") and got[1].at == dt.datetime(2026, 11, 23, 10, 0, 0, 123456)
    assert got[1].address.geo.lon == 10.7 and got[1].attrs == {"k": 1, "j": 2} and got[1].points[1].y == 4
    assert got[2].tags == [] and got[2].address is None
    assert_hudi_rs_agrees(nested)


def test_a_truncated_instant_is_a_corrupt_table_naming_the_file(spark, tmp_path):
    table = keyed(spark, tmp_path)
    (instant,) = table.timeline()
    path = os.path.join(table.path, ".hoodie", instant.file_name)
    with open(path, "r+b") as f:
        f.truncate(40)
    reopened = HudiTable.open(spark, table.path)
    with pytest.raises(CorruptTableError, match=f"completed instant .hoodie/{instant.file_name} is unreadable"):
        reopened.read()
    with pytest.raises(CorruptTableError, match=instant.file_name):
        reopened.upsert(rows(spark, [(3, "c", "eu")]))


def test_a_stray_parquet_file_does_not_change_what_is_read(spark, tmp_path):
    table = keyed(spark, tmp_path)
    stray = os.path.join(table.path, "region=eu", "part-00000-copied-by-hand.parquet")
    spark.createDataFrame([(9, "stray", "eu")], "id long, name string, region string").toPandas().to_parquet(stray)
    assert any("stray file region=eu/part-00000-copied-by-hand.parquet" in p for p in table.validate())
    table.upsert(rows(spark, [(3, "c", "eu")]))
    assert sorted(r.id for r in table.read().collect()) == [1, 2, 3]  # hudilite reads the timeline's files only
    os.remove(stray)  # hudi-rs lists partitions and fails on a file that is not a base file: validate says so
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_what_is_not_a_table_is_named(spark, tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigurationError, match=r"plain is not a Hudi table \(no .hoodie/hoodie.properties\)"):
        HudiTable.open(spark, str(tmp_path / "plain"))
    (tmp_path / "plain" / "data.parquet").write_bytes(b"PAR1")
    with pytest.raises(ConfigurationError, match="holds files that are not a Hudi table \\(data.parquet\\)"):
        HudiTable.create(spark, str(tmp_path / "plain"), "plain")
    assert os.listdir(tmp_path / "plain") == ["data.parquet"]
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ConfigurationError, match="cannot create table t at .*a_file/t"):
        HudiTable.create(spark, str(tmp_path / "a_file" / "t"), "t")


def test_a_create_killed_before_its_properties_is_taken_over(spark, tmp_path):
    """A create killed between its temporary properties file and the rename leaves `.hoodie/`
    with only that file: the next create takes the folder; anything more is still refused."""
    tmp = tmp_path / "t" / ".hoodie" / ".hudilite" / "tmp"
    tmp.mkdir(parents=True)
    (tmp / "hoodie.properties.0123.tmp").write_text("hoodie.table.name=t\n")
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    table.insert(spark.createDataFrame([(1,)], "id long"))
    assert [r.id for r in table.read().collect()] == [1]
    assert os.listdir(tmp_path / "t" / ".hoodie" / ".hudilite" / "tmp") == []

    tmp = tmp_path / "u" / ".hoodie" / ".hudilite" / "tmp"
    tmp.mkdir(parents=True)
    (tmp_path / "u" / ".hoodie" / "20261101000000000.commit").write_text("{}")
    with pytest.raises(ConfigurationError, match="holds files that are not a Hudi table \\(.hoodie\\)"):
        HudiTable.create(spark, str(tmp_path / "u"), "u")
    assert sorted(os.listdir(tmp_path / "u" / ".hoodie")) == [".hudilite", "20261101000000000.commit"]


def test_a_newer_table_version_is_refused(spark, tmp_path):
    table = keyed(spark, tmp_path)
    props = os.path.join(table.path, ".hoodie", "hoodie.properties")
    with open(props) as f:
        text = f.read()
    with open(props, "w") as f:
        f.write(text.replace("hoodie.table.version=6", "hoodie.table.version=10"))
    with pytest.raises(ConfigurationError, match="table version 10 is not one hudilite reads \\(6, 8, 9\\)"):
        HudiTable.open(spark, table.path)
