"""Virtual keys (`hoodie.populate.meta.fields=false`) without Spark: the keys write tasks make
again from stored rows, what hoodie.properties says, and the model config `populate_meta_fields`.
Against Spark's keys and Hudi's writer: tests/core/test_virtual_keys.py and
tests/referee/test_hudi_virtual_keys.py."""

import datetime as dt

import pyarrow as pa
import pytest

from dbt.adapters.hudilite import materialize as m
from dbt.adapters.hudilite.table.format import properties as props
from dbt.adapters.hudilite.table.errors import ConfigurationError
from dbt.adapters.hudilite.table.format.keygen import VirtualKeys, stored_keys
from dbt.adapters.hudilite.table.format.schema import META_COLUMNS


def test_stored_keys_are_made_as_the_key_generator_makes_them():
    ids = pa.array([1, 22, None], pa.int64())
    names = pa.array(["a", "", None])
    days = pa.array([dt.date(2026, 1, 2), None, dt.date(1999, 12, 31)], pa.date32())
    assert stored_keys([("id", ids)], False).to_pylist() == ["1", "22", None]  # bare: simple, one-field keys
    assert stored_keys([("id", ids)], True).to_pylist() == ["id:1", "id:22", "id:__null__"]
    assert stored_keys([("id", ids), ("name", names), ("day", days)], True).to_pylist() == [
        "id:1,name:a,day:2026-01-02", "id:22,name:__empty__,day:__null__", "id:__null__,name:__null__,day:1999-12-31"]
    assert stored_keys([("flag", pa.array([True, False]))], False).to_pylist() == ["true", "false"]


def test_stored_rows_are_filled_as_the_merge_takes_them():
    stored = pa.table({"_hoodie_commit_time": pa.nulls(2, pa.string()), "_hoodie_file_name": ["f.parquet"] * 2,
                       "ID": pa.array([7, 8], pa.int32()), "v": ["x", "y"]})
    filled = VirtualKeys(("id",), False).fill(stored, "20261126000000000")
    assert filled.column_names == list(META_COLUMNS) + ["ID", "v"]
    assert filled.column("_hoodie_record_key").to_pylist() == ["7", "8"]
    assert filled.column("_hoodie_commit_time").to_pylist() == ["20261126000000000"] * 2  # unchanged rows have one
    assert filled.column("_hoodie_file_name").to_pylist() == ["f.parquet"] * 2
    assert filled.column("_hoodie_commit_seqno").null_count == 2
    # A file with no meta columns at all (a writer that drops them) is filled the same way.
    bare = VirtualKeys(("ID", "v"), True).fill(stored.select(["ID", "v"]), "1")
    assert bare.column_names[:5] == list(META_COLUMNS) and bare.column("_hoodie_record_key").to_pylist() == [
        "ID:7,v:x", "ID:8,v:y"]
    assert VirtualKeys(("id",), False).fill(stored.slice(0, 0), "1").num_rows == 0


def test_hoodie_properties_of_a_table_with_virtual_keys():
    config = props.TableConfig(name="t", record_key_fields=["id"], virtual_keys=True)
    config.check_new()
    written = config.to_properties()
    assert written["hoodie.populate.meta.fields"] == "false"
    assert props.TableConfig(name="t", record_key_fields=["id"]).to_properties()["hoodie.populate.meta.fields"] == "true"
    read = props.TableConfig.from_properties(props.loads(props.dumps(written)))
    assert read.virtual_keys and read.not_writable is None  # written as well as read
    with pytest.raises(ConfigurationError, match="virtual keys .* need a record key"):
        props.TableConfig(name="t", virtual_keys=True).check_new()


def _config(**kw):
    return m.ModelConfig(**dict(dict(name="orders", materialized="incremental", strategy="merge", unique_key=["id"]),
                                **kw))


def test_the_populate_meta_fields_model_config():
    node = {"name": "t", "config": {"materialized": "incremental", "unique_key": "id", "populate_meta_fields": "false"}}
    assert m.ModelConfig.from_node(node).populate_meta_fields is False
    assert m.ModelConfig.from_node({"name": "t", "config": {}}).populate_meta_fields is None
    with pytest.raises(m.ModelConfigError, match="populate_meta_fields must be true or false"):
        m.ModelConfig.from_node({"name": "t", "config": {"populate_meta_fields": "maybe"}})
    columns = [("id", "bigint"), ("a", "string")]
    plan = m.plan_build(_config(populate_meta_fields=False), columns, None, False)
    assert (plan.operation, plan.populate_meta_fields) == (m.CREATE, False)
    for kw in (dict(strategy="append", unique_key=[]), dict(materialized="table")):
        with pytest.raises(m.ModelConfigError, match="populate_meta_fields=false .* needs a record key"):
            m.plan_build(_config(populate_meta_fields=False, **kw), columns, None, False)
    # Fixed when the table is created: unset keeps the table's; a change needs --full-refresh.
    virtual = m.TableState([], ["id"], columns, virtual_keys=True)
    assert m.plan_build(_config(), columns, virtual, False).operation == m.UPSERT
    assert m.plan_build(_config(populate_meta_fields=False), columns, virtual, False).operation == m.UPSERT
    with pytest.raises(m.ModelConfigError, match=r"populate_meta_fields \(true\) differs from the table's "
                                                 r"\(hoodie.populate.meta.fields=false\).*--full-refresh"):
        m.plan_build(_config(populate_meta_fields=True), columns, virtual, False)
    assert m.plan_build(_config(populate_meta_fields=True), columns, virtual, True).recreate
