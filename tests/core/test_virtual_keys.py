"""Tables with virtual keys (`hoodie.populate.meta.fields=false`), written by hudilite: files
hold Hudi's five meta columns null but `_hoodie_file_name` (as Hudi's Spark writer leaves them),
keys are made from the record key fields, every write goes through the record index, and a
changes read is refused. What Hudi's own writer and reader make of them is in
tests/referee/test_hudi_virtual_keys.py."""

import datetime as dt
import glob
import os

import pyarrow.parquet as pq
import pytest

from dbt.adapters.hudilite.table import FileSizing, HudiTable
from dbt.adapters.hudilite.table.format import properties as props
from dbt.adapters.hudilite.table.errors import ConfigurationError, DataError
from dbt.adapters.hudilite.table.format.keygen import VirtualKeys, record_key
from dbt.adapters.hudilite.table.format.schema import META_COLUMNS
from tests.core.hudi_rs import hudi_rs_snapshot, rows_of_arrow, rows_of_df

SCHEMA = "id long, name string, day date, amount int"
DATA = ["id", "name", "day", "amount"]


def _rows(ids, name="a", day=dt.date(2026, 11, 1)):
    return [(i, f"{name}{i}", day, i * 10) for i in ids]


def _latest_files(table):
    return [os.path.join(table.path, f.path) for f in table.latest_base_files()]


def _stored_meta(table):
    """Per latest base file: the meta column values it holds (besides the file name), and
    whether its file name column names it; and its footer's keys."""
    out = []
    for path in _latest_files(table):
        rows = pq.read_table(path)
        assert rows.column_names[:5] == list(META_COLUMNS)
        values = {v for c in META_COLUMNS[:4] for v in rows.column(c).to_pylist()}
        names = set(rows.column("_hoodie_file_name").to_pylist())
        footer = set((pq.read_metadata(path).metadata or {}).keys())
        out.append((values, names <= {os.path.basename(path)}, footer))  # (an emptied file group: no row)
    return out


def _check(table, expected, step):
    """Our reader, hudi-rs and the index agree with `expected` (id -> (name, amount))."""
    df = table.read()
    got = {r.id: (r.name, r.amount) for r in df.collect()}
    assert got == expected, step
    assert rows_of_df(df, DATA) == rows_of_arrow(hudi_rs_snapshot(table.path), DATA), step
    keys = [r._hoodie_record_key for r in df.select("_hoodie_record_key").collect()]
    assert sorted(keys) == sorted(str(i) for i in expected), step
    assert not table.validate(), (step, table.validate())
    for values, named, footer in _stored_meta(table):
        assert values <= {None} and named, step  # nothing stored but the file name
        assert not any(k.startswith(b"hoodie_") for k in footer), step  # no bloom footer, as Hudi's writer


def test_every_write_of_a_virtual_key_table(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="day", record_key="id",
                             precombine="amount", virtual_keys=True)
    properties = props.loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())
    assert properties["hoodie.populate.meta.fields"] == "false"
    assert props.TableConfig.from_properties(properties).virtual_keys

    day2 = dt.date(2026, 11, 2)
    first = table.insert(spark.createDataFrame(_rows(range(1, 6)) + _rows([6, 7], "b", day2), SCHEMA))
    expected = {i: (f"a{i}", i * 10) for i in range(1, 6)} | {6: ("b6", 60), 7: ("b7", 70)}
    _check(table, expected, "insert")
    stats = table.commit_metadata(first).write_stats
    assert {s.partitionPath for s in stats} == {"day=2026-11-01", "day=2026-11-02"}

    with pytest.raises(DataError, match="record keys the table holds already"):
        table.insert(spark.createDataFrame(_rows([3]), SCHEMA))

    # An upsert: key 2 changes, key 3 moves to another partition, key 4's older row changes nothing, 9 is new.
    upsert = table.upsert(spark.createDataFrame(
        [(2, "new2", dt.date(2026, 11, 1), 25), (3, "moved3", day2, 35), (4, "old4", dt.date(2026, 11, 1), 1),
         (9, "a9", dt.date(2026, 11, 1), 90)], SCHEMA))
    expected |= {2: ("new2", 25), 3: ("moved3", 35), 9: ("a9", 90)}
    _check(table, expected, "upsert")
    updated = sum(s.numUpdateWrites for s in table.commit_metadata(upsert).write_stats)
    assert updated == 1  # key 2 only: stored rows are told from changed ones though no commit time is stored

    table.file_sizing = FileSizing(small_write_bytes=0)  # the shuffle path: merge tasks, then an insert job
    table.upsert(spark.createDataFrame([(2, "again2", dt.date(2026, 11, 1), 26), (10, "a10", day2, 100)], SCHEMA))
    table.file_sizing = FileSizing()
    expected |= {2: ("again2", 26), 10: ("a10", 100)}
    _check(table, expected, "upsert on the shuffle path")

    table.delete(spark.createDataFrame([(1,), (6,)], "id long"))
    del expected[1], expected[6]
    _check(table, expected, "delete")

    table.update({"amount": "amount + 1"}, "id = 5")
    expected[5] = ("a5", 51)
    _check(table, expected, "SQL update")
    table.delete_where("id = 7")
    del expected[7]
    _check(table, expected, "SQL delete")

    table.insert_overwrite(spark.createDataFrame(_rows([20, 21], "c", day2), SCHEMA))
    # day2's rows (3 moved there, 10) are replaced
    expected = {k: v for k, v in expected.items() if k not in (3, 10)} | {20: ("c20", 200), 21: ("c21", 210)}
    _check(table, expected, "insert_overwrite")

    # Small files are not topped up: an insert makes new file groups only.
    groups = {f.file_id for f in table.latest_base_files()}
    table.insert(spark.createDataFrame(_rows([30]), SCHEMA))
    expected[30] = ("a30", 300)
    assert groups < {f.file_id for f in table.latest_base_files()}
    _check(table, expected, "insert after the overwrite")

    groups = len(table.latest_base_files())
    assert table.cluster(["id"]) is not None
    assert len(table.latest_base_files()) < groups
    _check(table, expected, "clustering")

    table.build_index()  # the index built from the snapshot: keys from the key fields
    _check(table, expected, "index rebuilt")

    with pytest.raises(ConfigurationError, match="hoodie.populate.meta.fields=false"):
        table.read_changes(first)
    reopened = HudiTable.open(spark, table.path)
    assert reopened.config.virtual_keys
    _check(reopened, expected, "reopened")


def test_complex_keys_are_made_from_the_stored_fields_as_spark_makes_them(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="name", record_key="id,day",
                             virtual_keys=True)
    rows = [(1, "p", dt.date(2026, 1, 1), 1), (1, "p", dt.date(2026, 1, 2), 2), (2, "", None, 3)]
    table.insert(spark.createDataFrame(rows, SCHEMA))
    spark_keys = sorted(r.k for r in spark.createDataFrame(rows, SCHEMA).select(
        record_key(["id", "day"], "t", True).alias("k")).collect())
    assert sorted(r._hoodie_record_key for r in table.read().collect()) == spark_keys
    arrow_keys = [k for path in _latest_files(table)
                  for k in VirtualKeys(("id", "day"), True).keys(pq.read_table(path)).to_pylist()]
    assert sorted(arrow_keys) == spark_keys == ["id:1,day:2026-01-01", "id:1,day:2026-01-02", "id:2,day:__null__"]
    table.upsert(spark.createDataFrame([(2, "", None, 30)], SCHEMA))
    assert sorted((r.id, r.amount) for r in table.read().collect()) == [(1, 1), (1, 2), (2, 30)]
    assert not table.validate()


def test_what_virtual_keys_refuse(spark, tmp_path):
    with pytest.raises(ConfigurationError, match="need a record key"):
        HudiTable.create(spark, str(tmp_path / "auto"), "auto", virtual_keys=True)
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="amount", virtual_keys=True)
    with pytest.raises(ConfigurationError, match="record key column 'amount' is double"):
        table.insert(spark.createDataFrame([(1, 1.5)], "id long, amount double"))
    assert not glob.glob(os.path.join(table.path, "*.parquet"))
