"""Timeline archival: the active timeline stays short however long a table lives.

As in Hudi, the active timeline (`.hoodie/`) keeps between `keep_min_commits` and
`keep_max_commits` completed instants; once it holds more than the maximum, the oldest move to
the archived timeline (`format.archived_timeline`) until the minimum is left. Readers of a
snapshot need nothing of the archived instants: Hudi's readers (Java, hudi-rs) take files older
than the active timeline as committed.

What may be archived (Hudi's rules): never a pending instant or one after it; nothing the
cleaner has not finished with (a file group an archived replacecommit replaced must be gone,
or Hudi's readers would read it again); nothing after the record index's base (the index reads
the deltas of active instants only). The runner (`maintenance`) archives what `plan_archive`
chooses.
"""

from __future__ import annotations

from typing import List, Optional

from ..errors import ConfigurationError

DEFAULT_KEEP_MIN_COMMITS = 20  # Hudi's hoodie.keep.min.commits
DEFAULT_KEEP_MAX_COMMITS = 30  # Hudi's hoodie.keep.max.commits


def check_keep(keep_min_commits: int, keep_max_commits: int) -> None:
    if keep_min_commits < 1 or keep_max_commits <= keep_min_commits:
        raise ConfigurationError(
            f"archival keeps between keep_min_commits and keep_max_commits instants: need 1 <= keep_min_commits < "
            f"keep_max_commits (got {keep_min_commits} and {keep_max_commits})")


def plan_archive(completed: List[str], keep_min_commits: int, keep_max_commits: int,
                 archivable_before: Optional[str], index_base: Optional[str]) -> List[str]:
    """The oldest completed instants to archive: none while at most `keep_max_commits` are
    active, else down to `keep_min_commits`, but only instants before `archivable_before`
    (what the cleaner has finished with; None: nothing) and at or before `index_base`."""
    check_keep(keep_min_commits, keep_max_commits)
    if len(completed) <= keep_max_commits or archivable_before is None:
        return []
    candidates = completed[: len(completed) - keep_min_commits]
    return [t for t in candidates if t < archivable_before and (index_base is None or t <= index_base)]
