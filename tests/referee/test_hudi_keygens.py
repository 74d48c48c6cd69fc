"""Tables whose key generator is Hudi's TimestampBasedKeyGenerator or CustomKeyGenerator: the
same rows get the same record keys and partition paths from Hudi's writer and ours, Hudi's writer
starts a table that we continue (upsert, insert, delete), and Hudi's writer continues a table we
created; both readers read the same rows after every step."""

import os

import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.format import properties as props
from tests.referee.hudi_spark import RefereeError
from tests.referee.test_hudi_spark_reads import compare
from tests.referee.values import plain_rows

SCHEMA = "id long, region string, ts long, d string, v string, s int"
COLUMNS = ["id", "region", "ts", "d", "v", "s"]
TS, CUSTOM = props.KEYGEN_TIMESTAMP, props.KEYGEN_CUSTOM

# (key generator, record key, Hudi's partition path field, hive style, hoodie.keygen.timebased.* settings)
CASES = {
    "epoch-millis-tokyo": (TS, "id", "ts", False, {
        "timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy/MM/dd", "timezone": "Asia/Tokyo"}),
    "unix-seconds-hive": (TS, "id", "s", True, {
        "timestamp.type": "UNIX_TIMESTAMP", "output.dateformat": "yyyy-MM-dd'T'HH", "output.timezone": "GMT+05:30"}),
    "date-string": (TS, "id", "d", False, {
        "timestamp.type": "DATE_STRING", "input.dateformat": "yyyy-MM-dd HH:mm:ss,yyyy/MM/dd",
        "output.dateformat": "yyyy/MM/dd", "input.timezone": "UTC", "output.timezone": "America/New_York"}),
    "custom-simple-and-date-string": (CUSTOM, "id,v", "region:SIMPLE,d:TIMESTAMP", True, {
        "timestamp.type": "DATE_STRING", "input.dateformat": "yyyy-MM-dd HH:mm:ss", "output.dateformat": "yyyy-MM-dd"}),
    "custom-scalar": (CUSTOM, "id", "ts:TIMESTAMP", False, {
        "timestamp.type": "SCALAR", "timestamp.scalar.time.unit": "MILLISECONDS", "output.dateformat": "yyyyMMddHH"}),
}

ROWS = [(1, "eu", 1700000000123, "2024-03-05 10:11:12", "a"), (2, "us", 1700090000000, "2024-03-06 23:59:59", "b"),
        (3, "us", 1699999999, "2024/01/01", "c"), (4, "", 0, "2023-12-31 23:00:00", "d")]
MORE = [(1, "eu", 1700000000999, "2024-03-05 10:11:12", "ours-1"), (5, "eu", 1600000000000, "2020-09-13 12:26:40", "e"),
        (6, "us", 86400000, "1999-12-31 19:00:00", "f")]


def _with_seconds(rows):
    """The rows with `s`: `ts` in whole seconds (an int column, for UNIX_TIMESTAMP)."""
    return [(*r, None if r[2] is None else r[2] // 1000) for r in rows]


ROWS, MORE = _with_seconds(ROWS), _with_seconds(MORE)


def _fields(case):
    generator, key, partition, hive, settings = CASES[case]
    return generator, key.split(","), partition, hive, {"hoodie.keygen.timebased." + k: v for k, v in settings.items()}


def _key(case, row):
    """The row's record key values: `id`, and `v` too where the key holds both."""
    return (row[0], row[4]) if "v" in CASES[case][1].split(",") else (row[0],)


def _dicts(rows):
    return [dict(zip(COLUMNS, r)) for r in rows]


def _date_rows(case, rows):
    """DATE_STRING cases read `d`; rows whose `d` another format holds stay for the ones that read it."""
    if case == "custom-simple-and-date-string":
        return [r for r in rows if "/" not in r[3]]
    return rows


def hudi_options(case, operation):
    generator, key, partition, hive, settings = _fields(case)
    return {
        "hoodie.table.name": "events", "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": operation, "hoodie.datasource.write.recordkey.field": ",".join(key),
        "hoodie.datasource.write.partitionpath.field": partition, "hoodie.datasource.write.keygenerator.class": generator,
        "hoodie.datasource.write.hive_style_partitioning": str(hive).lower(),
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.metadata.enable": "false",
        "hoodie.write.table.version": "6", "hoodie.write.auto.upgrade": "false", **settings,
    }


def create_ours(spark, path, case) -> HudiTable:
    """A table hudilite creates with the case's key generator (its settings kept in hoodie.properties)."""
    generator, key, partition, hive, settings = _fields(case)
    specs = [p.split(":") for p in partition.split(",")]
    config = props.TableConfig(
        name="events", partition_fields=[s[0] for s in specs], record_key_fields=key, precombine_field="ts",
        hive_style_partitioning=hive, key_generator=generator, keygen_settings=settings,
        partition_types=[s[1] for s in specs] if generator == CUSTOM else None)
    os.makedirs(os.path.join(path, ".hoodie"))
    with open(os.path.join(path, ".hoodie", "hoodie.properties"), "w") as out:
        out.write(props.dumps(config.to_properties()))
    return HudiTable.open(spark, path)


def keys_and_paths(rows):
    return sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in rows)


def _timestamp_fields(case):
    generator, _, partition, _, _ = CASES[case]
    return [p.split(":")[0] for p in partition.split(",") if generator == TS or p.endswith(":TIMESTAMP")]


def agree(table, hudi_spark, step, case):
    """Both readers read the same rows. Hudi's reader types a timestamp partition field as a
    string (it cannot read the value back from the path): compared as text."""
    ours = table.read()
    old_reader = hudi_spark.version.startswith("0.")
    # Hudi 0.15 reads the partition fields of these tables from the folder names (a timestamp
    # field as its folder name, '' in __HIVE_DEFAULT_PARTITION__ as null): left out with it.
    as_text = [p.split(":")[0] for p in CASES[case][2].split(",")] if old_reader else _timestamp_fields(case)
    if old_reader and CASES[case][3] and CASES[case][0] == TS:
        # Hudi 0.15's reader parses a hive-style folder name back into the column's type, and
        # fails on `s=2023-11-16T04`: on tables its own writer made as on ours.
        with pytest.raises(RefereeError, match="Failed to cast value .* for partition column"):
            hudi_spark.snapshot(table.path)
    else:
        columns, theirs = hudi_spark.snapshot(table.path)
        for row in theirs:
            for name in as_text:
                row[name] = None if old_reader or row[name] is None else str(row[name])
        compare(step, ours.select(*[(F.lit(None) if old_reader else F.col(c)).cast("string").alias(c) if c in as_text
                                    else F.col(c) for c in ours.columns]), (columns, theirs))
    keys = [r._hoodie_record_key for r in ours.select("_hoodie_record_key").collect()]
    assert len(keys) == len(set(keys)), f"{step}: a key is stored twice"
    assert not table.validate(), f"{step}: {table.validate()}"
    return plain_rows(ours.collect(), ["_hoodie_record_key", "_hoodie_partition_path", *COLUMNS])


def _complete_properties(path, case, version):
    """What Hudi's writer leaves out of hoodie.properties at version 6: the timestamp settings of a
    Custom table (every release) and the timestamp type (0.15). Our first write says which is missing."""
    generator, _, partition, _, settings = _fields(case)
    existing = props.loads(open(os.path.join(path, ".hoodie", "hoodie.properties")).read())
    missing = {k: v for k, v in settings.items() if k not in existing}
    return missing


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_rows_get_the_same_keys_and_partition_paths(spark, hudi_spark, tmp_path, case):
    rows = _date_rows(case, ROWS)
    hudi_spark.write(str(tmp_path / "hudi"), _dicts(rows), SCHEMA, hudi_options(case, "insert"))
    # The keys and paths Hudi's writer stored, read from its files (Hudi 0.15's reader cannot
    # read every such table: see `agree`).
    theirs = [r.asDict() for r in HudiTable.open(spark, str(tmp_path / "hudi")).read().collect()]
    ours = create_ours(spark, str(tmp_path / "ours"), case)
    ours.insert(spark.createDataFrame(rows, SCHEMA))
    assert keys_and_paths(r.asDict() for r in ours.read().collect()) == keys_and_paths(theirs)
    folders = sorted(os.path.relpath(root, tmp_path / "ours") for root, _, files in os.walk(tmp_path / "ours")
                     if any(f.endswith(".parquet") for f in files))
    assert folders == sorted({p for _, p in keys_and_paths(theirs)})
    # Hudi's writer continues the table we made, with the same settings.
    hudi_spark.write(ours.path, _dicts(_date_rows(case, MORE)), SCHEMA, hudi_options(case, "upsert"))
    rows_after = agree(HudiTable.open(spark, ours.path), hudi_spark, "Hudi's upsert into our table", case)
    assert sorted(r["v"] for r in rows_after) == sorted(
        {_key(case, r): r[4] for r in rows + _date_rows(case, MORE)}.values())


@pytest.mark.parametrize("case", sorted(CASES))
def test_we_continue_a_table_hudi_started_and_it_continues_after_us(spark, hudi_spark, tmp_path, case):
    path = str(tmp_path / "t")
    rows = _date_rows(case, ROWS)
    hudi_spark.write(path, _dicts(rows), SCHEMA, hudi_options(case, "upsert"))
    table = HudiTable.open(spark, path)
    missing = _complete_properties(path, case, hudi_spark.version)
    batch = spark.createDataFrame(_date_rows(case, MORE), SCHEMA)
    if missing:  # we refuse to guess: the error names a setting to add, and we add what the Java job runs with
        with pytest.raises(Exception, match=r"hoodie\.keygen\.timebased\.|hudilite\.keygen\.partition\.types"):
            table.upsert(batch)
        with open(os.path.join(path, ".hoodie", "hoodie.properties"), "a") as out:
            out.write("".join(f"{props.escape(k, True)}={props.escape(v, False)}\n" for k, v in missing.items()))
        os.remove(os.path.join(path, ".hoodie", ".hoodie.properties.crc"))  # Hadoop's checksum of the old file
        table = HudiTable.open(spark, path)
    agree(table, hudi_spark, "Hudi's first commit", case)
    table.upsert(batch)
    expected = {_key(case, r): r for r in rows + _date_rows(case, MORE)}
    after = agree(table, hudi_spark, "our upsert after Hudi's", case)
    assert sorted((r["id"], r["v"]) for r in after) == sorted((r[0], r[4]) for r in expected.values())
    table.delete(spark.createDataFrame([(2,)], "id long") if case != "custom-simple-and-date-string"
                 else spark.createDataFrame([(2, "b")], "id long, v string"))
    expected = {k: r for k, r in expected.items() if k[0] != 2}
    hudi_spark.write(path, _dicts(_with_seconds([(7, "eu", 1500000000000, "2017-07-14 02:40:00", "java-7")])), SCHEMA,
                     hudi_options(case, "insert"))
    table = HudiTable.open(spark, path)
    table.insert(spark.createDataFrame(_with_seconds([(8, "us", 1400000000000, "2014-05-13 16:53:20", "ours-8")]),
                                       SCHEMA))
    expected[(7,)], expected[(8,)] = (7, "", 0, "", "java-7"), (8, "", 0, "", "ours-8")
    after = agree(table, hudi_spark, "after our delete, Hudi's insert and ours", case)
    assert sorted((r["id"], r["v"]) for r in after) == sorted((r[0], r[4]) for r in expected.values())


def test_settings_we_cannot_follow_are_refused_naming_the_setting(spark, tmp_path):
    from dbt.adapters.hudilite.table.errors import ConfigurationError

    for n, (key, value) in enumerate([("timestamp.type", "MIXED"), ("output.dateformat", "yyyy/MMM/dd"),
                                      ("timezone", "Mars/Olympus")]):
        path = str(tmp_path / f"t{n}")
        table = create_ours(spark, path, "epoch-millis-tokyo")
        with open(os.path.join(path, ".hoodie", "hoodie.properties"), "a") as out:
            out.write(f"hoodie.keygen.timebased.{key}={props.escape(value, False)}\n")
        table = HudiTable.open(spark, path)
        with pytest.raises(ConfigurationError, match=f"hoodie.keygen.timebased.{key}"):
            table.insert(spark.createDataFrame(ROWS, SCHEMA))
