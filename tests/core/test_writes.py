"""HudiTable writes on a shared local SparkSession, every table read back through hudi-rs."""

import json
import re
import functools
import os

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import ConfigurationError, HudiTable, SchemaError
from dbt.adapters.hudilite.table.format.file_group import parse_base_file_name
from tests.core.hudi_rs import assert_hudi_rs_agrees, hudi_rs_snapshot, rows_of_arrow, rows_of_df


def events(spark, start, count, regions=("us", "eu")):
    n = len(regions)
    region = F.element_at(F.array(*[F.lit(r) for r in regions]), (F.col("id") % n + 1).cast("int"))
    return spark.range(start, start + count, numPartitions=2).select(
        F.col("id").alias("event_id"),
        region.alias("region"),
        (F.col("id") * 0.5).alias("amount"),
        F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 3).cast("int")).alias("day"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"),
    )


def parquet_files_on_disk(path):
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        found += [os.path.relpath(os.path.join(root, f), path) for f in files if f.endswith(".parquet")]
    return sorted(found)


def committed_files(table):
    return sorted(s.path for i in table.timeline() if i.is_completed for s in table.commit_metadata(i).write_stats)


def test_auto_keyed_partitioned_table_through_inserts_and_overwrites(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "events"), "events", partition_by="region")
    t1 = table.insert(events(spark, 0, 1000))
    t2 = table.insert(events(spark, 1000, 500, regions=("us", "apac")))
    t3 = table.insert_overwrite(events(spark, 5000, 10, regions=("us",)))
    t4 = table.insert_overwrite_table(events(spark, 9000, 7, regions=("eu",)))

    timeline = [(i.timestamp, i.action, i.state) for i in table.timeline()]
    assert timeline == [
        (t1, "commit", "COMPLETED"), (t2, "commit", "COMPLETED"),
        (t3, "replacecommit", "COMPLETED"), (t4, "replacecommit", "COMPLETED"),
    ]
    assert t1 < t2 < t3 < t4

    # Row contents at every instant.
    assert table.read(as_of=t1).count() == 1000
    assert table.read(as_of=t2).count() == 1500
    at_t3 = table.read(as_of=t3)
    assert at_t3.where("region = 'us'").count() == 10  # us replaced by the 10 new rows
    assert at_t3.where("region = 'eu'").count() == 500
    assert at_t3.where("region = 'apac'").count() == 250
    assert sorted(r.event_id for r in table.read().collect()) == list(range(9000, 9007))

    # The replacecommit lists exactly the file groups live in the touched partitions.
    us_groups_before = {f.file_id for f in table.latest_base_files(as_of=t2) if f.partition == "region=us"}
    assert set(table.commit_metadata(t3).replaced_file_ids["region=us"]) == us_groups_before
    assert set(table.commit_metadata(t3).replaced_file_ids) == {"region=us"}
    live_before_t4 = {f.file_id for f in table.latest_base_files(as_of=t3)}
    replaced_t4 = {fid for ids in table.commit_metadata(t4).replaced_file_ids.values() for fid in ids}
    assert replaced_t4 == live_before_t4

    # Meta columns.
    row = table.read().orderBy("event_id").first()
    assert row["_hoodie_commit_time"] == t4
    assert row["_hoodie_partition_path"] == "region=eu"
    assert row["_hoodie_record_key"] == row["_hoodie_commit_seqno"]
    assert row["_hoodie_record_key"].startswith(t4 + "_")
    name = parse_base_file_name(row["_hoodie_file_name"])
    assert name is not None and name.instant == t4

    # Layout: partition metadata, file names, nothing uncommitted on disk.
    props = (tmp_path / "events" / "region=us" / ".hoodie_partition_metadata").read_text()
    assert f"commitTime={t1}" in props and "partitionDepth=1" in props
    assert parquet_files_on_disk(table.path) == committed_files(table)
    assert not os.path.exists(os.path.join(table.path, ".hoodie", ".hudilite", "markers", t4))
    assert table.validate() == []

    assert_hudi_rs_agrees(table)


def test_validate_reports_stray_and_missing_files(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    table.insert(spark.range(4).select("id", F.lit("a").alias("p")))
    assert table.validate() == []
    stray = tmp_path / "t" / "p=a" / "part-00000-copied-by-hand.parquet"
    stray.write_bytes(b"PAR1")
    (committed,) = [f.path for f in table.latest_base_files()][:1]
    os.remove(os.path.join(table.path, committed))
    problems = table.validate()
    assert any("stray file p=a/part-00000-copied-by-hand.parquet" in p for p in problems)
    assert any(f"committed file {committed}" in p and "missing" in p for p in problems)


def test_auto_keys_are_unique_and_shaped_like_rfc76(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    t1 = table.insert(spark.range(0, 5000, numPartitions=3))
    t2 = table.insert(spark.range(0, 5000, numPartitions=3))
    keys = [r[0] for r in table.read().select("_hoodie_record_key").collect()]
    assert len(keys) == len(set(keys)) == 10000
    for key in keys:
        instant, task, row = key.split("_")
        assert instant in (t1, t2) and 0 <= int(task) < 3 and int(row) >= 0
    per_task = {}
    for key in keys:
        instant, task, row = key.split("_")
        per_task.setdefault((instant, task), []).append(int(row))
    for rows in per_task.values():
        assert sorted(rows) == list(range(len(rows)))  # a 0-based counter per task
    assert_hudi_rs_agrees(table)


def test_record_keys_simple_and_complex(spark, tmp_path):
    simple = HudiTable.create(spark, str(tmp_path / "s"), "s", record_key="event_id", partition_by="day")
    simple.insert(events(spark, 0, 20))
    assert {r._hoodie_record_key for r in simple.read().collect()} == {str(i) for i in range(20)}
    assert {r._hoodie_partition_path for r in simple.read().collect()} == {
        "day=2026-01-01", "day=2026-01-02", "day=2026-01-03"}

    complex_ = HudiTable.create(spark, str(tmp_path / "c"), "c", record_key=["region", "event_id"],
                                partition_by=["region", "day"])
    complex_.insert(events(spark, 0, 6))
    row = complex_.read().where("event_id = 3").first()
    assert row._hoodie_record_key == "region:eu,event_id:3"
    assert row._hoodie_partition_path == "region=eu/day=2026-01-01"
    props = (tmp_path / "c" / "region=eu" / "day=2026-01-01" / ".hoodie_partition_metadata").read_text()
    assert "partitionDepth=2" in props
    assert_hudi_rs_agrees(simple)
    assert_hudi_rs_agrees(complex_)


def test_retried_task_gives_the_same_keys_and_leaves_no_orphan_file(spark, tmp_path):
    source = spark.range(0, 3000, numPartitions=2).select("id", (F.col("id") % 7).alias("bucket"))
    clean = HudiTable.create(spark, str(tmp_path / "clean"), "clean")
    t_clean = clean.insert(source)

    retried = HudiTable.create(spark, str(tmp_path / "retried"), "retried")
    retried.write_options = {"fail_task_attempt": (0, 0)}  # task 0 fails after writing its file
    t_retried = retried.insert(source)
    retried.write_options = {}

    def keyed_rows(table, instant):
        return sorted((r._hoodie_record_key[len(instant):], r.id) for r in table.read().collect())

    assert keyed_rows(retried, t_retried) == keyed_rows(clean, t_clean)
    # The failed attempt's file (write token 0-<stage>-0) was deleted; the retry's file is committed.
    on_disk = parquet_files_on_disk(retried.path)
    assert on_disk == committed_files(retried)
    tokens = sorted(parse_base_file_name(p).write_token for p in on_disk)
    assert [t.split("-")[0] + "-" + t.split("-")[2] for t in tokens] == ["0-1", "1-0"]
    assert_hudi_rs_agrees(retried)


def test_two_successful_attempts_of_one_task_leave_only_the_committed_files(spark, tmp_path, monkeypatch):
    """Speculation: a second attempt of a task also finishes and leaves its own files (a new
    file group for an insert, a second slice of the same file group for an upsert). Only the
    files of the attempt the driver took are committed; the others are gone before publish."""
    source = spark.range(0, 2000, numPartitions=2).select("id", (F.col("id") % 3).cast("string").alias("p"))
    from dbt.adapters.hudilite.table.storage.filesystem import Storage

    deleted = []
    delete_file = Storage.delete_file
    monkeypatch.setattr(Storage, "delete_file", lambda self, rel: deleted.append(rel) or delete_file(self, rel))
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p", record_key="id")
    table.write_options = {"speculative_task": 0}
    table.insert(source)
    t2 = table.upsert(source.where("id < 50").select("id", F.lit("0").alias("p")))
    table.write_options = {}
    second_attempts = [p for p in deleted if p.endswith(".parquet")]
    assert {parse_base_file_name(p).write_token.split("-")[-1] for p in second_attempts} == {"1"}
    assert {parse_base_file_name(p).instant for p in second_attempts} == {table.timeline()[0].timestamp, t2}
    assert parquet_files_on_disk(table.path) == committed_files(table)
    tokens = {parse_base_file_name(p).write_token.split("-")[-1] for p in committed_files(table)}
    assert tokens == {"0"}  # the attempt the driver took
    rows = sorted((r.id, r.p) for r in table.read().collect())
    assert rows == sorted((i, "0" if i < 50 else str(i % 3)) for i in range(2000))
    assert len(table.latest_base_files(t2)) == len({f.file_id for f in table.latest_base_files(t2)})
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_auto_keys_compress_to_a_fraction_of_a_byte(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "k"), "k")
    table.insert(spark.range(0, 100_000, numPartitions=1).select(F.col("id").alias("value")))
    (base_file,) = table.latest_base_files()
    metadata = pq.ParquetFile(os.path.join(table.path, base_file.path)).metadata
    sizes = {}
    for g in range(metadata.num_row_groups):
        for c in range(metadata.num_columns):
            col = metadata.row_group(g).column(c)
            sizes[col.path_in_schema] = sizes.get(col.path_in_schema, 0) + col.total_compressed_size
    assert sizes["_hoodie_record_key"] / 100_000 <= 0.15
    assert sizes["_hoodie_commit_seqno"] / 100_000 <= 0.15
    assert_hudi_rs_agrees(table)


@pytest.mark.parametrize("encoding", ["compact", "portable"])
def test_columns_of_distinct_values_are_written_plain_and_repeating_ones_with_a_dictionary(spark, tmp_path, encoding):
    """The dictionary choice follows the data (`writer.dictionary_columns`): an id, an amount
    and a timestamp of distinct values get none, a category, a constant and a mostly null
    column get one; an upsert's rewrite chooses again from its own rows. hudi-rs reads both."""
    table = HudiTable.create(spark, str(tmp_path / "e"), "e", record_key="event_id", parquet_encoding=encoding)
    rows = spark.range(0, 50_000, numPartitions=1).select(
        F.col("id").alias("event_id"), (F.col("id") * 0.25).alias("amount"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"),
        F.concat(F.lit("page-"), (F.col("id") % 7).cast("string")).alias("page"),
        F.when(F.col("id") % 1000 == 0, F.col("id")).alias("rare"))
    table.insert(rows)

    def dictionary_pages():
        (base_file,) = table.latest_base_files()
        row_group = pq.ParquetFile(os.path.join(table.path, base_file.path)).metadata.row_group(0)
        columns = [row_group.column(c) for c in range(row_group.num_columns)]
        return {c.path_in_schema: c.has_dictionary_page for c in columns}

    expected = {"event_id": False, "amount": False, "ts": False, "page": True, "rare": True,
                "_hoodie_commit_time": True, "_hoodie_partition_path": True, "_hoodie_file_name": True}
    assert {k: v for k, v in dictionary_pages().items() if k in expected} == expected
    table.upsert(spark.createDataFrame([(7, 1.0, None, "page-x", 1)], "event_id long, amount double, ts timestamp, "
                                       "page string, rare long"))
    assert {k: v for k, v in dictionary_pages().items() if k in expected} == expected
    assert table.read().where("event_id = 7").select("amount", "page").first() == (1.0, "page-x")
    assert_hudi_rs_agrees(table)


def test_a_failed_write_leaves_the_table_exactly_as_it_was(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "orders", record_key="order_id")
    table.insert(spark.range(0, 100).select(F.col("id").alias("order_id")))
    before_timeline = table.timeline()
    before_files = parquet_files_on_disk(table.path)
    bad = spark.range(100, 200, numPartitions=2).select(
        F.when(F.col("id") == 150, F.lit(None)).otherwise(F.col("id")).alias("order_id"))
    with pytest.raises(Exception) as err:
        table.insert(bad)
    assert "record key column 'order_id' is null" in str(err.value)
    assert table.timeline() == before_timeline
    assert parquet_files_on_disk(table.path) == before_files
    assert os.listdir(os.path.join(table.path, ".hoodie", ".hudilite", "markers")) == []
    assert table.read().count() == 100
    assert_hudi_rs_agrees(table)


def test_bad_input_names_the_column(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "daily", partition_by="day")
    with pytest.raises(SchemaError, match="partition column 'day'"):
        table.insert(spark.range(3).select(F.col("id").alias("x")))
    table.insert(spark.range(3).select(F.col("id").alias("x"), F.lit("2026-01-01").alias("day")))
    with pytest.raises(SchemaError, match="column 'x' is bigint in the table but string"):
        table.insert(spark.range(3).select(F.col("id").cast("string").alias("x"), F.lit("d").alias("day")))
    with pytest.raises(SchemaError, match="lack column 'x'"):
        table.insert(spark.range(3).select(F.lit("d").alias("day")))
    with pytest.raises(Exception, match="partition column 'day' has a value that cannot be a folder name"):
        table.insert(spark.range(3).select(F.col("id").alias("x"), F.lit("a/b").alias("day")))
    assert len(table.timeline()) == 1
    assert table.read().count() == 3
    assert_hudi_rs_agrees(table)


def test_new_columns_are_appended_and_old_rows_read_null(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    table.insert(spark.range(3).select(F.col("id").alias("x")))
    table.insert(spark.range(3, 5).select(F.lit("new").alias("note"), F.col("id").cast("int").alias("x")))
    assert [f.name for f in table.schema().fields] == ["x", "note"]
    rows = sorted((r.x, r.note) for r in table.read().collect())
    assert rows == [(0, None), (1, None), (2, None), (3, "new"), (4, "new")]
    assert_hudi_rs_agrees(table)


def test_dropped_columns_and_whole_table_schema_replacement(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    t1 = table.insert(spark.range(2).select(F.col("id").alias("x"), F.lit("a").alias("old")))
    table.insert(spark.range(2, 4).select(F.col("id").alias("x")), drop_missing_columns=True)
    assert [f.name for f in table.schema().fields] == ["x"]
    assert sorted(r.x for r in table.read().collect()) == [0, 1, 2, 3]
    assert table.read(as_of=t1).columns[-1] == "old"  # older snapshots keep their schema
    assert_hudi_rs_agrees(table)
    table.insert_overwrite_table(spark.range(1).select(F.col("id").cast("string").alias("x")))
    assert table.schema().fields[0].dataType.simpleString() == "string"
    assert [r.x for r in table.read().collect()] == ["0"]
    # hudi-rs reads older snapshots cast to the latest schema (x as string), hudilite with
    # their own; the latest snapshot must agree exactly.
    assert rows_of_df(table.read()) == rows_of_arrow(hudi_rs_snapshot(table.path), table.read().columns)


def test_empty_writes_and_empty_table(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    assert table.read().count() == 0
    empty = spark.range(0).select(F.col("id"), F.lit("a").alias("p"))
    t1 = table.insert(empty)
    assert table.commit_metadata(t1).write_stats == []
    assert table.read().columns[-2:] == ["id", "p"] and table.read().count() == 0
    table.insert(spark.range(5).select(F.col("id"), F.lit("a").alias("p")))
    assert table.read().count() == 5
    assert_hudi_rs_agrees(table)


def test_snapshot_is_queryable_from_sql(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region")
    t1 = table.insert(events(spark, 0, 100))
    table.insert(events(spark, 100, 100))
    table.create_temp_view("events_now")
    table.create_temp_view("events_then", as_of=t1)
    now = spark.sql("select region, count(*) n from events_now group by region order by region").collect()
    then = spark.sql("select count(*) n from events_then").first().n
    assert [(r.region, r.n) for r in now] == [("eu", 100), ("us", 100)]
    assert then == 100
    assert_hudi_rs_agrees(table)


def test_time_travel_by_timestamp_and_clear_error_before_first_instant(spark, tmp_path):
    from dbt.adapters.hudilite.table import TimelineError
    from dbt.adapters.hudilite.table.format.instant import parse_instant_time

    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    t1 = table.insert(spark.range(3))
    table.insert(spark.range(3))
    moment = parse_instant_time(t1)
    assert table.read(as_of=moment.isoformat()).count() == 3
    with pytest.raises(TimelineError, match="no completed instant at or before"):
        table.read(as_of="2000-01-01 00:00:00")
    assert_hudi_rs_agrees(table)


def test_hoodie_properties_as_hudi_rs_reads_them(spark, tmp_path):
    import hudi

    table = HudiTable.create(spark, str(tmp_path / "t"), "my_table", partition_by="region", record_key="event_id",
                             precombine="amount")
    table.insert(events(spark, 0, 10))
    theirs = hudi.HudiTable(table.path)
    assert theirs.table_name == "my_table"
    assert theirs.table_type == "COPY_ON_WRITE"
    assert [f.name for f in theirs.get_partition_schema()] == ["region"]
    assert [f.name for f in theirs.get_schema()] == ["event_id", "region", "amount", "day", "ts"]
    assert json.loads(theirs.get_schema_in_avro_str())["type"] == "record"
    assert hudi_rs_snapshot(table.path).num_rows == 10
    assert sorted(r[0] for r in rows_of_df(table.read(), ["event_id"])) == list(range(10))


ODD_PARTITION_VALUES = ["x[1]", "a*b", "{a}", "?", "k=v", "50%", "%41", "a b", "zürich", None, "", "a,b",
                        "back\\slash", "t#1", "it's", "a]b[", ".x", "_x"]


def test_odd_partition_values_are_written_and_read_back_everywhere(spark, tmp_path):
    """Glob characters, '=', '%', spaces, non-ASCII, null and empty (Hudi's default partition)
    commit and read back through the core, the catalog's SQL and hudi-rs (issue 12, defect 6)."""
    from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog

    root = tmp_path / "lakehouse"
    table = HudiTable.create(spark, str(root / "odd" / "t"), "t", partition_by="p")
    rows = [(i, v) for i, v in enumerate(ODD_PARTITION_VALUES)]
    table.insert(spark.createDataFrame(rows, "id long, p string"))
    table.insert_overwrite(spark.createDataFrame([(100, "x[1]"), (101, None)], "id long, p string"))
    expected = sorted([(i, v) for i, v in rows if v not in ("x[1]", None, "")] + [(100, "x[1]"), (101, None)],
                      key=lambda r: r[0])
    assert sorted(((r.id, r.p) for r in table.read().collect()), key=lambda r: r[0]) == expected
    from dbt.adapters.hudilite.sql.dml import run_statement

    catalog = StorageCatalog(spark, str(root))
    assert run_statement(catalog, "select count(*) from odd.t").first()[0] == len(expected)
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


@pytest.mark.parametrize("partition_type", ["string", "date"])
def test_a_task_writes_one_file_group_per_partition_path_its_rows_in_input_order(spark, tmp_path, partition_type):
    """Rows of three partitions interleaved in one task, null, '' and the default partition's
    own name among them: one new file group per partition path, its rows and their keys in the
    order the rows came."""
    strings = partition_type == "string"
    values = ["2026-01-02", None, "2026-01-01", "" if strings else None, "__HIVE_DEFAULT_PARTITION__" if strings else None] * 5
    df = (spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id long, p string").coalesce(1)
          .select("id", F.col("p").cast(partition_type).alias("p")))
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    table.insert(df)
    stats = table.commit_metadata(table.timeline()[-1]).write_stats
    assert sorted(s.partitionPath for s in stats) == sorted(["p=2026-01-01", "p=2026-01-02", "p=__HIVE_DEFAULT_PARTITION__"])
    for stat in stats:
        rows = pq.read_table(os.path.join(table.path, stat.path), columns=["id", "_hoodie_commit_seqno"]).to_pylist()
        ids = [r["id"] for r in rows]
        rows_in_task = [int(r["_hoodie_commit_seqno"].rsplit("_", 1)[1]) for r in rows]
        assert ids == sorted(ids) and rows_in_task == sorted(rows_in_task) and len(set(rows_in_task)) == len(rows)
    assert sum(s.numWrites for s in stats) == len(values)
    assert_hudi_rs_agrees(table)


@pytest.mark.parametrize("hive_style", [True, False])
def test_paths_made_in_the_task_equal_those_spark_makes(spark, hive_style):
    """Write tasks make partition paths from Arrow values (`keygen.PartitionFormat`) for the
    types of `TASK_FORMATTED`; Spark's expression (`keygen.partition_path`) makes them for the
    others. Both must give the same folder for every value."""
    import datetime

    from dbt.adapters.hudilite.table.format.keygen import TASK_FORMATTED, PartitionFormat, partition_path

    texts = [v for v in ODD_PARTITION_VALUES] + ["0", "-1", "ünï", "x" * 300]
    longs = [0, -1, 1, 2**63 - 1, -(2**63), None, 42, 7, 8, 9] * 3
    days = [datetime.date(1, 1, 1), datetime.date(1969, 12, 31), datetime.date(1970, 1, 1),
            datetime.date(2024, 2, 29), datetime.date(9999, 12, 31), None, datetime.date(999, 5, 6)] * 4
    n = len(texts)
    rows = [(texts[i], longs[i % len(longs)], days[i % len(days)], (i % 250) - 125, i * 300 - 3000, i)
            for i in range(n)]
    df = spark.createDataFrame(rows, "Txt string, l long, d date, b byte, s short, i int")
    assert all(isinstance(f.dataType, TASK_FORMATTED) for f in df.schema.fields)
    for fields in (["Txt"], ["l"], ["d"], ["b", "s", "i"], ["d", "txt"]):
        expected = [r[0] for r in df.select(partition_path(fields if fields != ["d", "txt"] else ["d", "Txt"],
                                                           hive_style, "t")).collect()]
        made = PartitionFormat(tuple(fields), hive_style, "t").paths(df.toArrow().combine_chunks().to_batches()[0]).to_pylist()
        assert made == expected, fields


@pytest.mark.parametrize("value", ["a/b", "c:d", "..", ".", "tab\there"])  # a control character: no S3 key holds one
def test_partition_values_no_folder_can_hold_are_refused_and_nothing_changes(spark, tmp_path, value):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="p")
    table.context.config.hive_style_partitioning = value not in ("..", ".")  # '..' as a folder of its own
    table.insert(spark.createDataFrame([(1, "ok")], "id long, p string"))
    before = sorted(os.listdir(tmp_path)), parquet_files_on_disk(table.path), [i.timestamp for i in table.timeline()]
    with pytest.raises(Exception, match="partition column 'p' has a value that cannot be a folder name"):
        table.insert(spark.createDataFrame([(2, value)], "id long, p string"))
    assert (sorted(os.listdir(tmp_path)), parquet_files_on_disk(table.path),
            [i.timestamp for i in table.timeline()]) == before
    assert table.validate() == []


def test_a_date_partition_value_past_9999_is_refused_and_nothing_changes(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="day")
    table.insert(spark.createDataFrame([(1,)], "id long").select("id", F.lit("2026-01-01").cast("date").alias("day")))
    before = parquet_files_on_disk(table.path), [i.timestamp for i in table.timeline()]
    late = spark.range(3, 5).select("id", F.date_add(F.lit("9999-12-31").cast("date"), F.col("id").cast("int") - 3).alias("day"))
    with pytest.raises(Exception, match="table t: partition column 'day' has a date outside 0001-01-01 to 9999-12-31"):
        table.insert(late)
    assert (parquet_files_on_disk(table.path), [i.timestamp for i in table.timeline()]) == before
    assert table.validate() == [] and table.read().count() == 1


def test_an_upsert_of_a_date_partition_value_past_9999_is_refused_and_nothing_changes(spark, tmp_path):
    """The upsert's tagging makes partition paths in Spark (`keygen.partition_path`): it refuses
    the dates a write task refuses (the test above), whatever path the batch takes."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="day")
    table.insert(spark.createDataFrame([(1,)], "id long").select("id", F.lit("2026-01-01").cast("date").alias("day")))
    before = parquet_files_on_disk(table.path), [i.timestamp for i in table.timeline()]
    late = spark.createDataFrame([(1,), (2,)], "id long").select(
        "id", F.date_add(F.lit("9999-12-31").cast("date"), F.col("id").cast("int")).alias("day"))
    with pytest.raises(Exception, match="table t: partition column 'day' has a date outside 0001-01-01 to 9999-12-31"):
        table.upsert(late)
    assert (parquet_files_on_disk(table.path), [i.timestamp for i in table.timeline()]) == before
    assert table.validate() == [] and [tuple(r) for r in table.read().select("id", "day").collect()] == [
        (1, __import__("datetime").date(2026, 1, 1))]


def test_schema_edge_cases_are_refused_before_anything_is_written(spark, tmp_path):
    """A column dropped and added back with another type, a column differing from a meta column
    only by case, two columns differing only by case (issue 12, defect 7)."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t")
    table.insert(spark.createDataFrame([(1, 10)], "id long, x int"))
    table.insert(spark.createDataFrame([(2,)], "id long"), drop_missing_columns=True)  # x leaves the schema
    before = [i.timestamp for i in table.timeline()]
    with pytest.raises(SchemaError, match="column 'x' was int when files still in the table were written"):
        table.insert(spark.createDataFrame([(3, "ten")], "id long, x string"))
    with pytest.raises(SchemaError, match="'_HOODIE_RECORD_KEY' differs from Hudi's meta column only by case"):
        table.insert(spark.createDataFrame([(3, "k")], "id long, _HOODIE_RECORD_KEY string"))
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        with pytest.raises(SchemaError, match="differ only by case: A, a"):
            table.insert(spark.createDataFrame([(3, 1, 2)], "id long, a int, A int"))
    finally:
        spark.conf.set("spark.sql.caseSensitive", "false")
    # The same type is refused too: row 1's file still holds x = 10, which every reader would
    # show again (issue 44, item 7): a dropped column stays dropped.
    with pytest.raises(SchemaError, match="column 'x' was dropped, but files still in the table hold the values it "
                                          "had before"):
        table.insert(spark.createDataFrame([(3, 11)], "id long, x int"))
    assert [i.timestamp for i in table.timeline()] == before
    assert sorted(data_rows(table.read())) == [(1,), (2,)]
    assert sorted(data_rows(table.read(as_of=before[0]))) == [(1, 10)]  # history keeps it
    assert_hudi_rs_agrees(table)
    table.insert_overwrite_table(spark.createDataFrame([(4, "four")], "id long, x string"))  # a rebuild may retype
    table.insert(spark.createDataFrame([(5, "five")], "id long, x string"))
    assert sorted((r.id, r.x) for r in table.read().collect()) == [(4, "four"), (5, "five")]
    assert table.validate() == []
    assert sorted(data_rows(table.read(as_of=before[1]))) == [(1,), (2,)]
    # hudi-rs reads older snapshots with the latest schema (x as string), hudilite with theirs:
    # only the latest snapshot has one schema for both
    assert sorted((r["id"], r["x"]) for r in hudi_rs_snapshot(table.path).to_pylist()) == [(4, "four"), (5, "five")]


def test_a_failed_job_returns_only_once_its_other_tasks_have_stopped(spark, tmp_path):
    """When one task fails, Spark fails the job at once while a sibling may still be writing;
    the rollback that follows must find the sibling's files, so the write waits for it."""
    from dbt.adapters.hudilite.table.spark.jobs import run_task_job

    late = tmp_path / "late"
    late.mkdir()
    task = functools.partial(_slow_or_failing_task, str(late))
    with pytest.raises(Exception, match="the failing task"):
        run_task_job(spark.range(0, 2, numPartitions=2), task, "id long")
    assert os.listdir(late) == ["written"]  # the slow sibling finished before the failure surfaced


def _slow_or_failing_task(folder, batches):
    import time

    from pyspark import TaskContext

    list(batches)
    if TaskContext.get().partitionId() == 1:
        raise RuntimeError("the failing task")
    time.sleep(1.5)  # under Spark's 2 s grace before it kills a cancelled Python worker
    with open(os.path.join(folder, "written"), "w") as f:
        f.write("x")
    return iter([])


@pytest.mark.parametrize("key, old_type, new_type, new_value", [
    ("record key", "int", "double", "1.0"),
    ("record key", "decimal(10,2)", "decimal(12,3)", "1.500"),
    ("partition", "int", "double", "1.0"),
])
def test_a_key_or_partition_column_keeps_its_text_or_its_type(spark, tmp_path, key, old_type, new_type, new_value):
    """A widening that changes a key or partition column's text would key every stored row anew
    (issue 44, item 4): refused, naming the column; one that keeps the text is allowed."""
    keyed = key == "record key"
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="k" if keyed else "id",
                             partition_by=None if keyed else "k")
    first = spark.sql(f"select cast(1 as {old_type}) as k, 1L as id, 'a' as v")
    table.upsert(first) if keyed else table.insert_overwrite(first)
    before = [i.timestamp for i in table.timeline()], parquet_files_on_disk(table.path)
    wider = spark.sql(f"select cast({new_value} as {new_type}) as k, 1L as id, 'b' as v")
    with pytest.raises(SchemaError, match=re.escape(f"{key} column 'k' cannot change type from {old_type} to {new_type}")):
        if keyed:
            table.upsert(wider, drop_missing_columns=True)
        else:
            table.insert_overwrite(wider, drop_missing_columns=True)
    assert ([i.timestamp for i in table.timeline()], parquet_files_on_disk(table.path)) == before
    if keyed:  # among integers and at one decimal scale the text stays: the row is updated in place
        same = "bigint" if old_type == "int" else "decimal(14,2)"
        table.upsert(spark.sql(f"select cast(1 as {same}) as k, 1L as id, 'c' as v"), drop_missing_columns=True)
        text = "1" if same == "bigint" else "1.00"
        assert [(str(r.k), r.v, r._hoodie_record_key) for r in table.read().collect()] == [(text, "c", text)]
    assert table.validate() == []


def data_rows(df):
    return [tuple(r) for r in df.select(*[c for c in df.columns if not c.startswith("_hoodie_")]).collect()]


def test_an_unknown_update_column_is_refused(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    table.upsert(spark.sql("select 1L as id, 'a' as plan, 1 as updated_at"))
    before = [i.timestamp for i in table.timeline()]
    with pytest.raises(ConfigurationError, match="table t: update column 'updated_ta' is not a column of the new rows"):
        table.upsert(spark.sql("select 1L as id, 'b' as plan, 2 as updated_at"), update_columns=["plan", "updated_ta"])
    assert [i.timestamp for i in table.timeline()] == before


def test_a_dropped_column_stays_dropped_over_commits_without_our_schema(spark, tmp_path):
    """A commit of Hudi's Java writer (or an older hudilite) records only the Avro schema: the
    files it wrote still count as holding a dropped column (review of issue 44, item 7)."""
    from dbt.adapters.hudilite.table.format.commit import SPARK_SCHEMA_KEY

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    table.upsert(spark.sql("select id, concat('u', id, '@x') as email from range(2) t(id)"))
    first = table.timeline()[0].timestamp
    commit = tmp_path / "t" / ".hoodie" / f"{first}.commit"
    body = json.loads(commit.read_text())
    del body["extraMetadata"][SPARK_SCHEMA_KEY]
    commit.write_text(json.dumps(body))
    table = HudiTable.open(spark, table.path)
    table.upsert(spark.sql("select 5L as id"), drop_missing_columns=True)
    before = [i.timestamp for i in table.timeline()]
    with pytest.raises(SchemaError, match="column 'email' was dropped, but files still in the table hold the values"):
        table.upsert(spark.sql("select 7L as id, cast(null as string) as email"))
    assert [i.timestamp for i in table.timeline()] == before
    assert sorted(data_rows(table.read())) == [(0,), (1,), (5,)]
