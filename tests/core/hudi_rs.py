"""The referee: read a table back through hudi-rs (the PyPI package `hudi`) and compare."""

import datetime as dt
from decimal import Decimal

import hudi
import pyarrow as pa
import pytest

from dbt.adapters.hudilite.table.errors import TimelineError
from dbt.adapters.hudilite.table.transaction import first_write_in_flight


def _normalize(value):
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, Decimal):
        return str(value)
    return value


def rows_of_arrow(table: pa.Table, columns):
    return sorted(
        tuple(_normalize(row[c]) for c in columns) for row in table.to_pylist()
    )


def rows_of_df(df, columns=None):
    columns = columns or df.columns
    return rows_of_arrow(df.toArrow(), columns)


def _hudi_read(path, options=None):
    batches = hudi.HudiTable(path).read(options) if options else hudi.HudiTable(path).read()
    return pa.Table.from_batches(batches) if batches else None


def hudi_rs_snapshot(path, as_of=None):
    options = hudi.HudiReadOptions().with_as_of_timestamp(as_of) if as_of else None
    return _hudi_read(path, options)


def hudi_rs_changes(path, start, end):
    options = (
        hudi.HudiReadOptions()
        .with_query_type(hudi.HudiQueryType.Incremental)
        .with_start_timestamp(start)
        .with_end_timestamp(end)
    )
    return _hudi_read(path, options)


def _compare(ours_df, theirs, what):
    columns = ours_df.columns
    if theirs is not None and theirs.column_names != columns:
        # hudi-rs reads every snapshot with the latest table schema; hudilite reads a snapshot
        # with the schema it was written with. Rows must agree on the columns both show, and
        # the latest snapshot (one schema for both) on all of them.
        assert what != "latest snapshot", f"hudi-rs shows columns {theirs.column_names}, hudilite {columns}"
        columns = [c for c in columns if c in theirs.column_names]
    ours = rows_of_df(ours_df, columns)
    theirs_rows = [] if theirs is None else rows_of_arrow(theirs, columns)
    assert ours == theirs_rows, f"{what}: hudilite read {len(ours)} rows, hudi-rs read {len(theirs_rows)}"
    return ours


def assert_hudi_rs_latest_agrees(table):
    """The latest snapshot and every change to it: hudilite and hudi-rs read the same rows (the
    brief form of `assert_hudi_rs_agrees`, for a table whose every instant another reader checks)."""
    latest = _compare(table.read(), hudi_rs_snapshot(table.path), "latest snapshot")
    assert latest, "the latest snapshot has no rows"
    timeline = table.context.timeline
    done = [i for i in table.timeline() if i.is_completed]
    if timeline.orders_by_completion and done:
        start, end = max(timeline.archived_completions().values(), default="0"), max(i.completed_at for i in done)
        _compare(table.read_changes(start, end), hudi_rs_changes(table.path, start, end), "all changes")


def assert_hudi_rs_agrees(table, expect_empty=False):
    """Snapshot, as of every completed instant, and every incremental range between
    consecutive completed instants: hudilite and hudi-rs must read the same rows. Two empty
    reads agree on nothing: the latest snapshot must have rows, or be expected empty."""
    earliest = table.earliest_readable_instant() or ""
    completed = [i.timestamp for i in table.timeline() if i.is_completed and i.timestamp >= earliest]
    latest = _compare(table.read(), hudi_rs_snapshot(table.path), "latest snapshot")
    assert bool(latest) != expect_empty, f"the latest snapshot has {len(latest)} rows; expected {'none' if expect_empty else 'some'}"
    for instant in completed:
        _compare(table.read(as_of=instant), hudi_rs_snapshot(table.path, instant), f"as of {instant}")
    if table.context.timeline.orders_by_completion:
        _compare_changes_by_completion(table, [i for i in table.timeline() if i.is_completed and i.timestamp >= earliest])
        return
    # A changes read past a write in flight is refused (that write may still publish into the
    # range): compare every range before it, and check the refusal of the first one past it.
    _, in_flight = first_write_in_flight(table.context.storage, table.context.timeline)
    final = [t for t in completed if in_flight is None or t < in_flight]
    for start, end in zip(completed, completed[1:]):
        if end in final:
            _compare(table.read_changes(start, end), hudi_rs_changes(table.path, start, end), f"changes ({start}, {end}]")
        else:
            with pytest.raises(TimelineError, match=f"instant {in_flight} is still being written"):
                table.read_changes(start, end)
    if final and not earliest:
        # hudi-rs reads changes from the active timeline only; hudilite's reach into the archive.
        start = table.context.timeline.archived().through or "0"
        _compare(table.read_changes(start, final[-1]), hudi_rs_changes(table.path, start, final[-1]), "all changes")


def _compare_changes_by_completion(table, instants):
    """Timeline layout 2: a changes range is in completion times (Hudi 1.x, hudi-rs 0.5). Compare
    the ranges between consecutive completions, between consecutive instant times (bounds that
    are no completion), and all changes."""
    completions = sorted(i.completed_at for i in instants)
    requested = sorted(i.timestamp for i in instants)
    for bounds in (completions, requested):
        for start, end in zip(bounds, bounds[1:]):
            _compare(table.read_changes(start, end), hudi_rs_changes(table.path, start, end), f"changes ({start}, {end}]")
    if completions:
        # hudi-rs reads changes from the active timeline only; hudilite's reach into the history.
        start = max(table.context.timeline.archived_completions().values(), default="0")
        _compare(table.read_changes(start, completions[-1]), hudi_rs_changes(table.path, start, completions[-1]),
                 "all changes")
