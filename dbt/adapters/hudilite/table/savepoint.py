"""Savepoints: completed instants whose snapshot the cleaner and archival keep, so the table can
be read as of them, and restored to them, for as long as the savepoint stands.

As Hudi records them: `<T>.savepoint.inflight` (empty), then `<T>.savepoint` holding a
HoodieSavepointMetadata, the base files of the snapshot as of T per partition. T is the
savepointed commit's own instant time. Archival stops before the earliest savepoint.
"""

from __future__ import annotations

import getpass
import posixpath
import time
from typing import Dict, List, Optional, Set

from .avro_metadata import SAVEPOINT_METADATA
from .cleaner import unreadable_from
from .context import TableContext
from .errors import TimelineError
from .instant import COMPLETED, INFLIGHT, SAVEPOINT, Instant
from .layout import HOODIE_DIR
from .lock import TableLock
from .timeline import Timeline


def savepointed_files(timeline: Timeline) -> Set[str]:
    """The paths of every base file a savepoint keeps."""
    return _savepointed_files(timeline)


def _savepointed_files(timeline: Timeline, exclude: Optional[str] = None) -> Set[str]:
    kept: Set[str] = set()
    for instant in timeline.service_instants(SAVEPOINT):
        if instant.is_completed and instant.timestamp != exclude:
            for partition in timeline.service_metadata(instant)["partitionMetadata"].values():
                kept.update(posixpath.join(partition["partitionPath"], name) for name in partition["savepointDataFile"])
    return kept


def savepoint_record(files_by_partition: Dict[str, List[str]], by: str, comments: str) -> dict:
    return {
        "savepointedBy": by,
        "savepointedAt": int(time.time()),
        "comments": comments,
        "partitionMetadata": {partition: {"partitionPath": partition, "savepointDataFile": sorted(names)}
                              for partition, names in sorted(files_by_partition.items())},
    }


def create_savepoint(ctx: TableContext, as_of=None, comments: str = "") -> str:
    """Savepoint the latest completed instant at or before `as_of` (default: the latest one).
    Under the table lock, so no clean planned meanwhile misses it. Returns the instant."""
    with TableLock(ctx.storage):
        latest = ctx.timeline.latest_completed()
        if latest is None:
            raise TimelineError(f"table {ctx.name}: nothing to savepoint before the first commit")
        instant = latest.timestamp if as_of is None else ctx.resolve_instant(as_of)
        if instant in ctx.timeline.savepoints():
            return instant
        files_by_partition: Dict[str, List[str]] = {}
        for base_file in ctx.timeline.view(instant).latest_base_files():
            files_by_partition.setdefault(base_file.partition, []).append(posixpath.basename(base_file.path))
        record = savepoint_record(files_by_partition, _user(), comments)
        ctx.timeline.write_service_instant(Instant(instant, SAVEPOINT, INFLIGHT))
        ctx.timeline.write_service_instant(Instant(instant, SAVEPOINT, COMPLETED), SAVEPOINT_METADATA, record)
    return instant


def delete_savepoint(ctx: TableContext, instant: str) -> None:
    """Drop a savepoint. The files it alone kept from the cleaner go with it (the cleaner
    counts what it doomed earlier as gone), before the savepoint itself: one that dies
    half-way is deleted again."""
    with TableLock(ctx.storage):
        if instant not in ctx.timeline.savepoints():
            known = ", ".join(ctx.timeline.savepoints()) or "none"
            raise TimelineError(f"table {ctx.name}: no savepoint at {instant} (savepoints: {known})")
        earliest = ctx.earliest_retained()
        if earliest is not None:
            others = _savepointed_files(ctx.timeline, exclude=instant)
            for base_file in unreadable_from(ctx.timeline.view(), earliest):
                if base_file.path not in others:
                    ctx.storage.delete_file(base_file.path)
        remove_savepoint_files(ctx, instant)


def remove_savepoint_files(ctx: TableContext, instant: str) -> None:
    for state in (COMPLETED, INFLIGHT):  # the completed file first: from then on it is gone
        ctx.storage.delete_file(posixpath.join(HOODIE_DIR, Instant(instant, SAVEPOINT, state).file_name))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "hudilite"
