"""Looking after a table: the cleaner, validation and the timeline summary.

`clean` deletes file slices no retained instant reads and records the earliest readable
instant; `validate` checks the timeline, the files and the index against each other.
"""

from __future__ import annotations

import json
from typing import List

from . import properties as props
from .cleaner import CleanPlan, plan_clean, unreadable_from
from .context import TableContext
from .file_group import BaseFile
from .layout import CLEAN_STATE, PROPERTIES_FILE, TMP_DIR, writer_path
from .transaction import claimed_instants
from .validation import check_table, files_outside_hoodie


def clean(ctx: TableContext, retain_commits: int) -> CleanPlan:
    """Delete file slices that no snapshot of the last `retain_commits` instants reads. The new
    earliest readable instant is recorded before the first file goes, and the deletions are
    marked complete after the last: a clean that dies is finished by the next one."""
    completed = [i.timestamp for i in ctx.timeline.completed()]
    view = ctx.timeline.view()
    state = ctx.clean_state()
    if state and not state.get("complete", True):
        _delete_slices(ctx, state["earliest_retained"], unreadable_from(view, state["earliest_retained"]))
    plan = plan_clean(view, completed, retain_commits, state.get("earliest_retained"))
    if plan.files_to_delete:
        _delete_slices(ctx, plan.earliest_retained, plan.files_to_delete)
    latest = completed[-1] if completed else None
    pending = {i.timestamp for i in ctx.timeline.pending()}
    for claimed in claimed_instants(ctx.storage):  # tombstones of rolled-back writes
        if latest is not None and claimed < latest and claimed not in pending:
            ctx.storage.delete_file(writer_path(claimed))
    return plan


def _delete_slices(ctx: TableContext, earliest_retained: str, files: List[BaseFile]) -> None:
    def record(complete: bool) -> None:
        body = {"earliest_retained": earliest_retained, "complete": complete}
        ctx.storage.write_atomic(CLEAN_STATE, json.dumps(body).encode(), TMP_DIR)

    record(complete=False)  # from here on, instants before it are unreadable
    for base_file in files:
        ctx.storage.delete_file(base_file.path)
    record(complete=True)


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
