import json

import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite.table.schema import SchemaError, check_compatible, from_json, to_avro, to_json

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
