"""One write's life cycle on the driver: claim an instant, keep a heartbeat, publish or roll back.

Protocol: claim T (exclusive create of `.hoodie/.hudilite/writers/<T>.json`), write
`<T>.<action>.requested`, then the inflight file, let the tasks write base files (each one
after its marker), reconcile the markers with the tasks' write stats (files of retried or
speculative attempts are deleted), then publish the completed instant by atomic rename. A
failure anywhere before publishing deletes the markers' files and the instant's files.

A pending instant whose writer is gone (dead process on this host, or a heartbeat older than
the timeout) is rolled back by the next writer; one whose writer is alive is a concurrent
write, which is refused.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Iterable, List, Optional, Set

from .commit import CommitMetadata
from .errors import ConcurrentWriteError, CorruptTableError
from .instant import INFLIGHT, Instant, next_instant_time
from .layout import WRITERS_DIR, markers_dir, writer_instant, writer_path
from .storage import Storage
from .timeline import Timeline
HEARTBEAT_INTERVAL_S = 5.0
HEARTBEAT_TIMEOUT_S = 60.0

_active_in_this_process: Set[str] = set()



def marked_files(storage: Storage, instant: str) -> List[str]:
    """Data files (relative paths) that tasks of `instant` started to write."""
    root = markers_dir(instant)
    return sorted(p[: -len(".marker")] for p in storage.list_files_recursive(root) if p.endswith(".marker"))


def claimed_instants(storage: Storage) -> List[str]:
    return sorted(filter(None, (writer_instant(n) for n in storage.list_names(WRITERS_DIR))))


def _writer_is_alive(storage: Storage, instant: str, timeout_s: float) -> bool:
    path = writer_path(instant)
    if not storage.exists(path):
        return False
    try:
        owner = json.loads(storage.read_text(path) or "{}")
    except ValueError:
        owner = {}
    if owner.get("state") == "rolled_back":
        return False
    if owner.get("host") == socket.gethostname():
        pid = owner.get("pid")
        if pid == os.getpid():
            return instant in _active_in_this_process
        try:
            os.kill(int(pid), 0)
        except (ProcessLookupError, TypeError, ValueError):
            return False
        except PermissionError:
            pass
    return time.time() - storage.mtime_seconds(path) < timeout_s


def rollback(storage: Storage, timeline: Timeline, instant: Instant) -> None:
    """Undo a pending instant: its data files first, its timeline files last, so a rollback
    that dies half-way is simply run again by the next writer."""
    for path in marked_files(storage, instant.timestamp):
        storage.delete_file(path)
    storage.delete_dir(markers_dir(instant.timestamp))
    timeline.delete_pending(instant)
    # The claim stays as a tombstone so the instant time is never handed out again.
    storage.write_bytes(writer_path(instant.timestamp), json.dumps({"state": "rolled_back"}).encode())


def rollback_dead_writers(storage: Storage, timeline: Timeline, timeout_s: float = HEARTBEAT_TIMEOUT_S) -> List[str]:
    rolled_back = []
    for instant in timeline.pending():
        if _writer_is_alive(storage, instant.timestamp, timeout_s):
            raise ConcurrentWriteError(
                f"table at {storage.base_path}: instant {instant.timestamp} is being written by another "
                f"writer ({instant.action}, {instant.state.lower()}); hudilite allows one writer at a time"
            )
        rollback(storage, timeline, instant)
        rolled_back.append(instant.timestamp)
    return rolled_back


class WriteTransaction:
    def __init__(self, storage: Storage, timeline: Timeline, action: str,
                 heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
                 heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S):
        self.storage = storage
        self.timeline = timeline
        self.action = action
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.instant: Optional[str] = None
        self._stop = threading.Event()
        self._heartbeat: Optional[threading.Thread] = None
        self.completed = False

    def __enter__(self) -> "WriteTransaction":
        rollback_dead_writers(self.storage, self.timeline, self.heartbeat_timeout_s)
        self.instant = self._claim()
        _active_in_this_process.add(self.instant)
        self._heartbeat = threading.Thread(target=self._beat, name=f"hudilite-heartbeat-{self.instant}", daemon=True)
        self._heartbeat.start()
        self.timeline.create_requested(self.instant, self.action)
        self.timeline.transition_to_inflight(self.instant, self.action)
        return self

    def _claim(self) -> str:
        owner = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "state": "writing"}).encode()
        while True:
            seen = [i.timestamp for i in self.timeline.instants()] + claimed_instants(self.storage)
            candidate = next_instant_time(max(seen) if seen else None)
            if self.storage.create_exclusive(writer_path(candidate), owner):
                return candidate

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                self.storage.touch(writer_path(self.instant))
            except OSError:
                pass

    def commit(self, metadata: CommitMetadata, private_files: Iterable[str] = ()) -> None:
        """Keep exactly the files the successful task attempts reported (base files in the
        metadata, hudilite's own such as index deltas apart), then publish."""
        reported = {s.path for s in metadata.write_stats} | set(private_files)
        for path in marked_files(self.storage, self.instant):
            if path not in reported:  # a failed, retried or speculative attempt's file
                self.storage.delete_file(path)
        missing = [p for p in sorted(reported) if not self.storage.exists(p)]
        if missing:
            raise CorruptTableError(f"instant {self.instant}: tasks reported files that are not on storage: {missing[:5]}")
        self.timeline.complete(self.instant, self.action, metadata)
        self.completed = True

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        try:
            # The completed file is the commit, whatever interrupted the writer after its rename.
            if self.completed or self.timeline.is_published(self.instant, self.action):
                self.storage.delete_dir(markers_dir(self.instant))
                self.storage.delete_file(writer_path(self.instant))
            else:
                rollback(self.storage, self.timeline, Instant(self.instant, self.action, INFLIGHT))
        finally:
            _active_in_this_process.discard(self.instant)

