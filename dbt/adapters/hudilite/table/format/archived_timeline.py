"""Hudi's archived timeline (table version 6): the instants archival moved out of `.hoodie/`.

Archived instants are written as Hudi writes them for table version 6 (0.x, and 1.x with
hoodie.write.table.version=6): `.hoodie/archived/.commits_.archive.N_1-0-1`, one new log file
(`log_format`) per archival with N one past the highest there, holding one Avro data block
of HoodieArchivedMetaEntry records (`avro_metadata.ARCHIVED_META_ENTRY`): for each instant its
requested and inflight states, then the completed state with the commit metadata as an Avro
HoodieCommitMetadata / HoodieReplaceCommitMetadata (`write_archive`). So Java's archived
timeline and Hudi's CLI (`commits showarchived`) see the archived history, and Hudi's archiver
merges our files with its own. (Hudi's incremental queries on table version 6 take their
commits from the active timeline only, whoever archived.)

hudilite builds its view of a table from commit metadata instead of a listing, so archiving
folds what the archived instants leave readable into the *archived view* (`ArchivedView`):
the newest slice each file group got from them, and the schemas those slices were written with.
Tables Java's writer archived are read through the same files: the completed commits in Hudi's
archives newer than the archived view are folded into it (`archived_commits`). Older tables
keep their JSON archives (`hudilite_<first>_<last>.archive.json`, `read_archive_file` reads
both kinds); their archived view already covers them. When to archive is the archival
service's (`services.archival`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from . import log_format
from . import avro_metadata
from .avro_metadata import ARCHIVED_META_ENTRY
from .commit import SPARK_SCHEMA_KEY, CommitMetadata
from ..errors import CorruptTableError
from .file_group import BaseFile, FileSystemView
from .instant import ACTIONS, COMPLETED, INFLIGHT, REPLACE_COMMIT, REQUESTED, Instant
from ..storage.layout import ARCHIVED_DIR, TMP_DIR

JAVA_ARCHIVE_PREFIX = ".commits_.archive"  # Hudi's archived log files
ARCHIVE_WRITE_TOKEN = "1-0-1"  # the write token Hudi's archiver uses (HoodieLogFormat.UNKNOWN_WRITE_TOKEN)
_HUDI_ARCHIVE = re.compile(r"^\.commits_\.archive\.(\d+)(_\d+-\d+-\d+)?$")
_LEGACY_ARCHIVE = re.compile(r"^hudilite_\d{17}_\d{17}\.archive\.json$")


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
    """The JSON archive of hudilite before it wrote Hudi's format (`write_archive` replaces it)."""
    return posixpath.join(ARCHIVED_DIR, f"hudilite_{first}_{last}.archive.json")


def archive_file_body(commits: List[Tuple[Instant, str]]) -> bytes:
    """A JSON archive: the archived instants, each with its completed file's text as it was."""
    return json.dumps({"instants": [{"instant": i.timestamp, "action": i.action, "completed": text}
                                    for i, text in commits]}, indent=1).encode()


# ---- Hudi's archived timeline: writing --------------------------------------------------------
def archive_version(name: str) -> Optional[int]:
    """N of a Hudi archive file `.commits_.archive.N[_token]`; None for any other name."""
    m = _HUDI_ARCHIVE.match(name)
    return int(m[1]) if m else None


def next_archive_name(names: Iterable[str]) -> str:
    """The log file an archival writes: one version past the highest there (Hudi's archiver
    rolls over to a new version each time too), starting at 1."""
    versions = [v for v in map(archive_version, names) if v is not None]
    return f"{JAVA_ARCHIVE_PREFIX}.{max(versions, default=0) + 1}_{ARCHIVE_WRITE_TOKEN}"


def commit_record(action: str, text: str) -> dict:
    """A completed commit's JSON metadata as Hudi's archiver stores it: HoodieCommitMetadata,
    or HoodieReplaceCommitMetadata for a replacecommit."""
    return avro_metadata.commit_record(json.loads(text) if text.strip() else {}, action == REPLACE_COMMIT)


def archive_entries(commits: List[Tuple[Instant, str]]) -> List[dict]:
    """HoodieArchivedMetaEntry records of completed instants (each with its completed file's
    text): requested, inflight and completed state of each, oldest first, as Hudi archives them."""
    entries = []
    for instant, text in commits:
        # Hudi puts the time of each state's file in stateTransitionTime (1.x takes a completed
        # instant's for its completion time); an archival knows only the instant time.
        base = {"commitTime": instant.timestamp, "actionType": instant.action, "version": 1,
                "hoodieCommitMetadata": None, "hoodieReplaceCommitMetadata": None,
                "stateTransitionTime": instant.timestamp}
        entries.append({**base, "actionState": REQUESTED})
        entries.append({**base, "actionState": INFLIGHT})
        key = "hoodieReplaceCommitMetadata" if instant.action == REPLACE_COMMIT else "hoodieCommitMetadata"
        entries.append({**base, "actionState": COMPLETED, key: commit_record(instant.action, text)})
    return entries


def archive_body(commits: List[Tuple[Instant, str]]) -> bytes:
    """A Hudi archive log file of `commits`: one Avro data block of their entries."""
    return log_format.encode_log([log_format.avro_data_block(ARCHIVED_META_ENTRY, archive_entries(commits))])


def write_archive(storage, commits: List[Tuple[Instant, str]], folder: str = ARCHIVED_DIR) -> str:
    """Write `commits` (completed instants with their completed file's text) to the next
    archive log file in `folder` (the table's `layout.archived_dir`), whole or not at all
    (atomic rename); under the table lock. Returns its path."""
    path = posixpath.join(folder, next_archive_name(storage.list_names(folder)))
    storage.write_atomic(path, archive_body(commits), TMP_DIR)
    return path


# ---- the archived timeline: reading -----------------------------------------------------------
@dataclass(frozen=True)
class ArchivedInstant:
    timestamp: str
    action: str
    state: str
    metadata: Optional[dict] = None  # the completed state's commit metadata, JSON-shaped

    def commit_metadata(self) -> CommitMetadata:
        return CommitMetadata.from_record(self.metadata or {})


_METADATA_KEYS = {"commit": "hoodieCommitMetadata", "deltacommit": "hoodieCommitMetadata",
                  "replacecommit": "hoodieReplaceCommitMetadata", "clean": "hoodieCleanMetadata",
                  "rollback": "hoodieRollbackMetadata", "savepoint": "hoodieSavePointMetadata"}


def read_hudi_archive(data: bytes) -> List[ArchivedInstant]:
    """The entries of a Hudi archive log file (ours or Java's, of any Hudi version writing
    table version 6), in file order."""
    out = []
    for block in log_format.decode_blocks(data):
        if block.block_type != log_format.AVRO_DATA_BLOCK:
            continue  # Hudi's archiver writes only Avro data blocks
        for record in log_format.avro_records(block):
            action = record.get("actionType")
            timestamp = record.get("commitTime")
            if action is None or timestamp is None:
                continue
            state = record.get("actionState") or COMPLETED  # very old archives have no state
            metadata = record.get(_METADATA_KEYS.get(action, ""))
            out.append(ArchivedInstant(str(timestamp), str(action), str(state),
                                       metadata if isinstance(metadata, dict) else None))
    return out


def read_legacy_archive(text: str) -> List[ArchivedInstant]:
    """The instants of a JSON archive hudilite wrote before it wrote Hudi's format."""
    return [ArchivedInstant(i["instant"], i["action"], COMPLETED,
                            json.loads(i["completed"]) if i["completed"].strip() else {})
            for i in json.loads(text)["instants"]]


def is_archive_file(name: str) -> bool:
    return archive_version(name) is not None or bool(_LEGACY_ARCHIVE.match(name))


def read_archive_file(storage, name: str, folder: str = ARCHIVED_DIR) -> List[ArchivedInstant]:
    """One archive file in `folder`, of either kind; unreadable: CorruptTableError."""
    path = posixpath.join(folder, name)
    try:
        if _LEGACY_ARCHIVE.match(name):
            return read_legacy_archive(storage.read_text(path))
        return read_hudi_archive(storage.read_bytes(path))
    except (ValueError, KeyError, TypeError, EOFError, IndexError) as err:
        raise CorruptTableError(f"table at {storage.base_path}: the archived timeline file {path} is unreadable "
                                f"({err})") from None


def archive_files(names: Iterable[str]) -> List[str]:
    """Hudi's archive log files, by version."""
    return sorted((n for n in names if archive_version(n) is not None), key=lambda n: (archive_version(n), n))


# Archive files never change once written (ours by atomic rename; Hudi's archiver rolls over
# to a new file each time): what a file holds is kept per (table, name, size).
_READ: "OrderedDict[Tuple[str, str, int], List[ArchivedInstant]]" = OrderedDict()
_READ_MAX = 256


def _archived_instants(storage, folder: str, name: str, size: int) -> List[ArchivedInstant]:
    key = (storage.base_path, posixpath.join(folder, name), size)
    entries = _READ.get(key)
    if entries is None:
        entries = _READ[key] = read_archive_file(storage, name, folder)
        while len(_READ) > _READ_MAX:
            _READ.popitem(last=False)
    else:
        _READ.move_to_end(key)
    return entries


def archived_commits(storage, files: List[Tuple[str, int]], after: Optional[str],
                     folder: str = ARCHIVED_DIR) -> List[Tuple[Instant, CommitMetadata]]:
    """The completed commits and replacecommits in Hudi's archive files (name, size) newer
    than `after`, oldest first: what Java's writer archived since our archived view was made."""
    found: Dict[str, Tuple[Instant, CommitMetadata]] = {}
    for name, size in files:
        for entry in _archived_instants(storage, folder, name, size):
            if entry.state != COMPLETED or entry.action not in ACTIONS or (after is not None and entry.timestamp <= after):
                continue
            found[entry.timestamp] = (Instant(entry.timestamp, entry.action, COMPLETED), entry.commit_metadata())
    return [found[t] for t in sorted(found)]


def java_archive_files(names: Iterable[str]) -> List[str]:
    return sorted(n for n in names if n.startswith(JAVA_ARCHIVE_PREFIX))
