"""Issue 31, item 6: errors that say what to do, and why, without Spark."""

import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite import materialize as m
from dbt.adapters.hudilite.table import SchemaError
from dbt.adapters.hudilite.table.format.schema import to_avro

COLUMNS = [("id", "bigint"), ("v", "string")]


def test_a_column_avro_cannot_name_says_what_a_model_and_a_seed_can_do():
    schema = T.StructType([T.StructField("first name", T.StringType())])
    with pytest.raises(SchemaError) as refused:
        to_avro(schema, "people")
    assert "column 'first name' cannot be named in Avro" in str(refused.value)
    assert "(a model: with an alias in its SQL; a seed: rename its CSV header" in str(refused.value)


@pytest.mark.parametrize("stored_key, unique_key, partition_by, why", [
    ([], ["id"], [], "its rows have auto-generated record keys (it was built without unique_key), so a merge by "
                     "['id'] could not find them and would duplicate every row it meant to update; "),
    (["id"], ["id", "v"], [], "its rows have record key ['id'], so a merge by ['id', 'v'] could not find them"),
    (["id"], ["ID"], ["v"], None),  # the same key in another case: only the partitioning changed
])
def test_a_new_record_key_says_what_a_merge_would_do_without_a_full_refresh(stored_key, unique_key, partition_by, why):
    config = m.ModelConfig(name="orders", materialized="incremental", strategy="merge", unique_key=unique_key,
                           partition_by=partition_by)
    table = m.TableState([], stored_key, COLUMNS)
    with pytest.raises(m.ModelConfigError) as refused:
        m.plan_build(config, COLUMNS, table, False)
    message = str(refused.value)
    assert message.endswith("fixed when the table is created: run with --full-refresh to rebuild it")
    assert (why in message) if why else ("merge" not in message)
    assert m.plan_build(config, COLUMNS, table, True).recreate
