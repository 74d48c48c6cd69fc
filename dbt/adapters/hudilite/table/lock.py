"""The table lock: a short exclusive section for the steps that must not interleave between
writers (conflict check and publish, rolling back a dead writer, index build or compaction).

It is a file created exclusively (`O_EXCL` on a local or POSIX file system; an object store
needs a conditional put, see `Storage.create_exclusive`) holding its owner, and deleted on
release. Writers hold it for milliseconds, never while Spark jobs run. A lock whose owner is a
dead process on this host, or that is older than `STALE_AFTER_S` (the owner's clock may
differ: the age is measured against the file's own modification time), is broken.
"""

from __future__ import annotations

import json
import os
import random
import socket
import time

from .errors import ConcurrentWriteError
from .layout import LOCK_FILE
from .storage import Storage

WAIT_S = 60.0
STALE_AFTER_S = 30.0


def _owner() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}


def _dead_here(owner: dict) -> bool:
    if owner.get("host") != socket.gethostname() or owner.get("pid") == os.getpid():
        return False
    try:
        os.kill(int(owner.get("pid")), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, TypeError, ValueError):
        return False  # another pid namespace or a bad record: only age can tell
    return False


class TableLock:
    def __init__(self, storage: Storage, wait_s: float = WAIT_S, stale_after_s: float = STALE_AFTER_S):
        self.storage = storage
        self.wait_s = wait_s
        self.stale_after_s = stale_after_s

    def __enter__(self) -> "TableLock":
        deadline = time.monotonic() + self.wait_s
        pause = 0.01
        while not self.storage.create_exclusive(LOCK_FILE, json.dumps(_owner()).encode()):
            if self._stale():
                self.storage.delete_file(LOCK_FILE)
                continue
            if time.monotonic() > deadline:
                raise ConcurrentWriteError(f"table at {self.storage.base_path}: its lock ({LOCK_FILE}) is held by "
                                           f"{self._holder()} for longer than {self.wait_s:.0f} s")
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.5)
        return self

    def __exit__(self, *exc) -> None:
        self.storage.delete_file(LOCK_FILE)

    def _holder(self) -> dict:
        try:
            return json.loads(self.storage.read_text(LOCK_FILE) or "{}")
        except (FileNotFoundError, ValueError):
            return {}

    def _stale(self) -> bool:
        modified = self.storage.mtime_seconds(LOCK_FILE)
        if not modified:
            return False  # released meanwhile: just try again
        return time.time() - modified > self.stale_after_s or _dead_here(self._holder())
