"""Where a table keeps its files: the one place that spells a path under the base path.

Hudi's own (`.hoodie/`, `hoodie.properties`, partition metadata) and hudilite's private
state under `.hoodie/.hudilite/`, which Hudi readers ignore: writer claims, markers, the two
record-index kinds, the cleaner's state, temporary files, the empty folder a catalog entry of
an empty table points at.
"""

from __future__ import annotations

import posixpath
import re
from typing import Optional, Tuple

HOODIE_DIR = ".hoodie"
PROPERTIES_FILE = HOODIE_DIR + "/hoodie.properties"
PARTITION_METADATA = ".hoodie_partition_metadata"
ARCHIVED_DIR = HOODIE_DIR + "/archived"  # Hudi's archived timeline (see `archival`), by default
METADATA_TABLE_DIR = HOODIE_DIR + "/metadata"  # Hudi's metadata table (see `metadata_table`)



def archived_dir(folder: str) -> str:
    """Where the table's archived timeline lives: `.hoodie/<hoodie.archivelog.folder>` (`archived`
    by default; Hudi 1.x makes version 6 tables with `history`; empty: `.hoodie` itself)."""
    return posixpath.join(HOODIE_DIR, folder) if folder else HOODIE_DIR


def timeline_dir(folder: Optional[str]) -> str:
    """Where the active timeline's instant files are: `.hoodie` itself at timeline layout 1,
    `.hoodie/<hoodie.timeline.path>` (`timeline`) at layout 2 (table versions 8, 9)."""
    return posixpath.join(HOODIE_DIR, folder) if folder else HOODIE_DIR


def history_dir(timeline_folder: Optional[str], history_folder: str) -> Optional[str]:
    """Layout 2's archived timeline, the LSM history: `.hoodie/timeline/history` by default."""
    return posixpath.join(timeline_dir(timeline_folder), history_folder) if timeline_folder else None


PRIVATE_DIR = HOODIE_DIR + "/.hudilite"
TMP_DIR = PRIVATE_DIR + "/tmp"
WRITERS_DIR = PRIVATE_DIR + "/writers"
MARKERS_DIR = PRIVATE_DIR + "/markers"
CLEAN_STATE = PRIVATE_DIR + "/clean.json"
ARCHIVED_VIEW = PRIVATE_DIR + "/archived_view.json"
LOCK_FILE = PRIVATE_DIR + "/lock"
EMPTY_DIR = PRIVATE_DIR + "/empty"
LAST_SWEEP = PRIVATE_DIR + "/last_sweep"  # when a clean last listed the whole table for zombie files
RECORD_INDEX_DIR = PRIVATE_DIR + "/record_index"
KEY_RANGES_DIR = PRIVATE_DIR + "/key_ranges"
INDEX_STATE_FILE = "index.json"  # in each index folder

_INDEX_FILE = re.compile(r"^(\d{17})\.(base|delta)\.parquet$")


# A completed instant's file: `.hoodie/<instant time>.<action>` with no state after the action,
# or layout 2's `.hoodie/timeline/<requested>_<completion>.<action>` (`format.instant` reads
# every instant file name; this is only where one lives).
_COMPLETED_INSTANT = re.compile(r"^\.hoodie/(\d{17}\.(?!inflight$)[a-z]+|timeline/\d{17}_\d{17}\.[a-z]+)$")


def is_completed_instant_path(rel: str) -> bool:
    """A completed instant's file: published only by `Storage.publish`, never replaced."""
    return bool(_COMPLETED_INSTANT.match(rel))


def is_hoodie_path(rel: str) -> bool:
    return rel == HOODIE_DIR or rel.startswith(HOODIE_DIR + "/")


def partition_metadata_path(partition: str) -> str:
    return posixpath.join(partition, PARTITION_METADATA) if partition else PARTITION_METADATA


def writer_path(instant: str) -> str:
    """The claim of instant time `instant` by its writer (kept as a tombstone after a rollback)."""
    return posixpath.join(WRITERS_DIR, instant + ".json")


def writer_instant(name: str) -> Optional[str]:
    return name[: -len(".json")] if name.endswith(".json") else None


def markers_dir(instant: str) -> str:
    return posixpath.join(MARKERS_DIR, instant)


def marker_path(instant: str, file_path: str) -> str:
    """Written before `file_path` by a task of `instant`: a rollback finds the file through it."""
    return posixpath.join(markers_dir(instant), file_path + ".marker")


def staged_dir(instant: str) -> str:
    """Files a write of `instant` keeps between its Spark jobs (an upsert's tagged batch). In the
    instant's markers folder: deleted with it when the write publishes or is rolled back, and by
    the cleaner when a late task wrote there after that."""
    return posixpath.join(markers_dir(instant), "staged")


def staged_path(instant: str, name: str) -> str:
    return posixpath.join(staged_dir(instant), name)


def index_file_name(instant: str, kind: str) -> str:
    """`<T>.base.parquet` (the index as of T) or `<T>.delta.parquet` (what instant T changed)."""
    return f"{instant}.{kind}.parquet"


def parse_index_file_name(name: str) -> Optional[Tuple[str, str]]:
    """(instant, kind) of an index file name; None for anything else."""
    m = _INDEX_FILE.match(name)
    return (m[1], m[2]) if m else None


def record_index_shard_dir(shard: int) -> str:
    return posixpath.join(RECORD_INDEX_DIR, f"shard={shard}")
