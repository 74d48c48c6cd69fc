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
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import DataError
from .schema import COMMIT_TIME, META_COLUMNS, RECORD_KEY, quote

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


# How a timestamp key value is written (`properties.TIMESTAMP_KEYS_KEY`). epoch_micros: the
# microseconds since 1970 (timestamp_ntz: of its wall-clock time read in UTC), as Hudi's writers
# key a timestamp on their default (Avro) path, 0.14 to 1.1. utc_text: `yyyy-MM-dd HH:mm:ss[.f]`
# in UTC, what hudilite wrote before it recorded the choice (Spark's string cast, then in the
# session's zone: UTC unless the profile set another). Neither depends on the session's zone.
EPOCH_MICROS, UTC_TEXT = "epoch_micros", "utc_text"
TIMESTAMP_KEY_TEXTS = (EPOCH_MICROS, UTC_TEXT)
_DAY_MICROS = 86_400_000_000


def key_text(value: Column, kind: Optional[T.DataType], timestamps: str = EPOCH_MICROS) -> Column:
    """The text of one key value: Spark's string cast, but for timestamps, whose cast follows
    the session's time zone (`spark.sql.session.timeZone`), so that a profile changing it would
    key every row anew. Built from zone-free functions only."""
    if isinstance(kind, T.TimestampType):
        micros = F.unix_micros(value)
        if timestamps == EPOCH_MICROS:
            return micros.cast("string")
        day = F.date_from_unix_date(F.floor(micros / F.lit(_DAY_MICROS)).cast("int"))
        of_day = F.pmod(micros, F.lit(_DAY_MICROS))
        seconds = (of_day % F.lit(60_000_000)).cast("decimal(16,0)") / F.lit(1_000_000)
        return F.make_timestamp_ntz(F.year(day), F.month(day), F.dayofmonth(day), (of_day / F.lit(3_600_000_000)).cast("int"),
                                    (of_day / F.lit(60_000_000) % 60).cast("int"), seconds).cast("string")
    if isinstance(kind, T.TimestampNTZType) and timestamps == EPOCH_MICROS:
        seconds = F.date_part(F.lit("SECOND"), value) * F.lit(1_000_000)  # decimal: whole and fraction
        parts = [(F.unix_date(value.cast("date")), _DAY_MICROS), (F.hour(value), 3_600_000_000),
                 (F.minute(value), 60_000_000), (seconds, 1)]
        return sum((part.cast("long") * F.lit(scale) for part, scale in parts), F.lit(0).cast("long")).cast("string")
    return value_text(value, kind)


def value_text(value: Column, kind: Optional[T.DataType]) -> Column:
    """Spark's string cast, but a decimal's text is its plain form (`0.00000001`) in every
    session: the cast writes Java's scientific form (`1E-8`, below 1e-6 at a scale of 7 or
    more) when `spark.sql.ansi.enabled` is off, and `try_cast` takes the ANSI form either way."""
    if isinstance(kind, T.DecimalType) and hasattr(value, "try_cast"):
        return value.try_cast("string")
    return value.cast("string")


def record_key(fields: Sequence[str], table: str, field_prefixed: bool,
               types: Optional[Sequence[T.DataType]] = None, refuse_ambiguous: bool = True,
               timestamps: str = EPOCH_MICROS) -> Column:
    """The record key of user-named key fields; a null key, or (`refuse_ambiguous`) a value that
    would make an ambiguous key (`ambiguous_key_value`), is an error naming the column and the
    value. `field_prefixed`: `f1:v1[,f2:v2]` as Hudi's complex key generator writes it (always
    with two or more fields); else one field's bare value. `types`: the fields' types, to skip
    the checks a type's text cannot fail and to write timestamps as `timestamps` says."""
    kinds = list(types) if types is not None else [None] * len(fields)
    if len(fields) == 1 and not field_prefixed:
        col = F.col(quote(fields[0]))
        text = key_text(col, kinds[0], timestamps)
        return F.when(
            col.isNull() | (text == ""),
            F.raise_error(F.lit(f"table {table}: record key column '{fields[0]}' is null or empty")),
        ).otherwise(text)
    parts: List[Column] = []
    for name, kind in zip(fields, kinds):
        value = key_text(F.col(quote(name)), kind, timestamps)
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


# Key column types whose text Arrow's cast makes as Spark's `cast(string)` does: the record keys
# of a table with virtual keys are made again from stored rows in write tasks (`stored_keys`).
ARROW_KEY_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType, T.BooleanType)


def stored_keys(columns: Sequence[Tuple[str, pa.Array]], field_prefixed: bool) -> pa.Array:
    """`record_key` of stored rows in Arrow ((name, values) of the key fields, named as the
    table schema spells them), for a table whose files hold no `_hoodie_record_key` (virtual
    keys). The rows were checked when they were written: nothing is refused here (a one-field
    key's null stays null)."""
    if len(columns) == 1 and not field_prefixed:
        return columns[0][1].cast(pa.string())
    parts = []
    for name, values in columns:
        text = values.cast(pa.string())
        text = pc.if_else(pc.equal(text, ""), pa.scalar(EMPTY_KEY_PART), text)
        parts.append(pc.binary_join_element_wise(f"{name}:", pc.fill_null(text, NULL_KEY_PART), ""))
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, ",")


@dataclass(frozen=True)
class VirtualKeys:
    """A table with virtual keys (`hoodie.populate.meta.fields=false`): Hudi's writer leaves the
    meta columns of its files null but `_hoodie_file_name`, and so does hudilite's. Write tasks
    that read stored rows make their record keys again from the key `fields` (as the table
    schema spells them)."""

    fields: Tuple[str, ...]
    field_prefixed: bool

    def keys(self, stored: pa.Table) -> pa.Array:
        by_lower = {n.lower(): n for n in stored.column_names}
        return stored_keys([(f, stored.column(by_lower[f.lower()]).combine_chunks()) for f in self.fields],
                           self.field_prefixed)

    def fill(self, stored: pa.Table, commit_time: str) -> pa.Table:
        """Stored rows as the writers' merge takes them: the five meta columns first, the record
        key made again and `commit_time` (their slice's instant: an unchanged row is told from a
        changed one by having one), then the data columns."""
        n = stored.num_rows
        made = {RECORD_KEY: self.keys(stored), COMMIT_TIME: pa.repeat(pa.scalar(commit_time, pa.string()), n)}
        meta = [made.get(c, stored.column(c) if c in stored.column_names else pa.nulls(n, pa.string()))
                for c in META_COLUMNS]
        data = [c for c in stored.column_names if c not in META_COLUMNS]
        return pa.table(meta + [stored.column(c) for c in data], names=list(META_COLUMNS) + data)


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
        value = value_text(F.col(quote(name)), kind)
        if isinstance(kind, T.DateType):  # as `PartitionFormat` refuses them
            day = F.col(quote(name))
            outside = (day < F.lit(_FIRST_DATE).cast("date")) | (day > F.lit(_LAST_DATE).cast("date"))
            value = F.when(outside, F.raise_error(F.concat(F.lit(f"{_date_outside(table, name)}: "), value))
                           ).otherwise(value)
        value = F.when(value.isNull() | (value == ""), F.lit(DEFAULT_PARTITION)).otherwise(value)
        # A folder name Hadoop and Hudi readers can list: no '/' (a sub-folder), no ':' (read as
        # a URI scheme), not '.' or '..' (a value of a plain-style partition would leave the table),
        # no control character (an object store's key cannot hold one: refused on every store alike).
        unusable = (value.contains("/") | value.contains(":") | value.isin(".", "..")
                    | value.rlike(CONTROL_CHARACTERS))
        value = F.when(
            unusable,
            F.raise_error(F.concat(F.lit(str(_unusable_folder_name(table, name, ""))), value)),
        ).otherwise(value)
        segments.append(F.concat(F.lit(f"{name}="), value) if hive_style else value)
    return F.concat_ws("/", *segments)


def _date_outside(table: str, name: str) -> str:
    return f"table {table}: partition column '{name}' has a date outside {_FIRST_DATE} to {_LAST_DATE}"


CONTROL_CHARACTERS = "[\\x00-\\x1f\\x7f]"  # a regular expression for Java's and for RE2 (Arrow)


def _unusable_folder_name(table: str, name: str, value: str) -> DataError:
    return DataError(f"table {table}: partition column '{name}' has a value that cannot be a folder name ('/' or ':' "
                     f"in it, or '.' or '..', or a control character): {value}")


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
                          pc.or_(pc.is_in(text, value_set=pa.array([".", ".."])),
                                 pc.match_substring_regex(text, CONTROL_CHARACTERS)))
        if pc.any(unusable).as_py():
            raise _unusable_folder_name(self.table, name, text.filter(unusable)[0].as_py())
        return text


# ---- Hudi's TimestampBasedKeyGenerator and CustomKeyGenerator --------------------------------
# A timestamp partition field's folder name is its value read as a point in time (a number of
# seconds, milliseconds, ... since 1970, or a date string in an input format) and printed in an
# output format (Joda pattern) in an output time zone. Hudi's settings, as its writer keeps them
# in hoodie.properties (Hudi 1.x; 0.15 keeps the formats and zone, not the type):
TIMEBASED = "hoodie.keygen.timebased."
TIMESTAMP_TYPE = TIMEBASED + "timestamp.type"
SCALAR_UNIT = TIMEBASED + "timestamp.scalar.time.unit"
INPUT_FORMAT = TIMEBASED + "input.dateformat"
INPUT_FORMAT_DELIMITER = TIMEBASED + "input.dateformat.list.delimiter.regex"
INPUT_ZONE = TIMEBASED + "input.timezone"
OUTPUT_FORMAT = TIMEBASED + "output.dateformat"
OUTPUT_ZONE = TIMEBASED + "output.timezone"
ZONE = TIMEBASED + "timezone"
DATE_TIME_PARSER = "hoodie.keygen.datetime.parser.class"
_DEFAULT_PARSER = "org.apache.hudi.keygen.parser.HoodieDateTimeParser"

# timestamp.type -> microseconds per unit of the value (None: a date string)
_TIMESTAMP_TYPES = {"UNIX_TIMESTAMP": "SECONDS", "EPOCHMILLISECONDS": "MILLISECONDS",
                    "EPOCHMICROSECONDS": "MICROSECONDS", "SCALAR": None, "DATE_STRING": None}
_UNIT_MS = {"NANOSECONDS": (1, 1_000_000), "MICROSECONDS": (1, 1000), "MILLISECONDS": (1, 1), "SECONDS": (1000, 1),
            "MINUTES": (60_000, 1), "HOURS": (3_600_000, 1), "DAYS": (86_400_000, 1)}
# Joda pattern letters -> strftime, by the number of times the letter repeats.
_JODA = {("y", 4): "%Y", ("y", 2): "%y", ("M", 2): "%m", ("d", 2): "%d", ("H", 2): "%H", ("m", 2): "%M", ("s", 2): "%S"}
SIMPLE, TIMESTAMP = "SIMPLE", "TIMESTAMP"


def _setting_error(table: str, setting: str, why: str):
    from ..errors import ConfigurationError
    return ConfigurationError(f"table {table}: {setting}: {why}")


def joda_to_strftime(pattern: str, table: str, setting: str) -> str:
    """A Joda date pattern as a strftime format, for the letters hudilite formats and parses
    (yyyy, yy, MM, dd, HH, mm, ss) and literal text ('quoted', or any other character)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":  # quoted text, where '' is a quote; '' outside quotes is one too
            if pattern.startswith("''", i):
                out.append("'")
                i += 2
                continue
            j, text = i + 1, []
            while True:
                if j >= len(pattern):
                    raise _setting_error(table, setting, f"the pattern '{pattern}' has an unclosed quote")
                if pattern.startswith("''", j):
                    text.append("'")
                    j += 2
                elif pattern[j] == "'":
                    break
                else:
                    text.append(pattern[j])
                    j += 1
            out.append("".join(text).replace("%", "%%"))
            i = j + 1
        elif ch.isalpha():
            run = len(pattern) - i - len(pattern[i:].lstrip(ch))
            code = _JODA.get((ch, run))
            if code is None:
                raise _setting_error(table, setting, (
                    f"the pattern '{pattern}' holds '{ch * run}'; hudilite formats the pattern letters yyyy, yy, MM, "
                    "dd, HH, mm and ss and quoted text, not that one"))
            out.append(code)
            i += run
        else:
            out.append("%%" if ch == "%" else ch)
            i += 1
    return "".join(out)


def java_zone(name: Optional[str], table: str, setting: str) -> Optional[str]:
    """A java.util.TimeZone id as a zone pyarrow knows: IANA names, GMT/UTC, `GMT+8`,
    `GMT+08:00`; None for an empty setting. Java takes an unknown id as GMT, silently: refused."""
    import re
    if name is None or not name.strip():
        return None
    name = name.strip()
    if name in ("GMT", "UTC", "Z", "UT"):
        return "UTC"
    offset = re.fullmatch(r"(?:GMT|UTC)([+-])(\d{1,2})(?::?(\d{2}))?", name)
    if offset:
        sign, hours, minutes = offset.group(1), int(offset.group(2)), int(offset.group(3) or 0)
        if hours <= 23 and minutes <= 59:
            return f"{sign}{hours:02d}:{minutes:02d}"
    elif "/" in name:
        try:
            import zoneinfo
            zoneinfo.ZoneInfo(name)
            return name
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    raise _setting_error(table, setting, f"'{name}' is not a time zone hudilite knows (an IANA name such as "
                         "Asia/Tokyo, UTC, or GMT+08:00); Java would read it as GMT without a word")


@dataclass(frozen=True)
class TimestampPartition:
    """One partition field of Hudi's TimestampBasedKeyGenerator (alone, or a `field:TIMESTAMP`
    of CustomKeyGenerator): `folder_names` makes the folder name of each value.

    Numbers (UNIX_TIMESTAMP, EPOCHMILLISECONDS, EPOCHMICROSECONDS, SCALAR with its time unit)
    are truncated to milliseconds as Java's TimeUnit does, and printed in the output zone; a
    date string (DATE_STRING) is parsed with the input format(s) in the input zone and printed
    in the output zone, or as it reads when no output zone is set. A null is the value 1 (a
    date string: 1970-01-01 00:00:00.001), as Hudi's writer makes it. The zone setting
    `timezone` sets both. With no zone Java uses the JVM's default zone; hudilite takes UTC
    (the zone of Hudi's Spark jobs on EMR, Glue and Dataproc)."""

    field: str
    timestamp_type: str
    output_format: str  # strftime
    input_formats: Tuple[str, ...] = ()  # strftime; DATE_STRING only
    unit: Tuple[int, int] = (1, 1)  # (multiplier, divisor) to milliseconds
    input_zone: Optional[str] = None
    output_zone: Optional[str] = None
    table: str = ""

    @classmethod
    def from_settings(cls, settings: Dict[str, str], field: str, table: str) -> "TimestampPartition":
        """From Hudi's `hoodie.keygen.timebased.*` settings; what hudilite cannot do as Hudi does
        is an error naming the setting."""
        parser = settings.get(DATE_TIME_PARSER) or _DEFAULT_PARSER
        if parser != _DEFAULT_PARSER:
            raise _setting_error(table, DATE_TIME_PARSER, f"{parser} is a date parser of its own; hudilite makes "
                                 f"partition paths as Hudi's default ({_DEFAULT_PARSER}) does")
        kind = (settings.get(TIMESTAMP_TYPE) or "").strip().upper()
        if not kind:
            raise _setting_error(table, TIMESTAMP_TYPE, (
                "not set in .hoodie/hoodie.properties (Hudi 0.15 does not keep it there), so hudilite cannot tell how "
                f"field '{field}' makes partition paths; add the line {TIMESTAMP_TYPE}=<type> with the value the Java "
                "writer runs with (and delete .hoodie/.hoodie.properties.crc, Hadoop's checksum of the old file)"))
        if kind not in _TIMESTAMP_TYPES:
            raise _setting_error(table, TIMESTAMP_TYPE, (
                f"{kind}: hudilite makes partition paths for {', '.join(_TIMESTAMP_TYPES)}, not this one"))
        output = settings.get(OUTPUT_FORMAT)
        if not output:
            raise _setting_error(table, OUTPUT_FORMAT, "not set; Hudi's TimestampBasedKeyGenerator requires it")
        zone = settings.get(ZONE)
        if zone is not None:  # as Hudi: `timezone` sets both when present
            input_zone = output_zone = java_zone(zone, table, ZONE) or "UTC"
        else:
            input_zone = java_zone(settings.get(INPUT_ZONE), table, INPUT_ZONE)
            output_zone = java_zone(settings.get(OUTPUT_ZONE), table, OUTPUT_ZONE)
        unit_name = _TIMESTAMP_TYPES[kind]
        if kind == "SCALAR":
            unit_name = (settings.get(SCALAR_UNIT) or "SECONDS").strip().upper()
            if unit_name not in _UNIT_MS:
                raise _setting_error(table, SCALAR_UNIT, f"'{unit_name}' is not a java.util.concurrent.TimeUnit")
        inputs: Tuple[str, ...] = ()
        if kind == "DATE_STRING":
            import re
            text = settings.get(INPUT_FORMAT) or ""
            if not text.strip():
                raise _setting_error(table, INPUT_FORMAT, "not set; Hudi requires it with timestamp.type DATE_STRING")
            delimiter = settings.get(INPUT_FORMAT_DELIMITER) or ","
            inputs = tuple(joda_to_strftime(p.strip(), table, INPUT_FORMAT) for p in re.split(delimiter, text))
        return cls(field=field, timestamp_type=kind, output_format=joda_to_strftime(output, table, OUTPUT_FORMAT),
                   input_formats=inputs, unit=_UNIT_MS.get(unit_name, (1, 1)), input_zone=input_zone,
                   output_zone=output_zone, table=table)

    @property
    def depth(self) -> int:
        """Folders a value makes (`yyyy/MM/dd`: 3)."""
        return self.output_format.count("/") + 1

    def check_type(self, kind: T.DataType) -> None:
        numeric = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
        wanted = T.StringType if self.timestamp_type == "DATE_STRING" else numeric
        if not isinstance(kind, wanted):
            what = "a string" if self.timestamp_type == "DATE_STRING" else "an integer"
            raise _setting_error(self.table, TIMESTAMP_TYPE, (
                f"{self.timestamp_type} makes partition paths of {what} column; partition column '{self.field}' is "
                f"{kind.simpleString()}"))

    def folder_names(self, values: pa.Array) -> pa.Array:
        """The folder name (no `field=`) of each value."""
        if self.timestamp_type == "DATE_STRING":
            return self._from_text(values.cast(pa.string()))
        millis = pc.fill_null(values.cast(pa.int64()), 1)
        multiply, divide = self.unit
        if multiply != 1:
            millis = pc.multiply_checked(millis, multiply)
        if divide != 1:  # truncated toward zero, as TimeUnit.convert
            millis = pc.divide(millis, divide)
        instants = millis.cast(pa.timestamp("ms", tz="UTC"))
        return self._print(instants.cast(pa.timestamp("ms", tz=self.output_zone or "UTC")))

    def _print(self, instants: pa.Array) -> pa.Array:
        seconds = pc.floor_temporal(instants, unit="second").cast(pa.timestamp("s", tz=instants.type.tz))
        return pc.strftime(seconds, format=self.output_format)

    def _null_text(self) -> str:
        """What Hudi's writer puts in place of a null date string: 1 ms after 1970 printed in the
        first input format, in the input zone (else the output zone, else GMT)."""
        import datetime as dt
        import zoneinfo
        zone_name = self.input_zone or self.output_zone or "UTC"
        if zone_name[0] in "+-":
            sign = -1 if zone_name[0] == "-" else 1
            zone = dt.timezone(sign * dt.timedelta(hours=int(zone_name[1:3]), minutes=int(zone_name[4:6])))
        else:
            zone = zoneinfo.ZoneInfo(zone_name)
        return dt.datetime.fromtimestamp(0.001, zone).strftime(self.input_formats[0])

    def _from_text(self, text: pa.Array) -> pa.Array:
        text = pc.fill_null(text, self._null_text())
        parsed = None
        for fmt in self.input_formats:
            one = pc.strptime(text, format=fmt, unit="s", error_is_null=True)
            parsed = one if parsed is None else pc.coalesce(parsed, one)
        failed = pc.is_null(parsed)
        if pc.any(failed).as_py():
            raise DataError(f"table {self.table}: partition column '{self.field}' has the value "
                            f"'{text.filter(failed)[0].as_py()}', which the input date format ({INPUT_FORMAT}) "
                            "does not read")
        if self.output_zone is None:  # printed in the zone it was parsed in: as it reads
            return pc.strftime(parsed, format=self.output_format)
        local = pc.assume_timezone(parsed, timezone=self.input_zone or "UTC", ambiguous="earliest",
                                   nonexistent="earliest")
        return self._print(local.cast(pa.timestamp("s", tz=self.output_zone)))


@dataclass(frozen=True)
class KeyGenerator:
    """How a table's key generator makes record keys and partition paths, for the generators
    hudilite writes: Simple, Complex, Nonpartitioned (by the table's shape), TimestampBased and
    Custom. `partitions[i]`: None for a field whose value is its folder name (SIMPLE), else its
    `TimestampPartition`."""

    partition_fields: Tuple[str, ...]
    partitions: Tuple[Optional[TimestampPartition], ...]
    hive_style: bool
    table: str

    @property
    def plain(self) -> bool:
        """Every partition folder is a value as it reads (Simple/Complex partition paths)."""
        return all(p is None for p in self.partitions)

    @property
    def depth(self) -> int:
        return sum(1 if p is None else p.depth for p in self.partitions)

    def segment(self, name: str, index: int, values: pa.Array) -> pa.Array:
        """The path segment (`field=` included when hive style) of partition field `index`."""
        timestamp = self.partitions[index]
        text = PartitionFormat((name,), False, self.table)._folder_name(name, values) if timestamp is None \
            else timestamp.folder_names(values)
        return pc.binary_join_element_wise(f"{name}=", text, "") if self.hive_style else text

    def paths(self, columns: Sequence[Tuple[str, pa.Array]]) -> pa.Array:
        """The partition paths of rows whose partition field values are `columns` ((name,
        values) in the order of the fields)."""
        segments = [self.segment(name, i, values) for i, (name, values) in enumerate(columns)]
        return segments[0] if len(segments) == 1 else pc.binary_join_element_wise(*segments, "/")

    def column(self, names: Sequence[str], types: Sequence[T.DataType]) -> Column:
        """`paths` as a Spark column over the rows' partition columns (spelled `names`)."""
        for name, kind, timestamp in zip(names, types, self.partitions):
            if timestamp is not None:
                timestamp.check_type(kind)
            elif not formats_in_task([kind]):
                raise DataError(f"table {self.table}: partition column '{name}' is {kind.simpleString()}; next to a "
                                "timestamp partition field hudilite makes paths of string, integer and date columns")
        generator = self
        names = list(names)
        if hasattr(F, "arrow_udf"):  # pyspark 4.1+: the values as Arrow arrays
            def paths(*arrays: pa.Array) -> pa.Array:
                return generator.paths(list(zip(names, arrays)))
            import warnings
            with warnings.catch_warnings():  # it prefers type hints, which cannot spell *arrays
                warnings.simplefilter("ignore")
                udf = F.arrow_udf(paths, T.StringType(), F.ArrowUDFType.SCALAR)
        else:
            def paths(*series):
                arrays = [pa.Array.from_pandas(s) for s in series]
                return generator.paths(list(zip(names, arrays))).to_pandas()
            udf = F.pandas_udf(paths, T.StringType(), F.PandasUDFType.SCALAR)
        return udf(*[F.col(quote(n)) for n in names])
