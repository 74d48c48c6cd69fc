"""The cleaner: delete file slices that the retained snapshots no longer read.

Hudi's three policies:
- KEEP_LATEST_COMMITS (the default, N = 10): the earliest retained instant E is the N-th
  newest completed instant. Every snapshot as of E or later stays readable, so a file group
  keeps all its slices written after E plus the newest one written at or before E; a group
  replaced at or before E is read by no retained snapshot and goes entirely.
- KEEP_LATEST_BY_HOURS (N = 24): the same, with E the oldest instant of the last N hours.
- KEEP_LATEST_FILE_VERSIONS (N = 3): each live file group keeps its N newest slices; replaced
  groups go. E is then the oldest instant whose snapshot lost nothing.
Savepointed files are never deleted. E is recorded with the clean (`clean`): time travel and
archival stop there.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import AbstractSet, List, Optional

from ..errors import ConfigurationError
from ..format.file_group import BaseFile, FileSystemView
from ..format.instant import format_instant_time

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS, KEEP_LATEST_FILE_VERSIONS)
DEFAULT_RETAIN_COMMITS = 10  # Hudi's hoodie.cleaner.commits.retained
DEFAULT_RETAIN_HOURS = 24  # hoodie.cleaner.hours.retained
DEFAULT_RETAIN_FILE_VERSIONS = 3  # hoodie.cleaner.fileversions.retained


@dataclass(frozen=True)
class CleanPolicy:
    name: str = KEEP_LATEST_COMMITS
    retain_commits: int = DEFAULT_RETAIN_COMMITS
    retain_hours: int = DEFAULT_RETAIN_HOURS
    retain_file_versions: int = DEFAULT_RETAIN_FILE_VERSIONS

    def check(self) -> None:
        if self.name not in POLICIES:
            raise ConfigurationError(f"unknown cleaner policy {self.name!r}; choose one of {', '.join(POLICIES)}")
        for setting in ("retain_commits", "retain_hours", "retain_file_versions"):
            if getattr(self, setting) < 1:
                raise ConfigurationError(f"{setting} must be at least 1")


@dataclass
class CleanPlan:
    earliest_retained: Optional[str]
    files_to_delete: List[BaseFile] = field(default_factory=list)
    policy: str = KEEP_LATEST_COMMITS


def plan_clean(view: FileSystemView, completed: List[str], policy: CleanPolicy,
               cleaned_before: Optional[str] = None, kept: AbstractSet[str] = frozenset(),
               now: Optional[dt.datetime] = None) -> CleanPlan:
    """What `policy` deletes (never a path in `kept`), and the earliest instant whose snapshot
    stays readable. `cleaned_before` is the earliest instant an earlier clean retained: what
    it doomed is gone already."""
    policy.check()
    if policy.name == KEEP_LATEST_FILE_VERSIONS:
        doomed = [f for f in older_versions(view, policy.retain_file_versions) if f.path not in kept]
        earliest = earliest_intact(view, completed, doomed)
        if earliest is None or (cleaned_before is not None and earliest < cleaned_before):
            earliest = cleaned_before
        return CleanPlan(earliest, sorted(doomed, key=lambda f: f.path), policy.name)
    earliest = _earliest_to_retain(completed, policy, now)
    if earliest is None or (cleaned_before is not None and earliest <= cleaned_before):
        return CleanPlan(cleaned_before, policy=policy.name)
    already = set() if cleaned_before is None else {f.path for f in unreadable_from(view, cleaned_before)}
    doomed = [f for f in unreadable_from(view, earliest) if f.path not in already and f.path not in kept]
    return CleanPlan(earliest, sorted(doomed, key=lambda f: f.path), policy.name)


def _earliest_to_retain(completed: List[str], policy: CleanPolicy, now: Optional[dt.datetime]) -> Optional[str]:
    if policy.name == KEEP_LATEST_COMMITS:
        return completed[-policy.retain_commits] if len(completed) > policy.retain_commits else None
    horizon = format_instant_time((now or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(hours=policy.retain_hours))
    older = [t for t in completed if t < horizon]
    if not older:
        return None
    recent = [t for t in completed if t >= horizon]
    return recent[0] if recent else completed[-1]  # the latest snapshot always stays


def older_versions(view: FileSystemView, versions: int) -> List[BaseFile]:
    """All slices of replaced file groups, and each live group's slices but its newest `versions`."""
    doomed: List[BaseFile] = []
    for group in view.groups_with_history():
        doomed.extend(group.slices if group.replaced_at is not None else group.slices[:-versions])
    return doomed


def earliest_intact(view: FileSystemView, completed: List[str], doomed: List[BaseFile]) -> Optional[str]:
    """The oldest completed instant from which on no snapshot reads a file in `doomed` (None
    when no snapshot reads one). A slice is read by the snapshots from its own instant up to
    the next slice of its group or the group's replacement."""
    gone = {f.path for f in doomed}
    needed_until = None
    for group in view.groups_with_history():
        for position, piece in enumerate(group.slices):
            if piece.path not in gone:
                continue
            ends = [group.slices[position + 1].instant] if position + 1 < len(group.slices) else []
            ends += [group.replaced_at] if group.replaced_at is not None else []
            end = min(ends) if ends else None
            if end is None:
                raise ValueError(f"the cleaner would delete the newest slice of a live file group: {piece.path}")
            needed_until = end if needed_until is None else max(needed_until, end)
    if needed_until is None:
        return None
    return next((t for t in completed if t >= needed_until), needed_until)


def unreadable_from(view: FileSystemView, earliest: str) -> List[BaseFile]:
    """Slices that no snapshot as of `earliest` or later reads."""
    doomed: List[BaseFile] = []
    for group in view.groups_with_history():
        if group.replaced_at is not None and group.replaced_at <= earliest:
            doomed.extend(group.slices)
            continue
        read_as_of_earliest_or_older = [s for s in group.slices if s.instant <= earliest]
        doomed.extend(read_as_of_earliest_or_older[:-1])
    return doomed
