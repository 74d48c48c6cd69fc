"""Complex record keys (`f1:v1,f2:v2`) that other values would make too are refused, and only
those: checked against every way a key splits into its fields' values."""

import itertools

import pytest

from dbt.adapters.hudilite.table.format.keygen import ambiguous_key_value, record_key


def splits(key, fields):
    """How many value tuples make `key`: the ways it splits at its labels `,f2:` ... `,fn:`."""
    if not key.startswith(f"{fields[0]}:"):
        return 0

    def count(start, rest):
        if not rest:
            return 1
        label, found, total = f",{rest[0]}:", key.find(f",{rest[0]}:", start), 0
        while found >= 0:
            total += count(found + len(label), rest[1:])
            found = key.find(label, found + 1)
        return total

    return count(len(fields[0]) + 1, fields[1:])


def key_of(values, fields):
    return ",".join(f"{f}:{'__null__' if v is None else v or '__empty__'}" for f, v in zip(fields, values))


def words(alphabet, longest):
    return ["".join(w) for n in range(longest + 1) for w in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize("fields, values", [
    (["a", "b"], words(",:xab", 3) + [None, "x,b:y", "y,b:z", "x,a:y", "a,b", "q:r,s"]),
    (["a", "b", "c"], words(",:xbc", 2) + [None, ",b:", ",c:", "x,b:", ",c:y", ",b:x,c:", ",a:", "b,c"]),
])
def test_a_value_is_refused_exactly_when_other_values_make_its_key(spark, fields, values):
    values = list(dict.fromkeys(values))
    rows = [t for t in itertools.product(values, repeat=len(fields)) if any(v is not None for v in t)]
    df = spark.createDataFrame(rows, ", ".join(f"{f} string" for f in fields))
    checked = df.select(*fields, ambiguous_key_value(fields, "t").alias("problem")).collect()
    assert len(checked) == len(rows)
    wrong = [(tuple(r[:-1]), r.problem) for r in checked
             if (r.problem is not None) != (splits(key_of(r[:-1], fields), fields) > 1)]
    assert wrong == []
    accepted = [key_of(r[:-1], fields) for r in checked if r.problem is None]
    assert len(set(accepted)) == len(accepted)  # no two accepted rows share a key


def test_placeholders_and_the_message(spark):
    df = spark.createDataFrame([("__null__", "__empty__", 1)], "a string, b string, n int")
    one_field = df.select(ambiguous_key_value(["a"], "t").alias("a"), ambiguous_key_value(["b"], "t").alias("b")).first()
    assert one_field.a is None  # a one-field key's null is refused: only this value makes 'a:__null__'
    assert one_field.b == ("table t: record key column 'b' has the value '__empty__', which is how the key writes an "
                           "empty value, so a row with an empty value there makes the same key: change the value or "
                           "the unique_key")
    assert df.select(ambiguous_key_value(["a", "n"], "t").alias("p")).first().p.startswith(
        "table t: record key column 'a' has the value '__null__', which is how the key writes a null")
    collides = spark.createDataFrame([("x,b:y", "z")], "a string, b string")
    assert collides.select(ambiguous_key_value(["a", "b"], "t").alias("p")).first().p == (
        "table t: record key column 'a' has the value 'x,b:y', whose ',b:' reads as the start of b's part of the key "
        "'a:<value>,b:<value>', so other values make the same key: change the value or the unique_key")
    with pytest.raises(Exception, match="record key column 'a' has the value 'x,b:y'"):
        collides.select(record_key(["a", "b"], "t", True)).collect()
    fine = spark.createDataFrame([("x,a:y", "b,c")], "a string, b string")
    assert fine.select(record_key(["a", "b"], "t", True).alias("k")).first().k == "a:x,a:y,b:b,c"


def _rows(spark, tag, ntz=False):
    """Two instants as timestamp (or timestamp_ntz) keys, one in a US daylight-saving gap, made
    from epoch seconds so that they are the same in any session time zone."""
    n = ", timestamp_ntz'1970-01-01 00:00:00' + make_dt_interval(0, 0, 0, s) as n" if ntz else ""
    return spark.sql(f"select timestamp_seconds(s) as ts{n}, '{tag}' as v from values (1704112496L), (1710037800L) t(s)")


@pytest.fixture
def session_zone(spark):
    zone = spark.conf.get("spark.sql.session.timeZone")
    yield lambda z: spark.conf.set("spark.sql.session.timeZone", z)
    spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.parametrize("key", ["ts", "n", "ts,v"])
def test_timestamp_keys_are_epoch_micros_whatever_the_session_time_zone(spark, tmp_path, session_zone, key):
    """Issue 44, item 5: keys were Spark's string cast of the value, which follows the session
    time zone, so a profile in another zone stored every key twice. Now they are the epoch
    microseconds Hudi's writers make (timestamp_ntz: of the wall-clock time read in UTC)."""
    from dbt.adapters.hudilite.table import HudiTable
    from tests.core.hudi_rs import assert_hudi_rs_agrees

    session_zone("UTC")
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key=key)
    table.upsert(_rows(spark, "a", key == "n"))
    for zone, tag in [("America/New_York", "b"), ("Asia/Kolkata", "c")]:
        session_zone(zone)
        table = HudiTable.open(spark, table.path)
        table.upsert(_rows(spark, tag, key == "n"))
    stored = sorted((r._hoodie_record_key, r.v) for r in table.read().collect())
    micros = {"ts": ["1704112496000000", "1710037800000000"], "n": ["1704112496000000", "1710037800000000"],
              "ts,v": ["ts:1704112496000000,v:c", "ts:1710037800000000,v:c"]}[key]
    expected_v = "c"
    if key == "ts,v":  # v is part of the key: each run's rows are new keys, the same instant each time
        micros = sorted(f"ts:{m},v:{t}" for m in ("1704112496000000", "1710037800000000") for t in "abc")
        assert sorted(k for k, _ in stored) == micros
    else:
        assert stored == [(m, expected_v) for m in micros]
    assert "hudilite.keygen.timestamp.keys=epoch_micros" in open(tmp_path / "t" / ".hoodie" / "hoodie.properties").read()
    assert table.validate() == []
    if key != "n":  # hudi-rs 0.5 cannot read a timestamp_ntz column (a panic: "not yet implemented")
        assert_hudi_rs_agrees(table)


def _legacy_table(spark, path):
    """A table as an older hudilite made it: no record of the timestamp key text, text keys."""
    from dbt.adapters.hudilite.table import HudiTable
    from dbt.adapters.hudilite.table.format.keygen import UTC_TEXT

    HudiTable.create(spark, str(path), "t", record_key="ts", partition_by="p")
    properties = path / ".hoodie" / "hoodie.properties"
    properties.write_text("\n".join(line for line in properties.read_text().splitlines()
                                    if not line.startswith("hudilite.keygen.timestamp.keys")) + "\n")
    old = HudiTable.open(spark, str(path))
    old.context.keys._timestamp_text = UTC_TEXT  # as the string cast of an older hudilite wrote them
    return old


def test_a_table_whose_timestamp_keys_are_text_keeps_them_in_utc(spark, tmp_path, session_zone):
    """A table an older hudilite keyed by a timestamp holds text keys and no record of the
    choice: its keys stay text, now in UTC whatever the session's zone, even where the first
    file of its snapshot is an empty slice a delete left."""
    from dbt.adapters.hudilite.table import HudiTable

    session_zone("UTC")
    old = _legacy_table(spark, tmp_path / "t")
    old.upsert(_rows(spark, "a").selectExpr("*", "if(unix_seconds(ts) < 1710000000, 'a', 'b') as p"))
    old.delete_where("p = 'a'")  # p=a keeps an empty slice, listed first
    session_zone("America/New_York")
    table = HudiTable.open(spark, str(tmp_path / "t"))
    table.upsert(_rows(spark, "b").selectExpr("*", "if(unix_seconds(ts) < 1710000000, 'a', 'b') as p"))
    assert sorted((r._hoodie_record_key, r.v) for r in table.read().collect()) == [
        ("2024-01-01 12:34:56", "b"), ("2024-03-10 02:30:00", "b")]
    assert table.validate() == []


def test_timestamp_keys_in_neither_form_are_refused(spark, tmp_path, session_zone, monkeypatch):
    """Text keys an older hudilite wrote in another session zone match neither form: a write
    would key the rows anew, so it is refused, naming the key and the way out."""
    from dbt.adapters.hudilite.table import ConfigurationError, HudiTable

    session_zone("Europe/Berlin")
    old = _legacy_table(spark, tmp_path / "t")
    old.context.keys._timestamp_text = None  # the old code: Spark's cast, in the session's zone
    from dbt.adapters.hudilite.table.format import keygen
    with monkeypatch.context() as patched:
        patched.setattr(keygen, "key_text", lambda value, kind, timestamps="": value.cast("string"))
        old.upsert(_rows(spark, "a").selectExpr("*", "'a' as p"))
    session_zone("UTC")
    table = HudiTable.open(spark, str(tmp_path / "t"))
    before = [i.timestamp for i in table.timeline()]
    with pytest.raises(ConfigurationError, match=r"record key '2024-01-01 13:34:56' does not hold timestamp column "
                                                 r"'ts' as hudilite writes it .*rebuild the table \(--full-refresh\)"):
        table.upsert(_rows(spark, "b").selectExpr("*", "'a' as p"))
    assert [i.timestamp for i in table.timeline()] == before


@pytest.mark.parametrize("partitioned", [False, True])
def test_decimal_keys_and_partitions_do_not_depend_on_ansi_mode(spark, tmp_path, partitioned):
    """Spark casts a small decimal of scale 7 or more to '1E-8' with ANSI off and to
    '0.00000001' with it on: keys and partition folders take the plain form in both."""
    from dbt.adapters.hudilite.table import HudiTable

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id" if partitioned else "d",
                             partition_by="d" if partitioned else None)
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    try:
        for mode, tag in [("true", "a"), ("false", "b")]:
            spark.conf.set("spark.sql.ansi.enabled", mode)
            rows = spark.sql(f"select 1L as id, cast(0.00000001 as decimal(12,8)) as d, '{tag}' as v")
            table.insert_overwrite(rows) if partitioned else table.upsert(rows)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    stored = [(r._hoodie_record_key, r._hoodie_partition_path, r.v) for r in table.read().collect()]
    assert stored == ([("1", "d=0.00000001", "b")] if partitioned else [("0.00000001", "", "b")])
    assert table.validate() == []
