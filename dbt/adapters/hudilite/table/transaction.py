"""One write's life cycle on the driver: claim an instant, keep a heartbeat, publish or roll back.

Protocol: claim T (exclusive create of `.hoodie/.hudilite/writers/<T>.json`), later than every
instant and claim of a listing of the claims, then the timeline: the write's first listing when
at most CLAIM_ON_LISTING_S old and behind the clock (`_claims_of_first_listing`; writers on
hosts whose clocks disagree by more than that window's length could then claim out of order, as
Hudi's own writers can at any time), else one of its own. Then write
`<T>.<action>.requested`, then the inflight file, let the tasks write base files (each one
after its marker), reconcile the markers with the tasks' write stats (files of retried or
speculative attempts are deleted), then, under the table lock, check for conflicts with the
instants completed since the write began (`conflict.py`) and publish the completed instant by
atomic rename. A failure anywhere before publishing deletes the markers' files and the
instant's files.

Writers run side by side (optimistic concurrency). A pending instant whose writer is gone is
rolled back by the next writer, under the lock; a writer whose own instant was rolled back
never publishes. Liveness: a writer is alive while its heartbeat (the claim file's mtime,
touched every HEARTBEAT_INTERVAL_S) is younger than HEARTBEAT_TIMEOUT_S plus
CLOCK_SKEW_TOLERANCE_S; on the same host a process that no longer exists is dead at once. The
pid is never trusted alone (another host, another pid namespace, a reused pid).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import posixpath
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from .storage import faults
from .format.commit import CommitMetadata
from .conflict import KeysOf, find_conflict
from .errors import ConcurrentWriteError
from .metadata.timeline import instant_files
from .format.instant import INFLIGHT, RESTORE, Instant, format_instant_time, next_instant_time
from .metadata.record_index import FOLDER as RECORD_INDEX_FOLDER
from .metadata.table import MetadataTable
from .storage.layout import WRITERS_DIR, marker_path, markers_dir, writer_instant, writer_path
from .storage.lock import TableLock
from .storage.filesystem import Storage
from .format.timeline import Timeline

HEARTBEAT_INTERVAL_S = 5.0
PUBLISH_DOUBT_S = 30.0  # an object store's PUT whose answer was lost may land this long after
CLAIM_ON_LISTING_S = 2.0  # a claim may be made on a write's first listing this old (`_claims_of_first_listing`)
BRIEF_WRITE_S = 10.0  # a write this short, begun with no other in flight, lists the timeline only under its lock
HEARTBEAT_TIMEOUT_S = 60.0
CLOCK_SKEW_TOLERANCE_S = 30.0
ROLLED_BACK = "rolled_back"  # another host's clock, or the storage server's, may run ahead

_active_in_this_process: Set[str] = set()
logger = logging.getLogger("hudilite")


def marked_files(storage: Storage, instant: str) -> List[str]:
    """Data files (relative paths) that tasks of `instant` started to write."""
    return _marked(storage.list_files_recursive(markers_dir(instant)))


def _marked(in_markers: Iterable[str]) -> List[str]:
    """The files that a markers folder's listing (paths relative to it) announces."""
    return sorted(p[: -len(".marker")] for p in in_markers if p.endswith(".marker"))


def claimed_instants(storage: Storage) -> List[str]:
    return sorted(filter(None, (writer_instant(n) for n in storage.list_names(WRITERS_DIR))))


def claims_by_state(storage: Storage) -> Tuple[List[str], List[str]]:
    """From one listing of the claims: (claimed instants that were not rolled back: their
    writers may be between claim and requested, where the timeline does not show them yet;
    claims kept as tombstones of rolled-back instants)."""
    open_, tombstones = [], []
    for instant in claimed_instants(storage):
        (tombstones if _rolled_back(storage, instant) else open_).append(instant)
    return open_, tombstones


def open_claims(storage: Storage) -> List[str]:
    return claims_by_state(storage)[0]


@dataclass(frozen=True)
class Writers:
    """The timeline and the claims, read as one judgement (`writers_now`)."""
    instants: List[Instant]  # the active timeline, listed after the claims were read
    claims: Set[str]  # open claims
    tombstones: List[str]  # claims of rolled-back instants

    @property
    def completed(self) -> List[str]:
        return [i.timestamp for i in self.instants if i.is_completed]

    @property
    def in_flight(self) -> Set[str]:
        """Instants a writer may still publish: pending on the timeline, or claimed."""
        return {i.timestamp for i in self.instants if not i.is_completed} | self.claims

    def first_in_flight(self) -> Optional[str]:
        holes = sorted(self.in_flight - set(self.completed))  # a claim outlives its publish by a moment
        return holes[0] if holes else None


def writers_now(storage: Storage, timeline: Timeline) -> Writers:
    """The writers of the table now. The timeline is listed before and after the claims are
    read, until two listings complete the same instants, so a writer finishing meanwhile is
    seen (on the timeline, or by its claim)."""
    with timeline.pinned():
        completed = [i.timestamp for i in timeline.completed()]  # as the caller pinned it: listed again below
        while True:
            claims, tombstones = claims_by_state(storage)
            timeline.refresh()
            instants = timeline.instants()
            again = [i.timestamp for i in instants if i.is_completed]
            if again == completed:
                return Writers(instants, set(claims), tombstones)
            completed = again


def first_write_in_flight(storage: Storage, timeline: Timeline) -> Tuple[List[str], Optional[str]]:
    """(completed instants, the earliest instant a writer may still publish). Writers claim
    times in order but publish in any order: an instant before that one is final, one after
    it may yet get an earlier neighbour (Hudi's "hollow commit")."""
    writers = writers_now(storage, timeline)
    return writers.completed, writers.first_in_flight()


def _claim_time(timeline: Timeline, owner: dict, claims: Optional[List[str]] = None) -> str:
    """A new instant time, later than every instant and claim, claimed exclusively. The
    timeline stays pinned as listed for it (the caller's picture from then on). `claims`: the
    claims as the caller listed them just before it listed the timeline (`_list_writers`)."""
    storage = timeline.storage
    while True:
        if claims is None:
            claims = _list_writers(timeline)
        seen = timeline.instant_times() + claims
        candidate = next_instant_time(max(seen) if seen else None)
        if storage.create_exclusive(writer_path(candidate), json.dumps(owner).encode()):
            return candidate
        claims = None


def _list_writers(timeline: Timeline) -> List[str]:
    """The claimed instants, then the timeline listed afresh into the picture, in that order: a
    writer whose claim was gone by the time the claims were listed has its instant on the timeline."""
    claims = claimed_instants(timeline.storage)
    timeline.refresh()
    timeline.instant_times()
    return claims


# A pinned value: (monotonic time and wall-clock instant time at the listing's start, the claims).
_FIRST_LISTING = "claims listed before the timeline"


def list_writers_first(timeline: Timeline) -> None:
    """At a write's start, before its picture lists the timeline: the claims, then the timeline
    (`_list_writers`), so that the claim made soon after is made on this listing, not on one of
    its own. A picture that listed the timeline already is left as it is."""
    if timeline.is_listed():
        return
    began, wall = time.monotonic(), format_instant_time(dt.datetime.now(dt.timezone.utc))
    claims = claimed_instants(timeline.storage)
    timeline.instant_times()
    timeline.storage.pinned_value(_FIRST_LISTING, lambda: (began, wall, claims))


def _claims_of_first_listing(timeline: Timeline) -> Optional[List[str]]:
    """The claims `list_writers_first` listed, if that began at most CLAIM_ON_LISTING_S ago and
    every instant it saw is older than its start (once: a second claim lists afresh). A writer
    that claimed after that listing and completed before this claim is not seen; the claim then
    takes the clock's time, later than that writer's on the same clock, never `newest + 1 ms`,
    which could be that writer's own time."""
    storage = timeline.storage
    if not storage.is_pinned(_FIRST_LISTING):
        return None
    began, wall, claims = storage.pinned_value(_FIRST_LISTING, lambda: None)
    storage.forget(_FIRST_LISTING)
    seen = timeline.instant_times() + claims
    if time.monotonic() - began > CLAIM_ON_LISTING_S or (seen and max(seen) >= wall):
        return None
    return claims


def reserve_service_time(timeline: Timeline, action: str, writers: Optional["Writers"] = None) -> str:
    """An instant time for a table service (clean, restore): claimed like a write's, and a
    tombstone from the start, since no write will publish under it. `writers`: as the caller
    judged them just before (`writers_now`: the claims, then the timeline), so not listed again."""
    claims = None if writers is None else sorted(writers.claims | set(writers.tombstones))
    return _claim_time(timeline, {"state": ROLLED_BACK, "service": action}, claims)


def _writer_is_alive(storage: Storage, instant: str, timeout_s: float) -> bool:
    """Whether the writer of a pending instant still works on it. Its claim file may go at any
    moment (the writer finished): gone counts as not alive, and the caller looks again under
    the table lock before it rolls anything back."""
    try:
        return _claim_is_alive(storage, instant, timeout_s)
    except FileNotFoundError:
        return False


def _claim_is_alive(storage: Storage, instant: str, timeout_s: float) -> bool:
    path = writer_path(instant)
    if not storage.exists(path):
        return False
    try:
        owner = json.loads(storage.read_text(path) or "{}")
    except ValueError:
        owner = {}
    if owner.get("state") == ROLLED_BACK:
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
    return time.time() - storage.mtime_seconds(path) < timeout_s + CLOCK_SKEW_TOLERANCE_S


def _rolled_back(storage: Storage, instant: str) -> bool:
    try:
        return json.loads(storage.read_text(writer_path(instant)) or "{}").get("state") == ROLLED_BACK
    except (FileNotFoundError, ValueError):
        return True  # a claim that is gone or unreadable is not ours to publish


def rollback(storage: Storage, timeline: Timeline, instant: Instant) -> None:
    """Undo a pending instant: its data files first, its timeline files last, so a rollback
    that dies half-way is simply run again by the next writer."""
    metadata_table = MetadataTable(storage)
    for path in marked_files(storage, instant.timestamp):
        if metadata_table.written_by(path, instant.timestamp):
            for each in instant_files(storage, path):
                storage.delete_file(each)
    storage.delete_dir(markers_dir(instant.timestamp))
    timeline.delete_pending(instant)
    # The claim stays as a tombstone so the instant time is never handed out again.
    storage.write_bytes(writer_path(instant.timestamp), json.dumps({"state": ROLLED_BACK}).encode())


def rollback_dead_writers(storage: Storage, timeline: Timeline, timeout_s: float = HEARTBEAT_TIMEOUT_S,
                          claims: Optional[List[str]] = None) -> List[str]:
    """Roll back the pending instants whose writer is gone, and the claims of writers that died
    before their instant reached the timeline (they would count as in flight for ever, holding
    back changes reads and archival); live writers go on beside us. `claims`: the claimed
    instants as listed before the caller's picture of the timeline (listed here when None)."""
    dead = [i for i in timeline.pending() if not _writer_is_alive(storage, i.timestamp, timeout_s)]
    abandoned = _abandoned_claims(storage, timeline, timeout_s, claims)
    if not dead and not abandoned:
        return []
    rolled_back = []
    with TableLock(storage):  # a writer publishing now must not lose its files under it (the timeline read afresh)
        pending = {i.timestamp: i for i in timeline.pending()}
        for instant in dead:
            if instant.timestamp in pending and not _writer_is_alive(storage, instant.timestamp, timeout_s):
                rollback(storage, timeline, pending[instant.timestamp])
                rolled_back.append(instant.timestamp)
        for instant in set(abandoned) & set(_abandoned_claims(storage, timeline, timeout_s)):
            storage.write_bytes(writer_path(instant), json.dumps({"state": ROLLED_BACK}).encode())
            rolled_back.append(instant)
    return sorted(rolled_back)


def _abandoned_claims(storage: Storage, timeline: Timeline, timeout_s: float,
                      claims: Optional[List[str]] = None) -> List[str]:
    on_timeline = {i.timestamp for i in timeline.instants()}
    off_timeline = [t for t in (claimed_instants(storage) if claims is None else claims) if t not in on_timeline]
    return [t for t in off_timeline if not _rolled_back(storage, t) and not _writer_is_alive(storage, t, timeout_s)]


class WriteTransaction:
    def __init__(self, storage: Storage, timeline: Timeline, action: str, keys_of: Optional[KeysOf] = None,
                 check: Optional[Callable[[], Optional[str]]] = None, base_schema: Optional[str] = None,
                 heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
                 heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S):
        """`keys_of` reads the record keys of base files: given for tables with record keys,
        whose concurrent inserts of one key conflict. `check`, run under the lock before
        publishing, says why not to publish (None: go ahead). `base_schema` is the table
        schema this write began from."""
        if timeline.storage is not storage:  # the table lock reads afresh the picture of the storage it is given
            raise ValueError("a write's timeline must read through the write's own Storage")
        self.storage = storage
        self.timeline = timeline
        self.action = action
        self.keys_of = keys_of
        self.check = check
        self.base_schema = base_schema
        self._keys: Dict[Tuple[str, ...], Set[str]] = {}
        self.seen: Set[str] = set()  # instants completed when the write began
        self.restores_seen: Set[str] = set()  # restores completed before it began
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.instant: Optional[str] = None
        self._stop = threading.Event()
        self._heartbeat: Optional[threading.Thread] = None
        self.completed = False
        self._requested = False  # its requested instant is on the timeline
        self._in_markers: List[str] = []  # the markers folder, as its commit listed it, and markers added since
        self._began_alone = False  # no other writer was in flight at the claim
        self._claimed_at = 0.0
        self.metadata_table = MetadataTable(storage, lambda: reserve_service_time(timeline, "compaction"))
        # From the start to the end of its commit, the write plans on one listing of the timeline
        # (with its own transitions taken in), not one per question; its commit lists again before
        # its lock (unless the write was brief and alone) and under it (every table lock does).
        self._planning = contextlib.ExitStack()

    def __enter__(self) -> "WriteTransaction":
        self._planning.enter_context(self.timeline.pinned())
        try:
            return self._begin()
        except BaseException as err:
            if self.instant is None:
                self._end_planning()
            else:  # claimed: undone as a failed write, or it would count as in flight until the process ends
                self.__exit__(type(err), err, err.__traceback__)
            raise

    def _end_planning(self) -> None:
        self._planning.close()  # the commit's checks read afresh under its lock

    def _begin(self) -> "WriteTransaction":
        # One listing of the claims and of the timeline, in that order (the write's first, when
        # recent), for the claim, right after it (the window that keeps claim times in order
        # stays short), and then for dead writers (their rollback reads afresh under the lock).
        claims = _claims_of_first_listing(self.timeline)
        if claims is None:
            claims = _list_writers(self.timeline)
        self.instant = self._claim(claims)
        self._claimed_at = time.monotonic()
        # A service's claim (a clean's, a restore's) names its instant on the timeline.
        self._began_alone = not self.timeline.pending() and set(self.timeline.instant_times()).issuperset(claims)
        _active_in_this_process.add(self.instant)
        # From the listing the claim was made on, which the write plans on too: a commit after it
        # is not in `seen`, and is checked for conflicts (nothing slips by).
        self.seen = {i.timestamp for i in self.timeline.completed()}
        # Only restores complete by now: one still running may yet rebuild what this write reads.
        self.restores_seen = {i.timestamp for i in self.timeline.service_instants(RESTORE) if i.is_completed}
        rollback_dead_writers(self.storage, self.timeline, self.heartbeat_timeout_s, claims)
        self._heartbeat = threading.Thread(target=self._beat, name=f"hudilite-heartbeat-{self.instant}", daemon=True)
        self._heartbeat.start()
        self.timeline.create_requested(self.instant, self.action)
        self._requested = True
        self.timeline.transition_to_inflight(self.instant, self.action)
        faults.reach("requested")
        return self

    def _claim(self, claims: Optional[List[str]]) -> str:
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "state": "writing"}
        return _claim_time(self.timeline, owner, claims)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_s):
            try:
                self.storage.touch(writer_path(self.instant))
            except OSError:
                pass

    def commit(self, metadata: CommitMetadata, private_files: Iterable[str] = (), record_index_planned: bool = False) -> None:
        """Keep exactly the files the successful task attempts reported (base files in the
        metadata, others such as index deltas and the metadata table's record_index logs
        apart), check for conflicts with what completed since the write began (before the lock,
        then under it what completed since), and publish under the table lock.
        `record_index_planned`: the write wrote record_index logs (maybe none) among them."""
        # What completed while the tasks ran is compared before the lock (reading keys can take a
        # while), and only what completed since under it. A brief write begun with no other in
        # flight skips that listing: a writer that claimed after it and finished before its lock
        # wrote little, and is compared under the lock. The table lock reads everything afresh;
        # the planning picture ends after the commit.
        if not self._began_alone or time.monotonic() - self._claimed_at > BRIEF_WRITE_S:
            self.timeline.refresh()
        try:
            self._commit(metadata, private_files, record_index_planned)
        finally:
            self._end_planning()

    def _commit(self, metadata: CommitMetadata, private_files: Iterable[str], record_index_planned: bool) -> None:
        reported = {s.path for s in metadata.write_stats} | set(private_files)
        self._in_markers = self.storage.list_files_recursive(markers_dir(self.instant))
        for path in _marked(self._in_markers):
            if path not in reported:  # a failed, retried or speculative attempt's file
                self.storage.delete_file(path)
        # The record_index logs' sizes go into the metadata table. The data files are not looked
        # for again: a task reports a file once its upload completed, and what else could take it
        # away (a rollback by another writer, a restore) is refused under the lock.
        sizes = {p: self._size(p) for p in reported if p.startswith(RECORD_INDEX_FOLDER + "/")}
        if any(size is None for size in sizes.values()):
            self.timeline.refresh()  # what took them: a rollback by another writer, a restore, a rebuild
            self._refuse_if_rolled_back()
            self._refuse_if_restored()  # a restore drops the metadata table, with this write's record_index logs
            raise ConcurrentWriteError(f"instant {self.instant}: the metadata table was dropped or rebuilt while "
                                       "this write ran; nothing of it was published")
        faults.reach("before_publish")
        # Most of the comparison runs before the lock (reading keys can take a while); under it,
        # only the instants that completed since.
        checked = self._check_conflicts(metadata, set())
        with TableLock(self.storage):  # the timeline read afresh: what completed up to the lock
            self._refuse_if_rolled_back()  # only here: a rollback takes this lock too
            self._refuse_if_restored()
            self._check_conflicts(metadata, checked)
            reason = self.check() if self.check else None
            if reason:
                raise ConcurrentWriteError(f"instant {self.instant} conflicts: {reason}; nothing of it was published")
            # Hudi's order: the metadata table's deltacommit completes before the data instant.
            self.metadata_table.record_commit(self.instant, metadata, self._mark, sizes if record_index_planned else None)
            faults.reach("metadata_deltacommit")
            try:
                self.timeline.complete(self.instant, self.action, metadata)
            except OSError:
                if not self._published_after_all():
                    raise
            self.completed = True
            try:
                self.metadata_table.after_publish()
            except Exception as err:  # noqa: BLE001 - the write is committed; the next one compacts
                logger.warning("table at %s: metadata table compaction failed, the next write retries it: %s",
                               self.storage.base_path, err)

    def _size(self, path: str) -> Optional[int]:
        try:
            return self.storage.size(path)
        except FileNotFoundError:
            return None

    def _mark(self, path: str) -> None:
        """A marker for a file of this instant outside its tasks (the metadata table's): a
        rollback of the instant deletes it."""
        marker = marker_path(self.instant, path)
        self.storage.write_bytes(marker, b"")
        self._in_markers.append(posixpath.relpath(marker, markers_dir(self.instant)))

    def _published_after_all(self) -> bool:
        """Whether a publish that failed had landed after all. On an object store a PUT whose
        answer was lost may still be applied a moment later: look again for as long as a
        request may take, so that the write is neither reported failed while it committed, nor
        rolled back under its own completed instant."""
        deadline = time.monotonic() + (0 if self.storage.is_local else PUBLISH_DOUBT_S)
        while True:
            if self.timeline.is_published(self.instant, self.action):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(1.0)

    def _check_conflicts(self, metadata: CommitMetadata, checked: Set[str]) -> Set[str]:
        """Compare with the instants completed since the write began, but `checked`; returns
        every instant compared so far."""
        others = [(i.timestamp, self.timeline.metadata(i)) for i in self.timeline.completed()
                  if i.timestamp not in self.seen and i.timestamp not in checked]
        keys_of = self._cached_keys if self.keys_of is not None else None
        reason = find_conflict(metadata, others, keys_of, self.base_schema)
        if reason:
            raise ConcurrentWriteError(f"instant {self.instant} conflicts: {reason}; nothing of it was published")
        return checked | {t for t, _ in others}

    def _cached_keys(self, paths: List[str]) -> Set[str]:
        key = tuple(paths)
        if key not in self._keys:
            try:
                self._keys[key] = self.keys_of(paths)
            except (FileNotFoundError, OSError) as err:  # cleaned meanwhile: the other commit is old news
                raise ConcurrentWriteError(f"instant {self.instant}: cannot read the keys a concurrent commit "
                                           f"inserted ({err})") from None
        return self._keys[key]

    def _refuse_if_rolled_back(self) -> None:
        if self._rolled_back_by_another():
            raise self._rolled_back_error()

    def _rolled_back_by_another(self) -> bool:
        return _rolled_back(self.storage, self.instant) or self.instant not in {i.timestamp for i in self.timeline.pending()}

    def _rolled_back_error(self) -> ConcurrentWriteError:
        return ConcurrentWriteError(f"instant {self.instant} was rolled back by another writer (its heartbeat "
                                    "stopped for too long); nothing of it was published")

    def _refuse_if_restored(self) -> None:
        """A restore under way, or one since the write began that removed instants it read
        from (`restore`): the write would bring back what the restore took away."""
        restores = self.timeline.service_instants(RESTORE)
        if (restores and not restores[-1].is_completed) or {i.timestamp for i in restores} - self.restores_seen:
            # Its index lookups may have read an index the restore was about to rebuild.
            raise ConcurrentWriteError(f"instant {self.instant}: the table was restored while this write ran; "
                                       "nothing of it was published")
        completed = {i.timestamp for i in self.timeline.completed()}
        archived_through = self.timeline.archived().through or ""
        gone = sorted(t for t in self.seen if t not in completed and t > archived_through)
        if gone:
            raise ConcurrentWriteError(f"instant {self.instant}: the table was restored to before {gone[0]} while "
                                       "this write ran; nothing of it was published")

    def __exit__(self, exc_type, exc, tb) -> None:
        self._end_planning()
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        taken = False
        try:
            # The completed file is the commit, whatever interrupted the writer after its rename.
            if self.completed or self.timeline.is_published(self.instant, self.action):
                # As listed at the commit: on an object store a late task's marker since stays for
                # the cleaner to find (a file system drops the folder; the daily sweep finds its file).
                listed = self._in_markers or self.storage.list_files_recursive(markers_dir(self.instant))
                self.storage.delete_listed(markers_dir(self.instant), listed, [writer_path(self.instant)])
            else:
                # A write that failed because another writer rolled it back (and deleted its
                # files, an upsert's staged rows too) says so, whatever the failure looked like.
                if self._requested:
                    self.timeline.refresh()  # what another writer did, not the planning picture
                taken = (isinstance(exc, Exception) and not isinstance(exc, ConcurrentWriteError)
                         and self._requested and self._rolled_back_by_another())
                rollback(self.storage, self.timeline, Instant(self.instant, self.action, INFLIGHT))
        finally:
            _active_in_this_process.discard(self.instant)
        if taken:
            raise self._rolled_back_error() from exc

