"""Restore: take the table back to a completed instant, as Hudi's restore does.

Every later commit is rolled back, newest first: its files get markers (the base files it
wrote and its index deltas), its completed instant file goes, which makes it a pending
instant that `transaction.rollback` removes with its files. Readers meanwhile see the table as
of some instant between the latest and the target, never a half-removed one (but, when the
target is a savepoint older than the cleaner's earliest retained instant, those in-between
snapshots may lack files the cleaner removed). A restore is
recorded as Hudi records it: `<R>.restore.requested` and `.restore.inflight` hold the plan
(a HoodieRestorePlan), `<R>.restore` the outcome (a HoodieRestoreMetadata). Until it
completes, writes are refused; running it again finishes it.

The record index is rolled back with the commits: their deltas go, and a base newer than the
target is rebuilt from the restored snapshot. Savepoints of removed instants go too.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import replace
from typing import Dict, List, Set

from ..storage import faults
from ..format.avro_metadata import RESTORE_METADATA, RESTORE_PLAN
from ..context import TableContext
from ..errors import ConcurrentWriteError, TimelineError
from ..format.instant import COMPLETED, INFLIGHT, REQUESTED, RESTORE, Instant
from ..index.files import DELTA
from ..format.file_group import FileSystemView
from ..storage.layout import PRIVATE_DIR, marker_path, parse_index_file_name
from ..metadata.table import MetadataTable
from ..storage.lock import TableLock
from .savepoint import drop_savepoint
from ..transaction import first_write_in_flight, marked_files, reserve_service_time, rollback, rollback_dead_writers

def restore(ctx: TableContext, as_of) -> List[str]:
    """Restore the table to the latest completed instant at or before `as_of`: a savepoint, or
    an instant the cleaner kept readable. Returns the instants rolled back, newest first."""
    rollback_dead_writers(ctx.storage, ctx.timeline)
    started = time.time()
    with TableLock(ctx.storage):
        unfinished = ctx.pending_restore()
        if unfinished is not None:
            instant, plan = unfinished, ctx.timeline.service_metadata(unfinished)
            target = plan["savepointToRestoreTimestamp"]
            wanted = ctx.timeline.resolve(as_of)
            if wanted != target:
                raise TimelineError(f"table {ctx.name}: a restore to {target} is unfinished; restore to {target} "
                                    f"first (it finishes that one), then to {wanted}")
        else:
            target = ctx.resolve_instant(as_of)
            _refuse_writes_in_flight(ctx)
            later = ctx.timeline.completed_after(target)
            if not later:
                return []
            _refuse_if_snapshot_gone(ctx, target, later)
            plan = {"instantsToRollback": [{"commitTime": i.timestamp, "action": i.action} for i in reversed(later)],
                    "version": 2, "savepointToRestoreTimestamp": target}
            instant = Instant(reserve_service_time(ctx.timeline, RESTORE), RESTORE, REQUESTED)
            ctx.timeline.write_service_instant(instant, RESTORE_PLAN, plan)
            instant = replace(instant, state=INFLIGHT)
            ctx.timeline.write_service_instant(instant, RESTORE_PLAN, plan)
        deleted = {}
        # The metadata table lists the files about to go: readers list storage from here on,
        # and the next write builds it anew from the restored snapshot.
        MetadataTable(ctx.storage).drop(keep_dropped=False)
        deltas = _index_deltas(ctx)
        for entry in plan["instantsToRollback"]:  # newest first
            deleted[entry["commitTime"]] = _roll_back_commit(ctx, entry["commitTime"], entry["action"],
                                                             deltas.get(entry["commitTime"], []))
            faults.reach("restore")
        rolled_back = {entry["commitTime"] for entry in plan["instantsToRollback"]}
        for savepointed in ctx.timeline.savepoints():
            if savepointed in rolled_back:
                # the metadata table is down until the next write builds it from storage
                drop_savepoint(ctx, savepointed, lambda files: [ctx.storage.delete_file(f.path) for f in files])
    _restore_index(ctx, rolled_back)
    with TableLock(ctx.storage):
        ctx.timeline.write_service_instant(replace(instant, state=COMPLETED), RESTORE_METADATA,
                                           restore_metadata_record(instant.timestamp, plan, deleted, started))
    return [entry["commitTime"] for entry in plan["instantsToRollback"]]


def _refuse_if_snapshot_gone(ctx: TableContext, target: str, later: List[Instant]) -> None:
    """Layout 2 rolls back by completion time, the cleaner keeps slices by instant time: an
    instant requested before the target but completed after it may have replaced a slice the
    cleaner has since removed, which the restored snapshot would need. Refused, nothing done."""
    if not ctx.timeline.orders_by_completion:
        return
    undone = {i.timestamp for i in later}
    view = FileSystemView([(i, m) for i, m in ctx.timeline.commits() if i.timestamp not in undone], None,
                          ctx.timeline.archived().files)
    gone = [f.path for f in view.latest_base_files() if not ctx.storage.is_file(f.path)]
    if gone:
        raise TimelineError(f"table {ctx.name}: restoring to {target} needs {gone[0]} (and {len(gone) - 1} more), "
                            "which the cleaner removed; restore to a savepoint or a later instant")


def _refuse_writes_in_flight(ctx: TableContext) -> None:
    _, in_flight = first_write_in_flight(ctx.storage, ctx.timeline)
    if in_flight is not None:
        raise ConcurrentWriteError(f"table {ctx.name}: instant {in_flight} is being written; restore once it "
                                   "has finished (a write whose writer died is rolled back after its heartbeat times out)")


def _roll_back_commit(ctx: TableContext, timestamp: str, action: str, index_deltas: List[str]) -> Dict[str, List[str]]:
    """Roll back one completed commit (already rolled back when its instant is gone) and the
    index deltas it wrote. Returns the base files removed per partition."""
    instant = Instant(timestamp, action, COMPLETED)
    if ctx.storage.exists(ctx.timeline.path_of(instant)):
        metadata = ctx.timeline.metadata(instant)
        files = [s.path for s in metadata.write_stats] + index_deltas
        for file_path in files:  # what `rollback` deletes
            ctx.storage.write_bytes(marker_path(timestamp, file_path), b"")
        ctx.timeline.delete_instant_file(instant)  # from here on the instant is pending, its files invisible
    pending = {i.timestamp: i for i in ctx.timeline.pending()}
    removed: Dict[str, List[str]] = {}
    if timestamp in pending:
        for file_path in marked_files(ctx.storage, timestamp):
            if not file_path.startswith(PRIVATE_DIR + "/"):
                partition, name = posixpath.split(file_path)
                removed.setdefault(partition, []).append(name)
        rollback(ctx.storage, ctx.timeline, pending[timestamp])
    return removed


def _index_deltas(ctx: TableContext) -> Dict[str, List[str]]:
    """The index deltas on storage by the instant that wrote them (one per shard or partition
    folder), from one listing."""
    by_instant: Dict[str, List[str]] = {}
    if ctx.index.is_built():
        for path in ctx.storage.list_files_recursive(ctx.index.ROOT):
            parsed = parse_index_file_name(posixpath.basename(path))
            if parsed is not None and parsed[1] == DELTA:
                by_instant.setdefault(parsed[0], []).append(path)
    return by_instant


def _restore_index(ctx: TableContext, rolled_back: Set[str]) -> None:
    """An index base at or after a removed commit holds its keys: rebuild it."""
    state = ctx.index.state()
    if state and rolled_back and state["base_instant"] >= min(rolled_back):
        ctx.rebuild_index()


def restore_metadata_record(instant: str, plan: dict, deleted: Dict[str, Dict[str, List[str]]], started: float) -> dict:
    took_ms = int((time.time() - started) * 1000)
    rollbacks = {}
    for entry in plan["instantsToRollback"]:
        removed = deleted.get(entry["commitTime"], {})
        rollbacks[entry["commitTime"]] = [{
            "startRollbackTime": instant, "timeTakenInMillis": took_ms,
            "totalFilesDeleted": sum(len(v) for v in removed.values()), "commitsRollback": [entry["commitTime"]],
            "partitionMetadata": {p: {"partitionPath": p, "successDeleteFiles": names, "failedDeleteFiles": [],
                                      "rollbackLogFiles": None, "writtenLogFiles": None}
                                  for p, names in removed.items()},
            "version": 1, "instantsRollback": [entry],
        }]
    return {
        "startRestoreTime": instant, "timeTakenInMillis": took_ms,
        "instantsToRollback": [e["commitTime"] for e in plan["instantsToRollback"]],
        "hoodieRestoreMetadata": rollbacks, "version": 1, "restoreInstantInfo": plan["instantsToRollback"],
        "extraMetadata": {"savepointToRestoreTimestamp": plan["savepointToRestoreTimestamp"]},
    }
