"""Upsert and delete on a Copy-On-Write table through the record index.

1. The batch gets its record keys and partition paths; duplicates within it resolve by the
   precombine field (largest wins) or are an error naming the key.
2. A join with the record index tags each key with the file group holding it, if any.
3. Each touched file group is read (its latest slice only) and rewritten as a new slice of
   the same fileId: unchanged rows keep their commit time and seqno, updated rows get this
   instant's, deleted rows are left out. An incoming row older than the stored one (by the
   precombine field) changes nothing. Untouched file groups are neither read nor written.
4. New keys (and keys that moved to another partition: the index is global) go to new file
   groups through the insert writer.
5. The index delta of the instant: the keys of the new file groups, tombstones for deleted
   and moved-away keys.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .file_group import FileSystemView
from .keygen import partition_path, record_key
from .reader import read_base_files
from .record_index import file_id_of
from .schema import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY, SchemaError

IS_DELETED = "_hoodie_is_deleted"
OLD_PARTITION = "_hudilite_old_partition"
OLD_FILE_ID = "_hudilite_old_file_id"
FILE_ID = "_hudilite_file_id"


def keyed_batch(df: DataFrame, data_schema: T.StructType, key_fields: List[str], partition_fields: List[str],
                hive_style: bool, table: str) -> DataFrame:
    """Record key, partition path, delete flag, then the data columns in table order."""
    actual = {f.name.lower(): f.name for f in df.schema.fields}
    deleted = F.coalesce(F.col(IS_DELETED).cast("boolean"), F.lit(False)) if IS_DELETED.lower() in actual else F.lit(False)
    data = [F.col(f"`{actual[f.name.lower()]}`").cast(f.dataType).alias(f.name) for f in data_schema.fields]
    resolve = lambda names: [actual[n.lower()] for n in names]  # noqa: E731
    return df.select(
        record_key(resolve(key_fields), table).alias(RECORD_KEY),
        partition_path(resolve(partition_fields), hive_style, table).alias(PARTITION_PATH),
        deleted.alias(IS_DELETED), *data,
    )


def deduplicate(batch: DataFrame, precombine: str, table: str) -> DataFrame:
    """One row per key: the largest precombine value wins; without one, duplicates are an error."""
    if precombine:
        order = F.col(f"`{precombine}`")  # a row without a value (a bare delete) loses to any that has one
        winner = F.max_by(F.struct(*[F.col(f"`{c}`") for c in batch.columns]), F.struct(order.isNotNull(), order))
        return batch.groupBy(RECORD_KEY).agg(winner.alias("row")).select("row.*")
    duplicate = batch.groupBy(RECORD_KEY).count().where("count > 1").select(RECORD_KEY).limit(1).collect()
    if duplicate:
        raise SchemaError(
            f"table {table}: the new rows hold record key '{duplicate[0][0]}' more than once; "
            "set a precombine field to choose between them"
        )
    return batch


def locate(batch: DataFrame, index_entries: DataFrame) -> DataFrame:
    """Tag each key with the (partition, file group) holding it now; null for a new key."""
    found = index_entries.select(F.col("key").alias(RECORD_KEY), F.col("partition").alias(OLD_PARTITION),
                                 F.col("file_id").alias(OLD_FILE_ID))
    return batch.join(found, RECORD_KEY, "left")


def plan_rewrites(tagged: DataFrame) -> List[Tuple[str, int]]:
    """(fileId, rows deleted or moved out of it) for every file group the batch touches."""
    touched = tagged.where(F.col(OLD_FILE_ID).isNotNull())
    leaving = (F.col(IS_DELETED) | (F.col(PARTITION_PATH) != F.col(OLD_PARTITION))).cast("int")
    return [(r[0], r[1]) for r in touched.groupBy(OLD_FILE_ID).agg(F.sum(leaving)).collect()]


def rewritten_rows(spark, storage, view: FileSystemView, tagged: DataFrame, file_ids: List[str],
                   data_schema: T.StructType, precombine: str, update_columns: Optional[List[str]] = None) -> DataFrame:
    """The new content of the touched file groups, laid out for `writer.rewrite_task`. With
    `update_columns`, an updated row takes only those columns from the batch."""
    wanted = set(file_ids)
    files = [g.latest for g in view.live_groups() if g.file_id in wanted]
    stored = read_base_files(spark, storage, files, data_schema).withColumn(FILE_ID, file_id_of(F.col(FILE_NAME)))
    data = [F.col(f"`{f.name}`") for f in data_schema.fields]
    incoming = tagged.where(F.col(OLD_FILE_ID).isNotNull())
    in_place = incoming.where(~F.col(IS_DELETED) & (F.col(PARTITION_PATH) == F.col(OLD_PARTITION)))
    if precombine:  # an incoming row older than the stored one changes nothing
        stored_order = stored.select(F.col(RECORD_KEY), F.col(f"`{precombine}`").alias("_stored_order"))
        stale = (in_place.join(stored_order, RECORD_KEY)
                 .where(F.col(f"`{precombine}`") < F.col("_stored_order")).select(RECORD_KEY))
        in_place = in_place.join(stale, RECORD_KEY, "left_anti")
        incoming = incoming.join(stale, RECORD_KEY, "left_anti")
    if update_columns is not None:
        wanted = {c.lower() for c in update_columns}
        frozen = [f.name for f in data_schema.fields if f.name.lower() not in wanted]
        previous = stored.select(F.col(RECORD_KEY), *[F.col(f"`{c}`").alias(f"_stored_{c}") for c in frozen])
        in_place = in_place.join(previous, RECORD_KEY).select(
            *[c for c in in_place.columns if c not in frozen],
            *[F.col(f"`_stored_{c}`").alias(c) for c in frozen])
    kept = stored.join(incoming.select(RECORD_KEY), RECORD_KEY, "left_anti").select(
        F.col(FILE_ID), F.col(COMMIT_TIME), F.col(COMMIT_SEQNO), F.col(RECORD_KEY), F.col(PARTITION_PATH), *data)
    changed = in_place.select(
        F.col(OLD_FILE_ID).alias(FILE_ID), F.lit(None).cast("string").alias(COMMIT_TIME),
        F.lit(None).cast("string").alias(COMMIT_SEQNO), F.col(RECORD_KEY), F.col(PARTITION_PATH), *data)
    return kept.unionByName(changed).repartition(max(1, min(len(file_ids), 200)), FILE_ID).sortWithinPartitions(FILE_ID, RECORD_KEY)


def new_rows(tagged: DataFrame, data_schema: T.StructType) -> DataFrame:
    """Rows for new file groups: new keys, and keys that moved to another partition."""
    arriving = tagged.where(~F.col(IS_DELETED) & (F.col(OLD_FILE_ID).isNull() | (F.col(PARTITION_PATH) != F.col(OLD_PARTITION))))
    return arriving.select(*[F.col(f"`{f.name}`") for f in data_schema.fields])


def tombstones(tagged: DataFrame) -> DataFrame:
    """Index entries removing deleted keys (a moved key's new entry replaces its old one)."""
    gone = tagged.where(F.col(OLD_FILE_ID).isNotNull() & F.col(IS_DELETED))
    return gone.select(F.col(RECORD_KEY).alias("key"), F.col(OLD_PARTITION).alias("partition"),
                       F.col(OLD_FILE_ID).alias("file_id"), F.lit(True).alias("deleted"))
