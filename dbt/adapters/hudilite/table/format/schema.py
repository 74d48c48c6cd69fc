"""The table schema: meta columns, Spark types, and the Avro schema Hudi readers expect.

The commit metadata carries the data schema twice: as Avro under `schema` (what Hudi readers
use) and as Spark JSON (exact Spark types, which Avro cannot say: byte, short, char...).
"""

from __future__ import annotations

import json
import re
from typing import List

from pyspark.sql import types as T

from ..errors import SchemaError

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
IS_DELETED = "_hoodie_is_deleted"  # true in an upsert's row: delete the key (Hudi's convention)

META_SCHEMA = T.StructType([T.StructField(c, T.StringType(), True) for c in META_COLUMNS])


def quote(*parts: str) -> str:
    """A name for Spark SQL and `F.col`, each part backticked with backticks doubled:
    `quote("a")` is a column, `quote(schema, table)` a table."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def with_meta_columns(data_schema: T.StructType) -> T.StructType:
    return T.StructType(list(META_SCHEMA.fields) + list(data_schema.fields))


def data_columns(schema: T.StructType) -> T.StructType:
    """What a table stores of rows with `schema`: no meta columns, no delete marker, every
    column nullable (a later batch may hold nulls where this one had none)."""
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields
                         if f.name not in META_COLUMNS and f.name.lower() != IS_DELETED])


def to_json(schema: T.StructType) -> str:
    return schema.json()


def from_json(text: str) -> T.StructType:
    return T.StructType.fromJson(json.loads(text))


def check_compatible(table_schema: T.StructType, batch_schema: T.StructType, table: str,
                     drop_missing: bool = False) -> T.StructType:
    """The schema after writing `batch_schema` into a table of `table_schema`.

    Columns are matched by name (case-insensitively, as Spark does). A batch may add new
    columns (they are appended) and carry a narrower type than a column's (cast losslessly to
    it). With `drop_missing` (the batch's schema becomes the table's) it may leave columns out
    (they leave the schema) and widen a column's type (`promotes`); any other type change is
    refused."""
    batch = {f.name.lower(): f for f in batch_schema.fields}
    kept = []
    for f in table_schema.fields:
        got = batch.get(f.name.lower())
        if got is None:
            if drop_missing:
                continue
            raise SchemaError(f"table {table}: the new rows lack column '{f.name}' ({f.dataType.simpleString()})")
        if drop_missing and promotes(f.dataType, got.dataType):
            kept.append(T.StructField(f.name, got.dataType, True, f.metadata))
            continue
        if got.dataType != f.dataType and nullable(got.dataType) == nullable(f.dataType):
            # the same type but for the nullability of nested fields (a struct literal's are
            # not null): the table's, every part of it nullable, holds both
            kept.append(T.StructField(f.name, nullable(f.dataType), True, f.metadata))
            continue
        kept.append(f)
        if got.dataType != f.dataType and not promotes(got.dataType, f.dataType):  # a narrower batch: cast up
            raise SchemaError(
                f"table {table}: column '{f.name}' is {f.dataType.simpleString()} in the table "
                f"but {got.dataType.simpleString()} in the new rows; "
                + ("" if drop_missing else "widening a column takes on_schema_change='sync_all_columns'; ")
                + "a type its stored files cannot be read as takes a rebuild (--full-refresh)"
            )
    known = {f.name.lower() for f in table_schema.fields}
    added = [f for f in batch_schema.fields if f.name.lower() not in known]
    return T.StructType(kept + [T.StructField(f.name, f.dataType, True) for f in added])


def nullable(data_type: T.DataType) -> T.DataType:
    """`data_type` with every nested field, element and value nullable."""
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, nullable(f.dataType), True, f.metadata) for f in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(nullable(data_type.keyType), nullable(data_type.valueType), True)
    return data_type


def promotes(table_type: T.DataType, new_type: T.DataType) -> bool:
    """A column of `table_type` may become `new_type`: every stored value reads as the same
    value of the new type, by Spark's parquet reader (measured on pyspark 4.3) and within
    Hudi's schema evolution. Not date to timestamp: Spark's reader refuses a date column read
    as a timestamp, so the stored files would become unreadable."""
    ints = [T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType()]
    if table_type in ints and new_type in ints:
        return ints.index(new_type) > ints.index(table_type)
    if isinstance(new_type, T.DoubleType):
        return isinstance(table_type, (T.FloatType, T.ByteType, T.ShortType, T.IntegerType))
    if isinstance(table_type, T.DecimalType) and isinstance(new_type, T.DecimalType):
        return (new_type != table_type and new_type.scale >= table_type.scale
                and new_type.precision - new_type.scale >= table_type.precision - table_type.scale)
    return False


def same_key_text(table_type: T.DataType, new_type: T.DataType) -> bool:
    """Every value of `table_type` has the same text (Spark's and Hudi's key text) as the same
    value of `new_type`: integers among integers, decimals of one scale."""
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    if isinstance(table_type, ints) and isinstance(new_type, ints):
        return True
    return (isinstance(table_type, T.DecimalType) and isinstance(new_type, T.DecimalType)
            and table_type.scale == new_type.scale)


def _avro_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return cleaned if re.match(r"^[A-Za-z_]", cleaned) else "_" + cleaned


_AVRO_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def to_avro(schema: T.StructType, table_name: str) -> str:
    """The Avro record schema of `schema`, nullable fields as unions with null, as Hudi writes it.
    Java readers parse it with Avro's own parser, so what Avro cannot name or hold is refused
    here, naming the column, before anything is written."""
    _check_avro_names(schema, table_name, "")
    record = _avro_record(schema, f"{_avro_name(table_name)}_record", f"hoodie.{_avro_name(table_name)}")
    return json.dumps(record, separators=(",", ":"))


def _check_avro_names(dtype: T.DataType, table: str, path: str) -> None:
    if isinstance(dtype, T.StructType):
        for f in dtype.fields:
            column = f"{path}.{f.name}" if path else f.name
            if not _AVRO_FIELD_NAME.match(f.name):
                raise SchemaError(f"table {table}: column '{column}' cannot be named in Avro, which Hudi's Java readers "
                                  "parse the table schema with (letters, digits and '_', not starting with a digit): "
                                  "rename it (a model: with an alias in its SQL; a seed: rename its CSV header, as "
                                  "column_types and quoting keep the header's name)")
            _check_avro_names(f.dataType, table, column)
    elif isinstance(dtype, T.ArrayType):
        _check_avro_names(dtype.elementType, table, path + "[]")
    elif isinstance(dtype, T.MapType):
        if not isinstance(dtype.keyType, T.StringType):
            raise SchemaError(f"table {table}: column '{path}' is a map with {dtype.keyType.simpleString()} keys; "
                              "Avro maps, and so Hudi's, have string keys: cast the keys to string")
        _check_avro_names(dtype.valueType, table, path + "{}")


def _avro_record(schema: T.StructType, name: str, namespace: str) -> dict:
    fields = []
    for f in schema.fields:
        avro_type = _avro_type(f.dataType, f"{name}_{_avro_name(f.name)}", f"{namespace}.{name}")
        if f.nullable:
            fields.append({"name": f.name, "type": ["null", avro_type], "default": None})
        else:
            fields.append({"name": f.name, "type": avro_type})
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


_PRIMITIVE_AVRO_TYPES = (
    ((T.StringType, T.VarcharType, T.CharType), "string"),
    ((T.ByteType, T.ShortType, T.IntegerType), "int"),
    (T.LongType, "long"),
    (T.FloatType, "float"),
    (T.DoubleType, "double"),
    (T.BooleanType, "boolean"),
    (T.BinaryType, "bytes"),
)


def _avro_type(dtype: T.DataType, name: str, namespace: str):
    for spark_types, avro in _PRIMITIVE_AVRO_TYPES:
        if isinstance(dtype, spark_types):
            return avro
    if isinstance(dtype, T.DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(dtype, T.TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(dtype, T.TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(dtype, T.DecimalType):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{name}",
            "size": _decimal_bytes(dtype.precision),
            "logicalType": "decimal",
            "precision": dtype.precision,
            "scale": dtype.scale,
        }
    if isinstance(dtype, T.ArrayType):
        items = _avro_type(dtype.elementType, name, namespace)
        return {"type": "array", "items": ["null", items] if dtype.containsNull else items}
    if isinstance(dtype, T.MapType):
        values = _avro_type(dtype.valueType, name, namespace)
        return {"type": "map", "values": ["null", values] if dtype.valueContainsNull else values}
    if isinstance(dtype, T.StructType):
        return _avro_record(dtype, name, namespace)
    raise SchemaError(f"type {dtype.simpleString()} has no Avro form in a Hudi table")


def from_avro(text: str) -> T.StructType:
    """The Spark schema of an Avro record schema as Hudi's Java writer records it (commit
    `extraMetadata.schema`, `hoodie.table.create.schema`), meta columns left out."""
    record = json.loads(text)
    schema = _spark_type(record)
    if not isinstance(schema, T.StructType):
        raise SchemaError(f"the table's Avro schema is not a record: {text[:200]}")
    return T.StructType([f for f in schema.fields if f.name not in META_COLUMNS])


_AVRO_PRIMITIVES = {"string": T.StringType(), "int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(),
                    "double": T.DoubleType(), "boolean": T.BooleanType(), "bytes": T.BinaryType(), "enum": T.StringType()}
_AVRO_LOGICAL = {"date": T.DateType(), "timestamp-micros": T.TimestampType(), "timestamp-millis": T.TimestampType(),
                 "local-timestamp-micros": T.TimestampNTZType(), "local-timestamp-millis": T.TimestampNTZType(),
                 "uuid": T.StringType()}


def _nullable(avro) -> tuple:
    """(the type without null, whether null is allowed)."""
    if isinstance(avro, list):
        others = [t for t in avro if t != "null"]
        if len(others) != 1:
            raise SchemaError(f"Avro union {avro} has no Spark type (only a type with null is)")
        return others[0], len(others) < len(avro)
    return avro, avro == "null"


def _spark_type(avro) -> T.DataType:
    avro, _ = _nullable(avro)
    if isinstance(avro, str):
        if avro in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[avro]
        raise SchemaError(f"Avro type {avro!r} has no Spark type (named type references are not supported)")
    kind, logical = avro.get("type"), avro.get("logicalType")
    if logical == "decimal" and kind in ("fixed", "bytes"):
        return T.DecimalType(avro["precision"], avro.get("scale", 0))
    if logical in _AVRO_LOGICAL:
        return _AVRO_LOGICAL[logical]
    if kind == "record":
        fields = []
        for f in avro["fields"]:
            inner, nullable = _nullable(f["type"])
            fields.append(T.StructField(f["name"], _spark_type(inner), nullable))
        return T.StructType(fields)
    if kind == "array":
        items, nullable = _nullable(avro["items"])
        return T.ArrayType(_spark_type(items), nullable)
    if kind == "map":
        values, nullable = _nullable(avro["values"])
        return T.MapType(T.StringType(), _spark_type(values), nullable)
    if kind == "fixed":
        return T.BinaryType()
    return _spark_type(kind)


def _decimal_bytes(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def resolve_columns(fields: List[str], schema: T.StructType) -> List[str]:
    """The spelling `schema` uses for each of `fields` (Spark matches names case-insensitively)."""
    by_lower = {f.name.lower(): f.name for f in schema.fields}
    return [by_lower[f.lower()] for f in fields]
