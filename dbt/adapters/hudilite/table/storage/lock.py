"""The table lock: a short exclusive section for the steps that must not interleave between
writers (conflict check and publish, rolling back a dead writer, publishing an index base,
planning a clean).

On a local or POSIX file system it is an OS lock (`flock`) on `.hoodie/.hudilite/lock`: the
kernel gives it to one open file at a time, across processes and threads, and releases it when
its holder dies, so a lock is never stale and never broken by a guess. On NFS, Linux maps it to
a byte-range lock served by the NFS lock manager. Threads of one process also take a
process-local lock first (a byte-range lock would let them share).

On an object store (a `Storage` with conditional puts) it is a lease: the same file holds
{owner, expires_at, lease_s, released}. It is taken by a create-if-absent PUT, or by a PUT
conditional on the ETag of a lease that is released or expired; the holder renews it every
`RENEW_S` by a PUT conditional on its own last ETag, and releases it the same way. A waiter
takes over only a lease that is released, or whose expiry plus the clock-skew allowance has
passed, or whose ETag it has itself seen unchanged for a whole lease (that last rule needs
no clock agreement). A holder that failed to renew for `LEASE_S - MARGIN_S` refuses to
publish (`check_lease`): by then another writer may hold it. Hudi 1.1's storage-based lock
provider works the same way (5 min validity, renewed every 30 s); our sections are short.
Other storage (pyarrow file systems with neither) keeps an exclusive-create file broken after
`STALE_AFTER_S`, which is best effort only.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import threading
import time
import uuid
from typing import Dict, Optional, Tuple

from ..errors import ConcurrentWriteError
from .layout import LOCK_FILE
from .filesystem import Storage

WAIT_S = 120.0
STALE_AFTER_S = 60.0  # other non-local storage only
LEASE_S = 30.0  # object stores: how long a lease lasts unless renewed
RENEW_S = 3.0  # renewed this often (a tenth of the lease, as Hudi asks)
MARGIN_S = 5.0  # a holder whose last renewal is older than LEASE_S - MARGIN_S publishes nothing

# The leases this process holds, by (table, thread): `check_lease` looks there.
_held: Dict[Tuple[str, int], "TableLock"] = {}

_local_locks: Dict[str, threading.Lock] = {}
_local_locks_guard = threading.Lock()


def _local_lock(path: str) -> threading.Lock:
    with _local_locks_guard:
        return _local_locks.setdefault(path, threading.Lock())


class TableLock:
    def __init__(self, storage: Storage, wait_s: float = WAIT_S, lease_s: float = LEASE_S,
                 renew_s: float = RENEW_S):
        self.storage = storage
        self.wait_s = wait_s
        self.lease_s = lease_s
        self.renew_s = renew_s
        self._fd: Optional[int] = None
        self._thread_lock: Optional[threading.Lock] = None
        # the lease (object stores)
        self.owner = uuid.uuid4().hex
        self._version: Optional[dict] = None
        self._renewed_at = 0.0  # time.monotonic() of the PUT behind the last renewal
        self._lost = False
        self._stop = threading.Event()
        self._renewer: Optional[threading.Thread] = None
        self._guard = threading.Lock()

    def __enter__(self) -> "TableLock":
        deadline = time.monotonic() + self.wait_s
        if self.storage.is_local:
            self._enter_local(deadline)
        elif getattr(self.storage, "supports_conditional_update", False):
            self._enter_lease(deadline)
        else:
            self._enter_exclusive_file(deadline)
        # Under the lock, a pinned picture of the table (`Storage.pinned`) is read afresh: what
        # others committed up to the lock counts, whatever the holder read before it.
        self.storage.refresh()
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            self._thread_lock.release()
        elif self._version is not None or self._renewer is not None:
            self._release_lease()
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

    # ---- the lease (object stores) ---------------------------------------------------------
    def _lease_body(self, released: bool = False) -> bytes:
        return json.dumps({"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(),
                           "expires_at": time.time() + self.lease_s, "lease_s": self.lease_s,
                           "released": released}).encode()

    def _enter_lease(self, deadline: float) -> None:
        seen: Optional[Tuple[str, float]] = None  # (ETag, when we first saw it) of the lease we wait on
        pause = 0.01
        while True:
            current = self.storage.read_versioned(LOCK_FILE)
            sent_at = time.monotonic()
            if current is None:
                version = self.storage.put_if(LOCK_FILE, self._lease_body(), None)
            else:
                data, version = current
                etag = str(version.get("e_tag") or version.get("version"))
                if seen is None or seen[0] != etag:
                    seen = (etag, sent_at)
                version = (self.storage.put_if(LOCK_FILE, self._lease_body(), version)
                           if _lease_is_free(data, time.monotonic() - seen[1]) else None)
            if version is None:
                version = self._own_lease()  # our put landed but its answer was lost
            if version is not None:
                self._version, self._renewed_at = version, sent_at
                _held[(self.storage.base_path, threading.get_ident())] = self
                self._renewer = threading.Thread(target=self._renew, name="hudilite-table-lease", daemon=True)
                self._renewer.start()
                return
            if time.monotonic() > deadline:
                raise self._timeout()
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.5)

    def _renew(self) -> None:
        while not self._stop.wait(self.renew_s):
            with self._guard:
                if self._stop.is_set() or self._lost:
                    return
                sent_at = time.monotonic()
                try:
                    version = self.storage.put_if(LOCK_FILE, self._lease_body(), self._version)
                except Exception:  # a transient failure: try again at the next beat, the lease still runs
                    continue
                if version is None:
                    version = self._own_lease()  # our renewal landed but its answer was lost
                if version is None:  # taken over: we were too late
                    self._lost = True
                    return
                self._version, self._renewed_at = version, sent_at

    def _own_lease(self) -> Optional[dict]:
        """The lease's version when it names this holder (a refused conditional put whose
        earlier attempt, retried by the client, had landed); None when another holds it."""
        current = self.storage.read_versioned(LOCK_FILE)
        if current is None:
            return None
        try:
            owner = json.loads(current[0] or b"{}").get("owner")
        except ValueError:
            return None
        return current[1] if owner == self.owner else None

    def _release_lease(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        _held.pop((self.storage.base_path, threading.get_ident()), None)
        if not self._lost and self._version is not None:
            try:
                self.storage.put_if(LOCK_FILE, self._lease_body(released=True), self._version)
            except Exception:
                pass  # it expires on its own
        self._version = None

    def check(self) -> None:
        """Raise unless this lease is certainly still ours for MARGIN_S more (a holder stalled
        past its renewals may have been taken over)."""
        if self._renewer is None:  # not a lease: a flock is never taken over
            return
        if self._lost or time.monotonic() - self._renewed_at > self.lease_s - min(MARGIN_S, self.lease_s / 3):
            raise ConcurrentWriteError(f"table at {self.storage.base_path}: this writer's lease on the table lock "
                                       f"({LOCK_FILE}) ran out or was taken over; nothing was published")


def _lease_is_free(data: bytes, unchanged_for_s: float) -> bool:
    """A lease another writer may take: released, or seen unchanged by us (same ETag) for a
    whole lease, by our own monotonic clock. No wall clock is compared: hosts whose clocks
    disagree could otherwise both hold it. An unreadable lease waits the default lease."""
    try:
        lease = json.loads(data or b"{}")
        return bool(lease.get("released")) or unchanged_for_s >= float(lease.get("lease_s", LEASE_S))
    except (ValueError, TypeError, AttributeError):
        return unchanged_for_s >= LEASE_S


def check_lease(storage: Storage) -> None:
    """Called before an object store publishes a completed instant: refuse when this thread
    holds the table's lease and it may no longer be ours."""
    held = _held.get((storage.base_path, threading.get_ident()))
    if held is not None:
        held.check()
