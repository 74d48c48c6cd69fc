"""A table's keys: how its record keys and partition paths are made from rows (`keygen`), as
its properties declare and, where they are silent, as its stored files show: the key format
(`field:value` or bare), the text of timestamp key values, a CustomKeyGenerator's partition
field types. What a stored file shows is read once per table handle.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from typing import List, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column
from pyspark.sql import types as T

from .errors import HudiliteError
from .format import properties as props
from .format.keygen import (ARROW_KEY_TYPES, EPOCH_MICROS, SIMPLE, TIMESTAMP, TIMESTAMP_KEY_TEXTS, UTC_TEXT,
                            KeyGenerator, TimestampPartition, VirtualKeys, partition_path, record_key)
from .format.properties import KEYGEN_COMPLEX, KEYGEN_CUSTOM, KEYGEN_NON_PARTITIONED, KEYGEN_SIMPLE, KEYGEN_TIMESTAMP
from .format.schema import RECORD_KEY, resolve_columns


class TableKeys:
    """The keys of the table a `TableContext` holds (its config, storage, timeline, schema)."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._field_prefixed: Optional[bool] = None  # the key format, once known (`field_prefixed`)
        self._generator: Optional[KeyGenerator] = None  # how partition paths are made (`generator`)
        self._timestamp_text: Optional[str] = None  # the timestamp key text the stored keys show, once read

    def record_key(self, data_schema: T.StructType, refuse: bool = True) -> Column:
        """The record key of typed rows (`typed`), in the table's key format. Values that would
        make an ambiguous key are refused (`refuse`), but in reads of stored rows of a table with
        virtual keys: their keys are what Hudi made of its rows. On such a table the key fields
        must be of types whose keys write tasks make again from stored rows (`VirtualKeys`)."""
        columns = resolve_columns(self._ctx.config.record_key_fields, data_schema)
        types = [data_schema[c].dataType for c in columns]
        if refuse and self._ctx.config.virtual_keys:
            for name, kind in zip(columns, types):
                if not isinstance(kind, ARROW_KEY_TYPES):
                    raise self._ctx.error(
                        f"record key column '{name}' is {kind.simpleString()}; with virtual keys (hoodie.populate.meta."
                        "fields=false) hudilite makes keys of string, integer, date and boolean columns")
        return record_key(columns, self._ctx.name, self.field_prefixed(), types, refuse_ambiguous=refuse,
                          timestamps=self.timestamp_text(columns, types))

    def timestamp_text(self, columns: Sequence[str], types: Sequence[T.DataType]) -> str:
        """How this table writes timestamp key values (`keygen.TIMESTAMP_KEY_TEXTS`): as
        hudilite recorded it at creation, else as a stored key shows it against its own row's
        value (a Java writer's are epoch microseconds, an older hudilite's text), else Hudi's
        epoch microseconds. A stored key in neither form (text in another time zone, Hudi's
        `consistent.logical.timestamp` text) is refused: a write would key its rows anew."""
        stamps = [c for c, t in zip(columns, types) if isinstance(t, (T.TimestampType, T.TimestampNTZType))]
        if self._ctx.config.timestamp_keys not in (None, *TIMESTAMP_KEY_TEXTS):
            raise self._ctx.error(f"{props.TIMESTAMP_KEYS_KEY}={self._ctx.config.timestamp_keys} is not one of "
                             f"{', '.join(TIMESTAMP_KEY_TEXTS)}")
        if self._ctx.config.timestamp_keys or not stamps or self._ctx.config.virtual_keys:  # virtual: no key is stored
            return self._ctx.config.timestamp_keys or EPOCH_MICROS
        if self._timestamp_text is None:
            self._timestamp_text = self._stored_timestamp_text(stamps)
        return self._timestamp_text

    def _stored_timestamp_text(self, stamps: Sequence[str]) -> str:
        for base_file in self._ctx.timeline.view().latest_base_files():
            with self._ctx.storage.open_input(base_file.path) as source:
                parquet = pq.ParquetFile(source)
                names = {n.lower(): n for n in parquet.schema_arrow.names}
                if not parquet.metadata.num_rows or RECORD_KEY not in names.values() or any(
                        c.lower() not in names for c in stamps):
                    continue  # an empty slice (a delete's) shows nothing
                row = parquet.read_row_group(0, columns=[RECORD_KEY] + [names[c.lower()] for c in stamps]).slice(0, 1)
            key = row.column(RECORD_KEY)[0].as_py() or ""
            found = None
            for column in stamps:
                values = row.column(names[column.lower()])  # in any unit a writer chose (Spark's INT96: ns)
                micros = values.cast(pa.timestamp("us", tz=values.type.tz)).cast(pa.int64())[0].as_py()
                if micros is None:
                    continue
                forms = {EPOCH_MICROS: str(micros), UTC_TEXT: _spark_timestamp_text(micros)}
                if self.field_prefixed():
                    matches = [f for f, text in forms.items()
                               if re.search(rf"(^|,){re.escape(column)}:{re.escape(text)}(,|$)", key)]
                else:
                    matches = [f for f, text in forms.items() if key == text]
                if not matches:
                    raise self._ctx.error(
                        f"its record key '{key}' does not hold timestamp column '{column}' as hudilite writes it "
                        f"({' or '.join(repr(t) for t in forms.values())}): written in another session time zone, or "
                        "by a Java writer with hoodie.datasource.write.keygenerator.consistent.logical.timestamp."
                        "enabled, so a write would key its rows anew; rebuild the table (--full-refresh)")
                found = matches[0]
            if found is not None:
                return found
        return EPOCH_MICROS

    def virtual(self) -> Optional[VirtualKeys]:
        """How write tasks make stored rows' keys on a table with virtual keys; None otherwise."""
        if not self._ctx.config.virtual_keys:
            return None
        schema = self._ctx.committed_schema()
        fields = self._ctx.config.record_key_fields
        if schema is not None and all(f.lower() in {n.lower() for n in schema.names} for f in fields):
            fields = resolve_columns(fields, schema)
        return VirtualKeys(tuple(fields), self.field_prefixed())

    def field_prefixed(self) -> bool:
        """Whether keys read `field:value` (see `keygen`), as the declared key generator writes
        them. A complex key on one field was written bare by Hudi 0.14.1 to 1.0.2 (HUDI-7001)
        and by hudilite before 0.2: a table that holds keys keeps the format it has. Timestamp
        and Custom generators make a one-field key as the simple one does (bare), Custom a key
        of more fields as the complex one."""
        if self._field_prefixed is None:
            generator, fields = self._ctx.config.keygen_class, self._ctx.config.record_key_fields
            if generator not in (KEYGEN_SIMPLE, KEYGEN_COMPLEX, KEYGEN_NON_PARTITIONED, KEYGEN_TIMESTAMP, KEYGEN_CUSTOM):
                raise self._ctx.error(f"its key generator {generator} is not one hudilite writes keys for (Simple, Complex, "
                                 "Nonpartitioned, TimestampBased, Custom); it can be read, not written")
            if generator == KEYGEN_TIMESTAMP and len(fields) > 1:
                raise self._ctx.error(f"hoodie.table.recordkey.fields holds {len(fields)} fields; Hudi's "
                                 "TimestampBasedKeyGenerator makes a key of one field (CustomKeyGenerator of several)")
            stored = not self._ctx.config.virtual_keys and self._stored_prefix_or(True)
            prefixed = len(fields) > 1 or (generator == KEYGEN_COMPLEX and stored)
            self._field_prefixed = prefixed
        return self._field_prefixed

    def _stored_prefix_or(self, default: bool) -> bool:
        """Whether a stored key starts with `<key field>:`, or `default` when none is stored."""
        for base_file in self._ctx.timeline.view().latest_base_files():
            with self._ctx.storage.open_input(base_file.path) as source:
                parquet = pq.ParquetFile(source)
                for group in range(parquet.metadata.num_row_groups):
                    keys = parquet.read_row_group(group, columns=[RECORD_KEY]).column(0).drop_null()
                    if len(keys):
                        return keys[0].as_py().startswith(self._ctx.config.record_key_fields[0] + ":")
        return default

    def partition_path(self, data_schema: T.StructType) -> Column:
        """The partition path of typed rows (`typed`)."""
        columns = resolve_columns(self._ctx.config.partition_fields, data_schema)
        types = [data_schema[c].dataType for c in columns]
        generator = self.generator()
        if not generator.plain:
            return generator.column(columns, types)
        return partition_path(columns, self._ctx.config.hive_style_partitioning, self._ctx.name, types)

    def generator(self) -> KeyGenerator:
        """How the table's key generator makes partition paths: each field's value as it reads
        (Simple, Complex), or read as a time (TimestampBased; a `field:TIMESTAMP` of Custom),
        from the table's `hoodie.keygen.timebased.*` settings. A setting hudilite cannot follow
        is an error naming it."""
        if self._generator is None:
            config, generator = self._ctx.config, self._ctx.config.keygen_class
            fields = tuple(config.partition_fields)
            if generator == KEYGEN_TIMESTAMP:
                if len(fields) != 1:
                    raise self._ctx.error(f"hoodie.table.partition.fields holds {len(fields)} fields; Hudi's "
                                     "TimestampBasedKeyGenerator partitions by one (CustomKeyGenerator by several)")
                kinds = [TIMESTAMP]
            elif generator == KEYGEN_CUSTOM:
                kinds = self._custom_partition_types()
            else:
                kinds = [SIMPLE] * len(fields)
            self._generator = KeyGenerator(
                fields, tuple(TimestampPartition.from_settings(config.keygen_settings, f, self._ctx.name) if k == TIMESTAMP
                              else None for f, k in zip(fields, kinds)),
                config.hive_style_partitioning, self._ctx.name)
        return self._generator

    def _custom_partition_types(self) -> List[str]:
        """CustomKeyGenerator's type of each partition field: as hudilite recorded them at
        creation (`properties.PARTITION_TYPES_KEY`), else the ones that make the partition
        paths the table holds (Hudi's writer keeps only the field names at version 6)."""
        fields = self._ctx.config.partition_fields
        if not fields:  # a non-partitioned table
            return []
        declared = [t.upper() for t in (self._ctx.config.partition_types or [])]
        if declared:
            if len(declared) != len(fields) or any(t not in (SIMPLE, TIMESTAMP) for t in declared):
                raise self._ctx.error(f"{props.PARTITION_TYPES_KEY}={','.join(declared)} does not give SIMPLE or TIMESTAMP "
                                 f"for each of the partition fields {', '.join(fields)}")
            return declared
        samples = self._stored_partition_samples()
        if not samples:
            raise self._ctx.error(f"its CustomKeyGenerator's partition field types are not in hoodie.properties and it holds "
                             f"no rows to tell them from: add {props.PARTITION_TYPES_KEY}=<SIMPLE or TIMESTAMP for each "
                             f"of {', '.join(fields)}> to .hoodie/hoodie.properties")
        fitting = []
        for kinds in itertools.product((SIMPLE, TIMESTAMP), repeat=len(fields)):
            try:
                generator = KeyGenerator(tuple(fields), tuple(
                    TimestampPartition.from_settings(self._ctx.config.keygen_settings, f, self._ctx.name) if k == TIMESTAMP
                    else None for f, k in zip(fields, kinds)), self._ctx.config.hive_style_partitioning, self._ctx.name)
                if all(generator.paths(columns).to_pylist() == [path] for path, columns in samples):
                    fitting.append(list(kinds))
            except HudiliteError:
                continue
        if len(fitting) != 1:
            seen = "no type for each field makes" if not fitting else "more than one choice of types makes"
            raise self._ctx.error(
                f"its CustomKeyGenerator's partition field types are not in hoodie.properties, and {seen} the partition "
                f"paths it holds ({samples[0][0]}, ...): add {props.PARTITION_TYPES_KEY}=<SIMPLE or TIMESTAMP for each "
                f"of {', '.join(fields)}> to .hoodie/hoodie.properties, and for TIMESTAMP fields the Java writer's "
                "hoodie.keygen.timebased.* settings (timestamp.type, output.dateformat, ...); then delete "
                ".hoodie/.hoodie.properties.crc (Hadoop's checksum of the old file) if there is one")
        return fitting[0]

    def _stored_partition_samples(self, limit: int = 8):
        """(partition path, [(field, one-value array)]) of a row in each of a few base files."""
        samples = []
        for base_file in self._ctx.timeline.view().latest_base_files()[:limit]:
            with self._ctx.storage.open_input(base_file.path) as source:
                parquet = pq.ParquetFile(source)
                names = {n.lower(): n for n in parquet.schema_arrow.names}
                if any(f.lower() not in names for f in self._ctx.config.partition_fields) or not parquet.metadata.num_rows:
                    continue
                wanted = [names[f.lower()] for f in self._ctx.config.partition_fields]
                rows = parquet.read_row_group(0, columns=wanted).slice(0, 1)
            if rows.num_rows:
                samples.append((base_file.partition, [(n, rows.column(n).combine_chunks()) for n in wanted]))
        return samples


def _spark_timestamp_text(micros: int) -> str:
    """Spark's text of a timestamp in UTC: `yyyy-MM-dd HH:mm:ss[.f]`, trailing zeros dropped."""
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    text = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} {moment:%H:%M:%S}"
    return text + (f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else "")
