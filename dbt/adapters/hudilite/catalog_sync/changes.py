"""Which partitions a catalog must add or drop to be in step with a table: the ones the commits
since its last sync touched (Hudi's incremental meta sync), or all of them when that sync point
is not on the table's active timeline (a first sync, an archived or rolled back point, another
table at the name after a rebuild). Read from the timeline alone: no listing of storage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional

from .entry import LAST_SYNCED, LAST_SYNCED_COMPLETION, PENDING_AT_SYNC


@dataclass(frozen=True)
class SyncPoint:
    """Where a catalog entry's last sync left it: the last instant synced, when it completed, and
    the earliest instant then still pending (None where there was none)."""
    instant: Optional[str] = None
    completion: Optional[str] = None
    pending: Optional[str] = None

    @classmethod
    def of(cls, parameters: Dict[str, str]) -> "SyncPoint":
        return cls(parameters.get(LAST_SYNCED) or None, parameters.get(LAST_SYNCED_COMPLETION) or None,
                   parameters.get(PENDING_AT_SYNC) or None)

    def parameters(self) -> Dict[str, str]:
        """As table parameters; an absent value is written empty (a catalog keeps keys once set)."""
        return {LAST_SYNCED: self.instant or "", LAST_SYNCED_COMPLETION: self.completion or "",
                PENDING_AT_SYNC: self.pending or ""}


@dataclass(frozen=True)
class PartitionChanges:
    """`full`: compare every partition with the catalog's; otherwise `live` are touched
    partitions that hold file groups, `emptied` touched ones that hold none now."""
    full: bool
    live: FrozenSet[str]
    emptied: FrozenSet[str]
    point: SyncPoint  # the sync point these changes bring the entry to


def partition_changes(timeline, since: SyncPoint) -> PartitionChanges:
    """The partitions touched since `since` on `timeline` (the core's Timeline), with the point
    they bring a catalog to."""
    commits = timeline.commits()
    pending = [i.timestamp for i in timeline.pending()]
    latest = commits[-1][0] if commits else None
    point = SyncPoint(latest.timestamp if latest else None, latest.completed_at if latest else None,
                      min(pending) if pending else None)
    view = timeline.view()
    active = {i.timestamp for i, _ in commits}
    # Off the timeline (first sync, archived, rolled back, another table's), or a write pending at
    # the last sync now gone from it (archived before this sync saw it): every partition is compared.
    gone_pending = since.pending is not None and since.pending not in active and since.pending not in pending
    if since.instant is None or since.instant not in active or gone_pending:
        return PartitionChanges(True, frozenset(p for p, ids in view.live_file_ids().items() if ids), frozenset(), point)
    touched = set()
    for instant, metadata in commits:
        if _after(instant, since, timeline.orders_by_completion):
            touched.update(metadata.partition_to_write_stats())
            touched.update(metadata.replaced_file_ids)
    live = {p for p, ids in view.live_file_ids(touched).items() if ids}
    return PartitionChanges(False, frozenset(live), frozenset(touched - live), point)


def _after(instant, since: SyncPoint, by_completion: bool) -> bool:
    """Whether a completed instant is newer than the sync point: requested after it, pending
    when it was taken, or (layout 2) completed after it."""
    if instant.timestamp > since.instant:
        return True
    if since.pending and instant.timestamp >= since.pending:
        return True
    return by_completion and bool(since.completion) and instant.completed_at > since.completion
