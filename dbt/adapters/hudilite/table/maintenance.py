"""Looking after a table: the cleaner, validation and the timeline summary.

`clean` deletes file slices no retained instant reads and records the earliest readable
instant; `validate` checks the timeline, the files and the index against each other.
"""

from __future__ import annotations

import json
from typing import List

from . import faults
from . import properties as props
from .cleaner import CleanPlan, plan_clean, unreadable_from
from .context import TableContext
from .file_group import parse_base_file_name
from .layout import CLEAN_STATE, PROPERTIES_FILE, TMP_DIR, writer_path
from .lock import TableLock
from .transaction import open_claims, rolled_back_claims
from .validation import check_table, files_outside_hoodie


def clean(ctx: TableContext, retain_commits: int) -> CleanPlan:
    """Delete file slices that no snapshot of the last `retain_commits` instants reads. The new
    earliest readable instant is recorded (under the table lock, so two cleaners never move it
    back) before the first file goes, and marked complete after the last: a clean that dies is
    finished by the next one. Then zombie files and tombstones of rolled-back writes go."""
    with TableLock(ctx.storage):
        view = ctx.timeline.view()
        state = ctx.clean_state()
        earliest = state.get("earliest_retained")
        unfinished = unreadable_from(view, earliest) if earliest and not state.get("complete", True) else []
        completed = [i.timestamp for i in ctx.timeline.completed()]
        plan = plan_clean(view, completed, retain_commits, earliest)
        doomed = unfinished + plan.files_to_delete
        if doomed:
            _record_clean(ctx, plan.earliest_retained, complete=False)  # from here on, older instants are unreadable
    for base_file in doomed:
        ctx.storage.delete_file(base_file.path)
        faults.reach("clean")
    if doomed:
        with TableLock(ctx.storage):
            if ctx.earliest_retained() == plan.earliest_retained:
                _record_clean(ctx, plan.earliest_retained, complete=True)
    remove_zombie_files(ctx)
    for instant in rolled_back_claims(ctx.storage):  # kept only so that the time was not handed out again
        if completed and instant < completed[-1]:
            ctx.storage.delete_file(writer_path(instant))
    return plan


def _record_clean(ctx: TableContext, earliest_retained: str, complete: bool) -> None:
    body = {"earliest_retained": earliest_retained, "complete": complete}
    ctx.storage.write_atomic(CLEAN_STATE, json.dumps(body).encode(), TMP_DIR)


def remove_zombie_files(ctx: TableContext) -> List[str]:
    """Delete base files that no completed instant wrote and no writer in flight may still
    commit: a task attempt that wrote after its driver reconciled (speculation on a cluster,
    executors of a killed driver), or after its instant was rolled back. Only instants on the
    active timeline count; files of a writer claimed or pending when the timeline was read,
    and of anything newer, are left alone."""
    instants = ctx.timeline.instants()  # read before the listing: a later writer's files are newer
    in_flight = {i.timestamp for i in instants if not i.is_completed} | set(open_claims(ctx.storage))
    done = [i.timestamp for i in instants if i.is_completed]
    if not done:
        return []
    committed = {s.path for _, m in ctx.timeline.commits() for s in m.write_stats}
    zombies = []
    for path in files_outside_hoodie(ctx.storage.list_files_with_sizes("")):
        name = parse_base_file_name(path)
        if name is None or path in committed or name.instant in in_flight:
            continue
        if instants[0].timestamp <= name.instant <= done[-1]:
            ctx.storage.delete_file(path)
            zombies.append(path)
    return zombies


def validate(ctx: TableContext) -> List[str]:
    """Problems that make the table ill-formed (empty when it is well-formed)."""
    earliest = ctx.earliest_retained()
    commits = ctx.timeline.commits()
    readable = [i.timestamp for i in ctx.timeline.completed() if earliest is None or i.timestamp >= earliest]
    required = {f.path for t in readable for f in ctx.timeline.view(t).latest_base_files()}
    if earliest is None:
        required |= {s.path for _, m in commits for s in m.write_stats}
    on_disk = files_outside_hoodie(ctx.storage.list_files_with_sizes(""))
    problems = check_table(props.loads(ctx.storage.read_text(PROPERTIES_FILE)), commits, ctx.timeline.pending(),
                           on_disk, required)
    view = ctx.timeline.view()
    # The index is checked against the snapshot, which cannot be read while a file of it is missing.
    readable = all(f.path in on_disk for f in view.latest_base_files())
    if ctx.spark is not None and ctx.index.is_built() and readable:
        problems += ctx.index.check(ctx.read(), ctx.timeline.completed(), view)
    return problems


def history(ctx: TableContext) -> List[dict]:
    """One summary per instant, oldest first: what a person wants to see of the timeline."""
    out = []
    for i in ctx.timeline.instants():
        entry = {"instant": i.timestamp, "action": i.action, "state": i.state}
        if i.is_completed:
            m = ctx.timeline.metadata(i)
            entry.update(
                operation=m.operation, files_written=len(m.write_stats), rows_written=m.num_writes,
                file_groups_replaced=sum(len(v) for v in m.replaced_file_ids.values()),
            )
        out.append(entry)
    return out
