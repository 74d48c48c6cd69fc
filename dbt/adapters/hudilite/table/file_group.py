"""File groups, file slices and base-file names, and the view of a table as of an instant.

A file group is every version of one fileId; with Copy-On-Write each version (file slice) is
a single base file `<fileId>_<writeToken>_<T>.parquet`. The view is built from the commit
metadata of completed instants, never from a listing, so files of pending or failed writes
(and anything else lying in a partition) are invisible by construction. Archived instants are
represented by the slices they left readable (`archival.ArchivedView`).
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
        for base_file in archived:
            self.groups[(base_file.partition, base_file.file_id)] = FileGroup(base_file.partition, base_file.file_id,
                                                                              [base_file])
        for instant, metadata in sorted(commits, key=lambda c: c[0].timestamp):
            if as_of is not None and instant.timestamp > as_of:
                break
            for stat in metadata.write_stats:
                key = (stat.partitionPath, stat.fileId)
                group = self.groups.setdefault(key, FileGroup(stat.partitionPath, stat.fileId))
                group.slices.append(
                    BaseFile(stat.partitionPath, stat.fileId, instant.timestamp, stat.path, stat.numWrites, stat.fileSizeInBytes)
                )
            for partition, file_ids in metadata.replaced_file_ids.items():
                for file_id in file_ids:
                    group = self.groups.get((partition, file_id))
                    if group is not None and group.replaced_at is None:
                        group.replaced_at = instant.timestamp

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
