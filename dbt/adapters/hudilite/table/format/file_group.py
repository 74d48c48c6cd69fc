"""File groups, file slices and base-file names, and the view of a table as of an instant.

A file group is every version of one fileId; with Copy-On-Write each version (file slice) is
a single base file `<fileId>_<writeToken>_<T>.parquet`. The view is built from the commit
metadata of completed instants, never from a listing, so files of pending or failed writes
(and anything else lying in a partition) are invisible by construction. Archived instants are
represented by the slices they left readable (`archived_timeline.ArchivedView`).
"""

from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .commit import CommitMetadata
from .instant import Instant

_BASE_FILE = re.compile(r"^(?P<file_id>[^_/]+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{17})\.parquet$")
# A metadata table's base file, and a Merge-On-Read log file:
# `.<fileId>_<base instant>.log.<version>_<writeToken>`.
_HFILE = re.compile(r"^(?P<file_id>[^_/]+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{17,})\.hfile$")
_LOG_FILE = re.compile(r"^\.(?P<file_id>[^_/]+)_(?P<instant>\d{17,})\.log\.(?P<version>\d+)_(?P<token>\d+-\d+-\d+)$")


def new_file_id() -> str:
    return f"{uuid.uuid4()}-0"


def write_token(task_partition: int, stage_id: int, attempt: int) -> str:
    return f"{task_partition}-{stage_id}-{attempt}"


def base_file_name(file_id: str, token: str, instant: str) -> str:
    return f"{file_id}_{token}_{instant}.parquet"


def relative_file_path(partition: str, file_name: str) -> str:
    return posixpath.join(partition, file_name) if partition else file_name


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant: str


def parse_base_file_name(name: str) -> Optional[BaseFileName]:
    m = _BASE_FILE.match(posixpath.basename(name))
    return BaseFileName(m["file_id"], m["token"], m["instant"]) if m else None


def parse_hfile_name(name: str) -> Optional[BaseFileName]:
    m = _HFILE.match(posixpath.basename(name))
    return BaseFileName(m["file_id"], m["token"], m["instant"]) if m else None


def hfile_name(file_id: str, token: str, instant: str) -> str:
    return f"{file_id}_{token}_{instant}.hfile"


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    base_instant: str
    version: int
    write_token: str


def log_file_name(file_id: str, base_instant: str, version: int, token: str) -> str:
    return f".{file_id}_{base_instant}.log.{version}_{token}"


def parse_log_file_name(name: str) -> Optional[LogFileName]:
    m = _LOG_FILE.match(posixpath.basename(name))
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["token"]) if m else None


@dataclass(frozen=True)
class BaseFile:
    """One file slice: the base file one instant wrote for one file group."""

    partition: str
    file_id: str
    instant: str
    path: str  # relative to the table's base path
    num_records: int
    size: int


@dataclass
class FileGroup:
    partition: str
    file_id: str
    slices: List[BaseFile] = field(default_factory=list)  # oldest first
    replaced_at: Optional[str] = None

    @property
    def latest(self) -> BaseFile:
        return self.slices[-1]


class FileSystemView:
    """File groups of a table as of one instant (inclusive)."""

    def __init__(self, commits: Iterable[Tuple[Instant, CommitMetadata]], as_of: Optional[str] = None,
                 archived: Iterable[BaseFile] = ()):
        """`archived`: the slices archived instants left readable, all older than `commits`."""
        self.as_of = as_of
        self.groups: Dict[Tuple[str, str], FileGroup] = {}
        self._history: set = set()  # keys of groups with more than one slice, or replaced (`groups_with_history`)
        for base_file in archived:
            self.groups[(base_file.partition, base_file.file_id)] = FileGroup(base_file.partition, base_file.file_id,
                                                                              [base_file])
        self._apply(commits, None)

    def extended(self, commits: Iterable[Tuple[Instant, CommitMetadata]], as_of: Optional[str] = None) -> "FileSystemView":
        """The view of this one's commits followed by `commits` (all newer than this view's):
        what `FileSystemView(all commits, as_of, archived)` builds, in the time of `commits`
        (the groups they touch are copied, so this view stays as it was)."""
        view = FileSystemView.__new__(FileSystemView)
        view.as_of = as_of
        view.groups = dict(self.groups)
        view._history = set(self._history)
        view._apply(commits, set())
        return view

    def _apply(self, commits: Iterable[Tuple[Instant, CommitMetadata]], copied: Optional[set]) -> None:
        """Add the slices and replacements of `commits` up to `as_of`; `copied`: the keys of
        groups this view owns already (None: it owns all), others are copied before a change."""
        def own(key: Tuple[str, str]) -> Optional[FileGroup]:
            group = self.groups.get(key)
            if group is not None and copied is not None and key not in copied:
                group = self.groups[key] = FileGroup(group.partition, group.file_id, list(group.slices), group.replaced_at)
                copied.add(key)
            return group

        as_of = self.as_of
        for instant, metadata in sorted(commits, key=lambda c: c[0].timestamp):
            if as_of is not None and instant.timestamp > as_of:
                break
            for stat in metadata.write_stats:
                key = (stat.partitionPath, stat.fileId)
                group = own(key)
                if group is None:
                    group = self.groups[key] = FileGroup(stat.partitionPath, stat.fileId)
                    if copied is not None:
                        copied.add(key)
                group.slices.append(
                    BaseFile(stat.partitionPath, stat.fileId, instant.timestamp, stat.path, stat.numWrites, stat.fileSizeInBytes)
                )
                if len(group.slices) > 1:
                    self._history.add(key)
            for partition, file_ids in metadata.replaced_file_ids.items():
                for file_id in file_ids:
                    group = self.groups.get((partition, file_id))
                    if group is not None and group.replaced_at is None:
                        own((partition, file_id)).replaced_at = instant.timestamp
                        self._history.add((partition, file_id))

    def groups_with_history(self) -> List[FileGroup]:
        """The file groups with an older slice or replaced: the only ones holding slices that
        no snapshot as of the latest instant reads (what the cleaner looks through)."""
        return [self.groups[k] for k in sorted(self._history)]

    def live_groups(self) -> List[FileGroup]:
        return [g for g in self.groups.values() if g.replaced_at is None and g.slices]

    def latest_base_files(self) -> List[BaseFile]:
        return sorted((g.latest for g in self.live_groups()), key=lambda f: f.path)

    def live_file_ids(self, partitions: Optional[Iterable[str]] = None) -> Dict[str, List[str]]:
        """fileIds of the live file groups, by partition (all partitions when None)."""
        wanted = None if partitions is None else set(partitions)
        out: Dict[str, List[str]] = {}
        for g in self.live_groups():
            if wanted is None or g.partition in wanted:
                out.setdefault(g.partition, []).append(g.file_id)
        return {p: sorted(ids) for p, ids in out.items()}
