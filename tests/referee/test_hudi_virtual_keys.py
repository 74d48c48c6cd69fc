"""Tables with virtual keys (`hoodie.populate.meta.fields=false`) against Hudi's own Spark writer
and reader (0.15, 1.0, 1.1): the same rows make the same table (partition folders, files whose
meta columns are null but the file name, no bloom footer, hoodie.properties), Hudi reads what we
write as we do, we continue a table Hudi started and Hudi continues ours (upsert, delete, insert,
insert_overwrite, keys made from the key fields on both sides: no key is stored twice), and
incremental reads are refused on both sides, naming the setting."""

import os

import pyarrow.parquet as pq
import pytest

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.format import properties as props
from dbt.adapters.hudilite.table.errors import ConfigurationError
from dbt.adapters.hudilite.table.format.schema import META_COLUMNS
from tests.referee.hudi_spark import RefereeError
from tests.referee.test_hudi_spark_reads import compare

SCHEMA = "id long, kind string, region string, ts long, v string"
COLUMNS = ["id", "kind", "region", "ts", "v"]

# (Hudi's key generator, record key fields, partition fields, hive style)
CASES = {
    "simple-hive": (props.KEYGEN_SIMPLE, "id", "region", True),
    "complex-plain": (props.KEYGEN_COMPLEX, "id,kind", "region", False),
    "nonpartitioned": (props.KEYGEN_NON_PARTITIONED, "id", "", False),
}

ROWS = [(1, "a", "eu", 100, "v1"), (2, "a", "us", 100, "v2"), (3, "b", "us", 100, "v3"), (4, "b", "eu", 100, "v4")]


def hudi_options(case, operation):
    generator, key, partition, hive = CASES[case]
    return {
        "hoodie.table.name": "events", "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": operation, "hoodie.datasource.write.recordkey.field": key,
        "hoodie.datasource.write.partitionpath.field": partition, "hoodie.datasource.write.keygenerator.class": generator,
        "hoodie.datasource.write.hive_style_partitioning": str(hive).lower(),
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.populate.meta.fields": "false",
        "hoodie.metadata.enable": "false", "hoodie.write.table.version": "6", "hoodie.write.auto.upgrade": "false",
    }


def create_ours(spark, path, case) -> HudiTable:
    generator, key, partition, hive = CASES[case]
    if hive:  # what the core API makes (hive-style paths)
        return HudiTable.create(spark, path, "events", partition_by=partition or None, record_key=key,
                                precombine="ts", virtual_keys=True)
    config = props.TableConfig(name="events", partition_fields=[p for p in partition.split(",") if p],
                               record_key_fields=key.split(","),
                               precombine_field="ts", hive_style_partitioning=hive, key_generator=generator,
                               virtual_keys=True)
    os.makedirs(os.path.join(path, ".hoodie"))
    with open(os.path.join(path, ".hoodie", "hoodie.properties"), "w") as out:
        out.write(props.dumps(config.to_properties()))
    return HudiTable.open(spark, path)


def _dicts(rows):
    return [dict(zip(COLUMNS, r)) for r in rows]


def _folders(path):
    return sorted(os.path.relpath(root, path) for root, _, files in os.walk(path)
                  if ".hoodie" not in root and any(f.endswith(".parquet") for f in files))


def _latest_files(table):
    return [os.path.join(table.path, f.path) for f in table.latest_base_files()]


def agree(table, hudi_spark, step, expected=None):
    """Hudi's reader reads the snapshot as ours does (Hudi shows no meta columns on such a
    table: the data columns are compared); no key is stored twice; the table is well-formed."""
    ours = table.read()
    compare(step, ours.select(*COLUMNS), hudi_spark.snapshot(table.path))
    keys = [r._hoodie_record_key for r in ours.select("_hoodie_record_key").collect()]
    assert len(keys) == len(set(keys)) and None not in keys, f"{step}: keys {sorted(keys)}"
    assert not table.validate(), f"{step}: {table.validate()}"
    rows = sorted((r.id, r.kind, r.v) for r in ours.collect())
    if expected is not None:
        assert rows == sorted(expected), step
    return rows


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_rows_make_the_same_table_as_hudis_writer(spark, hudi_spark, tmp_path, case):
    theirs_path, ours_path = str(tmp_path / "hudi"), str(tmp_path / "ours")
    hudi_spark.write(theirs_path, _dicts(ROWS), SCHEMA, hudi_options(case, "upsert"))
    ours = create_ours(spark, ours_path, case)
    first = ours.insert(spark.createDataFrame(ROWS, SCHEMA))
    # The same partition folders, and the same keys made of the same rows.
    assert _folders(ours_path) == _folders(theirs_path)
    theirs = HudiTable.open(spark, theirs_path)
    assert theirs.config.virtual_keys
    assert sorted(r._hoodie_record_key for r in theirs.read().collect()) == sorted(
        r._hoodie_record_key for r in ours.read().collect())
    # Files: Hudi's five meta columns first, null but (0.15, 1.0: always; 1.1: on rewrites) the
    # file name; no bloom footer.
    for table in (theirs, ours):
        for path in _latest_files(table):
            stored = pq.read_table(path)
            assert stored.column_names == list(META_COLUMNS) + COLUMNS
            assert {v for c in META_COLUMNS[:4] for v in stored.column(c).to_pylist()} == {None}
            names = set(stored.column("_hoodie_file_name").to_pylist())
            assert names == {os.path.basename(path)} if table is ours else names <= {os.path.basename(path), None}
            assert not [k for k in pq.read_metadata(path).metadata if k.startswith(b"hoodie_")]
    for path in (theirs_path, ours_path):
        properties = props.loads(open(os.path.join(path, ".hoodie", "hoodie.properties")).read())
        assert properties["hoodie.populate.meta.fields"] == "false"
    agree(ours, hudi_spark, "Hudi reads our insert", [(r[0], r[1], r[4]) for r in ROWS])
    compare("time travel", ours.read(as_of=first).select(*COLUMNS), hudi_spark.snapshot(ours_path, first))
    # Incremental reads: refused by Hudi (every version) and by us, naming the setting.
    with pytest.raises(RefereeError, match="Incremental queries are not supported when meta fields are disabled"):
        hudi_spark.changes(ours_path, "000", first)
    with pytest.raises(ConfigurationError, match="hoodie.populate.meta.fields=false"):
        ours.read_changes(None)
    # Hudi's writer continues the table we created (its index finds our keys from the key fields),
    # and we continue after it.
    hudi_spark.write(ours_path, _dicts([(1, "a", "eu", 200, "java-1"), (5, "c", "us", 100, "java-5")]), SCHEMA,
                     hudi_options(case, "upsert"))
    ours = HudiTable.open(spark, ours_path)
    expected = {(r[0], r[1]): r[4] for r in ROWS} | {(1, "a"): "java-1", (5, "c"): "java-5"}
    agree(ours, hudi_spark, "Hudi's upsert into our table", [(i, k, v) for (i, k), v in expected.items()])
    ours.upsert(spark.createDataFrame([(5, "c", "us", 300, "ours-5"), (2, "a", "us", 300, "ours-2")], SCHEMA))
    expected |= {(5, "c"): "ours-5", (2, "a"): "ours-2"}
    agree(ours, hudi_spark, "our upsert after Hudi's", [(i, k, v) for (i, k), v in expected.items()])


@pytest.mark.parametrize("case", sorted(CASES))
def test_we_continue_a_table_hudi_started_and_it_continues_ours(spark, hudi_spark, tmp_path, case):
    path = str(tmp_path / "t")
    hudi_spark.write(path, _dicts(ROWS), SCHEMA, hudi_options(case, "upsert"))
    table = HudiTable.open(spark, path)
    expected = {(r[0], r[1]): r[4] for r in ROWS}

    def rows():
        return [(i, k, v) for (i, k), v in expected.items()]

    agree(table, hudi_spark, "Hudi's first commit", rows())
    # Ours: an upsert (key 1 changes in place, 5 is new), a delete, an overwrite of 'us'.
    table.upsert(spark.createDataFrame([(1, "a", "eu", 200, "ours-1"), (5, "a", "us", 100, "v5")], SCHEMA))
    expected[(1, "a")], expected[(5, "a")] = "ours-1", "v5"
    agree(table, hudi_spark, "our upsert", rows())
    table.delete(spark.createDataFrame([(2, "a")], "id long, kind string").select(
        *[c for c in ("id", "kind") if c in CASES[case][1].split(",")]))
    del expected[(2, "a")]
    agree(table, hudi_spark, "our delete", rows())
    table.insert_overwrite(spark.createDataFrame([(6, "c", "us", 100, "v6"), (3, "b", "us", 300, "ours-3")], SCHEMA))
    if CASES[case][2]:  # the 'us' partition
        expected = {k: v for k, v in expected.items() if k[0] not in (3, 5)}
    else:  # the whole table
        expected = {}
    expected[(6, "c")], expected[(3, "b")] = "v6", "ours-3"
    agree(table, hudi_spark, "our insert_overwrite", rows())
    # Hudi's writer: an upsert of a key we wrote and one Hudi wrote, a new key, then a delete.
    more = [(6, "c", "us", 400, "java-6"), (7, "c", "eu", 100, "java-7")]
    if (4, "b") in expected:
        more.append((4, "b", "eu", 400, "java-4"))
        expected[(4, "b")] = "java-4"
    hudi_spark.write(path, _dicts(more), SCHEMA, hudi_options(case, "upsert"))
    expected[(6, "c")], expected[(7, "c")] = "java-6", "java-7"
    table = HudiTable.open(spark, path)
    agree(table, hudi_spark, "Hudi's upsert into our commits", rows())
    hudi_spark.write(path, _dicts([(3, "b", "us", 500, None)]), SCHEMA, hudi_options(case, "delete"))
    del expected[(3, "b")]
    table = HudiTable.open(spark, path)
    agree(table, hudi_spark, "Hudi's delete", rows())
    # Ours again, after Java's commits: the index is built anew from the key fields; a key Java
    # deleted is not found, one it inserted is.
    table.upsert(spark.createDataFrame([(7, "c", "eu", 600, "ours-7"), (3, "b", "us", 600, "ours-3-again")], SCHEMA))
    expected[(7, "c")], expected[(3, "b")] = "ours-7", "ours-3-again"
    agree(table, hudi_spark, "our upsert after Hudi's", rows())
    with pytest.raises(Exception, match="record keys the table holds already"):
        table.insert(spark.createDataFrame([(7, "c", "eu", 700, "twice")], SCHEMA))
    hudi_spark.write(path, _dicts([(8, "d", "eu", 100, "java-8")]), SCHEMA, hudi_options(case, "insert"))
    expected[(8, "d")] = "java-8"
    table = HudiTable.open(spark, path)
    table.insert(spark.createDataFrame([(9, "d", "us", 100, "ours-9")], SCHEMA))
    expected[(9, "d")] = "ours-9"
    agree(table, hudi_spark, "Hudi's insert and ours", rows())
