"""The metadata table's own timeline (`.hoodie/metadata/.hoodie`; `.hoodie/metadata/.hoodie/timeline`
at table versions 8 and 9, whose completed instants are `<T>_<C>.<action>`): deltacommits (one
per data instant, and its bootstrap), compactions (completed as commits), cleans and rollbacks."""

from __future__ import annotations

import posixpath
import re
from typing import Dict, List, Optional, Set, Tuple

from ..format import avro_metadata
from ..storage.filesystem import Storage
from ..storage.layout import METADATA_TABLE_DIR

TIMELINE_DIR = posixpath.join(METADATA_TABLE_DIR, ".hoodie")
LAYOUT_2_DIR = "timeline"  # under TIMELINE_DIR, at timeline layout 2
LAYOUT_2_TIMELINE_DIR = posixpath.join(TIMELINE_DIR, LAYOUT_2_DIR)
HISTORY_DIR = posixpath.join(LAYOUT_2_TIMELINE_DIR, "history")  # layout 2's archive: an LSM history
# Layout 2: a partition's initialization is this plus a 3-digit offset (Hudi 1.x's
# SOLO_COMMIT_TIMESTAMP), older than any data instant.
INIT_PREFIX = "00000000000000"
DELTA_COMMIT = "deltacommit"
COMMIT = "commit"  # a completed compaction
COMPACTION = "compaction"
CLEAN = "clean"
ROLLBACK = "rollback"
_NAME = re.compile(r"^(\d{17,})(?:_(\d{17}))?\.([a-z]+)(\.requested|\.inflight)?$")
WRITE_ACTIONS = (DELTA_COMMIT, COMMIT)


def parse(name: str) -> Optional[Tuple[str, str, str]]:
    """(instant, action, state suffix: '', '.requested' or '.inflight') of a timeline file name."""
    m = _NAME.match(name)
    return (m[1], m[3], m[4] or "") if m and not (m[2] and m[4]) else None


def completion_time(name: str) -> Optional[str]:
    """Layout 2: when the completed instant a file name stands for completed."""
    m = _NAME.match(name)
    return m[2] if m else None


def instant_files(storage: Storage, path: str) -> List[str]:
    """The files a marker of `path` stands for: a completed instant of this timeline stands for
    its requested and inflight files too (newest state first, the order a rollback deletes
    them in); any other file for itself. At layout 2 the marker names `<T>.<action>`, as the
    completion time is not known before it completes: it stands for `<T>_<C>.<action>`."""
    folder, name = posixpath.split(path)
    parsed = parse(name) if folder in (TIMELINE_DIR, LAYOUT_2_TIMELINE_DIR) else None
    if parsed is None or parsed[2]:
        return [path]
    done = [path]
    if folder == LAYOUT_2_TIMELINE_DIR:
        done = [posixpath.join(folder, n) for n in storage.list_names(folder)
                if n.startswith(parsed[0] + "_") and parse(n) == parsed]
    return done + [path + ".inflight", path + ".requested"]


def archived_completions(storage: Storage) -> Dict[str, str]:
    """Layout 2: when each instant of the metadata table's LSM history completed (read only when
    a log of an archived deltacommit is still there: Hudi's cleaner keeps old slices longer than
    its archiver keeps their instants)."""
    from ..format import lsm_history  # the history's reader: parquet, wanted on this rare path only

    return {e.instant: e.completion for e in lsm_history.read_history(storage, HISTORY_DIR) if e.completion}


def is_init_instant(instant: str) -> bool:
    """A layout 2 partition initialization's instant (`INIT_PREFIX` and an offset)."""
    return instant.startswith(INIT_PREFIX)


class MetadataTimeline:
    def __init__(self, storage: Storage):
        self.storage = storage
        self.dir = TIMELINE_DIR
        self.names = storage.list_names(TIMELINE_DIR)  # empty when there is none
        if LAYOUT_2_DIR in self.names and not any(map(parse, self.names)):
            self.dir = posixpath.join(TIMELINE_DIR, LAYOUT_2_DIR)
            self.names = storage.list_names(self.dir)
        self.entries: List[Tuple[str, str, str]] = sorted(p for p in map(parse, self.names) if p is not None)
        # Completed file names, and (layout 2) completion times, by (instant, action).
        self._completed_names = {(p[0], p[1]): n for n, p in zip(self.names, map(parse, self.names)) if p and not p[2]}
        self.completions: Dict[str, str] = {p[0]: c for n in self.names
                                            for p, c in [(parse(n), completion_time(n))] if p and c}

    def own_instants(self) -> Set[str]:
        """The metadata table's own completed instants, not a data instant's: its compactions
        (commits) and, at layout 2, its initialisations (`00000000000000000` and on)."""
        return {i for i, a, s in self.entries if not s and (a == COMMIT or is_init_instant(i))}

    def completed(self, actions=WRITE_ACTIONS) -> List[str]:
        return sorted({instant for instant, action, state in self.entries if not state and action in actions})

    def completed_instants(self) -> Set[str]:
        return set(self.completed())

    def pending(self) -> Dict[str, str]:
        """Instant to action of every instant not completed."""
        done = {(i, a) for i, a, s in self.entries if not s}
        done |= {(i, COMPACTION) for i, a, s in self.entries if not s and a == COMMIT}
        return {i: a for i, a, s in self.entries if s and (i, a) not in done}

    def rolled_back(self) -> Set[str]:
        """Instants a completed rollback undid."""
        undone: Set[str] = set()
        for instant in self.completed((ROLLBACK,)):
            data = self.storage.read_bytes(posixpath.join(self.dir, self._completed_names[(instant, ROLLBACK)]))
            if data:
                undone.update(avro_metadata.decode(data).get("commitsRollback") or [])
        return undone
