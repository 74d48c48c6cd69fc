"""Hudi 1.x's timeline history (table versions 8 and 9, timeline layout 2): the instants archival
moved out of `.hoodie/timeline/`, kept as an LSM tree under `.hoodie/timeline/history/`.

- `_version_`: the number N of the latest snapshot of the tree.
- `manifest_<N>`: JSON, `{"files": [{"fileName": ..., "fileLen": ...}, ...]}`: the parquet files
  that make up snapshot N. Only these count: any other parquet in the folder is a leftover of a
  failed archival or of a compaction that never committed its manifest.
- `<min>_<max>_<layer>.parquet`: one row per archived action (Hudi's HoodieLSMTimelineInstant:
  instantTime, completionTime, action, metadata, plan, version), `min` and `max` being the
  requested times of its first and last action. Archival writes layer 0; compacting a layer's
  oldest files writes their rows again into one file of the next layer, so the same instant may
  sit in two layers until the clean that follows drops the old files.

This reads it and writes it; neither needs Spark (the rows are plain parquet). Archived
instants are all completed: each row carries its completion time and the bytes of its completed
instant file (Avro, decoded by `avro_metadata`'s codecs). See docs/design/hudi-1x-study.md,
section 4.

Writing follows Hudi 1.x's archiver: `write_history` adds one layer-0 file and commits it by a
new manifest and then `_version_`; `compact_history` merges a layer's oldest files into one of
the next layer once it has `batch_size` of them, then `clean_history` drops old manifests and
the files no kept manifest lists. Every file is written whole or not at all
(`Storage.write_atomic`), so a crash leaves either the previous snapshot or the new one, plus
perhaps a parquet no manifest lists, which readers ignore and the next write replaces or the
next clean deletes. The caller holds the table's lock.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptTableError
from ..storage.layout import HOODIE_DIR, TMP_DIR

HISTORY_DIR = HOODIE_DIR + "/timeline/history"  # where table versions 8 and 9 keep it
VERSION_FILE = "_version_"
_MANIFEST = re.compile(r"^manifest_(\d+)$")
_DATA_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_COLUMNS = ("instantTime", "completionTime", "action", "metadata", "plan")


@dataclass(frozen=True)
class HistoryEntry:
    """One archived action, as its row in the history holds it."""

    instant: str  # requested time (instantTime)
    completion: Optional[str]
    action: str  # the completed action: commit, deltacommit, replacecommit, clean, rollback, ...
    metadata: Optional[bytes]  # the completed instant file's bytes (Avro); None when it was empty
    plan: Optional[bytes]  # clean, compaction, clustering: the plan's bytes


def manifest_name(version: int) -> str:
    return f"manifest_{version}"


def data_file_range(name: str) -> Optional[Tuple[str, str, int]]:
    """(min instant, max instant, layer) of a history parquet file, None for any other name."""
    found = _DATA_FILE.match(name)
    return (found.group(1), found.group(2), int(found.group(3))) if found else None


def history_version(storage, history_dir: str = HISTORY_DIR) -> Optional[int]:
    """The latest snapshot of the history: `_version_`, or, when that is missing or unreadable
    (archival rewrites it by delete then create, so a crash can leave it gone), the highest
    `manifest_<N>`, as Hudi's own reader falls back. None: no history yet."""
    try:
        # A state file: one read per pinned picture of the table, like hoodie.properties.
        return int(storage.read_state(posixpath.join(history_dir, VERSION_FILE)).strip())
    except (FileNotFoundError, ValueError):
        pass
    versions = [int(m.group(1)) for m in map(_MANIFEST.match, storage.list_names(history_dir)) if m]
    return max(versions) if versions else None


def history_files(storage, history_dir: str = HISTORY_DIR) -> List[Tuple[str, int]]:
    """(file name, length) of the parquet files the latest manifest lists; empty without history."""
    version = history_version(storage, history_dir)
    if version is None:
        return []
    path = posixpath.join(history_dir, manifest_name(version))
    try:
        body = json.loads(storage.read_text(path))
        files = [(str(f["fileName"]), int(f["fileLen"])) for f in body["files"]]
        for name, _ in files:
            if data_file_range(name) is None:  # its range is in its name: without one we cannot prune
                raise ValueError(f"{name!r} is not a history file name")
    except FileNotFoundError:
        raise CorruptTableError(f"table at {storage.base_path}: the timeline history's version is {version} but "
                                f"{path} does not exist") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise CorruptTableError(f"table at {storage.base_path}: the timeline history's manifest {path} is "
                                f"unreadable ({err})") from None
    return files


def read_history(storage, history_dir: str = HISTORY_DIR, after: Optional[str] = None,
                 actions: Optional[Iterable[str]] = None,
                 listed: Optional[List[Tuple[str, int]]] = None) -> List[HistoryEntry]:
    """The archived actions requested after `after` (all when None), only those of `actions`
    when given, oldest first. A missing history is an empty one. `listed`: the manifest's files
    as the caller read them (`history_files`)."""
    wanted = set(actions) if actions is not None else None
    if listed is None:
        listed = history_files(storage, history_dir)
    # A file's name bounds its rows, so files wholly at or before `after` are never opened.
    # Higher layers first: a compacted file holds the same rows as the files it replaced, and
    # it is the copy the tree keeps.
    files = sorted(((name,) + data_file_range(name) for name, _ in listed), key=lambda f: (-f[3], f[1], f[0]))
    entries: Dict[str, HistoryEntry] = {}
    for name, _, newest, _ in files:
        if after is not None and newest <= after:
            continue
        for entry in _read_file(storage, posixpath.join(history_dir, name)):
            if after is not None and entry.instant <= after:
                continue
            if wanted is not None and entry.action not in wanted:
                continue
            entries.setdefault(entry.instant, entry)
    # Instant times compare as strings, as Hudi compares them.
    return [entries[instant] for instant in sorted(entries)]


def _read_file(storage, path: str) -> List[HistoryEntry]:
    """The rows of one history parquet file. A file the manifest lists must be there and readable."""
    try:
        with storage.open_input(path) as source:
            parquet = pq.ParquetFile(source)
            present = set(parquet.schema_arrow.names)
            missing = {"instantTime", "action"} - present
            if missing:
                raise ValueError(f"it has no {', '.join(sorted(missing))} column")
            rows = parquet.read(columns=[c for c in _COLUMNS if c in present]).to_pydict()
    except FileNotFoundError:
        raise CorruptTableError(f"table at {storage.base_path}: the timeline history's manifest lists {path}, "
                                "which does not exist") from None
    except (pa.ArrowException, OSError, ValueError) as err:
        raise CorruptTableError(f"table at {storage.base_path}: the timeline history file {path} is unreadable "
                                f"({err})") from None
    count = len(rows["instantTime"])
    column = {c: rows.get(c) or [None] * count for c in _COLUMNS}
    entries = []
    for i in range(count):
        instant, action = column["instantTime"][i], column["action"][i]
        if not instant or not action:
            raise CorruptTableError(f"table at {storage.base_path}: the timeline history file {path} has a row "
                                    f"without its instant time or action (row {i})")
        entries.append(HistoryEntry(instant, column["completionTime"][i], action,
                                    _bytes(column["metadata"][i]), _bytes(column["plan"][i])))
    return entries


def _bytes(value) -> Optional[bytes]:
    # Hudi writes an empty completed file as null; treat an empty value the same.
    return bytes(value) if value else None


# ---- writing ---------------------------------------------------------------------------------

# The rows' Avro schema, as Hudi 1.x stores it in each file's footer (`parquet.avro.schema`):
# Hudi reads the files with its Avro parquet reader, which takes the file's schema from there.
LSM_INSTANT_AVRO_SCHEMA = (
    '{"type":"record","name":"HoodieLSMTimelineInstant","namespace":"org.apache.hudi.avro.model","fields":['
    '{"name":"instantTime","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},'
    '{"name":"completionTime","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},'
    '{"name":"action","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},'
    '{"name":"metadata","type":["null","bytes"],"default":null},'
    '{"name":"plan","type":["null","bytes"],"default":null},'
    '{"name":"version","type":"int","default":1}]}')
LSM_INSTANT_VERSION = 1  # the `version` of every row (Hudi's LSM_TIMELINE_INSTANT_VERSION_1)
# Parquet's root is the Avro record's full name, as Avro's parquet writer names it.
PARQUET_ROOT_NAME = "org.apache.hudi.avro.model.HoodieLSMTimelineInstant"
# Hudi's default parquet codec (`hoodie.parquet.compression.codec`), the one its archiver uses.
CODEC = "gzip"
COMPACTION_BATCH_SIZE = 10  # hoodie.timeline.compaction.batch.size's default
COMPACTION_TARGET_BYTES = 1024 * 1024 * 1024  # a compaction stops adding files past ~1 GB (Hudi's cap)
MANIFESTS_KEPT = 3  # a clean keeps this many manifest versions, plus one per compaction just made

_ARROW_SCHEMA = pa.schema(
    [pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()),
     pa.field("action", pa.string()), pa.field("metadata", pa.binary()), pa.field("plan", pa.binary()),
     pa.field("version", pa.int32(), nullable=False)])
_FOOTER = {"writer.model.name": "avro", "parquet.avro.schema": LSM_INSTANT_AVRO_SCHEMA}
_INSTANT = re.compile(r"^\d+$")


def data_file_name(first: str, last: str, layer: int) -> str:
    return f"{first}_{last}_{layer}.parquet"


def manifest_json(files: List[Tuple[str, int]]) -> str:
    """A manifest's text as Hudi writes it (Jackson's default pretty printer, no final newline);
    readers only need it to be JSON."""
    if not files:
        return '{\n  "files" : [ ]\n}'
    entries = ", ".join('{\n    "fileName" : %s,\n    "fileLen" : %d\n  }' % (json.dumps(name), length)
                        for name, length in files)
    return '{\n  "files" : [ ' + entries + ' ]\n}'


def history_parquet(entries: List[HistoryEntry]) -> bytes:
    """One history file's bytes: `entries` (in that order) as rows of HoodieLSMTimelineInstant,
    laid out as Hudi's Avro parquet writer lays them out (its physical schema and root name, its
    footer's Avro schema and writer model, its codec)."""
    table = pa.table({
        "instantTime": [e.instant for e in entries],
        "completionTime": [e.completion for e in entries],
        "action": [e.action for e in entries],
        "metadata": [e.metadata or None for e in entries],  # Hudi writes an empty completed file as null
        "plan": [e.plan or None for e in entries],
        "version": [LSM_INSTANT_VERSION] * len(entries),
    }, schema=_ARROW_SCHEMA)
    sink = pa.BufferOutputStream()
    # Format version 1.0, data page v1, dictionaries where parquet-mr keeps them: what Hudi's files
    # have. No statistics of the blobs (their min and max would be whole Avro files, twice: in the
    # page headers and the footer; no reader filters on them). No ARROW:schema in the footer:
    # Hudi's files carry only the two keys below.
    with pq.ParquetWriter(sink, _ARROW_SCHEMA, compression=CODEC, version="1.0", data_page_version="1.0",
                          use_dictionary=["action", "version"], store_schema=False,
                          write_statistics=["instantTime", "completionTime", "action", "version"]) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(_FOOTER)
    return _with_root_name(sink.getvalue().to_pybytes(), PARQUET_ROOT_NAME)


def write_history(storage, history_dir: str, entries: List[HistoryEntry]) -> str:
    """Archive `entries` (completed actions, any order, each instant once) into the history as one
    new layer-0 file, `<first>_<last>_0.parquet`, committed by `manifest_<v+1>` (the latest
    manifest's files plus it) and then `_version_`. Returns the file's name.

    As Hudi's archiver, it can be run again after a crash: when the latest manifest already
    lists the file, the earlier run committed and nothing is written; a file of that name that
    no manifest lists is a leftover and is written again."""
    if not entries:
        raise ValueError("write_history: no entries to archive")
    ordered = sorted(entries, key=lambda e: e.instant)
    for entry in ordered:
        if not _INSTANT.match(entry.instant or "") or not entry.action:
            raise ValueError(f"write_history: {entry.instant!r} ({entry.action!r}) is not an instant time and action")
    for before, after in zip(ordered, ordered[1:]):
        if before.instant == after.instant:
            raise ValueError(f"write_history: instant {before.instant} given twice")
    name = data_file_name(ordered[0].instant, ordered[-1].instant, 0)
    version = history_version(storage, history_dir)
    listed = history_files(storage, history_dir)
    if any(listed_name == name for listed_name, _ in listed):
        return name
    length = _write_file(storage, history_dir, name, ordered)
    _commit(storage, history_dir, version, listed + [(name, length)])
    return name


def compact_history(storage, history_dir: str = HISTORY_DIR, batch_size: int = COMPACTION_BATCH_SIZE,
                    clean: bool = True) -> List[str]:
    """Hudi's timeline compaction: while a layer of the latest snapshot has `batch_size` files or
    more, merge its oldest consecutive ones (by name, i.e. by first instant; `batch_size` of them,
    fewer past ~1 GB, never fewer than 2) into one file of the next layer, `<min>_<max>_<layer+1>`,
    each instant once, by instant; each merge is committed by its own manifest and `_version_`.
    Then (`clean`) `clean_history`, keeping one more manifest per merge made. Returns the names of
    the files written, lowest layer first."""
    batch_size = max(int(batch_size), 2)
    written: List[str] = []
    layer = 0
    while True:
        version = history_version(storage, history_dir)
        listed = history_files(storage, history_dir)
        layers = [data_file_range(name)[2] for name, _ in listed]
        in_layer = sorted((f for f, lay in zip(listed, layers) if lay == layer), key=lambda f: f[0])
        if len(in_layer) >= batch_size:
            chosen = _compaction_candidates(in_layer, batch_size)
            written.append(_compact(storage, history_dir, version, listed, chosen, layer + 1))
            continue  # the same layer may still hold a batch (never after one archival)
        if not layers or layer >= max(layers):
            break
        layer += 1
    if clean:
        clean_history(storage, history_dir, keep=MANIFESTS_KEPT + len(written))
    return written


def clean_history(storage, history_dir: str = HISTORY_DIR, keep: int = MANIFESTS_KEPT) -> List[str]:
    """Keep the newest `keep` manifest versions (and always the latest snapshot's), delete the
    older manifests, then every parquet no kept manifest lists: files compaction merged away
    once no kept snapshot uses them, and leftovers of writes that never committed. Manifests go
    first, so no manifest ever lists a deleted file. Returns the names deleted."""
    current = history_version(storage, history_dir)
    if current is None:
        return []
    names = storage.list_names(history_dir)
    versions = sorted((int(m.group(1)) for m in map(_MANIFEST.match, names) if m), reverse=True)
    kept = set(versions[:max(int(keep), 1)]) | {current}
    referenced = {name for name, _ in history_files(storage, history_dir)}  # the latest: must be readable
    for version in kept - {current}:
        try:
            body = json.loads(storage.read_text(posixpath.join(history_dir, manifest_name(version))))
            referenced.update(str(f["fileName"]) for f in body["files"])
        except FileNotFoundError:
            continue
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return []  # which files it needs is unknown: delete nothing
    deleted = [manifest_name(v) for v in sorted(versions) if v not in kept]
    deleted += sorted(n for n in names if n.endswith(".parquet") and n not in referenced)
    storage.delete_files(posixpath.join(history_dir, n) for n in deleted)
    return deleted


def _compaction_candidates(files: List[Tuple[str, int]], batch_size: int) -> List[Tuple[str, int]]:
    chosen: List[Tuple[str, int]] = []
    total = 0
    for name, length in files[:batch_size]:
        if len(chosen) >= 2 and total + length > COMPACTION_TARGET_BYTES:
            break
        chosen.append((name, length))
        total += length
    return chosen


def _compact(storage, history_dir: str, version: Optional[int], listed: List[Tuple[str, int]],
             chosen: List[Tuple[str, int]], layer: int) -> str:
    ranges = [data_file_range(name) for name, _ in chosen]
    name = data_file_name(min(r[0] for r in ranges), max(r[1] for r in ranges), layer)
    rows: Dict[str, HistoryEntry] = {}
    for file_name, _ in chosen:
        for entry in _read_file(storage, posixpath.join(history_dir, file_name)):
            rows.setdefault(entry.instant, entry)
    length = _write_file(storage, history_dir, name, [rows[i] for i in sorted(rows)])
    merged = {file_name for file_name, _ in chosen}
    _commit(storage, history_dir, version,
            [f for f in listed if f[0] not in merged and f[0] != name] + [(name, length)])
    return name


def _write_file(storage, history_dir: str, name: str, entries: List[HistoryEntry]) -> int:
    data = history_parquet(entries)
    # Atomic: a crash leaves no half file; a leftover of that name (never listed) is replaced.
    storage.write_atomic(posixpath.join(history_dir, name), data, TMP_DIR)
    return len(data)


def _commit(storage, history_dir: str, version: Optional[int], files: List[Tuple[str, int]]) -> None:
    """The next snapshot: `manifest_<v+1>` (replacing a leftover a crash left before `_version_`
    moved), then `_version_`. Versions start at 1."""
    new = 1 if version is None or version < 1 else version + 1
    storage.write_atomic(posixpath.join(history_dir, manifest_name(new)), manifest_json(files).encode("utf-8"),
                         TMP_DIR)
    storage.write_atomic(posixpath.join(history_dir, VERSION_FILE), str(new).encode("utf-8"), TMP_DIR)


# ---- parquet's footer: the root's name -------------------------------------------------------
# pyarrow names a parquet schema's root "schema"; Avro's parquet writer names it after the
# record. The footer is a Thrift compact-protocol FileMetaData whose field 2 is the list of
# SchemaElements, the root first, whose field 4 is its name. Renaming it rewrites the footer
# only: the pages before it keep their offsets.

_T_BOOL_TRUE, _T_BOOL_FALSE, _T_BYTE, _T_I16, _T_I32, _T_I64, _T_DOUBLE = 1, 2, 3, 4, 5, 6, 7
_T_BINARY, _T_LIST, _T_SET, _T_MAP, _T_STRUCT = 8, 9, 10, 11, 12


class _Compact:
    """Just enough of Thrift's compact protocol to walk a struct and find a field's bytes."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            value = self.byte()
            result |= (value & 0x7F) << shift
            if not value & 0x80:
                return result
            shift += 7

    def field(self, last: int) -> Optional[Tuple[int, int]]:
        """(field id, type) of the struct's next field; None at its end."""
        header = self.byte()
        if header == 0:
            return None
        delta, kind = header >> 4, header & 0x0F
        if delta:
            return last + delta, kind
        raw = self.varint()
        return (raw >> 1) ^ -(raw & 1), kind

    def skip(self, kind: int, in_collection: bool = False) -> None:
        if kind in (_T_BOOL_TRUE, _T_BOOL_FALSE):
            self.pos += 1 if in_collection else 0  # in a field header the value is the type
        elif kind == _T_BYTE:
            self.pos += 1
        elif kind in (_T_I16, _T_I32, _T_I64):
            self.varint()
        elif kind == _T_DOUBLE:
            self.pos += 8
        elif kind == _T_BINARY:
            length = self.varint()
            self.pos += length
        elif kind in (_T_LIST, _T_SET):
            size, element = self.list_header()
            for _ in range(size):
                self.skip(element, True)
        elif kind == _T_MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4, True)
                    self.skip(types & 0x0F, True)
        elif kind == _T_STRUCT:
            last = 0
            while True:
                found = self.field(last)
                if found is None:
                    return
                last = found[0]
                self.skip(found[1])
        else:
            raise ValueError(f"Thrift type {kind} at byte {self.pos}")

    def list_header(self) -> Tuple[int, int]:
        header = self.byte()
        size, element = header >> 4, header & 0x0F
        return (self.varint() if size == 15 else size), element


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _with_root_name(data: bytes, root: str) -> bytes:
    """The parquet file `data` with its schema's root named `root`."""
    if data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise ValueError("not a parquet file")
    footer_len = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_len
    footer = data[start:-8]
    walk = _Compact(footer)
    last = 0
    while True:
        found = walk.field(last)
        if found is None:
            raise ValueError("parquet footer without a schema")
        last = found[0]
        if found == (2, _T_LIST):
            break
        walk.skip(found[1])
    size, element = walk.list_header()
    if not size or element != _T_STRUCT:
        raise ValueError("parquet footer with an empty schema")
    last = 0
    while True:  # the root SchemaElement's fields
        found = walk.field(last)
        if found is None:
            raise ValueError("parquet schema root without a name")
        last = found[0]
        if found == (4, _T_BINARY):
            begin = walk.pos
            walk.skip(_T_BINARY)
            end = walk.pos
            break
        walk.skip(found[1])
    encoded = root.encode("utf-8")
    new_footer = footer[:begin] + _varint_bytes(len(encoded)) + encoded + footer[end:]
    return data[:start] + new_footer + len(new_footer).to_bytes(4, "little") + b"PAR1"
