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

This reads it; it needs no Spark (the rows are plain parquet). Archived instants are all
completed: each row carries its completion time and the bytes of its completed instant file
(Avro, decoded by `avro_metadata`'s codecs). See docs/design/hudi-1x-study.md, section 4.
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
from ..storage.layout import HOODIE_DIR

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
