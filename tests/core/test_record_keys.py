"""Complex record keys (`f1:v1,f2:v2`) that other values would make too are refused, and only
those: checked against every way a key splits into its fields' values."""

import itertools

import pytest

from dbt.adapters.hudilite.table.keygen import ambiguous_key_value, record_key


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
