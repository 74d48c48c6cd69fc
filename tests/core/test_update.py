"""UPDATE, DELETE ... WHERE and delete+insert: rows chosen by a condition, on any table."""

import pytest

from dbt.adapters.hudilite.table import ConfigurationError, HudiTable, SchemaError
from tests.core.hudi_rs import assert_hudi_rs_agrees


def visits(spark, rows):
    return spark.createDataFrame(rows, "id long, city string, day string, n long")


def auto_keyed(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "v"), "visits", partition_by="day")
    t1 = table.insert(visits(spark, [(1, "oslo", "d1", 1), (2, "rome", "d1", 2), (3, "lima", "d2", 3),
                                     (4, "kiev", "d3", 4)]))
    return table, t1


def test_update_rewrites_only_file_groups_with_a_match(spark, tmp_path):
    table, t1 = auto_keyed(spark, tmp_path)
    before = {f.partition: f.file_id for f in table.latest_base_files()}
    keys = {r.id: r._hoodie_record_key for r in table.read().collect()}
    t2 = table.update({"n": "n * 10", "city": "upper(city)"}, where="id = 2")

    rows = {r.id: (r.city, r.n, r._hoodie_commit_time, r._hoodie_record_key) for r in table.read().collect()}
    assert rows == {1: ("oslo", 1, t1, keys[1]), 2: ("ROME", 20, t2, keys[2]), 3: ("lima", 3, t1, keys[3]),
                    4: ("kiev", 4, t1, keys[4])}
    meta = table.commit_metadata(t2)
    assert [(s.fileId, s.prevCommit, s.numUpdateWrites) for s in meta.write_stats] == [(before["day=d1"], t1, 1)]
    assert [r.id for r in table.read_changes(t1).collect()] == [2]
    assert table.update({"n": "0"}, where="id = 99") is None  # no match: no instant
    assert len(table.timeline()) == 2
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_delete_where_and_an_emptied_file_group(spark, tmp_path):
    table, t1 = auto_keyed(spark, tmp_path)
    t2 = table.delete_where("day = 'd2' or id = 1")
    assert sorted(r.id for r in table.read().collect()) == [2, 4]
    stats = {s.partitionPath: s for s in table.commit_metadata(t2).write_stats}
    assert set(stats) == {"day=d1", "day=d2"}
    assert (stats["day=d1"].numWrites, stats["day=d1"].numDeletes) == (1, 1)
    assert (stats["day=d2"].numWrites, stats["day=d2"].numDeletes) == (0, 1)  # an empty slice
    assert sorted(r.id for r in table.read(as_of=t1).collect()) == [1, 2, 3, 4]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_delete_insert_with_a_predicate(spark, tmp_path):
    table, t1 = auto_keyed(spark, tmp_path)
    t2 = table.delete_insert(visits(spark, [(1, "oslo2", "d1", 5), (3, "lima2", "d2", 6), (9, "new", "d4", 7)]),
                             ["id"], predicates=["stored.city != 'lima'"], predicate_alias="stored")
    rows = sorted((r.id, r.city) for r in table.read().collect())
    # id 3's stored row fails the predicate: it stays, and the new row joins it
    assert rows == [(1, "oslo2"), (2, "rome"), (3, "lima"), (3, "lima2"), (4, "kiev"), (9, "new")]
    assert table.commit_metadata(t2).operation == "INSERT"
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_keyed_table_delete_where_keeps_the_index_in_step(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "k"), "k", record_key="id")
    table.upsert(visits(spark, [(1, "a", "d1", 1), (2, "b", "d1", 2), (3, "c", "d2", 3)]))
    table.delete_where("n >= 2")
    table.update({"city": "'z'"}, where="id = 1")
    table.upsert(visits(spark, [(2, "b again", "d1", 5)]))
    assert sorted((r.id, r.city) for r in table.read().collect()) == [(1, "z"), (2, "b again")]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_update_errors_leave_the_table_as_it_was(spark, tmp_path):
    table, _ = auto_keyed(spark, tmp_path)
    with pytest.raises(SchemaError, match="'day' is a record key or partition column"):
        table.update({"day": "'d9'"})
    with pytest.raises(SchemaError, match="column 'nope'"):
        table.update({"nope": "1"})
    with pytest.raises(SchemaError, match="condition `id ===` is not valid here"):
        table.delete_where("id ===")
    keyed = HudiTable.create(spark, str(tmp_path / "k"), "k", record_key="id")
    with pytest.raises(ConfigurationError, match="duplicate its record keys"):
        keyed.delete_insert(visits(spark, [(1, "a", "d1", 1)]), ["id"])
    assert len(table.timeline()) == 1 and table.validate() == []
    with pytest.raises(SchemaError, match="update set n = no_such_column \+ 1 is not valid here"):
        table.update({"n": "no_such_column + 1"})
    assert len(table.timeline()) == 1


def test_a_non_deterministic_condition_is_evaluated_once(spark, tmp_path):
    """DELETE ... WHERE rand() < 0.5 deletes exactly the rows whose tombstones the index gets
    (issue 12, defect 3): the scan, the rewrite and the index delta read one evaluation."""
    from pyspark.sql import functions as F

    table = HudiTable.create(spark, str(tmp_path / "k"), "k", record_key="id", partition_by="day")
    table.insert(spark.range(2000).select("id", (F.col("id") % 4).cast("string").alias("day")))
    table.build_index()
    assert table.delete_where("rand() < 0.5") is not None
    left = table.read().count()
    assert 0 < left < 2000
    assert table.validate() == []  # every key the index holds is in the snapshot, and the other way round
    assert_hudi_rs_agrees(table)


def test_delete_insert_reads_its_input_once(spark, tmp_path):
    """A model whose rows change between evaluations (rand(), current_timestamp(), a growing
    source) still deletes exactly the keys it inserts: no row lost, none twice."""
    from pyspark.sql import functions as F

    table = HudiTable.create(spark, str(tmp_path / "v"), "v", partition_by="day")
    table.insert(spark.range(1000).select("id", F.lit("old").alias("v"), (F.col("id") % 3).cast("string").alias("day")))
    batch = spark.range(1000).where(F.rand() < 0.5).select(
        "id", F.lit("new").alias("v"), (F.col("id") % 3).cast("string").alias("day"))
    table.delete_insert(batch, ["id"])
    rows = table.read().groupBy("id").agg(F.count("*").alias("n"), F.max("v").alias("v")).collect()
    assert len(rows) == 1000 and all(r.n == 1 for r in rows)
    assert 0 < sum(r.v == "new" for r in rows) < 1000
    assert table.validate() == []


def test_an_update_value_that_does_not_fit_its_column_fails_naming_it(spark, tmp_path):
    """The core's update stores values as Spark's INSERT does (issue 44, item 8, for callers of
    the core API): 3000000000 in an int column is an overflow, not -1294967296."""
    table = HudiTable.create(spark, str(tmp_path / "o"), "orders")
    table.insert(spark.createDataFrame([(1, 5)], "id long, qty int"))
    before = [i.timestamp for i in table.timeline()]
    with pytest.raises(Exception, match=r"table orders: \[CAST_OVERFLOW_IN_TABLE_INSERT\] column `qty` \(int\) "
                                        r"cannot hold the value 3000000000"):
        table.update({"qty": "3000000000"}, where="id = 1")
    assert [i.timestamp for i in table.timeline()] == before
    table.update({"qty": "qty * 2"}, where="id = 1")  # what fits is stored
    assert [(r.id, r.qty) for r in table.read().collect()] == [(1, 10)]
