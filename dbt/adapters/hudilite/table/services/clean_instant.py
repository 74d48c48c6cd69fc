"""A clean instant, as Hudi records one: requested and inflight with its plan (a
HoodieCleanerPlan) under the table lock before the first file goes, the files deleted, then
the metadata table told what went and the instant completed (a HoodieCleanMetadata). One that
dies is finished from its plan by the next clean. The cleaner (`cleaner.py`) plans what to
delete; archival and a savepoint's drop delete files only through a clean instant too (a
restore deletes its files directly: it takes the metadata table down first)."""

from __future__ import annotations

import posixpath
import time
from dataclasses import replace

from ..context import TableContext
from ..format.avro_metadata import CLEAN_METADATA, CLEANER_PLAN
from ..format.instant import CLEAN, COMMIT, COMPLETED, INFLIGHT, REQUESTED, Instant
from ..metadata.table import MetadataTable
from ..storage import faults
from ..storage.lock import TableLock
from ..transaction import Writers, reserve_service_time
from .cleaner import CleanPlan


def request_clean(ctx: TableContext, plan: CleanPlan, writers: Writers) -> Instant:
    """Under the table lock: the clean instant of `plan`, requested and inflight (`finish_clean`
    deletes and completes it)."""
    instant = Instant(reserve_service_time(ctx.timeline, CLEAN, writers), CLEAN, REQUESTED)
    record = cleaner_plan_record(plan, {i.timestamp: i.action for i in ctx.timeline.completed()}, ctx.storage)
    ctx.timeline.write_service_instant(instant, CLEANER_PLAN, record)  # from here on, older instants are unreadable
    ctx.timeline.write_service_instant(replace(instant, state=INFLIGHT), CLEANER_PLAN, record)
    return replace(instant, state=INFLIGHT)


def finish_clean(ctx: TableContext, instant: Instant, last_completed: str) -> None:
    """Delete what a clean instant's plan lists, then complete it."""
    begun = time.time()
    plan = ctx.timeline.service_metadata(instant)
    outcome = {}
    for partition, infos in (plan.get("filePathsToBeDeletedPerPartition") or {}).items():
        names = [posixpath.basename(info["filePath"]) for info in infos]
        deleted = []
        for name in names:
            path = posixpath.join(partition, name) if partition else name
            if ctx.storage.is_file(path):
                ctx.storage.delete_file(path)
                deleted.append(name)
            faults.reach("clean")
        outcome[partition] = (names, deleted)
    earliest = plan["earliestInstantToRetain"]
    record = clean_metadata_record(instant.timestamp, plan["policy"], earliest["timestamp"] if earliest else "",
                                   last_completed, outcome, int((time.time() - begun) * 1000))
    with TableLock(ctx.storage):
        done = replace(instant, state=COMPLETED)
        if done not in ctx.timeline.service_instants(CLEAN):
            MetadataTable(ctx.storage).record_deletions(instant.timestamp, {p: names for p, (names, _) in outcome.items()})
            ctx.timeline.write_service_instant(done, CLEAN_METADATA, record)


def cleaner_plan_record(plan: CleanPlan, actions: dict, storage) -> dict:
    """A HoodieCleanerPlan: the earliest retained instant and the files to delete per partition."""
    per_partition: dict = {}
    for base_file in plan.files_to_delete:
        per_partition.setdefault(base_file.partition, []).append(
            {"filePath": storage.uri(base_file.path), "isBootstrapBaseFile": False})
    earliest = plan.earliest_retained
    return {
        "earliestInstantToRetain": None if earliest is None else
        {"timestamp": earliest, "action": actions.get(earliest, COMMIT), "state": COMPLETED},
        "policy": plan.policy, "filesToBeDeletedPerPartition": None, "version": 2,
        "filePathsToBeDeletedPerPartition": per_partition, "partitionsToBeDeleted": [],
    }


def clean_metadata_record(instant: str, policy: str, earliest: str, last_completed: str, outcome: dict,
                          took_ms: int) -> dict:
    """A HoodieCleanMetadata: per partition, the files planned and the files this clean deleted
    (one that an earlier attempt deleted counts as planned only)."""
    return {
        "policy": policy, "startCleanTime": instant, "timeTakenInMillis": took_ms,
        "totalFilesDeleted": sum(len(deleted) for _, deleted in outcome.values()),
        "earliestCommitToRetain": earliest, "lastCompletedCommitTimestamp": last_completed,
        "partitionMetadata": {partition: {
            "partitionPath": partition, "policy": policy, "deletePathPatterns": names,
            "successDeleteFiles": deleted, "failedDeleteFiles": [], "isPartitionDeleted": False,
        } for partition, (names, deleted) in outcome.items()},
        "version": 2, "bootstrapPartitionMetadata": None,
    }
