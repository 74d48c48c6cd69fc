"""Looking after a table: the cleaner, archival, validation and the timeline summary.

`clean` deletes file slices no retained instant reads and records the earliest readable
instant; `archive` moves old instants off the active timeline; `validate` checks the
timeline, the files and the index against each other.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..index.record_index import RecordIndex
from ..storage import faults
from ..format import properties as props
from ..format.archived_timeline import ArchivedView, write_archive
from .archival import DEFAULT_KEEP_MAX_COMMITS, DEFAULT_KEEP_MIN_COMMITS, check_keep, plan_archive
from .clustering import cluster
from ..format.commit import CLUSTER
from .clean_instant import finish_clean, request_clean
from .cleaner import (DEFAULT_RETAIN_COMMITS, DEFAULT_RETAIN_FILE_VERSIONS, DEFAULT_RETAIN_HOURS, KEEP_LATEST_COMMITS,
                      KEEP_LATEST_FILE_VERSIONS, CleanPlan, CleanPolicy, plan_clean, unreadable_from)
from ..errors import ConcurrentWriteError, ConfigurationError
from ..context import TableContext
from ..format.file_group import FileSystemView, parse_base_file_name
from ..format import lsm_history
from ..format.instant import (CLEAN, COMMIT, COMPLETED, INFLIGHT, REQUESTED, RESTORE, SAVEPOINT, SERVICE_ACTIONS,
                              Instant, parse_instant_file_name)
from ..storage.layout import (HOODIE_DIR, LAST_SWEEP, MARKERS_DIR, PROPERTIES_FILE, TMP_DIR,
                              markers_dir, writer_path)
from ..metadata.table import MetadataTable
from ..storage.lock import TableLock
from .savepoint import clean_of, drop_savepoint, savepointed_files, unfinished_savepoints
from ..transaction import Writers, marked_files, reserve_service_time, writers_now

logger = logging.getLogger("hudilite")
from .validation import check_table, files_outside_hoodie


def clean(ctx: TableContext, policy: CleanPolicy, sweep: bool = False) -> CleanPlan:
    """Delete file slices that `policy` no longer retains, as Hudi records a clean: under the
    table lock (so two cleaners never move the earliest retained instant back), the plan goes
    into `<C>.clean.requested` and `.clean.inflight` before the first file goes, and
    `<C>.clean` is written after the last. A clean that dies is finished by the next one.
    Savepointed files stay. Then zombie files (`sweep`: looked for in the whole table) and
    tombstones of rolled-back writes go."""
    with TableLock(ctx.storage):
        unfinished = [i for i in ctx.timeline.service_instants(CLEAN) if not i.is_completed]
        writers = writers_now(ctx.storage, ctx.timeline)
        completed, in_flight = writers.completed, writers.first_in_flight()
        for instant in unfinished_savepoints(ctx.timeline):  # a savepoint drop that died
            drop_savepoint(ctx, instant, lambda files: unfinished.append(clean_of(ctx, files, writers)))
        plan = _plan_settled(ctx, completed, in_flight, policy)
        if plan.files_to_delete:
            unfinished.append(request_clean(ctx, plan, writers))
    for instant in unfinished:
        finish_clean(ctx, instant, completed[-1] if completed else "")
    remove_zombie_files(ctx, sweep, writers=writers)
    return plan


def _plan_settled(ctx: TableContext, completed: List[str], in_flight: Optional[str], policy: CleanPolicy) -> CleanPlan:
    """The clean to do now over the instants settled before the first write in flight. As Hudi:
    nothing at or after it counts, so a write that publishes later into the retained range (a
    "hollow" commit) still has its replaced files cleaned."""
    settled = [t for t in completed if in_flight is None or t < in_flight]
    view = ctx.timeline.view(settled[-1] if settled and in_flight else None)
    return _plan(ctx, view, settled, policy)


def _plan(ctx: TableContext, view: FileSystemView, settled: List[str], policy: CleanPolicy) -> CleanPlan:
    """The clean to do now. Where the file-versions policy is or was in use, what an earlier
    clean deleted is told by storage (that policy leaves older slices behind on purpose), and
    the earliest retained instant never moves back."""
    state = ctx.clean_state()
    earliest, kept = state.get("earliest_retained"), savepointed_files(ctx.timeline)
    if KEEP_LATEST_FILE_VERSIONS not in (policy.name, state.get("policy")):
        return plan_clean(view, settled, policy, earliest, kept)
    plan = plan_clean(view, settled, policy, None, kept)
    plan.files_to_delete = [f for f in plan.files_to_delete if ctx.storage.is_file(f.path)]
    if earliest is not None and (plan.earliest_retained is None or plan.earliest_retained < earliest):
        plan.earliest_retained = earliest
    return plan


@dataclass(frozen=True)
class TableServices:
    """The services a writer runs inline after each commit, as Hudi's writer does (dbt runs
    them after every model build): clustering when due, the cleaner, then archival."""

    retain_commits: int = DEFAULT_RETAIN_COMMITS  # the cleaner keeps the last N instants readable
    keep_min_commits: int = DEFAULT_KEEP_MIN_COMMITS  # archival: instants left on the active timeline
    keep_max_commits: int = DEFAULT_KEEP_MAX_COMMITS  # ... once more than this many are there
    cluster_every: int = 0  # clustering after every N commits (0: never inline)
    cluster_by: Tuple[str, ...] = ()  # the columns clustering sorts each partition's rows by
    cleaner_policy: str = KEEP_LATEST_COMMITS  # or KEEP_LATEST_BY_HOURS, KEEP_LATEST_FILE_VERSIONS
    retain_hours: int = DEFAULT_RETAIN_HOURS  # KEEP_LATEST_BY_HOURS: instants of the last N hours stay readable
    retain_file_versions: int = DEFAULT_RETAIN_FILE_VERSIONS  # KEEP_LATEST_FILE_VERSIONS: slices per file group

    @property
    def clean_policy(self) -> CleanPolicy:
        return CleanPolicy(self.cleaner_policy.upper(), self.retain_commits, self.retain_hours, self.retain_file_versions)

    def check(self) -> None:
        self.clean_policy.check()
        check_keep(self.keep_min_commits, self.keep_max_commits)
        if self.cluster_every < 0:
            raise ConfigurationError("cluster_every must be 0 (no inline clustering) or more")
        if self.clean_policy.name == KEEP_LATEST_COMMITS and self.keep_min_commits <= self.retain_commits:  # as Hudi requires: archival waits for the cleaner
            raise ConfigurationError(f"keep_min_commits ({self.keep_min_commits}) must be greater than retain_commits "
                                     f"({self.retain_commits}): instants the cleaner retains stay on the active timeline")


def run_services(ctx: TableContext, services: TableServices) -> None:
    services.check()
    with ctx.timeline.pinned():  # one listing per step: each lock reads the table afresh
        if services.cluster_every and clustering_due(ctx, services.cluster_every):
            try:
                cluster(ctx, services.cluster_by)
            except ConcurrentWriteError as err:  # a write to the same file groups won; the next run clusters
                logger.warning("table %s: clustering gave way to a concurrent write: %s", ctx.name, err)
        clean_if_due(ctx, services.clean_policy)
        archive(ctx, services.keep_min_commits, services.keep_max_commits)


def clean_if_due(ctx: TableContext, policy: CleanPolicy) -> Optional[CleanPlan]:
    """The clean after a write (`run_services`): only when the caller's picture of the timeline
    shows something to do, or the daily sweep is due, so that a write with nothing to clean takes
    no lock and lists nothing more. A picture older than the lock's only delays a clean to the
    next run. Markers folders that failed writes left are looked at by the clean that runs,
    by archival (always, before instants go) and by `hudilite clean`."""
    sweep = _sweep_due(ctx)
    return clean(ctx, policy, sweep) if sweep or _clean_may_be_due(ctx, policy) else None


def _clean_may_be_due(ctx: TableContext, policy: CleanPolicy) -> bool:
    """Whether `clean` would do anything, judged on the caller's picture without the lock: an
    unfinished clean or savepoint drop, or files to delete. Claims are not read: they only hold
    more instants back, and a plan over fewer settled instants deletes no more."""
    timeline = ctx.timeline
    if any(not i.is_completed for i in timeline.service_instants(CLEAN)) or unfinished_savepoints(timeline):
        return True
    instants = timeline.instants()
    pending = [i.timestamp for i in instants if not i.is_completed]
    completed = [i.timestamp for i in instants if i.is_completed]
    return bool(_plan_settled(ctx, completed, pending[0] if pending else None, policy).files_to_delete)


def _sweep_due(ctx: TableContext) -> bool:
    """Whether a day went by since the last sweep of the whole table (or there was none)."""
    try:
        return time.time() - ctx.storage.mtime_seconds(LAST_SWEEP) >= SWEEP_EVERY_S
    except FileNotFoundError:
        return True


def clustering_due(ctx: TableContext, every: int) -> bool:
    """Whether `every` commits completed since the last clustering on the active timeline."""
    since = 0
    for instant, metadata in reversed(ctx.timeline.commits()):
        if metadata.operation == CLUSTER:
            break
        since += 1
    return since >= every


def archive(ctx: TableContext, keep_min_commits: int, keep_max_commits: int) -> List[str]:
    """Move the oldest completed instants off the active timeline once more than
    `keep_max_commits` are on it, down to `keep_min_commits` (`archival` says which may go).
    When only the record index's base or the metadata table's last compaction holds instants
    back (Hudi's readers take a metadata deltacommit only while its data instant is active), both
    are compacted and archival goes on. Returns the archived instants."""
    check_keep(keep_min_commits, keep_max_commits)
    if not _archival_may_be_due(ctx, keep_max_commits):
        return []
    chosen, held_by_index = _archive(ctx, keep_min_commits, keep_max_commits, wait_for_index=True)
    if held_by_index:
        try:
            if ctx.index.is_built():
                ctx.compact_index()
        except ConcurrentWriteError:
            pass  # a write completed meanwhile; archival goes as far as the index base allows
        with TableLock(ctx.storage):
            MetadataTable(ctx.storage, lambda: reserve_service_time(ctx.timeline, "compaction")).compact_now()
        chosen = _archive(ctx, keep_min_commits, keep_max_commits, wait_for_index=False)[0]
    return chosen


def _archival_may_be_due(ctx: TableContext, keep_max_commits: int) -> bool:
    """Whether archival has anything to do, as the caller's picture of the timeline shows it,
    without taking the lock: more than `keep_max_commits` instants completed on the active
    timeline, or instant files an archival that died left behind. Instants completed since the
    picture was taken only add to the count: at worst archival waits for the next run."""
    through = ctx.timeline.archived().through
    if through is not None and any(i is not None and i.timestamp <= through and i.state == COMPLETED
                                   for i in map(parse_instant_file_name, ctx.timeline.file_names())):
        return True
    return len(ctx.timeline.completed()) > keep_max_commits


def _archive(ctx: TableContext, keep_min_commits: int, keep_max_commits: int,
             wait_for_index: bool, after_own_clean: bool = False) -> Tuple[List[str], bool]:
    """Under the table lock: the archive file first, then the archived view (from then on the
    instants are archived), then their files on the timeline; an archival that dies is
    finished by the next. Older slices only the chosen instants read, still on storage, go
    first by a clean instant of their own (requested under the lock, finished after it), and
    archival is planned again (`after_own_clean`: once). Returns the archived instants, and
    whether the index's base held back some that were due (with `wait_for_index`, nothing is
    archived then)."""
    timeline = ctx.timeline
    doomed_clean = None
    with TableLock(ctx.storage):
        archived = timeline.archived()
        _delete_instant_files(ctx, archived.through)
        writers = writers_now(ctx.storage, timeline)
        completed = writers.completed
        if writers.first_in_flight() is not None:  # its conflict check compares with instants completed since it began
            return [], False
        view = timeline.view()
        before = _archivable_before(ctx, view, completed)
        due = plan_archive(completed, keep_min_commits, keep_max_commits, before, None)
        chosen = plan_archive(completed, keep_min_commits, keep_max_commits, before, _index_base(ctx))
        held_by_index = len(chosen) < len(due)
        if (held_by_index and wait_for_index) or not chosen or _left_behind(ctx, view, chosen[-1]):
            return [], held_by_index
        # Older slices only archived instants read (the file-versions policy keeps them) would
        # drop out of every view: they go first, by a clean of their own (the metadata table
        # records what a clean deletes; Hudi deletes data files only so), then archival goes on.
        doomed = [f for f in unreadable_from(view, chosen[-1]) if ctx.storage.is_file(f.path)]
        if doomed and after_own_clean:  # still there after their clean: the next archival tries again
            return [], held_by_index
        if doomed:
            state = ctx.clean_state()  # its earliest retained instant never moves back
            earliest = max(t for t in (chosen[-1], state.get("earliest_retained")) if t)
            doomed_clean = request_clean(ctx, CleanPlan(earliest, doomed, state.get("policy") or KEEP_LATEST_FILE_VERSIONS),
                                         writers)
        else:
            # a late task's file of an instant about to be archived would count as committed
            remove_zombie_files(ctx, holding_lock=True, writers=writers)
            _archive_through(ctx, archived, chosen[-1])
    if doomed_clean is not None:
        finish_clean(ctx, doomed_clean, completed[-1])
        return _archive(ctx, keep_min_commits, keep_max_commits, wait_for_index, after_own_clean=True)
    return chosen, held_by_index


def _archive_through(ctx: TableContext, archived: ArchivedView, through: str) -> None:
    """Under the table lock: the archive file of the completed instants up to `through`, then
    the archived view (from then on they are archived), then their files on the timeline."""
    timeline = ctx.timeline
    commits = [(i, timeline.metadata(i)) for i in timeline.completed() if i.timestamp <= through]
    if timeline.orders_by_completion:
        _write_history(ctx, through)
    else:
        texts = [(i, ctx.storage.read_text(timeline.path_of(i))) for i, _ in commits]
        write_archive(ctx.storage, texts, timeline.archived_dir)
    timeline.write_archived_view(archived.folded(commits))
    faults.reach("archive")
    _delete_instant_files(ctx, through)


def _write_history(ctx: TableContext, through: str) -> None:
    """Layout 2: the completed instants up to `through` (commits and the services' but
    savepoints) as one new file of the LSM history, as Hudi 1.x's archiver writes them: each
    completed file's bytes, and the plan of a clean (its requested file) or of a clustering
    (its requested file, or its inflight one when that holds one); then the history's own
    compaction and clean."""
    timeline = ctx.timeline
    listed = [i for i in map(parse_instant_file_name, timeline.file_names()) if i is not None and i.timestamp <= through]
    by_time: Dict[str, List[Instant]] = {}
    for instant in listed:
        by_time.setdefault(instant.timestamp, []).append(instant)
    entries = []
    for done in sorted(i for i in listed if i.is_completed and i.action != SAVEPOINT):
        plan = None
        for state in (REQUESTED, INFLIGHT):  # a later state's plan, when it holds one, wins
            pending = [i for i in by_time[done.timestamp] if i.state == state]
            body = ctx.storage.read_bytes(timeline.path_of(pending[0])) if pending and done.action != COMMIT else b""
            plan = body or plan
        entries.append(lsm_history.HistoryEntry(done.timestamp, done.completion_time, done.action,
                                                ctx.storage.read_bytes(timeline.path_of(done)) or None, plan))
    if entries:
        lsm_history.write_history(ctx.storage, timeline.history_dir, entries)
        lsm_history.compact_history(ctx.storage, timeline.history_dir)


def _left_behind(ctx: TableContext, view: FileSystemView, through: str) -> bool:
    """Whether a file of a group replaced at or before `through` is still on storage: once the
    replacecommit is archived, Hudi's readers would read the group again."""
    return any(ctx.storage.is_file(piece.path) for group in view.groups_with_history()
               if group.replaced_at is not None and group.replaced_at <= through for piece in group.slices)


def _index_base(ctx: TableContext) -> Optional[str]:
    """Instants after this are held back by the indexes: the record index's base, and the
    metadata table's last compaction (None: no limit)."""
    state = ctx.index.state()
    bounds = [b for b in (state["base_instant"] if state else None, MetadataTable(ctx.storage).archivable_through())
              if b is not None]
    return min(bounds) if bounds else None


def _archivable_before(ctx: TableContext, view: FileSystemView, completed: List[str]) -> Optional[str]:
    """Instants before this may be archived: the cleaner removed every file they made
    unreadable (Hudi's readers would read a replaced file group again once the replacecommit
    is archived). That is the cleaner's earliest retained instant once its clean finished;
    without one, the latest instant if nothing older is unreadable. Never past a savepoint."""
    state = ctx.clean_state()
    if state.get("earliest_retained"):
        before = state["earliest_retained"] if state.get("complete", True) else None
    elif completed and not unreadable_from(view, completed[-1]):
        before = completed[-1]
    else:
        before = None
    savepoints = ctx.timeline.savepoints()
    if before is not None and savepoints:
        before = min(before, savepoints[0])
    return before


def _delete_instant_files(ctx: TableContext, through: Optional[str]) -> None:
    """Remove what archived instants (up to `through`) left on the active timeline: their
    instant files, completed one last, and a claim or markers their writer left behind."""
    if through is None:
        return
    listed = [i for i in map(parse_instant_file_name, ctx.storage.list_names(ctx.timeline.dir))
              if i is not None and i.timestamp <= through]
    archived = sorted(i for i in listed if i.state == COMPLETED)
    for instant in archived:  # oldest first, completed file last: the rest stays a contiguous timeline
        ctx.storage.delete_file(writer_path(instant.timestamp))
        ctx.storage.delete_dir(markers_dir(instant.timestamp))
        # its pending states by their own names (a clustering's are `clustering` at layout 2)
        pending = sorted((i for i in listed if i.timestamp == instant.timestamp and not i.is_completed),
                         key=lambda i: i.state != REQUESTED)
        for state in pending + [instant]:
            ctx.timeline.delete_instant_file(state)


TMP_FILE_LIFETIME_S = 3600
# A file a late task wrote after its instant's markers were deleted (a speculative attempt on
# object storage, whose object appears only when closed) has no marker: a clean lists the whole
# table this often, whatever `sweep` says.
SWEEP_EVERY_S = 24 * 3600


def remove_zombie_files(ctx: TableContext, sweep: bool = False, holding_lock: bool = False,
                        writers: Optional[Writers] = None) -> List[str]:
    """Delete base files that no completed instant wrote and no writer in flight may still
    commit: a task attempt that wrote after its driver reconciled (speculation on a cluster,
    executors of a killed driver), or after its instant was rolled back. Every task writes a
    file's marker before the file, so such files are found through the markers folders of
    instants no writer works on any more: the cost follows what was written since the last
    look, not the table's size, and the folders go once looked at. `sweep` (or a day since the
    last sweep, SWEEP_EVERY_S) lists the whole table instead (`hudilite clean --sweep`): for
    files no marker announces.
    Only instants on the active timeline count; files of a writer claimed or pending when the
    timeline was read, and of anything newer, are left alone. So do the staged rows of upserts
    (in the markers folders) no writer works on: a driver killed between publishing and
    deleting them, or a late task writing after a rollback, leaves some. And the temporary
    files of atomic writes (index files, state files) a killed process left before renaming
    them: those older than TMP_FILE_LIFETIME_S, which no write in progress has (a write
    renames its file within seconds; the margin covers clocks that differ), looked for by a
    sweep only.
    `writers`: the writers as the caller judged them (the clean, under its lock, just before);
    judged here when None. An older judgement only leaves more alone: a writer claiming since
    takes a time after every instant it judged completed."""
    writers = writers or writers_now(ctx.storage, ctx.timeline)  # judged before the listing: a later writer's files are newer
    instants, in_flight, done = writers.instants, writers.in_flight, writers.completed
    if not done:
        return []
    for claim in writers.tombstones:  # kept only so that the time was not handed out again
        if claim < done[-1]:
            ctx.storage.delete_file(writer_path(claim))
    settled = [t for t in ctx.storage.list_names(MARKERS_DIR) if t not in in_flight and t <= done[-1]]
    sweep = sweep or _sweep_due(ctx)
    if sweep:
        ctx.storage.write_text(LAST_SWEEP, str(time.time()))  # before the listing: files after it are the next one's
        candidates = files_outside_hoodie(ctx.storage.list_files_with_sizes(""))
    else:
        candidates = [p for t in settled for p in marked_files(ctx.storage, t) if not p.startswith(HOODIE_DIR + "/")]
    committed = {s.path for _, m in ctx.timeline.commits() for s in m.write_stats}
    archived = ctx.timeline.archived()  # read last: instants archived meanwhile are skipped, not taken for zombies
    committed |= {f.path for f in archived.files}
    zombies = []
    for path in candidates:
        name = parse_base_file_name(path)
        if name is None or path in committed or name.instant in in_flight:
            continue
        if instants[0].timestamp <= name.instant <= done[-1] and name.instant > (archived.through or ""):
            ctx.storage.delete_file(path)
            zombies.append(path)
    if settled:
        with contextlib.nullcontext() if holding_lock else TableLock(ctx.storage):  # a restore writes markers under it
            if ctx.pending_restore() is None:  # and one that died needs them to finish
                for instant in settled:  # looked at: markers, and staged rows no writer reads any more
                    ctx.storage.delete_dir(markers_dir(instant))
    if sweep:  # left by killed processes only, and read by no one: looked for as rarely as the sweep
        oldest_kept = time.time_ns() - TMP_FILE_LIFETIME_S * 1_000_000_000
        for name, mtime_ns in ctx.storage.list_files_with_mtimes(TMP_DIR):
            if mtime_ns is not None and mtime_ns < oldest_kept:
                ctx.storage.delete_file(posixpath.join(TMP_DIR, name))
    return zombies


def validate(ctx: TableContext) -> List[str]:
    """Problems that make the table ill-formed (empty when it is well-formed)."""
    earliest = ctx.earliest_retained()
    commits = ctx.timeline.commits()
    savepoints = set(ctx.timeline.savepoints())
    readable = [i.timestamp for i in ctx.timeline.completed()
                if earliest is None or i.timestamp >= earliest or i.timestamp in savepoints]
    required = {f.path for t in readable for f in ctx.timeline.view(t).latest_base_files()}
    if earliest is None:
        required |= {s.path for _, m in commits for s in m.write_stats}
    on_disk = files_outside_hoodie(ctx.storage.list_files_with_sizes(""))
    problems = check_table(props.loads(ctx.storage.read_text(PROPERTIES_FILE)), commits, ctx.timeline.pending(),
                           on_disk, required, ctx.timeline.archived().files)
    committed = {s.path for _, m in commits for s in m.write_stats} | {f.path for f in ctx.timeline.archived().files}
    live: Dict[str, Dict[str, int]] = {}
    for path, size in on_disk.items():
        if path in committed:
            partition, _, name = path.rpartition("/")
            live.setdefault(partition, {})[name] = size
    # A clean under way deletes files before the metadata table hears of them (at its completion).
    cleaning = {posixpath.join(partition, posixpath.basename(info["filePath"])) if partition else
                posixpath.basename(info["filePath"])
                for instant in ctx.timeline.service_instants(CLEAN) if not instant.is_completed
                for partition, infos in (ctx.timeline.service_metadata(instant).get("filePathsToBeDeletedPerPartition")
                                         or {}).items() for info in infos}
    problems += MetadataTable(ctx.storage).problems(live, on_disk.keys() | cleaning)
    view = ctx.timeline.view()
    # The index is checked against the snapshot, which cannot be read while a file of it is missing.
    readable = all(f.path in on_disk for f in view.latest_base_files())
    # An index behind another writer's commits is built again by the next write (`ensure_index`).
    if ctx.spark is not None and ctx.index.is_built() and readable and not ctx.foreign_commits():
        problems += ctx.index.check(ctx.read(), ctx.timeline.completed(), view)
    if ctx.spark is not None and readable and isinstance(ctx.index, RecordIndex):
        problems += ctx.index.check_record_index(ctx.read())
    return problems


def history(ctx: TableContext) -> List[dict]:
    """One summary per instant, oldest first: what a person wants to see of the timeline."""
    out = []
    archived = ctx.timeline.archived()
    if archived.through is not None:
        out.append({"instant": archived.first, "action": "archived", "state": "ARCHIVED",
                    "operation": f"{archived.count} instants to {archived.through}"})
    entries = []
    for i in ctx.timeline.instants():
        entry = {"instant": i.timestamp, "action": i.action, "state": i.state}
        if i.completion_time:  # timeline layout 2
            entry["completed"] = i.completion_time
        if i.is_completed:
            m = ctx.timeline.metadata(i)
            entry.update(
                operation=m.operation, files_written=len(m.write_stats), rows_written=m.num_writes,
                inserts=sum(s.numInserts for s in m.write_stats), updates=sum(s.numUpdateWrites for s in m.write_stats),
                deletes=sum(s.numDeletes for s in m.write_stats),
                file_groups_rewritten=sum(s.prevCommit is not None for s in m.write_stats),
                file_groups_replaced=sum(len(v) for v in m.replaced_file_ids.values()),
            )
        entries.append(entry)
    for action in SERVICE_ACTIONS:
        for i in ctx.timeline.service_instants(action):
            entries.append({"instant": i.timestamp, "action": i.action, "state": i.state,
                            **_service_summary(ctx.timeline.service_metadata(i) if i.action != SAVEPOINT else {}, i)})
    order = {action: n for n, action in enumerate(("commit", "replacecommit") + SERVICE_ACTIONS)}
    return out + sorted(entries, key=lambda e: (e["instant"], order.get(e["action"], len(order))))


def _service_summary(record: dict, instant: Instant) -> dict:
    """What a clean, savepoint or restore instant did, in the timeline's columns."""
    if instant.action == CLEAN:
        if instant.is_completed:
            return {"operation": f"retain from {record['earliestCommitToRetain']}",
                    "files_deleted": record["totalFilesDeleted"]}
        earliest = record["earliestInstantToRetain"]
        return {"operation": f"retain from {earliest['timestamp'] if earliest else '?'}"}
    if instant.action == RESTORE:
        target = (record.get("extraMetadata") or {}).get("savepointToRestoreTimestamp") \
            or record.get("savepointToRestoreTimestamp")
        rolled = record.get("instantsToRollback") or []
        return {"operation": f"restore to {target}", "instants_rolled_back": len(rolled)}
    return {"operation": "savepoint"}


SIZE_BUCKETS_MB = (1, 8, 32, 64, 100, 120)  # the histogram's upper bounds; the last bucket is open


def stats(ctx: TableContext) -> dict:
    """What a table owner checks to see a table stays healthy: files per partition, their
    sizes, the timeline's length, active and archived, and the index's size on storage."""
    files = ctx.timeline.view().latest_base_files()
    per_partition: dict = {}
    for f in files:
        entry = per_partition.setdefault(f.partition, {"files": 0, "rows": 0, "bytes": 0})
        entry["files"] += 1
        entry["rows"] += f.num_records
        entry["bytes"] += f.size
    labels = [f"<{b} MB" for b in SIZE_BUCKETS_MB] + [f">={SIZE_BUCKETS_MB[-1]} MB"]
    histogram = dict.fromkeys(labels, 0)
    for f in files:
        bucket = next((i for i, b in enumerate(SIZE_BUCKETS_MB) if f.size < b * 1024 * 1024), len(SIZE_BUCKETS_MB))
        histogram[labels[bucket]] += 1
    archived = ctx.timeline.archived()
    instants = ctx.timeline.instants()
    index_root = ctx.index.ROOT
    index_bytes = sum(size for _, size in ctx.storage.list_files_with_sizes(index_root)) if ctx.index.is_built() else 0
    return {
        "table": ctx.name, "rows": sum(f.num_records for f in files), "files": len(files),
        "bytes": sum(f.size for f in files), "partitions": dict(sorted(per_partition.items())),
        "file_sizes": histogram,
        "active_instants": len(instants), "pending_instants": sum(not i.is_completed for i in instants),
        "archived_instants": archived.count, "archived_through": archived.through,
        "earliest_readable_instant": ctx.earliest_retained(), "savepoints": ctx.timeline.savepoints(),
        "index_bytes": index_bytes,
    }
