"""Record keys and partition paths, as Spark column expressions evaluated on the executors;
partition paths of the common column types (strings, integers, dates) are made by the write
tasks instead, from Arrow values (`PartitionFormat`).

- simple key: `str(value)` of one field; complex key: `f1:v1,f2:v2` (`f1:v1` with one field:
  Hudi's ComplexKeyGenerator prefixes the field name, apart from releases 0.14.1-1.0.2). A
  complex key's value that would make a key other values make too is refused
  (`ambiguous_key_value`).
- auto key (RFC-76): `<instant>_<task partition>_<row>`, the row numbered in the order the
  task writes it. The task sorts its rows by partition (path or columns) and their input
  position (the low 33 bits of `monotonically_increasing_id()`), so the numbering is deterministic when a
  task reruns over the same input, and each file group a task writes holds one run of
  consecutive rows: the auto-key index stores such runs (`key_ranges.py`). The Python writer
  builds the key strings in numpy (`seqno_array`); no string crosses
  from the JVM.
- `_hoodie_commit_seqno` uses the same `<instant>_<task partition>_<row>` shape for every write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .errors import DataError
from .schema import quote

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"

_ROW_BITS = (1 << 33) - 1


def task_row_index() -> Column:
    """The 0-based index of the row within the task that evaluates it."""
    return F.monotonically_increasing_id().bitwiseAND(F.lit(_ROW_BITS))


def seqno_array(instant: str, task_partition: int, start: int, count: int) -> pa.Array:
    """`<instant>_<task partition>_<row>` for the rows `start` to `start + count - 1`.

    Built as bytes in numpy, about twice as fast as joining cast numbers: consecutive rows with
    the same number of digits form a block of fixed-width strings, written column by column."""
    prefix = np.frombuffer(f"{instant}_{task_partition}_".encode(), np.uint8)
    blocks, widths = [], []
    row, end = start, start + count
    while row < end:
        digits = len(str(row))
        block_end = min(end, 10 ** digits)
        width = len(prefix) + digits
        block = np.empty((block_end - row, width), np.uint8)
        block[:, : len(prefix)] = prefix
        numbers = np.arange(row, block_end, dtype=np.int64)
        for place in range(digits):
            block[:, width - 1 - place] = numbers // 10 ** place % 10 + ord("0")
        blocks.append(block.ravel())
        widths.append(np.full(block_end - row, width, np.int64))
        row = block_end
    offsets = np.zeros(count + 1, np.int64)
    if count:
        np.cumsum(np.concatenate(widths), out=offsets[1:])
    data = np.concatenate(blocks) if blocks else np.empty(0, np.uint8)
    strings = pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))
    return strings.cast(pa.string())  # the writers' schema; fails loudly past 2 GB in one call


def record_key(fields: Sequence[str], table: str, field_prefixed: bool,
               types: Optional[Sequence[T.DataType]] = None, refuse_ambiguous: bool = True) -> Column:
    """The record key of user-named key fields; a null key, or (`refuse_ambiguous`) a value that
    would make an ambiguous key (`ambiguous_key_value`), is an error naming the column and the
    value. `field_prefixed`: `f1:v1[,f2:v2]` as Hudi's complex key generator writes it (always
    with two or more fields); else one field's bare value. `types`: the fields' types, to skip
    the checks a type's text cannot fail."""
    if len(fields) == 1 and not field_prefixed:
        col = F.col(quote(fields[0]))
        return F.when(
            col.isNull() | (col.cast("string") == ""),
            F.raise_error(F.lit(f"table {table}: record key column '{fields[0]}' is null or empty")),
        ).otherwise(col.cast("string"))
    parts: List[Column] = []
    for name in fields:
        value = F.col(quote(name)).cast("string")
        rendered = F.when(value.isNull(), F.lit(NULL_KEY_PART)).when(value == "", F.lit(EMPTY_KEY_PART)).otherwise(value)
        parts.append(F.concat(F.lit(f"{name}:"), rendered))
    all_null = None
    for name in fields:
        cond = F.col(quote(name)).isNull()
        all_null = cond if all_null is None else (all_null & cond)
    ambiguous = ambiguous_key_value(fields, table, types) if refuse_ambiguous else F.lit(None)
    return F.when(
        all_null,
        F.raise_error(F.lit(f"table {table}: every record key column ({', '.join(fields)}) is null")),
    ).when(ambiguous.isNotNull(), F.raise_error(ambiguous)).otherwise(F.concat_ws(",", *parts))


# Types whose text holds no ',' and never equals a placeholder: their values need no check.
_PLAIN_TEXT = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
               T.DecimalType, T.DateType, T.TimestampType, T.TimestampNTZType)


def ambiguous_key_value(fields: Sequence[str], table: str, types: Optional[Sequence[T.DataType]] = None) -> Column:
    """Null, or the error naming the first value of a complex key (`f1:v1,...,fn:vn`) that
    other values make too: two rows would share one record key, the second overwriting the first.

    Hudi's writers and indexes match rows by the whole key string. Field names hold no ',' or
    ':' (they are Avro names), so a key splits into values only where it holds a label `,fi:`.
    Other values make the same key exactly when a value vi holds its own label `,fi:` (i > 1)
    or the next field's `,f(i+1):`: `vi-1` + `,fi:` + `a,fi:b` is also `vi-1,fi:a` + `,fi:` + `b`.
    Were no value to hold one, each label would be the first of its kind after the one before:
    one split only. So 'a,b', 'a:b', ',f1:' (f1 never follows a comma) or a label of a field
    further on stay allowed. (Hudi's `KeyGenUtils.extractRecordKeys`, which bucket indexes and
    Flink's changelog reads use to get values back, cuts at commas, so it misreads a value
    holding a comma (older releases) or a comma then a ':' (newer ones); that is no collision.)

    A value equal to a placeholder (`__null__`, `__empty__`) makes the key of a null or '' in
    its place: refused, apart from `__null__` in a one-field key, whose null is refused."""
    problems = []
    for i, name in enumerate(fields):
        if types is not None and isinstance(types[i], _PLAIN_TEXT):
            continue
        value = F.col(quote(name)).cast("string")
        labels = ([fields[i]] if i > 0 else []) + ([fields[i + 1]] if i + 1 < len(fields) else [])
        for label in labels:
            problems.append(F.when(value.contains(f",{label}:"), _ambiguous(table, name, value, (
                f"whose ',{label}:' reads as the start of {label}'s part of the key "
                f"'{':<value>,'.join(fields)}:<value>', so other values make the same key"))))
        for placeholder, meaning in [(NULL_KEY_PART, "a null"), (EMPTY_KEY_PART, "an empty value")]:
            if placeholder == NULL_KEY_PART and len(fields) == 1:
                continue  # a one-field key's null is refused: no other row makes `f1:__null__`
            problems.append(F.when(value == placeholder, _ambiguous(table, name, value, (
                f"which is how the key writes {meaning}, so a row with {meaning} there makes the same key"))))
    return F.coalesce(*problems) if problems else F.lit(None).cast("string")


def _ambiguous(table: str, name: str, value: Column, why: str) -> Column:
    return F.concat(F.lit(f"table {table}: record key column '{name}' has the value '"), value,
                    F.lit(f"', {why}: change the value or the unique_key"))


def partition_path(fields: Sequence[str], hive_style: bool, table: str,
                   types: Optional[Sequence[T.DataType]] = None) -> Column:
    """The relative partition path; '' for a non-partitioned table. `types`: the fields'
    types, for the checks that depend on them (a date column's range)."""
    if not fields:
        return F.lit("")
    segments = []
    for name, kind in zip(fields, types or [None] * len(fields)):
        value = F.col(quote(name)).cast("string")
        if isinstance(kind, T.DateType):  # as `PartitionFormat` refuses them
            day = F.col(quote(name))
            outside = (day < F.lit(_FIRST_DATE).cast("date")) | (day > F.lit(_LAST_DATE).cast("date"))
            value = F.when(outside, F.raise_error(F.concat(F.lit(f"{_date_outside(table, name)}: "), value))
                           ).otherwise(value)
        value = F.when(value.isNull() | (value == ""), F.lit(DEFAULT_PARTITION)).otherwise(value)
        # A folder name Hadoop and Hudi readers can list: no '/' (a sub-folder), no ':' (read as
        # a URI scheme), not '.' or '..' (a value of a plain-style partition would leave the table).
        unusable = value.contains("/") | value.contains(":") | value.isin(".", "..")
        value = F.when(
            unusable,
            F.raise_error(F.concat(F.lit(str(_unusable_folder_name(table, name, ""))), value)),
        ).otherwise(value)
        segments.append(F.concat(F.lit(f"{name}="), value) if hive_style else value)
    return F.concat_ws("/", *segments)


def _date_outside(table: str, name: str) -> str:
    return f"table {table}: partition column '{name}' has a date outside {_FIRST_DATE} to {_LAST_DATE}"


def _unusable_folder_name(table: str, name: str, value: str) -> DataError:
    return DataError(f"table {table}: partition column '{name}' has a value that cannot be a folder name ('/' or ':' "
                     f"in it, or '.' or '..'): {value}")


# Partition column types whose paths a write task makes from Arrow values as Spark's
# `partition_path` would: their text is the same in both (checked against Spark in the tests).
TASK_FORMATTED = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType)
_FIRST_DATE, _LAST_DATE = "0001-01-01", "9999-12-31"  # Spark's DateType range
_FIRST_DAY, _LAST_DAY = -719162, 2932896  # the same, in days since 1970-01-01


def formats_in_task(types: Sequence[T.DataType]) -> bool:
    """A collated string (Spark 4, `UTF8_LCASE`) is not: rows sorted by it would interleave
    values that compare equal but are different folders."""
    return all(isinstance(t, TASK_FORMATTED) and getattr(t, "collation", "UTF8_BINARY") == "UTF8_BINARY"
               for t in types)


def partition_grouping(columns: Sequence[str], types: Sequence[T.DataType]) -> List[Column]:
    """Columns to sort rows by so that each partition path's rows are consecutive, for the
    types `formats_in_task` takes: the values, with the strings that all make the default
    partition (null, '' and its own name) made equal."""
    return [F.when(~F.col(quote(c)).isin("", DEFAULT_PARTITION), F.col(quote(c))) if isinstance(t, T.StringType)
            else F.col(quote(c)) for c, t in zip(columns, types)]


@dataclass(frozen=True)
class PartitionFormat:
    """`partition_path` in a write task, over Arrow batches: Spark's string cast and concat cost
    about 1 µs a row (half of a 100k-row overwrite's task time), here a few vectorised passes
    over one row per run of equal values (`writer.partition_runs`). For the types of
    `TASK_FORMATTED` only."""

    fields: Tuple[str, ...]
    hive_style: bool
    table: str

    def paths(self, batch: pa.RecordBatch) -> pa.Array:
        segments = []
        for name, values in self.columns(batch):
            value = self._folder_name(name, values)
            segments.append(pc.binary_join_element_wise(f"{name}=", value, "") if self.hive_style else value)
        return segments[0] if len(segments) == 1 else pc.binary_join_element_wise(*segments, "/")

    def columns(self, batch: pa.RecordBatch) -> List[Tuple[str, pa.Array]]:
        """(name, values) of the partition columns, named as the rows spell them (as
        `partition_path` is given them)."""
        column_of = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        return [(batch.schema.names[column_of[f.lower()]], batch.column(column_of[f.lower()])) for f in self.fields]

    def _folder_name(self, name: str, values: pa.Array) -> pa.Array:
        if pa.types.is_date32(values.type):
            days = values.cast(pa.int32())
            outside = pc.or_(pc.less(days, _FIRST_DAY), pc.greater(days, _LAST_DAY))
            if pc.any(outside).as_py():
                raise DataError(f"{_date_outside(self.table, name)} "
                                f"(days since 1970-01-01: {values.filter(outside)[0].cast(pa.int32())})")
        text = values.cast(pa.string())
        text = pc.if_else(pc.fill_null(pc.equal(text, ""), True), pa.scalar(DEFAULT_PARTITION), text)
        unusable = pc.or_(pc.or_(pc.match_substring(text, "/"), pc.match_substring(text, ":")),
                          pc.is_in(text, value_set=pa.array([".", ".."])))
        if pc.any(unusable).as_py():
            raise _unusable_folder_name(self.table, name, text.filter(unusable)[0].as_py())
        return text
