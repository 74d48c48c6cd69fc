"""Timeline archival: the active timeline stays short however long a table lives.

As in Hudi, the active timeline (`.hoodie/`) keeps between `keep_min_commits` and
`keep_max_commits` completed instants; once it holds more than the maximum, the oldest move to
`.hoodie/archived/` until the minimum is left. Readers of a snapshot need nothing of the
archived instants: Hudi's readers (Java, hudi-rs) take files older than the active timeline as
committed. hudilite builds its view of a table from commit metadata instead of a listing, so
archiving folds what the archived instants leave readable into the *archived view*: the newest
slice each file group got from them, and the schemas those slices were written with.

What may be archived (Hudi's rules): never a pending instant or one after it; nothing the
cleaner has not finished with (a file group an archived replacecommit replaced must be gone,
or Hudi's readers would read it again); nothing after the record index's base (the index reads
the deltas of active instants only).

Deviation from Hudi: archived instants are kept as JSON, `hudilite_<first>_<last>.archive.json`
(each instant's completed file as it was), not as Hudi's Avro log files `.commits_.archive.N`.
Java's archived timeline reads only those, so it sees no archived instants: its snapshot reads
are unaffected; its incremental queries cannot start inside the archived range.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .commit import SPARK_SCHEMA_KEY, CommitMetadata
from .errors import ConfigurationError
from .file_group import BaseFile, FileSystemView
from .instant import Instant
from .layout import ARCHIVED_DIR

DEFAULT_KEEP_MIN_COMMITS = 20  # Hudi's hoodie.keep.min.commits
DEFAULT_KEEP_MAX_COMMITS = 30  # Hudi's hoodie.keep.max.commits
JAVA_ARCHIVE_PREFIX = ".commits_.archive"  # Hudi's archived log files


@dataclass(frozen=True)
class ArchivedView:
    """What the archived instants left readable. Empty until the first archival."""

    through: Optional[str] = None  # the newest archived instant
    first: Optional[str] = None  # the oldest
    count: int = 0
    files: Tuple[BaseFile, ...] = ()  # the newest archived slice of each live file group
    schemas: Dict[str, str] = field(default_factory=dict)  # instant -> Spark schema of its live slices

    def to_json(self) -> str:
        return json.dumps({
            "through": self.through, "first": self.first, "count": self.count,
            "files": [[f.partition, f.file_id, f.instant, f.path, f.num_records, f.size] for f in self.files],
            "schemas": self.schemas,
        })

    @classmethod
    def from_json(cls, text: str) -> "ArchivedView":
        body = json.loads(text)
        return cls(body["through"], body["first"], body["count"], tuple(BaseFile(*f) for f in body["files"]),
                   dict(body.get("schemas") or {}))

    def folded(self, commits: List[Tuple[Instant, CommitMetadata]]) -> "ArchivedView":
        """This view with `commits` (the next oldest completed instants, oldest first) archived too."""
        view = FileSystemView(commits, archived=self.files)
        files = tuple(sorted((g.latest for g in view.live_groups()), key=lambda f: f.path))
        schemas = dict(self.schemas)
        schemas.update({i.timestamp: m.extra[SPARK_SCHEMA_KEY] for i, m in commits if SPARK_SCHEMA_KEY in m.extra})
        live = {f.instant for f in files}
        return ArchivedView(through=commits[-1][0].timestamp, first=self.first or commits[0][0].timestamp,
                            count=self.count + len(commits), files=files,
                            schemas={t: s for t, s in schemas.items() if t in live})

    def describe(self) -> str:
        return f"{self.count} instants from {self.first} to {self.through}"


def archive_file_path(first: str, last: str) -> str:
    return posixpath.join(ARCHIVED_DIR, f"hudilite_{first}_{last}.archive.json")


def archive_file_body(commits: List[Tuple[Instant, str]]) -> bytes:
    """The archived instants, each with its completed file's text as it was."""
    return json.dumps({"instants": [{"instant": i.timestamp, "action": i.action, "completed": text}
                                    for i, text in commits]}, indent=1).encode()


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


def java_archive_files(names: Iterable[str]) -> List[str]:
    return sorted(n for n in names if n.startswith(JAVA_ARCHIVE_PREFIX))
