import json
import re

import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite.table.format.schema import SchemaError, check_compatible, from_json, to_avro, to_json

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("name", T.StringType()),
    T.StructField("amount", T.DecimalType(12, 2)),
    T.StructField("day", T.DateType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("attrs", T.MapType(T.StringType(), T.IntegerType())),
    T.StructField("nested", T.StructType([T.StructField("x", T.DoubleType())])),
])


def test_avro_schema_is_a_hudi_style_record():
    avro = json.loads(to_avro(SCHEMA, "my-table"))
    assert avro["type"] == "record" and avro["name"] == "my_table_record" and avro["namespace"] == "hoodie.my_table"
    fields = {f["name"]: f["type"] for f in avro["fields"]}
    assert fields["id"] == "long"
    assert fields["name"] == ["null", "string"]
    assert fields["amount"][1]["logicalType"] == "decimal" and fields["amount"][1]["size"] == 6
    assert fields["day"][1] == {"type": "int", "logicalType": "date"}
    assert fields["ts"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    assert fields["tags"][1] == {"type": "array", "items": ["null", "string"]}
    assert fields["nested"][1]["type"] == "record"


def test_spark_schema_round_trips():
    assert from_json(to_json(SCHEMA)) == SCHEMA


def test_compatibility():
    table = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])
    same = check_compatible(table, T.StructType([T.StructField("B", T.StringType()), T.StructField("a", T.IntegerType())]), "t")
    assert same == table
    added = check_compatible(table, T.StructType(table.fields + [T.StructField("c", T.DateType(), False)]), "t")
    assert [f.name for f in added.fields] == ["a", "b", "c"] and added.fields[2].nullable
    with pytest.raises(SchemaError, match="table t: column 'a' is bigint in the table but string"):
        check_compatible(table, T.StructType([T.StructField("a", T.StringType()), T.StructField("b", T.StringType())]), "t")
    with pytest.raises(SchemaError, match="lack column 'b'"):
        check_compatible(table, T.StructType([T.StructField("a", T.LongType())]), "t")


def test_a_column_widens_only_where_its_stored_files_read_as_the_new_type():
    from dbt.adapters.hudilite.table.format.schema import promotes

    widen = [(T.IntegerType(), T.LongType()), (T.ByteType(), T.IntegerType()), (T.FloatType(), T.DoubleType()),
             (T.IntegerType(), T.DoubleType()), (T.DecimalType(10, 2), T.DecimalType(12, 2)),
             (T.DecimalType(10, 2), T.DecimalType(12, 4))]
    refuse = [(T.LongType(), T.IntegerType()), (T.DateType(), T.TimestampType()), (T.LongType(), T.DoubleType()),
              (T.DecimalType(10, 2), T.DecimalType(10, 4)), (T.DecimalType(12, 2), T.DecimalType(10, 2)),
              (T.IntegerType(), T.StringType()), (T.LongType(), T.LongType())]
    assert all(promotes(a, b) for a, b in widen) and not any(promotes(a, b) for a, b in refuse)
    table = T.StructType([T.StructField("i", T.IntegerType()), T.StructField("d", T.DateType())])
    wider = T.StructType([T.StructField("i", T.LongType()), T.StructField("d", T.DateType())])
    assert check_compatible(table, wider, "t", drop_missing=True) == wider  # sync_all_columns widens
    with pytest.raises(SchemaError, match="column 'i' is int in the table but bigint.*sync_all_columns"):
        check_compatible(table, wider, "t")  # other modes keep the table's type
    with pytest.raises(SchemaError, match="column 'd' is date in the table but timestamp.*--full-refresh"):
        check_compatible(table, T.StructType([T.StructField("i", T.IntegerType()), T.StructField("d", T.TimestampType())]),
                         "t", drop_missing=True)


def test_avro_schemas_read_back_as_the_spark_schema_they_came_from():
    from dbt.adapters.hudilite.table.format.schema import from_avro

    assert from_avro(to_avro(SCHEMA, "t")) == SCHEMA
    hudi_style = json.dumps({"type": "record", "name": "t_record", "fields": [
        {"name": "_hoodie_commit_time", "type": ["null", "string"]},
        {"name": "id", "type": ["int", "null"]},  # Hudi's Java writer puts null second
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
        {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A", "B"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "h", "size": 16}},
        {"name": "items", "type": {"type": "array", "items": ["null", "long"]}}]})
    assert from_avro(hudi_style) == T.StructType([
        T.StructField("id", T.IntegerType(), True), T.StructField("ms", T.TimestampType(), False),
        T.StructField("local", T.TimestampNTZType(), True), T.StructField("price", T.DecimalType(5, 2), False),
        T.StructField("kind", T.StringType(), False), T.StructField("hash", T.BinaryType(), False),
        T.StructField("items", T.ArrayType(T.LongType(), True), False)])
    with pytest.raises(SchemaError, match="union"):
        from_avro(json.dumps({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "string"]}]}))


@pytest.mark.parametrize("field, column", [
    (T.StructField("my col", T.LongType()), "my col"),
    (T.StructField("a-b", T.LongType()), "a-b"),
    (T.StructField("9lives", T.LongType()), "9lives"),
    (T.StructField("s", T.StructType([T.StructField("x.y", T.LongType())])), "s.x.y"),
    (T.StructField("l", T.ArrayType(T.StructType([T.StructField("bad name", T.LongType())]))), "l[].bad name"),
])
def test_names_avro_cannot_hold_are_refused_naming_the_column(field, column):
    with pytest.raises(SchemaError, match=f"table t: column '{re.escape(column)}' cannot be named in Avro"):
        to_avro(T.StructType([T.StructField("id", T.LongType()), field]), "t")


def test_maps_with_keys_avro_cannot_hold_are_refused():
    with pytest.raises(SchemaError, match="column 'm' is a map with int keys"):
        to_avro(T.StructType([T.StructField("m", T.MapType(T.IntegerType(), T.StringType()))]), "t")


def test_nested_fields_that_differ_only_in_nullability_are_one_type():
    """A struct literal's fields are not null; a later batch's may be: the same column, whose
    schema becomes nullable throughout (it was refused, naming two identical-looking types)."""
    from pyspark.sql import types as T

    from dbt.adapters.hudilite.table.format.schema import check_compatible

    strict = T.StructType([T.StructField("name", T.StringType(), False), T.StructField("email", T.StringType(), False)])
    loose = T.StructType([T.StructField("name", T.StringType(), True), T.StructField("email", T.StringType(), True)])
    table = T.StructType([T.StructField("id", T.LongType()), T.StructField("person", strict),
                          T.StructField("tags", T.ArrayType(T.StringType(), False))])
    batch = T.StructType([T.StructField("id", T.LongType()), T.StructField("person", loose),
                          T.StructField("tags", T.ArrayType(T.StringType(), True))])
    after = check_compatible(table, batch, "t")
    assert after["person"].dataType == loose and after["tags"].dataType == T.ArrayType(T.StringType(), True)
    assert check_compatible(table, table, "t") == table  # unchanged when nothing differs
