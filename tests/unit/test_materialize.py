import pytest

from dbt.adapters.hudilite import materialize as m
from dbt.adapters.hudilite.table import FileSizing, TableServices
from dbt.adapters.hudilite.catalog.spark_entries import snapshot_glob


def config(**kw):
    base = dict(name="orders", materialized="incremental")
    base.update(kw)
    return m.ModelConfig(**base)


def test_config_from_a_dbt_node():
    node = {"name": "orders", "config": {"materialized": "incremental", "incremental_strategy": "Insert_Overwrite",
                                         "partition_by": "day", "unique_key": ["a", "b"], "retain_commits": 3,
                                         "keep_max_commits": "40", "small_file_limit": 0}}
    c = m.ModelConfig.from_node(node)
    assert (c.strategy, c.partition_by, c.unique_key) == ("insert_overwrite", ["day"], ["a", "b"])
    assert c.services == TableServices(retain_commits=3, keep_min_commits=20, keep_max_commits=40)
    assert c.file_sizing == FileSizing(small_file_limit=0, max_file_size=FileSizing().max_file_size)
    with pytest.raises(m.ModelConfigError, match="model 't': keep_min_commits must be a whole number, not 'many'"):
        m.ModelConfig.from_node({"name": "t", "config": {"keep_min_commits": "many"}})
    assert m.ModelConfig.from_node({"name": "t", "config": {}}).strategy == "append"
    keyed = m.ModelConfig.from_node({"name": "t", "config": {"unique_key": ["id", "ID", "id"]}})
    assert (keyed.strategy, keyed.unique_key) == ("merge", ["id", "ID"])  # a key means merge by default
    assert m.ModelConfig.from_node({"name": "t", "config": {"unique_key": ""}}).strategy == "append"


@pytest.mark.parametrize("kw, columns, message", [
    (dict(strategy="upsert"), ["id"], "model 'orders': unknown incremental_strategy 'upsert'"),
    (dict(strategy="merge"), ["id"], "incremental_strategy 'merge' needs a unique_key"),
    (dict(strategy="delete+insert"), ["id"], "incremental_strategy 'delete.insert' needs a unique_key"),
    (dict(incremental_predicates=["a > 1"]), ["id"], "incremental_strategy 'append' matches none"),
    (dict(strategy="microbatch"), ["id"], "'microbatch' replaces the partitions of each batch: set partition_by"),
    (dict(partition_by=["day"]), ["id", "dt"], "partition_by names column 'day', which the model does not produce (it produces id, dt)"),
    (dict(unique_key=["customer_id"]), ["id"], "unique_key names column 'customer_id'"),
    (dict(on_schema_change="whatever"), ["id"], "unknown on_schema_change 'whatever'"),
    (dict(unique_key=["id"], strategy="merge", merge_update_columns=["plan", "updated_ta"]),
     ["id", "plan", "updated_at"], "merge_update_columns names column 'updated_ta', which the model does not produce "
     "(it produces id, plan, updated_at)"),
    (dict(unique_key=["id"], strategy="merge", merge_exclude_columns=["craeted_at"]), ["id", "created_at"],
     "merge_exclude_columns names column 'craeted_at'"),
    (dict(services=TableServices(cluster_every=2, cluster_by=("dya",))), ["id", "day"], "cluster_by names column 'dya'"),
    (dict(precombine_field="ts"), ["id", "_hoodie_is_deleted"], "precombine_field names column 'ts', which the model "
     "does not produce (it produces id)"),
    (dict(services=TableServices(retain_commits=0)), ["id"], "retain_commits must be at least 1"),
    (dict(services=TableServices(keep_min_commits=30, keep_max_commits=30)), ["id"],
     "need 1 <= keep_min_commits < keep_max_commits (got 30 and 30)"),
    (dict(services=TableServices(retain_commits=20)), ["id"],
     "keep_min_commits (20) must be greater than retain_commits (20)"),
    (dict(file_sizing=FileSizing(max_file_size=0)), ["id"], "max_file_size more than 0"),
])
def test_validation_names_the_model_and_the_problem(kw, columns, message):
    with pytest.raises(m.ModelConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        m.validate(config(**kw), columns)


def test_valid_configs_pass():
    m.validate(config(partition_by=["DAY"], unique_key=["id"]), ["id", "day"])  # names match case-insensitively
    m.validate(config(materialized="table", strategy="anything"), ["id"])  # strategies only matter for incremental


@pytest.mark.parametrize("kw, exists, full_refresh, expected", [
    (dict(materialized="table"), False, False, m.CREATE),
    (dict(materialized="table"), True, False, m.OVERWRITE_TABLE),
    (dict(), True, True, m.OVERWRITE_TABLE),
    (dict(), True, False, m.INSERT),
    (dict(strategy="insert_overwrite", partition_by=["d"]), True, False, m.OVERWRITE_PARTITIONS),
    (dict(strategy="insert_overwrite"), True, False, m.OVERWRITE_TABLE),
    (dict(strategy="microbatch", partition_by=["d"]), True, False, m.OVERWRITE_PARTITIONS),
    (dict(strategy="merge", unique_key=["id"]), False, False, m.CREATE),
])
def test_operation_choice(kw, exists, full_refresh, expected):
    assert m.choose_operation(config(**kw), exists, full_refresh) == expected


def test_merge_keys_the_table_and_delete_insert_does_not():
    merge = config(strategy="merge", unique_key=["id"])
    assert m.choose_operation(merge, True, False) == m.UPSERT and m.record_key(merge) == ["id"]
    delete_insert = config(strategy="delete+insert", unique_key=["id"], incremental_predicates=["id != 2"])
    m.validate(delete_insert, ["id"])
    assert m.choose_operation(delete_insert, True, False) == m.DELETE_INSERT and m.record_key(delete_insert) == []
    assert m.record_key(config(materialized="table", unique_key=["id"])) == []
    node = {"name": "orders", "config": {"materialized": "incremental", "predicates": ["a > 1"], "unique_key": "id"}}
    assert m.ModelConfig.from_node(node).incremental_predicates == ["a > 1"]


def test_merge_update_columns():
    assert m.update_columns(config(), ["id", "a", "b"]) is None
    assert m.update_columns(config(merge_update_columns=["a"]), ["id", "a", "b"]) == ["a"]
    assert m.update_columns(config(merge_exclude_columns=["A"]), ["id", "a", "b"]) == ["id", "b"]
    with pytest.raises(m.ModelConfigError, match="not both"):
        m.update_columns(config(merge_update_columns=["a"], merge_exclude_columns=["b"]), ["a", "b"])


TABLE = [("id", "bigint"), ("a", "string"), ("b", "string")]


def test_schema_change_ignore_keeps_the_table_columns():
    plan = m.plan_schema_change(config(on_schema_change="ignore"), TABLE, TABLE + [("c", "int")])
    assert plan.columns == [("id", None), ("a", None), ("b", None)] and not plan.drop_missing_columns
    with pytest.raises(m.ModelConfigError, match="no longer produces column\\(s\\) b"):
        m.plan_schema_change(config(on_schema_change="ignore"), TABLE, TABLE[:2])


def test_schema_change_fail_lists_the_differences():
    with pytest.raises(m.ModelConfigError, match=r"out of sync \(added: c; removed: b; changed type: a \(string -> int\)\)"):
        m.plan_schema_change(config(on_schema_change="fail"), TABLE, [("id", "bigint"), ("a", "int"), ("c", "int")])
    assert m.plan_schema_change(config(on_schema_change="fail"), TABLE, TABLE).columns == [(n, None) for n, _ in TABLE]


def test_schema_change_append_and_sync():
    model = [("id", "bigint"), ("a", "string"), ("c", "int")]
    append = m.plan_schema_change(config(on_schema_change="append_new_columns"), TABLE, model)
    assert append.columns == [("id", None), ("a", None), ("b", "string"), ("c", None)]
    sync = m.plan_schema_change(config(on_schema_change="sync_all_columns"), TABLE, model)
    assert sync.columns == [("id", None), ("a", None), ("c", None)] and sync.drop_missing_columns


def test_a_retyped_column_is_cast_to_the_tables_type_unless_the_table_syncs_to_the_model():
    table = [("id", "bigint"), ("n", "int"), ("d", "date"), ("s", "string")]
    model = [("id", "bigint"), ("n", "bigint"), ("d", "timestamp"), ("s", "int")]
    for mode in ("ignore", "append_new_columns"):  # numbers to numbers, dates and timestamps; not int to string
        plan = m.plan_schema_change(config(on_schema_change=mode), table, model)
        assert plan.casts == {"n": ("bigint", "int"), "d": ("timestamp", "date")}
    assert m.plan_schema_change(config(on_schema_change="sync_all_columns"), table, model).casts == {}
    assert m.store_assignable("decimal(12,2)", "decimal(10,2)") and not m.store_assignable("string", "int")
    assert not m.store_assignable("int", "int") and not m.store_assignable("interval day", "int")


def test_layout_change():
    assert not m.table_layout_changed(config(partition_by=["Day"]), ["day"], [])
    assert m.table_layout_changed(config(partition_by=["day"], strategy="merge", unique_key=["id"]), ["day"], [])


def test_snapshot_glob_names_exact_files_and_escapes_glob_characters():
    assert snapshot_glob("/t", ["p=a/f1.parquet", "f2.parquet"]) == "/t/{p=a/f1.parquet,f2.parquet}"
    assert snapshot_glob("/t", ["p=a,b{1}/q=*/f.parquet"]) == "/t/{p=a?b?1?/q=?/f.parquet}"


def test_a_snapshot_is_a_merge_on_dbt_scd_id_that_only_closes_open_versions():
    names = {"dbt_scd_id": "scd", "dbt_valid_to": "valid_to"}
    snap = m.snapshot_config("orders_snapshot", names, None)
    assert (m.record_key(snap), m.update_columns(snap, ["id", "valid_to"])) == (["scd"], ["valid_to"])
    assert snap.incremental_predicates == ["DBT_INTERNAL_DEST.`valid_to` is null"]
    assert m.choose_operation(snap, True, True) == m.UPSERT and m.choose_operation(snap, False, False) == m.CREATE
    current = m.snapshot_config("s", names, "to_timestamp('9999-12-31')")
    assert current.incremental_predicates == [
        "DBT_INTERNAL_DEST.`valid_to` is null or DBT_INTERNAL_DEST.`valid_to` = to_timestamp('9999-12-31')"]
    assert [c for c in ["id", "dbt_change_type", "DBT_UNIQUE_KEY_1", "dbt_valid_to"] if m.snapshot_staging_only(c)] == [
        "dbt_change_type", "DBT_UNIQUE_KEY_1"]


COLUMNS = [("id", "bigint"), ("a", "string"), ("b", "string")]


def state(partition_fields=(), record_key_fields=(), columns=COLUMNS):
    return m.TableState(list(partition_fields), list(record_key_fields), list(columns))


def test_one_plan_per_build_carries_everything_the_write_needs():
    merge = config(strategy="merge", unique_key=["id"], merge_exclude_columns=["b"], incremental_predicates=["x > 1"],
                   precombine_field="a", services=TableServices(retain_commits=4), file_sizing=FileSizing(0))
    plan = m.plan_build(merge, COLUMNS + [(m.DELETE_FLAG, "boolean")], state(record_key_fields=["id"]), False)
    assert (plan.operation, plan.record_key, plan.precombine_field) == (m.UPSERT, ["id"], "a")
    assert (plan.services.retain_commits, plan.file_sizing.small_file_limit) == (4, 0)
    assert plan.update_columns == ["id", "a"] and plan.predicates == ["x > 1"] and not plan.recreate
    assert plan.schema.columns == [("id", None), ("a", None), ("b", None)]  # the delete flag rides along, unplanned
    first = m.plan_build(merge, COLUMNS, None, False)
    assert (first.operation, first.schema, first.update_columns) == (m.CREATE, None, None)
    delete_insert = m.plan_build(config(strategy="delete+insert", unique_key=["a"]), COLUMNS, state(), False)
    assert (delete_insert.operation, delete_insert.key_columns, delete_insert.record_key) == (m.DELETE_INSERT, ["a"], [])


def test_a_changed_layout_rebuilds_a_table_and_refuses_an_incremental_run():
    rebuilt = m.plan_build(config(materialized="table", partition_by=["a"]), COLUMNS, state(), False)
    assert (rebuilt.operation, rebuilt.recreate, rebuilt.partition_by) == (m.CREATE, True, ["a"])
    with pytest.raises(m.ModelConfigError, match="model 'orders': partition_by/record key .* run with --full-refresh"):
        m.plan_build(config(partition_by=["a"]), COLUMNS, state(), False)
    assert m.plan_build(config(partition_by=["a"]), COLUMNS, state(), True).recreate
    portable = config(parquet_encoding="portable")
    with pytest.raises(m.ModelConfigError, match=r"parquet_encoding \(portable\) differs from the table's \(compact\)"):
        m.plan_build(portable, COLUMNS, state(), False)
    rebuilt = m.plan_build(portable, COLUMNS, state(), True)
    assert (rebuilt.recreate, rebuilt.parquet_encoding) == (True, "portable")
    with pytest.raises(m.ModelConfigError, match="unknown parquet_encoding 'tiny'"):
        m.plan_build(config(parquet_encoding="tiny"), COLUMNS, None, False)
    snap = m.snapshot_config("snap", {"dbt_scd_id": "id", "dbt_valid_to": "b"}, None)
    with pytest.raises(m.ModelConfigError, match="it was not built as a snapshot"):
        m.plan_build(snap, COLUMNS, state(record_key_fields=["a"]), False)


def test_another_table_version_rebuilds_a_table_model_and_a_full_refresh_and_no_incremental_run():
    at_6 = m.TableState([], [], list(COLUMNS), table_version=6)
    rebuilt = m.plan_build(config(materialized="table", hudi_table_version=9), COLUMNS, at_6, False)
    assert (rebuilt.operation, rebuilt.recreate, rebuilt.table_version) == (m.CREATE, True, 9)
    kept = m.plan_build(config(hudi_table_version=9), COLUMNS, at_6, False)  # an incremental run keeps its history
    assert (kept.operation, kept.recreate) == (m.INSERT, False)
    assert m.plan_build(config(hudi_table_version=9), COLUMNS, at_6, True).recreate
    assert not m.plan_build(config(materialized="table"), COLUMNS, at_6, False).recreate  # unset: the table's
    assert not m.plan_build(config(materialized="table", hudi_table_version=6), COLUMNS, at_6, False).recreate
    assert m.ModelConfig.from_node({"name": "o", "config": {"hudi_table_version": "8"}}).hudi_table_version == 8
    with pytest.raises(m.ModelConfigError, match="model 'o': hudi_table_version must be one of 6, 8, 9"):
        m.ModelConfig.from_node({"name": "o", "config": {"hudi_table_version": 7}})


def test_the_plan_validates_before_anything_is_decided():
    with pytest.raises(m.ModelConfigError, match="unique_key names column 'nope'"):
        m.plan_build(config(strategy="merge", unique_key=["nope"]), COLUMNS, None, False)
    with pytest.raises(m.ModelConfigError, match="no longer produces column"):
        m.plan_build(config(), COLUMNS[:2], state(), False)


def test_build_errors_map_to_dbt_errors_by_kind():
    from dbt_common.exceptions import CompilationError, DbtDatabaseError

    from dbt.adapters.hudilite.impl import _dbt_error
    from dbt.adapters.hudilite.table import ConcurrentWriteError, DataError, SchemaError

    orders = config()
    assert isinstance(_dbt_error(orders, SchemaError("table orders: column 'x' changed type")), CompilationError)
    assert isinstance(_dbt_error(orders, orders.fail("bad config")), CompilationError)
    for err in (DataError("duplicate key"), ConcurrentWriteError("another writer"), RuntimeError("task failed")):
        mapped = _dbt_error(orders, err)
        assert isinstance(mapped, DbtDatabaseError) and "model 'orders'" in str(mapped)
    assert str(_dbt_error(orders, orders.fail("x"))).count("model 'orders'") == 1
    from_task = RuntimeError("An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
                             '  File "/x/keygen.py", line 160, in _folder_name\n'
                             "dbt.adapters.hudilite.table.errors.DataError: table orders: partition column 'p' has a "
                             "value that cannot be a folder name ('/' or ':' in it, or '.' or '..'): a/b\n\n"
                             "\tat org.apache.spark.api.python.BasePythonRunner")
    assert str(_dbt_error(orders, from_task)).strip().splitlines()[-1].strip() == ("model 'orders': table orders: partition column 'p' has a value that "
                                                  "cannot be a folder name ('/' or ':' in it, or '.' or '..'): a/b")


def test_a_conflicting_write_is_retried_as_configured():
    from dbt.adapters.hudilite.impl import _with_retries
    from dbt.adapters.hudilite.table import ConcurrentWriteError

    node = {"name": "orders", "config": {"materialized": "incremental", "unique_key": "id", "write_retries": 2}}
    plan = m.plan_build(m.ModelConfig.from_node(node), COLUMNS, state(record_key_fields=["id"]), False)
    assert plan.write_retries == 2 and m.plan_build(m.ModelConfig.from_node(node), COLUMNS, None, False).write_retries == 0
    calls = []

    def conflicts_twice():
        calls.append(1)
        if len(calls) <= 2:
            raise ConcurrentWriteError("instant 1 conflicts")
        return "20261123000000000"

    assert _with_retries(2, conflicts_twice) == "20261123000000000" and len(calls) == 3
    calls.clear()
    with pytest.raises(ConcurrentWriteError):
        _with_retries(1, conflicts_twice)
    assert len(calls) == 2
    with pytest.raises(m.ModelConfigError, match="write_retries must be 0 or more"):
        m.validate(config(write_retries=-1), ["id"])


@pytest.mark.parametrize("schema, name", [("..", "t"), ("s", ".."), ("s", "a/b"), ("/etc", "t"), ("", "t"),
                                          ("s", ""), ("s", ".hudilite_views"), ("c:", "t"), ("s", "a\\b")])
def test_names_that_would_leave_their_folder_are_refused_before_any_path_is_built(tmp_path, schema, name):
    from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
    from dbt.adapters.hudilite.table import ConfigurationError

    root = tmp_path / "lakehouse"
    (root / "s" / "keep").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    catalog = StorageCatalog(None, str(root))
    with pytest.raises(ConfigurationError, match="cannot be a folder under location_root"):
        catalog.drop_table(schema, name)
    with pytest.raises(ConfigurationError, match="cannot be a folder under location_root"):
        catalog.table_path(schema, name)
    assert (root / "s" / "keep").is_dir() and (tmp_path / "outside").is_dir()
    assert catalog.table_path("s", "t") == f"{root}/s/t"


def test_a_model_retaining_more_than_archival_keeps_gets_room_above_it():
    c = m.ModelConfig.from_node({"name": "t", "config": {"retain_commits": 25}})
    assert (c.services.keep_min_commits, c.services.keep_max_commits) == (35, 45)
    c = m.ModelConfig.from_node({"name": "t", "config": {"retain_commits": 25, "keep_max_commits": 60}})
    assert (c.services.keep_min_commits, c.services.keep_max_commits) == (35, 60)
    c = m.ModelConfig.from_node({"name": "t", "config": {"cluster_every": "4", "cluster_by": "day"}})
    assert (c.services.cluster_every, c.services.cluster_by) == (4, ("day",))


def test_row_constraints_of_an_enforced_contract():
    node = {"name": "orders", "config": {"contract": {"enforced": True}},
            "columns": {"id": {"name": "id", "constraints": [{"type": "not_null"}, {"type": "primary_key"},
                                                             {"type": "check", "expression": "id > 0"}]},
                        "note": {"name": "note", "constraints": []}},
            "constraints": [{"type": "check", "name": "amount_ok", "expression": "amount >= 0"},
                            {"type": "not_null", "columns": ["`Amount`"]},
                            {"type": "unique", "columns": ["id"]}]}
    rules = m.row_constraints(node, ["ID", "note", "amount"])
    assert [str(r) for r in rules] == ["not_null(ID)", "check(id > 0)", "check(amount >= 0)", "not_null(amount)"]
    assert rules[0].message == "model 'orders': null value in column \"ID\" violates not-null constraint"
    assert rules[2].message == "model 'orders': a row violates check constraint \"amount_ok\""
    assert rules[1].message == "model 'orders': a row violates check constraint \"id > 0\""
    # Without an enforced contract dbt applies no constraint, and neither does hudilite.
    assert m.row_constraints({**node, "config": {}}, ["ID", "note", "amount"]) == []
    assert m.row_constraints({**node, "config": {"contract": {"enforced": False}}}, ["ID", "note", "amount"]) == []
    with pytest.raises(m.ModelConfigError, match="model 'orders': a not_null constraint names column 'missing'"):
        m.row_constraints({**node, "constraints": [{"type": "not_null", "columns": ["missing"]}]}, ["ID"])
