"""The cleaner: delete file slices no retained instant can read.

With `retain_commits = N`, the earliest retained instant E is the N-th newest completed
instant. Every snapshot as of E or later must stay readable, so a file group keeps all its
slices written after E, plus the newest slice written at or before E; a file group replaced
at or before E is read by no retained snapshot and goes entirely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from .errors import ConfigurationError
from .file_group import BaseFile, FileSystemView

DEFAULT_RETAIN_COMMITS = 10  # Hudi's hoodie.cleaner.commits.retained


@dataclass
class CleanPlan:
    earliest_retained: Optional[str]
    files_to_delete: List[BaseFile] = field(default_factory=list)


def plan_clean(view: FileSystemView, completed: List[str], retain_commits: int,
               cleaned_before: Optional[str] = None) -> CleanPlan:
    """What to delete to keep the last `retain_commits` instants readable. `cleaned_before` is
    the earliest instant an earlier clean retained: what it doomed is gone already."""
    if retain_commits < 1:
        raise ConfigurationError("retain_commits must be at least 1")
    if len(completed) <= retain_commits:
        return CleanPlan(earliest_retained=cleaned_before)
    earliest = completed[-retain_commits]
    if cleaned_before is not None and earliest <= cleaned_before:
        return CleanPlan(earliest_retained=cleaned_before)
    already = set() if cleaned_before is None else {f.path for f in unreadable_from(view, cleaned_before)}
    doomed = [f for f in unreadable_from(view, earliest) if f.path not in already]
    return CleanPlan(earliest_retained=earliest, files_to_delete=sorted(doomed, key=lambda f: f.path))


def unreadable_from(view: FileSystemView, earliest: str) -> List[BaseFile]:
    """Slices that no snapshot as of `earliest` or later reads."""
    doomed: List[BaseFile] = []
    for group in view.groups.values():
        if group.replaced_at is not None and group.replaced_at <= earliest:
            doomed.extend(group.slices)
            continue
        read_as_of_earliest_or_older = [s for s in group.slices if s.instant <= earliest]
        doomed.extend(read_as_of_earliest_or_older[:-1])
    return doomed
