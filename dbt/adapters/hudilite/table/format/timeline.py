"""The timeline under `.hoodie/`: which instants exist, in which state, and what they wrote.

Completed instants are immutable, so their parsed metadata is cached per table object.
State transitions are file creations; the completed file is the commit point and is
published by atomic rename. Instants archived (`archival`) leave the active timeline; the
view of the table starts from what they left readable, ours or Java's writer's archival.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
from dataclasses import replace
from typing import Dict, Iterable, List, Optional, Tuple

from . import archived_timeline
from . import avro_metadata
from . import lsm_history
from .archived_timeline import ArchivedView
from .commit import CommitMetadata
from .file_group import FileSystemView
from .instant import (ACTIONS, CLUSTERING, COMMIT, COMPLETED, INFLIGHT, REPLACE_COMMIT, REQUESTED, SAVEPOINT, Instant,
                      instant_file_name, is_instant_time, next_instant_time, parse_instant_file_name, to_instant_time)
from ..errors import CorruptTableError, TimelineError
from ..storage.lock import check_lease
from .properties import timeline_folders
from ..storage.layout import ARCHIVED_DIR, ARCHIVED_VIEW, HOODIE_DIR, TMP_DIR, archived_dir, history_dir, timeline_dir
from ..storage.filesystem import Storage

_STATE_RANK = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}
_TIMES = re.compile(r"\d{17}")  # the requested and completion times in an instant file's name


def _most_advanced(names: List[str], actions, after: Optional[str] = None) -> List[Instant]:
    """The instants of `actions` among `.hoodie/` file names (newer than `after`), each in its
    most advanced state, oldest first."""
    latest: Dict[str, Instant] = {}
    for name in names:
        instant = parse_instant_file_name(name)
        if instant is None or instant.action not in actions or (after is not None and instant.timestamp <= after):
            continue
        known = latest.get(instant.timestamp)
        if known is None or _STATE_RANK[instant.state] > _STATE_RANK[known.state]:
            latest[instant.timestamp] = instant
    return sorted(latest.values(), key=lambda i: i.timestamp)


_NAMES, _ARCHIVED = "timeline names", "archived view"  # their pinned values (`Storage.pinned_value`)


class Timeline:
    def __init__(self, storage: Storage, archived_dir: str = ARCHIVED_DIR, timeline_dir: str = HOODIE_DIR,
                 history_dir: Optional[str] = None):
        self.storage = storage
        self.dir = timeline_dir  # `.hoodie` (layout 1), `.hoodie/timeline` (layout 2: table versions 8, 9)
        self.archived_dir = archived_dir  # the table's archived timeline folder (hoodie.archivelog.folder)
        self.history_dir = history_dir  # layout 2's archived timeline, the LSM history
        self._archived_key = (_ARCHIVED, history_dir or archived_dir)  # its pinned value: per folder, as read
        self._metadata_cache: Dict[str, CommitMetadata] = {}
        self._archived: Tuple[tuple, ArchivedView] = ((), ArchivedView())  # ((view text, archive files), parsed)
        # The instant files listed when Hudi's archive folder was last listed, and its archive files.
        self._archive_listing: Tuple[frozenset, Optional[Tuple[Tuple[str, int], ...]]] = (frozenset(), None)
        # The last view built: (the archived view it starts from, its commits' instants, the view).
        # A later view of the same start and more commits extends it (`view`).
        self._view: Optional[Tuple[ArchivedView, Tuple[str, ...], FileSystemView]] = None
        self._completions: Tuple[tuple, Dict[str, str]] = ((), {})  # `archived_completions`, per history files

    @classmethod
    def of_table(cls, storage: Storage, properties: Dict[str, str]) -> "Timeline":
        """The timeline of the table whose hoodie.properties hold `properties`, in its layout."""
        timeline_folder, history_folder = timeline_folders(properties)
        return cls(storage, archived_dir(properties.get("hoodie.archivelog.folder", "archived").strip("/")),
                   timeline_dir(timeline_folder), history_dir(timeline_folder, history_folder))

    def pinned(self):
        """One listing of `.hoodie/` and one read of the archived view while pinned
        (`Storage.pinned`), plus what this object itself writes (each transition is taken in).
        For a write's planning, between its start and the lock of its commit."""
        return self.storage.pinned()

    def refresh(self) -> None:
        """Forget the pinned listing and archived view: the next question lists the timeline
        again (the rest of the picture stays: a table lock reads all of it afresh)."""
        self.storage.forget(_NAMES, self._archived_key)

    def is_listed(self) -> bool:
        """Whether the pinned picture holds a listing of `.hoodie/`."""
        return self.storage.is_pinned(_NAMES)

    def _names(self) -> List[str]:
        return self.storage.pinned_value(_NAMES, lambda: self.storage.list_names(self.dir))

    @contextlib.contextmanager
    def _changing(self, added: Iterable[str] = (), removed: Iterable[str] = ()):
        """This object's own change to `.hoodie/`: a pinned listing takes it in (listing again
        would add only what others did, which a pin leaves out until `refresh`). One that fails
        leaves the store unknown: the picture goes."""
        try:
            yield
        except BaseException:
            self.refresh()
            raise
        added, removed = [posixpath.basename(p) for p in added], {posixpath.basename(p) for p in removed}
        self.storage.pinned_update(_NAMES, lambda names: [n for n in names if n not in removed] + added)

    def archived(self) -> ArchivedView:
        """What archived instants left readable (empty before the first archival): our archived
        view, with the commits of Hudi archive files newer than it folded in (what Java's
        writer archived). Read with every listing; parsed again only when either changed."""
        return self.storage.pinned_value(self._archived_key, self._read_archived)

    def _read_archived(self, names: Optional[List[str]] = None) -> ArchivedView:
        try:
            text = self.storage.read_text(ARCHIVED_VIEW)
        except FileNotFoundError:
            text = ""
        files = self._archive_files(names)
        key = (text, files)
        if key != self._archived[0]:
            view = ArchivedView.from_json(text) if text else ArchivedView()
            newer = self._archived_commits(list(files), view.through) if files else []
            self._archived = (key, view.folded(newer) if newer else view)
        return self._archived[1]

    def _archived_commits(self, files: List[Tuple[str, int]], after: Optional[str]) -> List[Tuple[Instant, CommitMetadata]]:
        """The completed commits in the archive `files` newer than `after`, oldest first: Hudi's
        archive log files at layout 1, the LSM history's parquet files at layout 2."""
        if self.history_dir is None:
            return archived_timeline.archived_commits(self.storage, files, after, self.archived_dir)
        return [(Instant(e.instant, e.action, COMPLETED, e.completion), CommitMetadata.from_bytes(e.metadata or b""))
                for e in lsm_history.read_history(self.storage, self.history_dir, after, ACTIONS, files)]

    def _archive_files(self, names: Optional[List[str]]) -> Tuple[Tuple[str, int], ...]:
        """Hudi's archive files (name, size): its archive log files (layout 1), or the files the
        LSM history's manifest lists (layout 2). With the `.hoodie/` listing `names` they were read
        with, listed again only once an instant file seen then is gone: Hudi's archiver removes
        the instants it archived after writing their archive file, and until it does Hudi reads
        them as active, as we do (ours writes the archived view first, read every time)."""
        listed = None if names is None else frozenset(n for n in names if parse_instant_file_name(n) is not None)
        seen, files = self._archive_listing
        if listed is not None and files is not None and seen and seen <= listed:  # seen empty: nothing could go
            return files
        if self.history_dir is not None:
            files = tuple(lsm_history.history_files(self.storage, self.history_dir))
        else:
            files = tuple((name, size) for name, size in sorted(self.storage.list_files_with_sizes(self.archived_dir))
                          if "/" not in name and archived_timeline.archive_version(name) is not None)
        if listed is not None:  # without the listing it goes with, a later one could not tell what went
            self._archive_listing = (listed, files)
        return files

    def file_names(self) -> List[str]:
        """The names in `.hoodie/` (pinned: as listed for the picture)."""
        return list(self._names())

    def instant_times(self) -> List[str]:
        """The times in every instant file's name on the active timeline, of any action and state
        (at layout 2 a completed instant's completion time too): a new time is later than all."""
        return [t for name in self._names() if is_instant_time(name[:17]) for t in _TIMES.findall(name.split(".", 1)[0])]

    def instants(self) -> List[Instant]:
        """Every instant on the active timeline, in its most advanced state, oldest first."""
        return self._active()[1]

    def _active(self) -> Tuple[ArchivedView, List[Instant]]:
        # Listed before the archived view is read: an archival in between only adds instants
        # the view already covers, which are dropped, never loses one.
        names = self._names()
        archived = self.storage.pinned_value(self._archived_key, lambda: self._read_archived(names))
        # An archived instant's files may outlive an archival that died: they are not active.
        return archived, _most_advanced(names, ACTIONS, after=archived.through)

    def completed(self) -> List[Instant]:
        return [i for i in self.instants() if i.is_completed]

    # ---- the table services' instants: Avro metadata, not part of any snapshot ----------------
    def service_instants(self, action: str) -> List[Instant]:
        """The clean, savepoint or restore instants, each in its most advanced state, oldest first."""
        return _most_advanced(self._names(), (action,))

    def savepoints(self) -> List[str]:
        """The savepointed instants (`savepoint`), oldest first."""
        return [i.timestamp for i in self.service_instants(SAVEPOINT) if i.is_completed]

    def service_metadata(self, instant: Instant) -> dict:
        """The Avro record in a service instant's file (a plan while requested or inflight)."""
        return avro_metadata.decode(self.storage.read_bytes(self.path_of(instant)))

    def write_service_instant(self, instant: Instant, schema: Optional[dict] = None, record: Optional[dict] = None) -> None:
        """Write a service instant's file, by atomic rename: a plan is read back to finish the work."""
        body = b"" if schema is None else avro_metadata.encode(schema, record)
        if instant.is_completed and self.orders_by_completion and instant.completion_time is None:
            if self._listed_completed(instant.timestamp, instant.action) is not None:
                return  # an earlier attempt completed it: a second completion time would be a second instant
            instant = replace(instant, completion_time=self._completion_time())
        path = self.path_of(instant)
        if instant.is_completed:
            self._publish(path, body)
        else:
            with self._changing(added=[path]):
                self.storage.write_atomic(path, body, TMP_DIR)

    def pending(self) -> List[Instant]:
        return [i for i in self.instants() if not i.is_completed]

    def latest_completed(self) -> Optional[Instant]:
        done = self.completed()
        return done[-1] if done else None

    def metadata(self, instant: Instant) -> CommitMetadata:
        if not instant.is_completed:
            raise TimelineError(f"instant {instant.timestamp} is {instant.state.lower()}, not completed")
        cached = self._metadata_cache.get(instant.timestamp)
        if cached is None:
            path = self.path_of(instant)
            data = self.storage.read_bytes(path)
            try:
                if not data.strip():
                    raise ValueError("the file is empty")
                cached = CommitMetadata.from_bytes(data)
            except (ValueError, TypeError, AttributeError, EOFError) as err:
                raise CorruptTableError(
                    f"table at {self.storage.base_path}: completed instant {path} is unreadable ({err}); it was "
                    "truncated or damaged: restore it from a backup, or remove it to drop that commit") from None
            self._metadata_cache[instant.timestamp] = cached
        return cached

    def commits(self, as_of: Optional[str] = None) -> List[Tuple[Instant, CommitMetadata]]:
        """The active completed instants up to `as_of`, with their metadata."""
        return self._state(as_of)[1]

    def _state(self, as_of: Optional[str]) -> Tuple[ArchivedView, List[Tuple[Instant, CommitMetadata]]]:
        """The archived view and the active commits after it, read consistently: an instant
        archived between the listing and the read of its file makes us read again."""
        for _ in range(10):
            archived, instants = self._active()
            try:
                return archived, [(i, self.metadata(i)) for i in instants
                                  if i.is_completed and (as_of is None or i.timestamp <= as_of)]
            except FileNotFoundError:
                self.refresh()
                continue
        raise TimelineError(f"table at {self.storage.base_path}: the timeline kept changing under the reader")

    def view(self, as_of: Optional[str] = None) -> FileSystemView:
        """The file groups as of `as_of` (default: the latest completed instant). Built from
        the last view this timeline built when its commits are the first of these (the usual
        case: a write's view, then the view after its commit), so a write pays for the commits
        that are new, not for every file group of the table again."""
        archived, commits = self._state(as_of)
        if as_of is not None and archived.through is not None and as_of < archived.through:
            raise self.archived_error(as_of, archived)
        stamps = tuple(i.timestamp for i, _ in commits)
        last = self._view
        if last is not None and last[0] is archived and stamps[:len(last[1])] == last[1]:
            view = last[2].extended(commits[len(last[1]):], as_of)
        else:  # the first view, another archived start, or a commit that completed behind newer ones
            view = FileSystemView(commits, as_of, archived.files)
        if last is None or last[1][:len(stamps)] != stamps:  # a view of fewer commits (time travel) is not kept
            self._view = (archived, stamps, view)
        return view

    @property
    def orders_by_completion(self) -> bool:
        """Timeline layout 2: changes are read by completion time (layout 1: by instant time)."""
        return self.history_dir is not None

    @property
    def clustering_action(self) -> str:
        """What a pending clustering is named: replacecommit at layout 1, clustering at layout 2
        (it completes as a replacecommit in both)."""
        return CLUSTERING if self.orders_by_completion else REPLACE_COMMIT

    def completed_view(self, start: str, end: str) -> Tuple[FileSystemView, set]:
        """The table as the instants completed by `end` (a completion time) left it, and those
        of them that completed after `start`, by their instant times."""
        archived, commits = self._state(None)
        done = [(i, m) for i, m in commits if i.completed_at <= end]
        changed = {i.timestamp for i, _ in done if i.completed_at > start}
        completions = self.archived_completions()
        # Hudi archives by instant time: an archived instant may have completed after an active
        # one, so whether the range reaches into the history is told by completion times.
        if completions and start < max(completions.values()):
            if end < max(completions.values()):
                raise self.archived_error(end, archived)
            changed |= {t for t, completed in completions.items() if start < completed <= end}
        return FileSystemView(done, None, archived.files), changed

    def completed_after(self, target: str) -> List[Instant]:
        """The completed instants a restore to completed instant `target` rolls back: those
        requested after it (layout 1); those that completed after it (layout 2, as Hudi 1.x
        restores: a checkpoint past the target's completion then names a rolled back instant)."""
        done = self.completed()
        if not self.orders_by_completion:
            return [i for i in done if i.timestamp > target]
        (at,) = [i.completed_at for i in done if i.timestamp == target]
        return sorted((i for i in done if i.completed_at > at), key=lambda i: i.completed_at)

    def completion_bound(self, start: str, end: Optional[str]) -> str:
        """Layout 2's end of a changes read: the latest completion time (active or archived) at or
        before `end` (all without it), never before `start`."""
        times = [i.completed_at for i in self.completed()] + list(self.archived_completions().values())
        if end is not None:
            times = [t for t in times if t <= end]
        return max(times + [start])

    def has_completion(self, value: str) -> bool:
        """Whether a completed instant, active or archived, completed at `value` (where a changes
        read ended: its instant time at layout 1)."""
        if any(i.completed_at == value for i in self.completed()):
            return True
        archived = self.archived()
        if archived.through is None:
            return False
        return value in self.archived_completions().values() if self.orders_by_completion else value <= archived.through

    def archived_completions(self) -> Dict[str, str]:
        """Layout 2: when each archived commit completed (its LSM history row); none at layout 1."""
        if self.history_dir is None:
            return {}
        files = self._archive_files(self._names())  # listed again only once an active instant file went
        if self._completions[0] != files:
            entries = lsm_history.read_history(self.storage, self.history_dir, None, ACTIONS, list(files))
            self._completions = (files, {e.instant: e.completion or e.instant for e in entries})
        return self._completions[1]

    def archived_error(self, wanted: str, archived: ArchivedView) -> TimelineError:
        return TimelineError(f"table at {self.storage.base_path}: {wanted} lies in the archived part of the timeline "
                             f"({archived.describe()}); time travel reaches back to the first active instant")

    def resolve(self, as_of) -> str:
        """The latest completed instant at or before `as_of` (an instant or a timestamp)."""
        wanted = to_instant_time(as_of)
        archived, instants = self._active()
        done = [i.timestamp for i in instants if i.is_completed]
        at_or_before = [t for t in done if t <= wanted]
        if not at_or_before:
            if archived.through is not None:
                raise self.archived_error(wanted, archived)
            first = done[0] if done else "none"
            raise TimelineError(f"no completed instant at or before {as_of} (first completed instant: {first})")
        return at_or_before[-1]

    # Transitions. A pending instant's files may be empty; only the completed one carries metadata.
    def path_of(self, instant: Instant) -> str:
        """Where an instant's file is (relative to the table). A completed instant at layout 2
        is named with its completion time, found in the listing when not given."""
        if instant.is_completed and instant.completion_time is None and self.orders_by_completion:
            instant = self._listed_completed(instant.timestamp, instant.action) or instant
        return posixpath.join(self.dir, instant.file_name)

    def _listed_completed(self, timestamp: str, action: str, names: Optional[List[str]] = None) -> Optional[Instant]:
        for name in self._names() if names is None else names:
            if name.startswith(timestamp + "_"):
                instant = parse_instant_file_name(name)
                if instant is not None and instant.is_completed and instant.action == action:
                    return instant
        return None

    def _path(self, timestamp: str, action: str, state: str) -> str:
        return posixpath.join(self.dir, instant_file_name(timestamp, action, state))

    def create_requested(self, timestamp: str, action: str) -> None:
        # Layout 2 keeps an (empty) HoodieRequestedReplaceMetadata in a requested replacecommit.
        body = b""
        if action == REPLACE_COMMIT and self.orders_by_completion:
            body = avro_metadata.encode(avro_metadata.REQUESTED_REPLACE_METADATA, {})
        self._write(self._path(timestamp, action, REQUESTED), body)

    def transition_to_inflight(self, timestamp: str, action: str) -> None:
        self._write(self._path(timestamp, action, INFLIGHT))

    def _write(self, path: str, body: bytes = b"") -> None:
        with self._changing(added=[path]):
            self.storage.write_bytes(path, body)

    def complete(self, timestamp: str, action: str, metadata: CommitMetadata) -> None:
        """Publish a commit (or clustering) instant: its metadata as JSON at layout 1, as Avro
        with its completion time in the name at layout 2."""
        is_replace = action != COMMIT
        if self.orders_by_completion:
            body = metadata.to_avro(is_replace)
            done = Instant(timestamp, REPLACE_COMMIT if is_replace else COMMIT, COMPLETED, self._completion_time())
        else:
            body = metadata.to_json(is_replace).encode("utf-8")
            done = Instant(timestamp, action, COMPLETED)
        self._publish(self.path_of(done), body)
        self._metadata_cache[timestamp] = CommitMetadata.from_bytes(body)  # as a reader would read it

    def _completion_time(self) -> str:
        """Layout 2: the completion time of an instant completing now, under the table lock (on
        its fresh listing): later than every time on the timeline, so that a changes read that
        ended at the latest completion it saw misses nothing published after it."""
        times = self.instant_times() + list(self.archived_completions().values())
        return next_instant_time(max(times) if times else None)

    def _publish(self, path: str, body: bytes) -> None:
        """A completed instant, created only if absent: never replaced (`Storage.publish`)."""
        with self._changing(added=[path]):
            self.storage.publish(path, body, TMP_DIR, lambda: check_lease(self.storage))

    def is_published(self, timestamp: str, action: str) -> bool:
        """Whether the completed instant file exists: from then on the instant is committed."""
        if self.orders_by_completion:  # its name holds a completion time: looked for on a fresh listing
            done = REPLACE_COMMIT if action == CLUSTERING else action
            return self._listed_completed(timestamp, done, self.storage.list_names(self.dir)) is not None
        return self.storage.exists(self._path(timestamp, action, COMPLETED))

    def delete_instant_file(self, instant: Instant) -> None:
        """Remove one file of an instant that leaves the active timeline by a service (archival,
        a savepoint drop), which says in what order."""
        path = self.path_of(instant)
        with self._changing(removed=[path]):
            self.storage.delete_file(path)

    def write_archived_view(self, view: ArchivedView) -> None:
        """Archival's record of what it archived: from then on those instants are archived."""
        try:
            self.storage.write_atomic(ARCHIVED_VIEW, view.to_json().encode(), TMP_DIR)
        finally:
            self.refresh()

    def delete_pending(self, instant: Instant) -> None:
        """Remove a pending instant's files, inflight before requested, as Hudi does."""
        if instant.is_completed:
            raise TimelineError(f"refusing to delete completed instant {instant.timestamp}")
        inflight, requested = (self._path(instant.timestamp, instant.action, state) for state in (INFLIGHT, REQUESTED))
        with self._changing(removed=[inflight, requested]):
            self.storage.delete_file(inflight)
            self.storage.delete_file(requested)
