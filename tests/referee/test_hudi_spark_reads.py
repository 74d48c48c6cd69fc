"""Hudi's own Spark reader (0.15, 1.0 and 1.1) reads every table state our core writes as our
reader does: the snapshot, time travel to every instant the cleaner keeps, and incremental
queries between consecutive instants and over the whole range, meta columns included."""

import pytest

from tests.referee.conftest import MATRIX
from tests.referee.hudi_spark import RefereeError, changes_options, snapshot_options
from tests.referee.table_states import STATES
from dbt.adapters.hudilite.table.format.instant import next_instant_time, parse_instant_time
from tests.core.hudi_rs import assert_hudi_rs_latest_agrees
from tests.referee.values import plain_rows


def _ours(df, columns):
    return plain_rows(df.collect(), columns)


def read_checks(table):
    """(label, our DataFrame, the referee's read options) for every read to compare."""
    earliest = table.earliest_readable_instant() or ""
    completed = [i.timestamp for i in table.timeline() if i.is_completed and i.timestamp >= earliest]
    yield "snapshot", table.read(), snapshot_options()
    for instant in completed:
        yield f"as of {instant}", table.read(as_of=instant), snapshot_options(instant)
    timeline = table.context.timeline
    if timeline.orders_by_completion:  # table versions 8, 9: changes go by completion time, as Hudi 1.x reads them
        bounds = sorted(i.completed_at for i in table.timeline() if i.is_completed and i.timestamp >= earliest)
        first = max(timeline.archived_completions().values(), default="000")
    else:
        bounds, first = completed, timeline.archived().through or "000"
    for begin, end in zip(bounds, bounds[1:]):
        yield f"changes ({begin}, {end}]", table.read_changes(begin, end), changes_options(begin, end)
    if bounds:
        yield f"changes ({first}, {bounds[-1]}]", table.read_changes(first, bounds[-1]), changes_options(first, bounds[-1])


def compare(label, ours_df, theirs):
    compare_rows(label, ours_df.columns, _ours(ours_df, ours_df.columns), theirs)


def compare_rows(label, our_columns, ours, theirs):
    """`ours`: the rows of our read (`_ours`) of `our_columns`; `theirs`: the referee's (columns, rows)."""
    columns, rows = theirs
    missing = [c for c in our_columns if c not in columns]
    assert not missing, f"{label}: Hudi's reader has no column {missing}"
    theirs_rows = sorted(({c: r[c] for c in our_columns} for r in rows), key=repr)
    if ours != theirs_rows:
        only_ours = [r for r in ours if r not in theirs_rows][:3]
        only_theirs = [r for r in theirs_rows if r not in ours][:3]
        raise AssertionError(f"{label}: hudilite read {len(ours)} rows, Hudi {len(theirs_rows)}; "
                             f"only hudilite: {only_ours}; only Hudi: {only_theirs}")


# state -> [(label, our columns, our rows, the referee's read options)]: a written table does not
# change during the run (nothing writes it after `written` built it), so our side of each read
# is read once and compared with every Hudi version's.
OUR_READS = {}


def our_reads(state, table, version=6):
    key = (state, version)
    if key not in OUR_READS:
        OUR_READS[key] = [(label, df.columns, _ours(df, df.columns), options)
                          for label, df, options in read_checks(table)]
    return OUR_READS[key]


# The table versions each Hudi release reads: 0.15 refuses 8 and 9, 1.0 refuses 9.
READS_VERSIONS = {"0.15.0": (6,), "1.0.2": (6, 8), "1.1.1": (6, 8, 9)}


@pytest.mark.parametrize("state", sorted(STATES))
def test_hudi_spark_reads_what_we_write(hudi_spark, written, state):
    _check_reads(hudi_spark, written, state, 6)


@pytest.mark.parametrize("table_version", [8, 9])
@pytest.mark.parametrize("state", sorted(STATES))
def test_hudi_spark_reads_what_we_write_at_table_versions_8_and_9(hudi_spark, written, state, table_version):
    """The same states at Hudi 1.x's table versions. A Hudi release older than the version
    refuses the table (never reads it wrong); hudi-rs reads the latest snapshot and its changes
    alike (every instant of these tables is compared with hudi-rs in test_hudi_1x_tables.py)."""
    table = written(state, table_version)
    if table.config.table_version not in READS_VERSIONS[hudi_spark.version]:
        (theirs,) = hudi_spark.read_many(table.path, [snapshot_options()])
        MATRIX[(f"{state}@v{table_version}", hudi_spark.version)] = "refuses"
        assert isinstance(theirs, RefereeError), f"Hudi {hudi_spark.version} read a version {table_version} table"
        return
    _check_reads(hudi_spark, written, state, table_version)
    if hudi_spark.version == max(v for v, versions in READS_VERSIONS.items() if table_version in versions):
        assert_hudi_rs_latest_agrees(written(state, table_version))


def _as_release_reads(options: dict, release: str, table) -> dict:
    """The read options as `release` takes them. Hudi 1.0's incremental query on a version 8
    table takes its start completion time inclusively (measured: (C1, C2] reads the instant
    that completed at C1 too; 1.1 and hudi-rs exclude it): its start is the next millisecond."""
    begin = options.get("hoodie.datasource.read.begin.instanttime")
    if release.startswith("1.0.") and begin and begin != "000" and table.context.timeline.orders_by_completion:
        return dict(options, **{"hoodie.datasource.read.begin.instanttime": next_instant_time(begin, parse_instant_time(begin))})
    return options


def _check_reads(hudi_spark, written, state, version):
    table = written(state, version)
    failures = []
    cell = MATRIX[(state if version == 6 else f"{state}@v{version}", hudi_spark.version)]
    checks = our_reads(state, table, version)
    options = [_as_release_reads(c[3], hudi_spark.version, table) for c in checks]
    for (label, columns, ours, _), theirs in zip(checks, hudi_spark.read_many(table.path, options)):
        cell[1] += 1
        try:
            if isinstance(theirs, RefereeError):
                raise theirs
            compare_rows(label, columns, ours, theirs)
            cell[0] += 1
        except AssertionError as err:
            failures.append(str(err)[:1500])
    assert not failures, f"{len(failures)} of {cell[1]} reads differ:\n" + "\n".join(failures)
