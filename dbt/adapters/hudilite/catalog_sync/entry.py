"""What a catalog holds for a hudilite table, as Hudi's own sync tools write it (HiveSyncTool in
HMS mode, AwsGlueCatalogSyncTool): an external table over the base path with Hudi's input format,
the meta columns first, the partition fields as partition keys, and the Spark schema in table
properties so that Spark SQL reads it as a Hudi data source table. Pure values: no client, no
engine (docs/design/catalog-sync.md has the sources)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from pyspark.sql import types as T

from ..table import META_COLUMNS

INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
# The marker Hudi's sync tools keep: the last instant synced, and when it completed.
LAST_SYNCED = "last_commit_time_sync"
LAST_SYNCED_COMPLETION = "last_commit_completion_time_sync"
# Ours beside it: the earliest instant still pending at that sync (a write requested before the
# marker may complete after it, and its partitions are then still to sync).
PENDING_AT_SYNC = "hudilite_pending_at_sync"
SCHEMA_PART_LENGTH = 4000  # spark.sql.sources.schemaStringLengthThreshold's default
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # a null or empty value's folder, and Hive's null


class CatalogTypeError(ValueError):
    """A column type no catalog type stands for."""


@dataclass(frozen=True)
class TableEntry:
    """One table as a catalog holds it. `columns` and `partition_keys`: (name, catalog type)."""
    database: str
    name: str
    location: str
    columns: Tuple[Tuple[str, str], ...]
    partition_keys: Tuple[Tuple[str, str], ...]
    parameters: Dict[str, str] = field(default_factory=dict)
    serde_parameters: Dict[str, str] = field(default_factory=dict)

    def partition_location(self, path: str) -> str:
        return f"{self.location.rstrip('/')}/{path}"

    def same_layout(self, partition_keys: Sequence[Tuple[str, str]], location: Optional[str]) -> bool:
        """Whether an entry with these partition keys and location can be altered into this one
        (a catalog cannot change a table's partition keys: a new layout is a new entry)."""
        return (tuple((n.lower(), t.lower()) for n, t in partition_keys)
                == tuple((n.lower(), t.lower()) for n, t in self.partition_keys)
                and same_location(location or "", self.location))


def catalog_type(dtype: T.DataType) -> str:
    """The Hive type of a Spark type, as Hudi's sync writes it with timestamps as timestamps
    (`hoodie.datasource.hive_sync.support_timestamp=true`, the Spark SQL writer's default):
    nested field names in lower case, no spaces."""
    if isinstance(dtype, (T.StringType, T.CharType, T.VarcharType)):
        return "string"
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return "timestamp"
    if isinstance(dtype, T.ArrayType):
        return f"array<{catalog_type(dtype.elementType)}>"
    if isinstance(dtype, T.MapType):
        return f"map<{catalog_type(dtype.keyType)},{catalog_type(dtype.valueType)}>"
    if isinstance(dtype, T.StructType):
        return "struct<" + ",".join(f"{f.name.lower()}:{catalog_type(f.dataType)}" for f in dtype.fields) + ">"
    if isinstance(dtype, T.DecimalType):
        return f"decimal({dtype.precision},{dtype.scale})"
    simple = {T.ByteType: "tinyint", T.ShortType: "smallint", T.IntegerType: "int", T.LongType: "bigint",
              T.FloatType: "float", T.DoubleType: "double", T.BooleanType: "boolean", T.BinaryType: "binary",
              T.DateType: "date"}
    for kind, name in simple.items():
        if isinstance(dtype, kind):
            return name
    raise CatalogTypeError(f"type {dtype.simpleString()} has no catalog type")


def table_entry(database: str, name: str, location: str, schema: T.StructType, partition_fields: Sequence[str],
                meta_columns: bool = True, spark_version: Optional[str] = None,
                formatted_fields: Sequence[str] = ()) -> TableEntry:
    """The entry Hudi's sync writes for a Copy-On-Write table of this schema: the five meta
    columns first (unless `meta_columns` is false, or the table keeps none), then the data
    columns less the partition fields, which are the partition keys typed as their columns
    (`formatted_fields`: partition fields whose folders hold formatted text, a timestamp key
    generator's, are strings). Names are the schema's, however `partition_fields` spells them."""
    by_name = {f.name.lower(): f for f in schema.fields}
    formatted = {f.lower() for f in formatted_fields}
    keys = []
    for p in partition_fields:
        found = by_name.get(p.lower())
        if found is None or p.lower() in formatted:
            found = T.StructField(found.name if found else p, T.StringType(), found is None or found.nullable)
        keys.append(found)
    partition_set = {p.lower() for p in partition_fields}
    data = [f for f in schema.fields if f.name.lower() not in partition_set and f.name not in META_COLUMNS]
    meta = [T.StructField(c, T.StringType(), True) for c in META_COLUMNS] if meta_columns else []
    columns = []
    for f in meta + data:
        try:
            columns.append((f.name, catalog_type(f.dataType)))
        except CatalogTypeError as err:
            raise CatalogTypeError(f"table {database}.{name}: column '{f.name}': {err}") from None
    partition_keys = tuple((f.name, catalog_type(f.dataType)) for f in keys)
    spark_schema = T.StructType(meta + data + keys).json()
    parameters = {"EXTERNAL": "TRUE", "spark.sql.sources.provider": "hudi"}
    if spark_version:
        parameters["spark.sql.create.version"] = spark_version
    parts = [spark_schema[i:i + SCHEMA_PART_LENGTH] for i in range(0, len(spark_schema), SCHEMA_PART_LENGTH)]
    parameters["spark.sql.sources.schema.numParts"] = str(len(parts))
    parameters.update({f"spark.sql.sources.schema.part.{i}": part for i, part in enumerate(parts)})
    if keys:
        parameters["spark.sql.sources.schema.numPartCols"] = str(len(keys))
        parameters.update({f"spark.sql.sources.schema.partCol.{i}": f.name for i, f in enumerate(keys)})
    serde = {"serialization.format": "1", "path": location, "hoodie.query.as.ro.table": "false"}
    return TableEntry(database, name, location, tuple(columns), partition_keys, parameters, serde)


def partition_values(path: str, fields: Sequence[str]) -> List[str]:
    """A partition's values from its relative path: one folder per field, less a `field=` prefix
    (Hive style); for one field over several folders (a timestamp key generator's `yyyy/MM/dd`),
    the folders joined by `-`, as Hudi's SinglePartPartitionValueExtractor reads them."""
    parts = path.split("/") if path else []

    def value(part: str, field: str) -> str:
        prefix = f"{field}="
        return part[len(prefix):] if part.lower().startswith(prefix.lower()) else part
    if len(parts) == len(fields):
        return [value(part, f) for part, f in zip(parts, fields)]
    if len(fields) == 1 and parts:
        return ["-".join(value(part, fields[0]) for part in parts)]
    raise ValueError(f"partition path '{path}' does not have one folder per partition field {list(fields)}")


def values_of_name(name: str) -> Tuple[str, ...]:
    """A partition's values from the name a Hive metastore lists it by, `f1=v1/f2=v2`, with the
    `%XX` escapes it writes undone."""
    return tuple(re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), part.split("=", 1)[1])
                 for part in name.split("/"))


def same_location(a: str, b: str) -> bool:
    """Locations equal but for a trailing slash, `file:` spelled with one or three slashes, and
    S3 spelled `s3a://` or `s3n://` (Hudi's sync writes the path as its writer was given it)."""
    def plain(value: str) -> str:
        value = value.rstrip("/")
        if value.startswith("file:///"):
            value = "file:/" + value[len("file:///"):]
        return re.sub(r"^s3[an]://", "s3://", value)
    return plain(a) == plain(b)


def spark_schema(parameters: Dict[str, str]) -> Optional[T.StructType]:
    """The Spark schema an entry's properties hold (None where they hold none)."""
    try:
        count = int(parameters.get("spark.sql.sources.schema.numParts", "0"))
    except ValueError:
        return None
    if not count:
        return None
    text = "".join(parameters.get(f"spark.sql.sources.schema.part.{i}", "") for i in range(count))
    return T.StructType.fromJson(json.loads(text))
