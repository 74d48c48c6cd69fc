import datetime as dt

import pytest

from dbt.adapters.hudilite.table.format.instant import (CLEAN, COMMIT, COMPLETED, INFLIGHT, REPLACE_COMMIT, REQUESTED,
                                                        RESTORE, SAVEPOINT, Instant, format_instant_time,
                                                        next_instant_time, parse_instant_file_name,
                                                        parse_instant_time, to_instant_time)


@pytest.mark.parametrize("instant, name", [
    (Instant("20261122010203004", COMMIT, REQUESTED), "20261122010203004.commit.requested"),
    (Instant("20261122010203004", COMMIT, INFLIGHT), "20261122010203004.inflight"),
    (Instant("20261122010203004", COMMIT, COMPLETED), "20261122010203004.commit"),
    (Instant("20261122010203004", REPLACE_COMMIT, REQUESTED), "20261122010203004.replacecommit.requested"),
    (Instant("20261122010203004", REPLACE_COMMIT, INFLIGHT), "20261122010203004.replacecommit.inflight"),
    (Instant("20261122010203004", REPLACE_COMMIT, COMPLETED), "20261122010203004.replacecommit"),
    (Instant("20261122010203004", CLEAN, REQUESTED), "20261122010203004.clean.requested"),
    (Instant("20261122010203004", CLEAN, INFLIGHT), "20261122010203004.clean.inflight"),
    (Instant("20261122010203004", CLEAN, COMPLETED), "20261122010203004.clean"),
    (Instant("20261122010203004", SAVEPOINT, INFLIGHT), "20261122010203004.savepoint.inflight"),
    (Instant("20261122010203004", SAVEPOINT, COMPLETED), "20261122010203004.savepoint"),
    (Instant("20261122010203004", RESTORE, REQUESTED), "20261122010203004.restore.requested"),
    (Instant("20261122010203004", RESTORE, COMPLETED), "20261122010203004.restore"),
])
def test_file_names_round_trip(instant, name):
    assert instant.file_name == name
    assert parse_instant_file_name(name) == instant


@pytest.mark.parametrize("name", ["hoodie.properties", ".hudilite", "2026.commit", "20261122010203004.commit.tmp",
                                  "20261122010203004.compaction", "20261122010203004.inflight.requested"])
def test_other_files_are_not_instants(name):
    assert parse_instant_file_name(name) is None


def test_instant_times_are_utc_milliseconds():
    moment = dt.datetime(2026, 11, 22, 1, 2, 3, 4567, tzinfo=dt.timezone.utc)
    assert format_instant_time(moment) == "20261122010203004"
    assert parse_instant_time("20261122010203004") == moment.replace(microsecond=4000)
    plus_one = dt.datetime(2026, 11, 22, 2, 2, 3, 4000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert format_instant_time(plus_one) == "20261122010203004"


def test_next_instant_time_strictly_increases_even_when_the_clock_stalls():
    now = dt.datetime(2026, 11, 22, 1, 2, 3, tzinfo=dt.timezone.utc)
    assert next_instant_time(None, now) == "20261122010203000"
    assert next_instant_time("20261122010203000", now) == "20261122010203001"
    assert next_instant_time("20261122235959999", now) == "20261123000000000"
    assert next_instant_time("20261122000000000", now) == "20261122010203000"


@pytest.mark.parametrize("value, expected", [
    ("20261122010203004", "20261122010203004"),
    ("2026-11-22 01:02:03", "20261122010203999"),
    ("2026-11-22T01:02:03.250", "20261122010203250"),
    ("2026-11-22T02:02:03.250+01:00", "20261122010203250"),
    ("2026-11-22", "20261122000000000"),
    (dt.datetime(2026, 11, 22, 1, 2, 3, 250000), "20261122010203250"),
])
def test_as_of_values(value, expected):
    assert to_instant_time(value) == expected


def test_bad_as_of_value_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot read 'yesterday' as an instant"):
        to_instant_time("yesterday")
