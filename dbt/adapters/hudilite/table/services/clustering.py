"""Clustering: a partition's small file groups rewritten into a few files near `max_file_size`,
optionally sorted by `cluster_by` columns so that readers skip files and row groups by their
statistics.

As Hudi writes it: a replacecommit with operation type CLUSTER whose new file groups hold the
rows of the replaced ones unchanged (commit time, seqno and key kept, so incremental reads do
not see them as changed). Old slices stay until the cleaner removes them: time travel to
before a clustering reads them. A clustering and a concurrent write to the same file groups
conflict like any two writes; the clustering is the one that gives way.

The plan is made on the driver from the timeline alone: per partition, its file groups below
`small_file_limit`, when there are at least two, in input groups of at most
MAX_BYTES_PER_GROUP (one Spark task each). As in Hudi, the requested instant holds the plan
(an Avro HoodieRequestedReplaceMetadata: input groups, output file counts, sort columns);
it is written once the plan is made, after the write claimed its instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..format.avro_metadata import REQUESTED_REPLACE_METADATA
from ..format.commit import CLUSTER
from ..context import TableContext
from ..format.schema import resolve_columns
from ..format.file_group import BaseFile, FileGroup
from ..spark.file_sizing import FileSizing, average_record_bytes
from ..index.table_index import IndexChange
from ..format.instant import REQUESTED, Instant
from ..spark.reader import bounded_stored_reads
from ..format.rows import CLUSTER_GROUP, CLUSTER_ROWS
from ..format.schema import FILE_NAME, quote
from ..spark.writer import cluster_task, run_write_job

MAX_BYTES_PER_GROUP = 2 * 1024 * 1024 * 1024  # Hudi's hoodie.clustering.plan.strategy.max.bytes.per.group
STORED_ORDER = "_hudilite_stored_order"


@dataclass(frozen=True)
class ClusteringGroup:
    """File groups of one partition that one task rewrites into files of `rows_per_file` rows."""

    partition: str
    file_ids: List[str]
    rows_per_file: int


def plan_clustering(groups: Sequence[FileGroup], sizing: FileSizing, record_bytes: int) -> List[ClusteringGroup]:
    """Per partition, its small live file groups (smallest first) when there are two or more."""
    if sizing.small_file_limit <= 0:
        return []
    small = {}
    for group in groups:
        if group.latest.size < sizing.small_file_limit:
            small.setdefault(group.partition, []).append(group)
    rows_per_file = max(1, sizing.max_file_size // max(1, record_bytes))
    plan = []
    for partition, members in sorted(small.items()):
        if len(members) < 2:
            continue
        batches: List[List[FileGroup]] = [[]]
        size = 0
        for group in sorted(members, key=lambda g: (g.latest.size, g.file_id)):
            if batches[-1] and size + group.latest.size > MAX_BYTES_PER_GROUP:
                batches.append([])
                size = 0
            batches[-1].append(group)
            size += group.latest.size
        plan += [ClusteringGroup(partition, [g.file_id for g in b], rows_per_file) for b in batches if len(b) >= 2]
    return plan


def cluster(ctx: TableContext, cluster_by: Sequence[str] = ()) -> Optional[str]:
    """Rewrite each partition's small file groups into files near `max_file_size` (sorted by
    `cluster_by` within each); returns the instant, None when no partition has two small
    file groups."""
    if ctx.timeline.latest_completed() is None:
        return None
    data_schema = ctx.existing_schema()
    sort_columns = resolve_columns(list(cluster_by), data_schema) if cluster_by else []
    if not ctx.config.auto_keys:
        ctx.ensure_index()
    action = ctx.timeline.clustering_action
    with ctx.transaction(action) as txn:
        view = ctx.timeline.view()
        plan = plan_clustering(view.live_groups(), ctx.file_sizing, average_record_bytes(ctx.timeline.commits()))
        if not plan:
            return None
        chosen = {f for c in plan for f in c.file_ids}
        files = [g.latest for g in view.live_groups() if g.file_id in chosen]
        # As Hudi: the requested instant holds the plan (Java's clustering tools read it there).
        ctx.timeline.write_service_instant(Instant(txn.instant, action, REQUESTED), REQUESTED_REPLACE_METADATA,
                                           clustering_plan_record(plan, files, sort_columns, ctx.storage.uri))
        rows = _rows_by_group(ctx.read_files(files), data_schema.names, plan, sort_columns)
        spec = ctx.write_spec(txn.instant, rows_per_file=[c.rows_per_file for c in plan])
        with bounded_stored_reads(ctx.spark, ctx.storage, files, ctx.name):  # wide rows: smaller reader batches
            stats = run_write_job(rows, spec, task=cluster_task)
        replaced = {}
        for c in plan:
            replaced.setdefault(c.partition, []).extend(c.file_ids)
        index_files = ctx.index_delta(txn.instant, IndexChange(written=stats, inserted=stats))
        ctx.commit(txn, CLUSTER, data_schema, stats, index_files, replaced)
    ctx.after_commit()
    return txn.instant


SORT_AND_SIZE_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"


def clustering_plan_record(plan: List[ClusteringGroup], files: List[BaseFile], sort_columns: Sequence[str],
                           uri_of) -> dict:
    """A HoodieRequestedReplaceMetadata holding the clustering plan: each group's slices, the
    number of files it becomes, the sort columns."""
    by_id = {f.file_id: f for f in files}
    groups = []
    for group in plan:
        slices = [by_id[file_id] for file_id in group.file_ids]
        rows = sum(s.num_records for s in slices)
        groups.append({
            "slices": [{"dataFilePath": uri_of(s.path), "deltaFilePaths": [], "fileId": s.file_id,
                        "partitionPath": group.partition, "bootstrapFilePath": "", "version": 1} for s in slices],
            "metrics": {"TOTAL_IO_MB": sum(s.size for s in slices) / 2 ** 20, "TOTAL_LOG_FILES": 0.0},
            "numOutputFileGroups": max(1, -(-rows // max(1, group.rows_per_file))), "version": 1,
        })
    params = {"hoodie.clustering.plan.strategy.sort.columns": ",".join(sort_columns)} if sort_columns else {}
    return {
        "operationType": "CLUSTER",
        "clusteringPlan": {"inputGroups": groups, "version": 1, "extraMetadata": {}, "preserveHoodieMetadata": True,
                           "strategy": {"strategyClassName": SORT_AND_SIZE_STRATEGY, "strategyParams": params,
                                        "version": 1}},
        "extraMetadata": {}, "version": 1,
    }


def _rows_by_group(df: DataFrame, data_columns: List[str], plan: List[ClusteringGroup],
                   sort_columns: List[str]) -> DataFrame:
    """The rows of the plan's file groups in the `rows.CLUSTER_ROWS` layout, each clustering group's
    rows together and sorted by `sort_columns` (else kept in the order they were stored)."""
    group_of = F.create_map(*[x for i, c in enumerate(plan) for f in c.file_ids for x in (F.lit(f), F.lit(i))])
    stored_order = F.monotonically_increasing_id()  # taken before the shuffle, in file order
    order = [F.col(quote(c)) for c in sort_columns] + [F.col(STORED_ORDER)]
    meta = {name: F.col(name) for name in CLUSTER_ROWS.meta}
    meta[CLUSTER_GROUP] = group_of[F.substring_index(F.col(FILE_NAME), "_", 1)]
    return (df.withColumn(STORED_ORDER, stored_order)
            .select(*CLUSTER_ROWS.select(meta, [F.col(quote(c)) for c in data_columns]), F.col(STORED_ORDER))
            .repartition(len(plan), CLUSTER_GROUP)
            .sortWithinPartitions(CLUSTER_GROUP, *order)
            .drop(STORED_ORDER))
