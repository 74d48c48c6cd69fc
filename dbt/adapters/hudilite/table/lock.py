"""The table lock: a short exclusive section for the steps that must not interleave between
writers (conflict check and publish, rolling back a dead writer, publishing an index base,
planning a clean).

On a local or POSIX file system it is an OS lock (`flock`) on `.hoodie/.hudilite/lock`: the
kernel gives it to one open file at a time, across processes and threads, and releases it when
its holder dies, so a lock is never stale and never broken by a guess. On NFS, Linux maps it to
a byte-range lock served by the NFS lock manager. Threads of one process also take a
process-local lock first (a byte-range lock would let them share). Other storage has no such
lock: it needs a conditional put (see README, "Concurrent writers"); until then the lock there
is an exclusive-create file, broken after `STALE_AFTER_S`, which is best effort only.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import threading
import time
from typing import Dict, Optional

from .errors import ConcurrentWriteError
from .layout import LOCK_FILE
from .storage import Storage

WAIT_S = 120.0
STALE_AFTER_S = 60.0  # object stores only

_local_locks: Dict[str, threading.Lock] = {}
_local_locks_guard = threading.Lock()


def _local_lock(path: str) -> threading.Lock:
    with _local_locks_guard:
        return _local_locks.setdefault(path, threading.Lock())


class TableLock:
    def __init__(self, storage: Storage, wait_s: float = WAIT_S):
        self.storage = storage
        self.wait_s = wait_s
        self._fd: Optional[int] = None
        self._thread_lock: Optional[threading.Lock] = None

    def __enter__(self) -> "TableLock":
        deadline = time.monotonic() + self.wait_s
        if self.storage.is_local:
            self._enter_local(deadline)
        else:
            self._enter_exclusive_file(deadline)
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            self._thread_lock.release()
        else:
            self.storage.delete_file(LOCK_FILE)

    def _timeout(self) -> ConcurrentWriteError:
        return ConcurrentWriteError(f"table at {self.storage.base_path}: waited {self.wait_s:.0f} s for its lock "
                                    f"({LOCK_FILE}); another writer holds it")

    def _enter_local(self, deadline: float) -> None:
        path = self.storage.full_path(LOCK_FILE)
        self._thread_lock = _local_lock(path)
        if not self._thread_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise self._timeout()
        try:
            self.storage.make_dirs(os.path.dirname(LOCK_FILE))
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except BaseException:
            self._thread_lock.release()
            raise
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    self._thread_lock.release()
                    raise self._timeout() from None
                time.sleep(pause * (1 + random.random()))
                pause = min(pause * 2, 0.2)

    def _enter_exclusive_file(self, deadline: float) -> None:
        owner = json.dumps({"pid": os.getpid(), "time": time.time()}).encode()
        pause = 0.01
        while not self.storage.create_exclusive(LOCK_FILE, owner):
            modified = self.storage.mtime_seconds(LOCK_FILE)
            if modified and time.time() - modified > STALE_AFTER_S:
                self.storage.delete_file(LOCK_FILE)
                continue
            if time.monotonic() > deadline:
                raise self._timeout()
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.5)
