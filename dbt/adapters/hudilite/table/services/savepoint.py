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
from typing import Callable, Dict, List, Optional, Set

from ..format.avro_metadata import SAVEPOINT_METADATA
from .clean_instant import finish_clean, request_clean
from .cleaner import KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, CleanPlan, unreadable_from
from ..context import TableContext
from ..errors import ConcurrentWriteError, TimelineError
from ..format.instant import COMPLETED, INFLIGHT, SAVEPOINT, Instant
from ..storage.lock import TableLock
from ..format.timeline import Timeline
from ..format.file_group import BaseFile
from ..transaction import Writers, first_write_in_flight


def savepointed_files(timeline: Timeline) -> Set[str]:
    """The paths of every base file a savepoint keeps."""
    kept: Set[str] = set()
    for instant in timeline.service_instants(SAVEPOINT):
        if instant.is_completed:
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
        _, in_flight = first_write_in_flight(ctx.storage, ctx.timeline)
        if in_flight is not None and in_flight < instant:  # it may yet publish into the snapshot
            raise ConcurrentWriteError(f"table {ctx.name}: instant {in_flight} is being written; savepoint "
                                       f"{instant} once it has finished")
        files_by_partition: Dict[str, List[str]] = {}
        for base_file in ctx.timeline.view(instant).latest_base_files():
            files_by_partition.setdefault(base_file.partition, []).append(posixpath.basename(base_file.path))
        record = savepoint_record(files_by_partition, _user(), comments)
        ctx.timeline.write_service_instant(Instant(instant, SAVEPOINT, INFLIGHT))
        ctx.timeline.write_service_instant(Instant(instant, SAVEPOINT, COMPLETED), SAVEPOINT_METADATA, record)
    return instant


def delete_savepoint(ctx: TableContext, instant: str) -> None:
    """Drop a savepoint (or finish dropping one); the files it alone kept go with it, by a clean
    instant (so the metadata table is told)."""
    cleans: List[Instant] = []
    with TableLock(ctx.storage):
        if ctx.pending_restore() is not None:
            raise TimelineError(f"table {ctx.name}: a restore is unfinished; finish it before deleting savepoints")
        if instant not in ctx.timeline.savepoints() + unfinished_savepoints(ctx.timeline):
            known = ", ".join(ctx.timeline.savepoints()) or "none"
            raise TimelineError(f"table {ctx.name}: no savepoint at {instant} (savepoints: {known})")
        drop_savepoint(ctx, instant, lambda files: cleans.append(clean_of(ctx, files)))
        latest = ctx.timeline.latest_completed()
    for clean in cleans:
        finish_clean(ctx, clean, latest.timestamp if latest else "")


def clean_of(ctx: TableContext, files: List[BaseFile], writers: Optional[Writers] = None) -> Instant:
    """Under the table lock: a clean instant of `files` that no retained snapshot reads (the
    cleaner's earliest retained instant and policy stay as its last clean left them)."""
    state = ctx.clean_state()
    return request_clean(ctx, CleanPlan(state.get("earliest_retained"), files, state.get("policy") or KEEP_LATEST_COMMITS),
                         writers)


def unfinished_savepoints(timeline: Timeline) -> List[str]:
    """Savepoints whose creation or deletion died (only `<T>.savepoint.inflight` is left)."""
    return [i.timestamp for i in timeline.service_instants(SAVEPOINT) if not i.is_completed]


def drop_savepoint(ctx: TableContext, instant: str, dispose: Callable[[List[BaseFile]], None]) -> None:
    """Under the table lock: the completed file first (from then on nothing counts on the
    savepoint), then the files only it kept from the cleaner (which counts what it doomed
    earlier as gone) handed to `dispose` (a clean instant of them, or deleted), then the
    inflight file. One that dies is finished by the next clean."""
    ctx.timeline.delete_instant_file(Instant(instant, SAVEPOINT, COMPLETED))
    state = ctx.clean_state()
    # KEEP_LATEST_FILE_VERSIONS plans from what is on storage: its next clean takes them.
    if state.get("earliest_retained") and state.get("policy") != KEEP_LATEST_FILE_VERSIONS:
        kept = savepointed_files(ctx.timeline)
        orphans = [f for f in unreadable_from(ctx.timeline.view(), state["earliest_retained"])
                   if f.path not in kept and ctx.storage.is_file(f.path)]
        if orphans:
            dispose(orphans)
    ctx.timeline.delete_instant_file(Instant(instant, SAVEPOINT, INFLIGHT))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "hudilite"
