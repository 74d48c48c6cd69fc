"""The files of an index that lives beside the timeline: a base as of one instant plus one
delta per later commit, under one folder with a state file naming the base.

Both index kinds (`record_index`, `key_ranges`) keep their files this way:
- `index.json` names the base instant (and what the kind needs besides); it is written last,
  so a build or compaction that dies is simply redone;
- `<T>.base.parquet` holds the index as of T; `<T>.delta.parquet` what instant T changed. A
  delta belongs to its commit: written after a marker, so a rollback removes it, and read only
  once T completed;
- compaction writes a new base as of the latest instant, then moves the state to it and
  deletes the files it supersedes.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from typing import Callable, ContextManager, Dict, Iterable, List, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from ..storage import faults
from ..storage.layout import INDEX_STATE_FILE, TMP_DIR, index_file_name, marker_path, parse_index_file_name
from ..storage.filesystem import Storage

BASE = "base"
DELTA = "delta"
COMPACT_AFTER_DELTAS = 20  # per folder of files: then the base is rewritten as of the latest instant


# Publishing a new base (build, compaction) under a guard: a context manager, given the base
# instant, that holds off concurrent commits and raises if the base would miss one.
BaseGuard = Callable[[str], ContextManager]


class IndexFiles:
    def __init__(self, storage: Storage, root: str, guard: Optional[BaseGuard] = None):
        self.storage = storage
        self.root = root
        self.guard = guard or (lambda base_instant: contextlib.nullcontext())

    @property
    def state_path(self) -> str:
        return posixpath.join(self.root, INDEX_STATE_FILE)

    def state(self) -> Optional[dict]:
        try:
            return json.loads(self.storage.read_state(self.state_path))
        except FileNotFoundError:
            return None

    def write_state(self, state: dict) -> None:
        """Publish the index as of `state["base_instant"]` (its base files are written)."""
        with self.guard(state["base_instant"]):
            self.storage.write_atomic(self.state_path, json.dumps(state).encode(), TMP_DIR)

    def path(self, instant: str, kind: str, folder: str = "") -> str:
        return posixpath.join(self.root, folder, index_file_name(instant, kind))

    def visible(self, base_instant: str, completed: Set[str], folder: str = "") -> List[Tuple[str, str]]:
        """(instant, path) of the base and of the deltas of `completed` instants after it, oldest first."""
        directory = posixpath.join(self.root, folder)
        out = []
        for name in self.storage.list_names(directory):
            parsed = parse_index_file_name(name)
            if parsed is not None and is_visible(parsed, base_instant, completed):
                out.append((parsed[0], posixpath.join(directory, name)))
        return sorted(out)

    def visible_by_folder(self, base_instant: str, completed: Set[str]) -> Dict[str, List[Tuple[str, str]]]:
        """`visible` for every folder under the root (its relative name: files of the root
        itself under ""), from one listing of the whole index: one request on an object store
        for up to 1,000 files, where a listing per folder costs one per shard."""
        out: Dict[str, List[Tuple[str, str]]] = {}
        for rel in self.storage.list_files_recursive(self.root):
            folder, name = posixpath.split(rel)
            parsed = parse_index_file_name(name)
            if parsed is not None and is_visible(parsed, base_instant, completed):
                out.setdefault(folder, []).append((parsed[0], posixpath.join(self.root, rel)))
        return {folder: sorted(files) for folder, files in out.items()}

    def finish_compaction(self, state: dict, superseded: Iterable[str]) -> None:
        """Publish a compaction (its new base files are written): the state moves to the new
        base. The files it supersedes stay one generation, for readers that listed them before
        (a concurrent upsert's lookup); the previous compaction's go now."""
        faults.reach("compaction")
        keep = index_file_name(state["base_instant"], BASE)
        previous = (self.state() or {}).get("superseded", [])
        self.write_state(dict(state, superseded=sorted(p for p in superseded if posixpath.basename(p) != keep)))
        for path in previous:
            if posixpath.basename(path) != keep:
                self.storage.delete_file(path)


def is_visible(parsed: Tuple[str, str], base_instant: str, completed: Set[str]) -> bool:
    instant, kind = parsed
    if kind == BASE:
        return instant == base_instant
    return instant > base_instant and instant in completed


def has_too_many_deltas(visible: List[Tuple[str, str]]) -> bool:
    """A base plus more than COMPACT_AFTER_DELTAS deltas: time to compact."""
    return len(visible) - 1 > COMPACT_AFTER_DELTAS


def deltas_may_be_too_many(commits_after_base: int) -> bool:
    """Whether some folder may hold too many deltas (`has_too_many_deltas`), told without a
    listing: a commit writes at most one delta to a folder (the file is named by its instant)."""
    return commits_after_base > COMPACT_AFTER_DELTAS


def completed_set(completed, as_of: Optional[str] = None) -> Set[str]:
    """The timestamps of `completed` instants at or before `as_of`."""
    return {i.timestamp for i in completed if as_of is None or i.timestamp <= as_of}


def write_index_file(storage: Storage, path: str, table: pa.Table, delta_instant: Optional[str] = None,
                     **parquet_options) -> None:
    """Executor- or driver-side write of one index file (parquet, zstd unless said otherwise),
    whole or not at all: a task attempt killed while a twin wrote the same path cannot leave it
    cut short."""
    if delta_instant is not None:
        storage.write_bytes(marker_path(delta_instant, path), b"")
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **{"compression": "zstd", **parquet_options})
    storage.write_atomic(path, sink.getvalue(), TMP_DIR)  # the Arrow buffer, not a copy of it
