"""`.hoodie/hoodie.properties`: the table's configuration, in java.util.Properties syntax."""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..errors import ConfigurationError

TABLE_VERSION = "6"  # what hudilite creates tables at unless told (`TableConfig.table_version`)
READ_VERSIONS = ("6", "8", "9")  # 8: Hudi 1.0, 9: Hudi 1.1 (timeline layout 2); 7 was never a table's
TABLE_VERSIONS = tuple(int(v) for v in READ_VERSIONS)  # what it reads, continues and creates
# Hudi 1.x's record merge modes and the strategy ids Hudi 1.0 records for them (1.1 drops the ids).
EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING = "EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"
MERGE_STRATEGY_IDS = {EVENT_TIME_ORDERING: "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
                       COMMIT_TIME_ORDERING: "ce9acb64-bde0-424c-9b91-f6ebba25356d"}
PAYLOADS = {EVENT_TIME_ORDERING: "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
             COMMIT_TIME_ORDERING: "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"}

KEYGEN_SIMPLE = "org.apache.hudi.keygen.SimpleKeyGenerator"
KEYGEN_COMPLEX = "org.apache.hudi.keygen.ComplexKeyGenerator"
KEYGEN_NON_PARTITIONED = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
KEYGEN_TIMESTAMP = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
KEYGEN_CUSTOM = "org.apache.hudi.keygen.CustomKeyGenerator"
# Hudi 1.x records `hoodie.table.keygenerator.type` instead of the class; its Avro twins make
# the same keys and paths.
_KEYGEN_TYPES = {"SIMPLE": KEYGEN_SIMPLE, "COMPLEX": KEYGEN_COMPLEX, "NON_PARTITION": KEYGEN_NON_PARTITIONED,
                 "TIMESTAMP": KEYGEN_TIMESTAMP, "CUSTOM": KEYGEN_CUSTOM}
_KEYGEN_TWINS = {f"org.apache.hudi.keygen.{n}AvroKeyGenerator": f"org.apache.hudi.keygen.{n}KeyGenerator"
                 for n in ("Simple", "Complex", "Nonpartitioned", "TimestampBased", "Custom")}
KEYGEN_SETTINGS_PREFIX = "hoodie.keygen."  # TimestampBasedKeyGenerator's settings (`keygen.TIMEBASED`)
# CustomKeyGenerator's partition field types (SIMPLE, TIMESTAMP), in the order of the fields: ours.
# Hudi's writer takes them with each write (`field:TYPE` in hoodie.datasource.write.partitionpath.field)
# and keeps only the field names at table version 6.
PARTITION_TYPES_KEY = "hudilite.keygen.partition.types"

# How base files are encoded. compact: record keys and seqnos delta-encoded, zstd (a fraction
# of a byte per key; readers on Spark 3.3+ / parquet-mr 1.12+). portable: dictionary and plain
# encodings with snappy, which every Parquet reader Hudi runs on reads (Spark 3.2 and older too).
COMPACT, PORTABLE = "compact", "portable"
PARQUET_ENCODINGS = (COMPACT, PORTABLE)
PARQUET_ENCODING_KEY = "hudilite.parquet.encoding"  # ours: Hudi's Java side ignores it
# How a timestamp record key value is written (`keygen.TIMESTAMP_KEY_TEXTS`): set when hudilite
# creates a table; a table without it keeps what its stored keys show (`TableContext`).
TIMESTAMP_KEYS_KEY = "hudilite.keygen.timestamp.keys"


def escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch in "\\:=#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) > 126:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


SAVED_BY_HUDILITE = "#Properties saved on hudilite"


def dumps(props: Dict[str, str], header: str = SAVED_BY_HUDILITE) -> str:
    """`props` as a Java properties file. The header tells our tables from those Hudi's writer
    made (`TableConfig.from_properties(ours=...)`): a Java table we update keeps another."""
    lines = [header]
    lines += [f"{escape(k, True)}={escape(v, False)}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


def loads(text: str) -> Dict[str, str]:
    props: Dict[str, str] = {}
    logical: List[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry, logical = "".join(logical), []
        key, value = _split_entry(entry)
        props[unescape(key)] = unescape(value)
    return props


def _split_entry(entry: str):
    i = 0
    while i < len(entry):
        ch = entry[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            key, rest = entry[:i], entry[i:].lstrip(" \t")
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t")
            return key, rest
        i += 1
    return entry, ""


@dataclass
class TableConfig:
    """What a hudilite table fixes at creation."""

    name: str
    partition_fields: List[str] = field(default_factory=list)
    record_key_fields: List[str] = field(default_factory=list)  # empty: auto-generated keys
    precombine_field: Optional[str] = None
    database: str = "default"
    hive_style_partitioning: bool = True
    create_schema: Optional[str] = None  # Avro, as Hudi's Java writer records it at creation
    key_generator: Optional[str] = None  # as declared by the table; None: by its shape
    not_writable: Optional[str] = None  # why hudilite may read but not write it (a Java writer's settings)
    parquet_encoding: str = COMPACT
    virtual_keys: bool = False  # hoodie.populate.meta.fields=false: files hold no meta columns
    keygen_settings: Dict[str, str] = field(default_factory=dict)  # hoodie.keygen.* (timestamp partition paths)
    partition_types: Optional[List[str]] = None  # CustomKeyGenerator: SIMPLE/TIMESTAMP per partition field
    archive_folder: str = "archived"  # hoodie.archivelog.folder, under .hoodie
    timestamp_keys: Optional[str] = None  # TIMESTAMP_KEYS_KEY; None: as the stored keys show
    table_version: int = int(TABLE_VERSION)
    # Timeline layout 2 (table versions 8, 9): the active timeline's folder under .hoodie
    # (hoodie.timeline.path) and the LSM history's under that (hoodie.timeline.history.path).
    # None: layout 1, whose instants are in .hoodie itself.
    timeline_folder: Optional[str] = None
    history_folder: str = "history"
    merge_mode: Optional[str] = None  # hoodie.record.merge.mode (Hudi 1.x); None: by the precombine field

    @property
    def stored_ordering_field(self) -> Optional[str]:
        """The field an incoming row must not be older than the stored row by: the precombine
        field, unless the table orders by commit time (Hudi 1.x's COMMIT_TIME_ORDERING: the
        latest write wins; the field then only chooses among one batch's rows of a key)."""
        return None if self.merge_mode == COMMIT_TIME_ORDERING else self.precombine_field

    def check_new(self) -> None:
        """Settings a new table is created with."""
        if self.table_version not in TABLE_VERSIONS:
            raise ConfigurationError(f"table {self.name}: hudi_table_version {self.table_version} is not one of "
                                     f"{', '.join(READ_VERSIONS)}")
        if self.parquet_encoding not in PARQUET_ENCODINGS:
            raise ConfigurationError(f"table {self.name}: parquet_encoding '{self.parquet_encoding}' is not one of "
                                     f"{', '.join(PARQUET_ENCODINGS)}")
        if self.virtual_keys and self.auto_keys:
            raise ConfigurationError(f"table {self.name}: virtual keys (hoodie.populate.meta.fields=false) need a record "
                                     "key: auto-generated keys exist only in _hoodie_record_key, which such a table "
                                     "leaves empty")

    def layout(self) -> tuple:
        """What a rebuild with a new layout changes (it is built as another table)."""
        return (self.name, self.partition_fields, self.record_key_fields, self.precombine_field,
                self.parquet_encoding, self.virtual_keys)

    @property
    def auto_keys(self) -> bool:
        return not self.record_key_fields

    @property
    def keygen_class(self) -> str:
        if self.key_generator:
            return _KEYGEN_TWINS.get(self.key_generator, self.key_generator)
        if not self.partition_fields:
            return KEYGEN_NON_PARTITIONED
        if len(self.record_key_fields) > 1 or len(self.partition_fields) > 1:
            return KEYGEN_COMPLEX
        return KEYGEN_SIMPLE

    @property
    def keygen_type(self) -> Optional[str]:
        """Hudi 1.x's name of the key generator (`hoodie.table.keygenerator.type`); None for one
        it has no name for."""
        return {cls: name for name, cls in _KEYGEN_TYPES.items()}.get(self.keygen_class)

    def to_properties(self) -> Dict[str, str]:
        props = {
            "hoodie.table.name": self.name,
            "hoodie.database.name": self.database,
            "hoodie.table.type": "COPY_ON_WRITE",
            "hoodie.table.version": str(self.table_version),
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.table.keygenerator.class": self.keygen_class,
            "hoodie.table.partition.fields": ",".join(self.partition_fields),
            "hoodie.populate.meta.fields": str(not self.virtual_keys).lower(),
            "hoodie.datasource.write.hive_style_partitioning": str(self.hive_style_partitioning).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.timeline.timezone": "UTC",
            "hoodie.archivelog.folder": self.archive_folder,
            "hoodie.table.checksum": str(table_checksum(self.database, self.name)),
            PARQUET_ENCODING_KEY: self.parquet_encoding,
        }
        if self.record_key_fields:
            props["hoodie.table.recordkey.fields"] = ",".join(self.record_key_fields)
        if self.precombine_field:
            props["hoodie.table.precombine.field"] = self.precombine_field
        if self.create_schema:
            props["hoodie.table.create.schema"] = self.create_schema
        props.update(self.keygen_settings)
        if self.partition_types:
            props[PARTITION_TYPES_KEY] = ",".join(self.partition_types)
        if self.timestamp_keys:
            props[TIMESTAMP_KEYS_KEY] = self.timestamp_keys
        if self.table_version >= 8:
            self._hudi_1x_properties(props)
        return props

    def _hudi_1x_properties(self, props: Dict[str, str]) -> None:
        """The keys Hudi 1.0 (table version 8) and 1.1 (9) write at a table's creation on top of
        version 6's: timeline layout 2 and where it lives, the merge mode (event time with an
        ordering field, else commit time), the key generator by its type; 1.1 names the ordering
        field `ordering.fields`, records no payload class or strategy id, and the table format."""
        mode = EVENT_TIME_ORDERING if self.precombine_field else COMMIT_TIME_ORDERING
        props.update({
            "hoodie.timeline.layout.version": "2",
            "hoodie.table.initial.version": str(self.table_version),
            "hoodie.timeline.path": self.timeline_folder or "timeline",
            "hoodie.timeline.history.path": self.history_folder,
            "hoodie.record.merge.mode": mode,
        })
        if self.keygen_type:
            props["hoodie.table.keygenerator.type"] = self.keygen_type
            del props["hoodie.table.keygenerator.class"]
        if self.table_version == 8:
            props["hoodie.record.merge.strategy.id"] = MERGE_STRATEGY_IDS[mode]
            props["hoodie.compaction.payload.class"] = PAYLOADS[mode]
        else:
            props["hoodie.table.format"] = "native"
            if self.precombine_field:
                props["hoodie.table.ordering.fields"] = props.pop("hoodie.table.precombine.field")

    @classmethod
    def from_properties(cls, props: Dict[str, str], ours: bool = True) -> "TableConfig":
        """`ours`: hudilite created the table. One another writer created without our encoding
        setting gets the portable encoding: its readers may be older Parquet readers."""
        def fields(key: str) -> List[str]:
            return [f for f in props.get(key, "").split(",") if f]

        if props.get("hoodie.table.type", "COPY_ON_WRITE") != "COPY_ON_WRITE":
            raise ConfigurationError("only COPY_ON_WRITE tables are supported")
        if props.get("hoodie.table.base.file.format", "PARQUET").upper() != "PARQUET":
            raise ConfigurationError(f"table {props.get('hoodie.table.name', '?')}: its base files are "
                                     f"{props['hoodie.table.base.file.format']}; hudilite reads and writes PARQUET ones")
        version = props.get("hoodie.table.version", TABLE_VERSION)
        if version not in READ_VERSIONS:
            raise ConfigurationError(
                f"table {props.get('hoodie.table.name', '?')}: table version {version} is not one hudilite reads "
                f"({', '.join(READ_VERSIONS)}): a Hudi older than 0.14 made it (upgrade it with Hudi 0.14 or later), or "
                "a Hudi newer than 1.1")
        timeline_folder, history_folder = timeline_folders(props)
        return cls(
            name=props["hoodie.table.name"],
            partition_fields=fields("hoodie.table.partition.fields"),
            record_key_fields=fields("hoodie.table.recordkey.fields"),
            # Hudi 1.1 (table version 9) names it the ordering field(s)
            precombine_field=props.get("hoodie.table.precombine.field") or props.get("hoodie.table.ordering.fields")
            or None,
            database=props.get("hoodie.database.name", "default"),
            hive_style_partitioning=props.get(
                "hoodie.datasource.write.hive_style_partitioning", "false"
            ).lower()
            == "true",
            create_schema=props.get("hoodie.table.create.schema") or None,
            key_generator=props.get("hoodie.table.keygenerator.class")
            or _KEYGEN_TYPES.get(props.get("hoodie.table.keygenerator.type", "").upper(),
                                 props.get("hoodie.table.keygenerator.type")) or None,
            not_writable=_not_writable(props),
            parquet_encoding=props.get(PARQUET_ENCODING_KEY, COMPACT if ours else PORTABLE),
            virtual_keys=props.get("hoodie.populate.meta.fields", "true").lower() == "false",
            keygen_settings={k: v for k, v in props.items() if k.startswith(KEYGEN_SETTINGS_PREFIX)},
            partition_types=fields(PARTITION_TYPES_KEY) or None,
            archive_folder=props.get("hoodie.archivelog.folder", "archived").strip("/"),
            timestamp_keys=props.get(TIMESTAMP_KEYS_KEY) or None,
            table_version=int(version),
            merge_mode=props.get("hoodie.record.merge.mode") or None,
            timeline_folder=timeline_folder,
            history_folder=history_folder,
        )


def timeline_folders(props: Dict[str, str]) -> Tuple[Optional[str], str]:
    """(the active timeline's folder under .hoodie, None at timeline layout 1; the LSM history's
    under it), as Hudi 1.x reads hoodie.timeline.path and hoodie.timeline.history.path."""
    layout = props.get("hoodie.timeline.layout.version")
    if layout is None:
        layout = "2" if int(props.get("hoodie.table.version", TABLE_VERSION)) >= 8 else "1"
    history = props.get("hoodie.timeline.history.path", "history").strip("/")
    return (props.get("hoodie.timeline.path", "timeline").strip("/") if layout == "2" else None), history


METADATA_PARTITIONS = ("hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight")


def _not_writable(props: Dict[str, str]) -> Optional[str]:
    """Why a table Hudi's Java writer set up would not see (or would break under) our commits."""
    if props.get("hoodie.datasource.write.partitionpath.urlencode", "false").lower() == "true":
        return ("its partition paths are URL-encoded (hoodie.datasource.write.partitionpath.urlencode=true); hudilite "
                "writes plain partition paths")
    encoding = props.get(PARQUET_ENCODING_KEY, COMPACT)
    if encoding not in PARQUET_ENCODINGS:
        return f"a newer hudilite set its parquet encoding to '{encoding}'; this one writes {', '.join(PARQUET_ENCODINGS)}"
    ordering = [f for f in props.get("hoodie.table.ordering.fields", "").split(",") if f]
    if len(ordering) > 1:
        return (f"it orders records by {len(ordering)} fields (hoodie.table.ordering.fields={','.join(ordering)}); "
                "hudilite merges by one precombine field")
    mode = props.get("hoodie.record.merge.mode")
    if mode not in (None, "", EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING):
        return f"it merges records by hoodie.record.merge.mode={mode}; hudilite merges by event or commit time"
    for key in ("hoodie.compaction.payload.class", "hoodie.table.legacy.payload.class"):
        if props.get(key) and props[key] not in PAYLOADS.values():
            return f"its records merge through {key}={props[key]}; hudilite merges whole rows by event or commit time"
    if props.get("hoodie.table.partial.update.mode", "NONE").upper() not in ("", "NONE"):
        return (f"it updates records partially (hoodie.table.partial.update.mode="
                f"{props['hoodie.table.partial.update.mode']}); hudilite writes whole rows")
    if props.get("hoodie.table.format", "native") != "native":
        return f"its table format is {props['hoodie.table.format']} (hoodie.table.format); hudilite writes Hudi's native one"
    generator = props.get("hoodie.table.keygenerator.type")
    if generator and not props.get("hoodie.table.keygenerator.class") and generator.upper() not in _KEYGEN_TYPES:
        return f"its key generator type {generator} is not one hudilite makes keys as ({', '.join(_KEYGEN_TYPES)})"
    return None


def table_checksum(database: str, name: str) -> int:
    return binascii.crc32(f"{database}.{name}".encode("utf-8"))
