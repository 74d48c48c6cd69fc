"""Random sequences of core operations against a Python model of the table (issue 44): upserts,
deletes, columns added, dropped and added back, key and partition columns widened, and a
session time zone that changes between steps. After every step the table reads as the model
does; a step the core refuses changes nothing. The properties under test: a record key means the
same row whatever its column's type has widened to and whatever the session's zone, and a
dropped column's values never come back."""

import datetime as dt
import random

import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite.table import HudiTable, SchemaError
from tests.core.hudi_rs import assert_hudi_rs_agrees

ZONES = ["UTC", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"]
INSTANTS = [dt.datetime(2024, 3, 10, 7, 30, tzinfo=dt.timezone.utc),  # 02:30 in New York: a DST gap
            dt.datetime(2024, 11, 3, 5, 30, tzinfo=dt.timezone.utc), dt.datetime(1969, 12, 31, 23, 59, 59, 500000,
                                                                               tzinfo=dt.timezone.utc)]
WIDER = {"int": ["bigint", "double"], "bigint": ["double"], "double": []}
SAME_TEXT = {("int", "bigint")}  # the widenings whose values keep their text


class Model:
    """What the table must hold: rows by key (k, ts), the columns in order with their types,
    and the columns dropped while stored files may still hold them."""

    def __init__(self):
        self.rows = {}
        self.columns = {"k": "int", "ts": "timestamp", "p": "int", "v": "string"}
        self.dropped = set()
        self.added = 0  # names of new columns: c1, c2, ...

    def schema(self, extra=None):
        columns = dict(self.columns, **(extra or {}))
        return ", ".join(f"`{c}` {t}" for c, t in columns.items())


def batch(spark, rng, model, columns):
    rows = []
    for _ in range(rng.randint(1, 5)):
        row = {"k": rng.randint(0, 6), "ts": rng.choice(INSTANTS), "p": rng.randint(0, 2), "v": rng.choice("abcdef")}
        row.update({c: rng.choice([None, "x", "y"]) for c in columns if c not in row})
        rows.append(row)
    rows = list({(r["k"], r["ts"]): r for r in rows}.values())  # one row per key
    names = list(columns)
    schema = T._parse_datatype_string(", ".join(f"`{c}` {columns[c] if c not in ('k', 'p') else 'int'}"
                                                for c in names))
    df = spark.createDataFrame([tuple(r[c] for c in names) for r in rows], schema)
    return df.select(*[df[f"`{c}`"].cast(columns[c]).alias(c) for c in names]), rows


def expected(model):
    names = list(model.columns)
    return sorted(tuple(_value(r.get(c), model.columns[c]) for c in names) for r in model.rows.values())


def _value(v, kind):
    if v is None:
        return None
    if kind in ("double",):
        return float(v)
    if kind == "timestamp":
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def actual(table, model, spark):
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # collect() renders timestamps in the session zone
    df = table.read()
    names = list(model.columns)
    out = []
    for r in df.select(*names).collect():
        out.append(tuple(_value(r[c], model.columns[c]) if model.columns[c] != "timestamp" else r[c] for c in names))
    return sorted(out)


def step(spark, rng, table, model, log):
    zone = rng.choice(ZONES)
    spark.conf.set("spark.sql.session.timeZone", zone)
    kind = rng.choice(["upsert", "upsert", "delete", "add", "drop", "readd", "widen_k", "widen_p"])
    columns = dict(model.columns)
    drop_missing = False
    if kind == "add":
        model.added += 1
        columns[f"c{model.added}"] = "string"
    elif kind == "drop":
        extra = [c for c in columns if c not in ("k", "ts", "p", "v")]
        if not extra:
            kind = "upsert"
        else:
            del columns[rng.choice(extra)]
            drop_missing = True
    elif kind == "readd":
        if not model.dropped:
            kind = "upsert"
        else:
            columns[rng.choice(sorted(model.dropped))] = "string"
    elif kind in ("widen_k", "widen_p"):
        column = kind[-1]
        options = WIDER[columns[column]]
        if not options:
            kind = "upsert"
        else:
            columns[column] = rng.choice(options)
            drop_missing = True
    log.append(f"{kind} in {zone}: {columns}")
    if kind == "delete":
        keys = rng.sample(sorted(model.rows, key=str), min(len(model.rows), rng.randint(1, 3))) if model.rows else []
        if not keys:
            return
        df = spark.createDataFrame([(k, ts) for k, ts in keys], "k int, ts timestamp").selectExpr(
            f"cast(k as {model.columns['k']}) as k", "ts")
        table.delete(df)
        for key in keys:
            del model.rows[key]
        return
    df, rows = batch(spark, rng, model, columns)
    changed_text = kind.startswith("widen") and (model.columns[kind[-1]], columns[kind[-1]]) not in SAME_TEXT
    readded_old = kind == "readd"
    try:
        table.upsert(df, drop_missing_columns=drop_missing)
    except SchemaError as err:
        # refused: a widening that changes the key or partition text, or a column added back while
        # files hold its old values; nothing changed
        assert changed_text or readded_old, f"unexpected refusal: {err}"
        assert ("cannot change type" in str(err)) if changed_text else ("was dropped" in str(err)), str(err)
        return
    assert not changed_text, "a widening that changes the key text was accepted"
    removed = [c for c in model.columns if c not in columns]
    for c in removed:
        model.dropped.add(c)
        for r in model.rows.values():
            r.pop(c, None)
    if kind == "readd":  # accepted: no stored file holds the old values any more
        model.dropped.discard([c for c in columns if c not in model.columns][0])
    model.columns = {c: (columns[c] if c in columns else t) for c, t in model.columns.items() if c in columns}
    model.columns.update({c: t for c, t in columns.items() if c not in model.columns})
    for row in rows:
        model.rows[(row["k"], row["ts"])] = {c: row.get(c) for c in model.columns}


@pytest.mark.parametrize("seed", [7, 44])
def test_random_operations_read_as_the_model(spark, tmp_path, seed):
    rng = random.Random(seed)
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key=["k", "ts"], partition_by="p")
    model, log = Model(), []
    first, rows = batch(spark, rng, model, model.columns)
    table.upsert(first)
    model.rows.update({(r["k"], r["ts"]): r for r in rows})
    try:
        for _ in range(12):
            step(spark, rng, table, model, log)
            table = HudiTable.open(spark, table.path)  # a later run: a new handle, no cached state
            assert actual(table, model, spark) == expected(model), "\n".join(log)
            keys = [r._hoodie_record_key for r in table.read().collect()]
            assert len(keys) == len(set(keys)) == len(model.rows), "\n".join(log)
        assert table.validate() == []
        assert_hudi_rs_agrees(table)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
