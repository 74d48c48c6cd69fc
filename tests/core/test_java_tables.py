"""Tables written by Apache Hudi's own Spark writer (`../shared/fixtures/hudi-java-tables/`):
what we read equals what hudi-rs reads, and our writes continue them in their own formats."""

import os
import zipfile

import hudi
import pytest

from dbt.adapters.hudilite.table import HudiTable
from tests.core.hudi_rs import assert_hudi_rs_agrees

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures", "hudi-java-tables")
FIXTURES = os.environ.get("HUDI_JAVA_FIXTURES", os.path.normpath(FIXTURES))
WRITTEN = ["v6_simplekeygen_nonhivestyle", "v6_complexkeygen_hivestyle", "v6_nonpartitioned"]


def java_table(spark, tmp_path, name) -> HudiTable:
    """A fresh copy of a fixture (the checked-in one is never written)."""
    with zipfile.ZipFile(os.path.join(FIXTURES, name + ".zip")) as archive:
        archive.extractall(tmp_path, [m for m in archive.namelist() if not m.startswith("__MACOSX")])
    return HudiTable.open(spark, str(tmp_path / name))


def test_the_fixtures_are_here():
    assert sorted(f[:-4] for f in os.listdir(FIXTURES) if f.endswith(".zip")) == sorted(WRITTEN + ["v6_empty"])


@pytest.mark.parametrize("name", WRITTEN)
def test_every_column_of_a_java_written_table_reads_as_hudi_rs_reads_it(spark, tmp_path, name):
    table = java_table(spark, tmp_path, name)
    df = table.read()
    assert sorted(df.columns[5:]) == sorted(["id", "name", "isActive", "intField", "longField", "floatField", "doubleField",
                              "decimalField", "dateField", "timestampField", "binaryField", "arrayField", "mapField",
                              "structField", "byteField", "shortField"])
    assert dict(df.dtypes)["decimalField"] == "decimal(10,5)" and dict(df.dtypes)["timestampField"] == "timestamp"
    assert sorted(r.name for r in df.collect()) == ["Alice", "Bob", "Carol", "Diana"]
    assert_hudi_rs_agrees(table)


def test_a_java_table_created_without_a_commit_has_its_schema(spark, tmp_path):
    table = java_table(spark, tmp_path, "v6_empty")
    assert table.read().count() == 0
    assert "id" in table.schema().fieldNames()


@pytest.mark.parametrize("keys, partitions, generator, stored", [
    (["id"], [], "NonpartitionedKeyGenerator", ("7", "")),
    (["id", "name"], [], "NonpartitionedKeyGenerator", ("id:7,name:__empty__", "")),
    (["id"], ["region"], "SimpleKeyGenerator", ("7", "region=eu")),
    (["id"], ["region", "day"], "ComplexKeyGenerator", ("id:7", "region=eu/day=d1")),
    (["id", "name"], ["region"], "ComplexKeyGenerator", ("id:7,name:__empty__", "region=eu")),
])
def test_keys_are_written_as_the_declared_key_generator_writes_them(spark, tmp_path, keys, partitions, generator, stored):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key=keys, partition_by=partitions)
    assert table.config.keygen_class == "org.apache.hudi.keygen." + generator
    schema = "id long, name string, region string, day string, v string"
    table.upsert(spark.createDataFrame([(7, "", "eu", "d1", "old")], schema))
    (row,) = table.read().collect()
    assert (row._hoodie_record_key, row._hoodie_partition_path) == stored
    reopened = HudiTable.open(spark, table.path)  # a new process finds the same format
    reopened.upsert(spark.createDataFrame([(7, "", "eu", "d1", "new")], schema))
    assert [(r._hoodie_record_key, r.v) for r in reopened.read().collect()] == [(stored[0], "new")]


def test_a_complex_key_on_one_field_written_bare_stays_bare(spark, tmp_path):
    """Hudi 0.14.1-1.0.2 and earlier hudilite wrote a one-field complex key without `field:`:
    a table that holds such keys keeps them, or an upsert would store every key twice."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by=["region", "day"])
    table.context.keys._field_prefixed = False  # as the older writers did
    table.insert(spark.createDataFrame([(1, "a", "eu", "d1")], "id long, name string, region string, day string"))
    reopened = HudiTable.open(spark, table.path)
    reopened.upsert(spark.createDataFrame([(1, "b", "eu", "d1"), (2, "c", "eu", "d1")],
                                          "id long, name string, region string, day string"))
    assert sorted((r._hoodie_record_key, r.name) for r in reopened.read().collect()) == [("1", "b"), ("2", "c")]
    assert reopened.validate() == []


@pytest.mark.parametrize("name, new_key, new_partition", [
    ("v6_simplekeygen_nonhivestyle", "10", "10"),
    ("v6_complexkeygen_hivestyle", "id:10,name:Zed", "byteField=10/shortField=300"),
    ("v6_nonpartitioned", "10", ""),
])
def test_our_writes_continue_a_java_written_table_in_its_formats(spark, tmp_path, name, new_key, new_partition):
    from pyspark.sql import functions as F

    from dbt.adapters.hudilite.table import META_COLUMNS

    table = java_table(spark, tmp_path, name)
    java_instants = [i.timestamp for i in table.timeline()]
    data = table.read().drop(*META_COLUMNS)
    alice = data.where("id = 1")
    changed = alice.withColumn("longField", F.col("longField") + 1000).withColumn("isActive", F.lit(False))
    newcomer = alice.withColumn("id", F.lit(10)).withColumn("name", F.lit("Zed"))
    upserted = table.upsert(changed.unionByName(newcomer))
    rows = {r.id: r for r in table.read().collect()}
    assert (rows[10]._hoodie_record_key, rows[10]._hoodie_partition_path) == (new_key, new_partition)
    assert rows[1].longField == alice.first().longField + 1000 and rows[1].isActive is False
    assert rows[1]._hoodie_record_key == alice_key(table, java_instants)  # the stored row was replaced, not repeated
    assert len(rows) == 5 and table.read().count() == 5
    table.delete(data.where("id = 2"))
    table.insert(data.where("id = 3").withColumn("id", F.lit(11)).withColumn("name", F.lit("Yan")))
    assert sorted(r.id for r in table.read().collect()) == [1, 3, 4, 10, 11]
    assert [i.timestamp for i in table.timeline()][:2] == java_instants and upserted > java_instants[-1]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def alice_key(table, java_instants):
    """Alice's key as the Java writer stored it."""
    (row,) = table.read(as_of=java_instants[-1]).where("id = 1").select("_hoodie_record_key").collect()
    return row[0]


@pytest.mark.parametrize("setting, message", [
    ("hoodie.datasource.write.partitionpath.urlencode=true", "URL-encoded"),
    ("hoodie.table.keygenerator.class=org.apache.hudi.keygen.SqlKeyGenerator", "SqlKeyGenerator is not one"),
])
def test_a_java_table_set_up_in_ways_we_do_not_write_is_read_and_not_written(spark, tmp_path, setting, message):
    from pyspark.sql import functions as F

    from dbt.adapters.hudilite.table import ConfigurationError, META_COLUMNS

    table = java_table(spark, tmp_path, "v6_simplekeygen_nonhivestyle")
    properties = os.path.join(table.path, ".hoodie", "hoodie.properties")
    key = setting.split("=")[0]
    lines = [line for line in open(properties).read().splitlines() if not line.startswith(key + "=")]
    with open(properties, "w") as f:
        f.write("\n".join(lines + [setting]) + "\n")
    table = HudiTable.open(spark, table.path)
    before = sorted(os.path.relpath(os.path.join(d, n), table.path) for d, _, ns in os.walk(table.path) for n in ns)
    rows = table.read().drop(*META_COLUMNS)
    assert rows.count() == 4
    with pytest.raises(ConfigurationError, match=message):
        table.upsert(rows.where("id = 1").withColumn("longField", F.lit(0).cast("long")))
    after = sorted(os.path.relpath(os.path.join(d, n), table.path) for d, _, ns in os.walk(table.path) for n in ns)
    assert set(after) - set(before) == set() and set(before) - set(after) == set()


def test_a_java_table_listing_a_metadata_table_it_lacks_gets_one_on_our_write(spark, tmp_path):
    from dbt.adapters.hudilite.table.metadata.table import MetadataTable

    table = java_table(spark, tmp_path, "v6_simplekeygen_nonhivestyle")
    properties = os.path.join(table.path, ".hoodie", "hoodie.properties")
    with open(properties, "a") as f:
        f.write("hoodie.table.metadata.partitions=files,column_stats\n")
    table = HudiTable.open(spark, table.path)
    rows = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie")])
    table.upsert(rows.where("id = 1"))
    # column_stats taken off; files and record_index (a keyed table) built from the snapshot.
    assert "hoodie.table.metadata.partitions=files,record_index\n" in open(properties).read()
    assert MetadataTable(table.context.storage).reader().partitions() == sorted(
        {r._hoodie_partition_path for r in table.read().select("_hoodie_partition_path").collect()})
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_table_with_an_unreadable_archived_timeline_is_refused_naming_the_file(spark, tmp_path):
    from dbt.adapters.hudilite.table import ConfigurationError

    table = java_table(spark, tmp_path, "v6_nonpartitioned")
    with open(os.path.join(table.path, ".hoodie", "archived", ".commits_.archive.1_1-0-1"), "wb") as f:
        f.write(b"\0")
    with pytest.raises(ConfigurationError, match=r"archived timeline file \.hoodie/archived/\.commits_\.archive\.1_1-0-1 "
                                                 r"is unreadable"):
        HudiTable.open(spark, table.path)


def _encodings_and_codecs(path):
    """{(column, encoding)} and {compression} over every column chunk of every base file."""
    import pyarrow.parquet as pq

    encodings, codecs = set(), set()
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for name in (f for f in files if f.endswith(".parquet")):
            metadata = pq.ParquetFile(os.path.join(root, name)).metadata
            for g in range(metadata.num_row_groups):
                for c in range(metadata.num_columns):
                    chunk = metadata.row_group(g).column(c)
                    encodings |= {(chunk.path_in_schema, e) for e in chunk.encodings}
                    codecs.add(chunk.compression)
    return encodings, codecs


@pytest.mark.parametrize("encoding", ["compact", "portable"])
def test_portable_encoding_writes_what_older_parquet_readers_read(spark, tmp_path, encoding):
    """Spark 3.2 and older readers (Hudi 0.14/0.15 run there) know neither DELTA_BYTE_ARRAY nor
    zstd: a portable table's every write (insert, upsert rewrite, overwrite) uses neither."""
    from pyspark.sql import functions as F

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="p",
                             parquet_encoding=encoding)
    rows = spark.range(100).select("id", (F.col("id") % 2).cast("string").alias("p"), F.lit("a").alias("v"))
    table.upsert(rows)
    table = HudiTable.open(spark, table.path)  # a new process keeps the table's encoding
    table.upsert(rows.where("id < 10").withColumn("v", F.lit("b")))
    table.insert_overwrite(rows.where("p = '0'").withColumn("id", F.col("id") + 1000))
    encodings, codecs = _encodings_and_codecs(table.path)
    delta = {c for c, e in encodings if e == "DELTA_BYTE_ARRAY"}
    # (_hoodie_partition_path and _hoodie_file_name, one value a file, are stored uncompressed)
    if encoding == "portable":
        assert codecs == {"SNAPPY", "UNCOMPRESSED"} and delta == set()
    else:
        assert codecs == {"ZSTD", "UNCOMPRESSED"} and delta == {"_hoodie_record_key", "_hoodie_commit_seqno"}
    assert sorted(r.v for r in table.read().where("id < 10").collect()) == ["b"] * 5
    assert_hudi_rs_agrees(table)


def test_an_unknown_parquet_encoding_is_refused_before_anything_is_written(spark, tmp_path):
    from dbt.adapters.hudilite.table import ConfigurationError

    with pytest.raises(ConfigurationError, match="parquet_encoding 'tiny' is not one of compact, portable"):
        HudiTable.create(spark, str(tmp_path / "t"), "t", parquet_encoding="tiny")
    assert not os.path.exists(tmp_path / "t" / ".hoodie")


def test_a_table_we_create_records_its_schema_for_java_readers_before_its_first_commit(spark, tmp_path):
    """Java's schema resolver reads `hoodie.table.create.schema` of a table without commits:
    data columns only (no meta columns, no delete marker), as Avro."""
    import json

    from dbt.adapters.hudilite.table.format import properties as props

    schema = spark.range(1).selectExpr("id", "'x' as name", "date'2026-01-01' as day", "false as _hoodie_is_deleted",
                                       "'k' as _hoodie_record_key").schema
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", schema=schema)
    stored = props.loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())
    avro = json.loads(stored["hoodie.table.create.schema"])
    assert (avro["name"], avro["namespace"]) == ("t_record", "hoodie.t")
    assert [f["name"] for f in avro["fields"]] == ["id", "name", "day"]
    assert [f["type"] for f in avro["fields"]][2] == ["null", {"type": "int", "logicalType": "date"}]
    reopened = HudiTable.open(spark, table.path)
    assert reopened.schema().fieldNames() == ["id", "name", "day"] and reopened.read().count() == 0
    assert hudi.HudiTable(table.path).get_schema().names == ["id", "name", "day"]  # as Java's resolver would


def _without_meta_fields(table_path):
    """The table as a Java writer with hoodie.populate.meta.fields=false (virtual keys) leaves it."""
    import pyarrow.parquet as pq

    for root, dirs, files in os.walk(table_path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for name in (os.path.join(root, f) for f in files if f.endswith(".parquet")):
            rows = pq.read_table(name)
            pq.write_table(rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")]), name)
    properties = os.path.join(table_path, ".hoodie", "hoodie.properties")
    with open(properties, "a") as f:
        f.write("hoodie.populate.meta.fields=false\n")


@pytest.mark.parametrize("name", WRITTEN)
def test_a_virtual_key_table_reads_its_keys_from_the_key_fields(spark, tmp_path, name):
    from dbt.adapters.hudilite.table import ConfigurationError, META_COLUMNS
    from tests.core.hudi_rs import hudi_rs_snapshot, rows_of_arrow, rows_of_df

    with_meta = java_table(spark, tmp_path / "stored", name)
    stored = sorted((r._hoodie_record_key, r._hoodie_partition_path, r._hoodie_file_name, r.id)
                    for r in with_meta.read().collect())
    table = java_table(spark, tmp_path / "virtual", name)
    _without_meta_fields(table.path)
    table = HudiTable.open(spark, table.path)
    assert table.config.virtual_keys
    df = table.read()
    assert df.columns == list(META_COLUMNS) + with_meta.read().columns[5:]
    assert sorted((r._hoodie_record_key, r._hoodie_partition_path, r._hoodie_file_name, r.id)
                  for r in df.collect()) == stored  # what the Java writer stored when it kept meta fields
    assert {(r._hoodie_commit_time, r._hoodie_commit_seqno) for r in df.collect()} == {(None, None)}  # stored nowhere
    data_columns = df.columns[5:]
    assert rows_of_df(df, data_columns) == rows_of_arrow(hudi_rs_snapshot(table.path), data_columns)
    first = table.timeline()[0].timestamp
    assert rows_of_df(table.read(as_of=first), data_columns) == rows_of_arrow(hudi_rs_snapshot(table.path, first),
                                                                              data_columns)
    with pytest.raises(ConfigurationError, match="virtual keys"):
        table.read_changes(first)
    # We continue it: keys from the key fields, through the record index (files with no meta
    # columns at all, as this fixture's, keep none; our new ones hold them null but the file name).
    from pyspark.sql import functions as F

    before = {r._hoodie_record_key: r for r in df.collect()}
    stripped = set(table.validate())  # the fixture's files, rewritten without meta columns, differ from their stats
    table.upsert(df.drop(*META_COLUMNS).where("id = 1").withColumn("intField", F.lit(4242)))
    after = {r._hoodie_record_key: r for r in table.read().collect()}
    assert sorted(after) == sorted(before)
    assert sorted(k for k in after if after[k].intField != before[k].intField) == sorted(
        k for k, r in before.items() if r.id == 1) and {after[k].intField for k in after if after[k].id == 1} == {4242}
    assert set(table.validate()) <= stripped
    assert rows_of_df(table.read(), data_columns) == rows_of_arrow(hudi_rs_snapshot(table.path), data_columns)


def _footers_and_keys(path):
    import pyarrow.parquet as pq

    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for name in (os.path.join(root, f) for f in files if f.endswith(".parquet")):
            footer = {k.decode(): v.decode() for k, v in (pq.read_metadata(name).metadata or {}).items()}
            yield name, footer, pq.read_table(name, columns=["_hoodie_record_key"]).column(0)


@pytest.mark.parametrize("name", WRITTEN)
def test_keyed_files_carry_the_bloom_footer_javas_bloom_index_reads(spark, tmp_path, name):
    """Every base file of a keyed table (new file groups, upsert rewrites, a continued Java table)
    holds Hudi's DYNAMIC_V0 bloom filter of its keys and its key range, as Hudi's writer puts them
    (ours sized to the file's keys, Java's at Hudi's fixed size);
    auto-keyed files hold none (no index looks auto keys up)."""
    from pyspark.sql import functions as F

    from dbt.adapters.hudilite.table import META_COLUMNS
    from dbt.adapters.hudilite.table.format.bloom import BLOOM_FILTER_KEY, DynamicBloomFilter, footer_metadata

    table = java_table(spark, tmp_path, name)
    data = table.read().drop(*META_COLUMNS)
    table.upsert(data.where("id = 1").withColumn("longField", F.col("longField") + 1))
    table.upsert(data.where("id = 1").withColumn("id", F.lit(10)).withColumn("name", F.lit("Zed")))
    files = list(_footers_and_keys(table.path))
    ours = [(f, footer, keys) for f, footer, keys in files if table.timeline()[-1].timestamp in f
            or table.timeline()[-2].timestamp in f]
    assert len(ours) >= 2
    for path, footer, keys in files:  # Java's files at Hudi's fixed size; ours sized to their keys
        expected = footer_metadata(keys, sized=any(path == f for f, _, _ in ours))
        assert {k: footer.get(k) for k in expected} == expected
        assert DynamicBloomFilter.deserialize(footer[BLOOM_FILTER_KEY]).might_contain_all(keys).all()

    auto = HudiTable.create(spark, str(tmp_path / "auto"), "auto")
    auto.insert(spark.range(10))
    assert all(BLOOM_FILTER_KEY not in footer for _, footer, _ in _footers_and_keys(auto.path))


@pytest.mark.parametrize("name", ["v6_simplekeygen_nonhivestyle", "v6_complexkeygen_hivestyle"])
def test_insert_overwrite_replaces_a_java_written_partition(spark, tmp_path, name):
    from pyspark.sql import functions as F

    from dbt.adapters.hudilite.table import META_COLUMNS

    table = java_table(spark, tmp_path, name)
    before = table.read()
    alice = before.where("id = 1").first()
    others = sorted(r.id for r in before.where(F.col("_hoodie_partition_path") != alice._hoodie_partition_path).collect())
    replacement = before.where("id = 1").drop(*META_COLUMNS).withColumn("id", F.lit(20)).withColumn("name", F.lit("Ann"))
    instant = table.insert_overwrite(replacement)
    metadata = table.commit_metadata(instant)
    assert metadata.operation == "INSERT_OVERWRITE" and list(metadata.replaced_file_ids) == [alice._hoodie_partition_path]
    after = {r.id: r for r in table.read().collect()}
    assert sorted(after) == sorted(others + [20])  # the partition holds only the new row; the others are as they were
    assert after[20]._hoodie_partition_path == alice._hoodie_partition_path
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
