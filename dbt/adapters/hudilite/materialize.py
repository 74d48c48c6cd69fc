"""What a model build does to its table: one `BuildPlan` from the model's config, its columns
and the table's state (config validation, the operation, schema changes, merge columns).

Pure functions over plain values, so the rules are unit-tested without Spark; the adapter
carries the plan out with the table-format core.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .table import ConfigurationError, FileSizing, TableServices, quote
from .table.services.cleaner import KEEP_LATEST_COMMITS
from .table.format.schema import IS_DELETED
from .table.format.commit import INSERT, INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE, UPSERT
from .table.format.properties import PARQUET_ENCODINGS, TABLE_VERSIONS

STRATEGIES = ("append", "insert_overwrite", "microbatch", "merge", "delete+insert")
ON_SCHEMA_CHANGE = ("ignore", "fail", "append_new_columns", "sync_all_columns")

# What a build does to the table: the core's operation names, and two of the adapter's own.
CREATE = "CREATE"                      # a new table, then its first commit
OVERWRITE_TABLE = INSERT_OVERWRITE_TABLE
OVERWRITE_PARTITIONS = INSERT_OVERWRITE
DELETE_INSERT = "DELETE_INSERT"        # delete rows with the batch's unique_key values, insert the batch
DELETE_FLAG = IS_DELETED               # a merge model's rows with it true are deletes
DEST_ALIAS = "DBT_INTERNAL_DEST"       # what incremental_predicates call the stored row


class ModelConfigError(ConfigurationError):
    """A config mistake; the adapter reports it as a compilation error of the model."""


def _as_list(value: Any) -> List[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _ints(config: Dict[str, Any], settings, model: str) -> Dict[str, int]:
    """The model configs named as the fields of a settings dataclass, as ints; unset ones keep
    the dataclass's defaults."""
    out = {}
    for name, spec in settings.__dataclass_fields__.items():
        value = config.get(name)
        if spec.type not in (int, "int"):
            continue
        if value is not None and value != "":
            try:
                out[name] = int(value)
            except (TypeError, ValueError):
                raise ModelConfigError(f"model '{model}': {name} must be a whole number, "
                                       f"not {value!r}") from None
    return out


@dataclass
class ModelConfig:
    name: str
    materialized: str = "table"
    strategy: str = "append"  # from_node: merge when a unique_key is set
    partition_by: List[str] = field(default_factory=list)
    unique_key: List[str] = field(default_factory=list)
    precombine_field: Optional[str] = None
    on_schema_change: str = "ignore"
    services: TableServices = TableServices()  # retain_commits, keep_min/max_commits, cluster_every/by
    file_sizing: FileSizing = FileSizing()  # small_file_limit, max_file_size, small_write_bytes, driver_write_bytes (bytes)
    merge_update_columns: Optional[List[str]] = None
    merge_exclude_columns: List[str] = field(default_factory=list)
    incremental_predicates: List[str] = field(default_factory=list)
    write_retries: int = 0  # a write that conflicts with a concurrent one is run again this many times
    parquet_encoding: Optional[str] = None  # compact or portable (older Parquet readers); None: the table's
    drop_metadata_table: bool = False  # remove Hudi's metadata table of a table Java wrote (`metadata_table`)
    # Hudi's hoodie.populate.meta.fields: False makes a table with virtual keys; None: the table's, or true
    populate_meta_fields: Optional[bool] = None
    # Hudi's table version a new table is created at (6, 8 or 9); None: the profile's, else 6
    hudi_table_version: Optional[int] = None
    # Catalog sync after the build: None the profile's, "none" (or false) not this model, or a kind
    catalog_sync: Optional[str] = None
    catalog_database: Optional[str] = None  # the catalog database; None: the profile's naming

    @classmethod
    def from_node(cls, model: Dict[str, Any]) -> "ModelConfig":
        config = model.get("config", {}) or {}
        unique_key = list(dict.fromkeys(_as_list(config.get("unique_key"))))  # ['a', 'a'] is 'a'
        name = model.get("name") or model.get("alias") or "?"
        services = TableServices(**_ints(config, TableServices, name), cluster_by=tuple(_as_list(config.get("cluster_by"))),
                                 cleaner_policy=str(config.get("cleaner_policy") or KEEP_LATEST_COMMITS).upper())
        if config.get("keep_min_commits") in (None, "") and services.keep_min_commits <= services.retain_commits:
            # A model that retains more than archival keeps by default: archival keeps ten more.
            keep_min = services.retain_commits + 10
            keep_max = max(services.keep_max_commits, keep_min + 10) if config.get("keep_max_commits") in (None, "") \
                else services.keep_max_commits
            services = replace(services, keep_min_commits=keep_min, keep_max_commits=keep_max)
        return cls(
            name=name,
            materialized=config.get("materialized") or "table",
            strategy=(config.get("incremental_strategy") or ("merge" if unique_key else "append")).lower(),
            partition_by=_as_list(config.get("partition_by")),
            unique_key=unique_key,
            precombine_field=config.get("precombine_field"),
            on_schema_change=(config.get("on_schema_change") or "ignore").lower(),
            services=services,
            file_sizing=FileSizing(**_ints(config, FileSizing, name)),
            merge_update_columns=_as_list(config.get("merge_update_columns")) or None,
            merge_exclude_columns=_as_list(config.get("merge_exclude_columns")),
            incremental_predicates=_as_list(config.get("incremental_predicates") or config.get("predicates")),
            write_retries=int(config.get("write_retries") or 0),
            parquet_encoding=(config.get("parquet_encoding") or "").lower() or None,
            drop_metadata_table=_flag(config, "drop_metadata_table", name),
            populate_meta_fields=None if config.get("populate_meta_fields") in (None, "")
            else _flag(config, "populate_meta_fields", name),
            hudi_table_version=table_version(config.get("hudi_table_version"), f"model '{name}'"),
            catalog_sync=_catalog_sync(config.get("catalog_sync")),
            catalog_database=config.get("catalog_database") or None,
        )

    def fail(self, message: str) -> ModelConfigError:
        return ModelConfigError(f"model '{self.name}': {message}")


def _catalog_sync(value: Any) -> Optional[str]:
    """A model's `catalog_sync`: false turns it off, as `none` does."""
    if value is None or value == "":
        return None
    return "none" if value is False or str(value).lower() in ("false", "off") else str(value).lower()


def table_version(value: Any, where: str) -> Optional[int]:
    """A `hudi_table_version` setting: 6, 8 or 9 (None when unset)."""
    if value in (None, ""):
        return None
    if str(value).strip() not in [str(v) for v in TABLE_VERSIONS]:
        raise ModelConfigError(f"{where}: hudi_table_version must be one of {', '.join(map(str, TABLE_VERSIONS))} "
                               f"(Hudi 0.14+, 1.0+, 1.1+ read them), not {value!r}")
    return int(str(value).strip())


def _flag(config: Dict[str, Any], key: str, model: str) -> bool:
    value = config.get(key)
    if value in (None, "", False, True):
        return bool(value)
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ModelConfigError(f"model '{model}': {key} must be true or false, not {value!r}")


ENFORCED_CONSTRAINTS = ("not_null", "check")  # checked on every row before the commit; the rest are documentation


@dataclass(frozen=True)
class RowConstraint:
    """A rule every row of a build must keep (an enforced contract's `not_null` or `check`):
    `column IS NOT NULL`, or a SQL expression that must not be false (null passes, as in SQL)."""

    message: str
    column: Optional[str] = None   # not_null
    expression: Optional[str] = None  # check

    def __str__(self) -> str:
        return f"not_null({self.column})" if self.column else f"check({self.expression})"


def row_constraints(model: Dict[str, Any], columns: Sequence[str]) -> List[RowConstraint]:
    """The `not_null` and `check` constraints of a model with an enforced contract, from its
    columns and the model itself; a not_null on a column the model does not produce is a
    config error. Without an enforced contract dbt applies no constraint, and neither do we."""
    config = model.get("config", {}) or {}
    if not ((config.get("contract") or {}).get("enforced")):
        return []
    name = model.get("name") or "?"
    actual = {c.lower(): c for c in columns}
    declared = [(c.get("name"), k) for c in (model.get("columns") or {}).values() for k in c.get("constraints") or []]
    declared += [(None, k) for k in model.get("constraints") or []]
    out: List[RowConstraint] = []
    for column, constraint in declared:
        kind = str(constraint.get("type", "")).lower()
        if kind == "not_null":
            for target in [column] if column else constraint.get("columns") or []:
                bare = str(target).strip('`"')
                if bare.lower() not in actual:
                    raise ModelConfigError(f"model '{name}': a not_null constraint names column '{bare}', which the "
                                           f"model does not produce")
                out.append(RowConstraint(f"model '{name}': null value in column \"{actual[bare.lower()]}\" violates "
                                         "not-null constraint", column=actual[bare.lower()]))
        elif kind == "check" and constraint.get("expression"):
            label = constraint.get("name") or constraint["expression"]
            out.append(RowConstraint(f"model '{name}': a row violates check constraint \"{label}\"",
                                     expression=str(constraint["expression"])))
    return out


def validate(config: ModelConfig, columns: Sequence[str]) -> None:
    """Raise `ModelConfigError` for a config that cannot work with the model's columns."""
    if config.materialized == "incremental":
        if config.strategy not in STRATEGIES:
            raise config.fail(
                f"unknown incremental_strategy '{config.strategy}' (hudilite supports {', '.join(STRATEGIES)})"
            )
        if config.strategy in ("merge", "delete+insert") and not config.unique_key:
            raise config.fail(f"incremental_strategy '{config.strategy}' needs a unique_key")
        if config.incremental_predicates and config.strategy not in ("merge", "delete+insert"):
            raise config.fail("incremental_predicates restrict which existing rows a merge or delete+insert "
                              f"matches; incremental_strategy '{config.strategy}' matches none")
        if config.strategy == "microbatch" and not config.partition_by:
            raise config.fail(
                "incremental_strategy 'microbatch' replaces the partitions of each batch: set partition_by "
                "(for example a date column derived from event_time)"
            )
        if config.on_schema_change not in ON_SCHEMA_CHANGE:
            raise config.fail(
                f"unknown on_schema_change '{config.on_schema_change}' (one of {', '.join(ON_SCHEMA_CHANGE)})"
            )
    try:
        config.services.check()
    except ConfigurationError as err:
        raise config.fail(str(err)) from None
    sizing = config.file_sizing
    if min(sizing.small_file_limit, sizing.small_write_bytes, sizing.driver_write_bytes) < 0 or sizing.max_file_size <= 0:
        raise config.fail("small_file_limit, small_write_bytes and driver_write_bytes must be 0 (off) or more and "
                          "max_file_size more than 0 (bytes)")
    if config.write_retries < 0:
        raise config.fail("write_retries must be 0 or more")
    if config.parquet_encoding is not None and config.parquet_encoding not in PARQUET_ENCODINGS:
        raise config.fail(f"unknown parquet_encoding '{config.parquet_encoding}' (one of {', '.join(PARQUET_ENCODINGS)})")
    if config.populate_meta_fields is False and not record_key(config):
        raise config.fail("populate_meta_fields=false (virtual keys) needs a record key: a unique_key with "
                          "incremental_strategy 'merge' (or a snapshot); without one the keys are generated and "
                          "stored only in the meta fields")
    known = {c.lower() for c in columns if c.lower() != DELETE_FLAG}
    for setting, names in column_settings(config):
        for name in names:
            if name.lower() not in known:
                raise config.fail(f"{setting} names column '{name}', which the model does not produce "
                                  f"(it produces {', '.join(c for c in columns if c.lower() != DELETE_FLAG)})")


def column_settings(config: ModelConfig) -> List[Tuple[str, List[str]]]:
    """Every config that names model columns, (setting, names): each name must be a column of
    the model, or the build fails before anything runs (a misspelt merge_update_columns would
    otherwise update nothing and report success)."""
    return [("partition_by", config.partition_by), ("unique_key", config.unique_key),
            ("precombine_field", [config.precombine_field] if config.precombine_field else []),
            ("merge_update_columns", config.merge_update_columns or []),
            ("merge_exclude_columns", config.merge_exclude_columns),
            ("cluster_by", list(config.services.cluster_by))]


def snapshot_config(name: str, column_names: Dict[str, str], valid_to_current: Optional[str]) -> ModelConfig:
    """A snapshot (SCD type 2) is a merge keyed by dbt_scd_id: new versions are new keys; a
    changed or deleted record's open version (dbt_valid_to null, or the configured current
    value) gets its dbt_valid_to and nothing else; closed versions never change."""
    valid_to = f"{DEST_ALIAS}.{quote(column_names['dbt_valid_to'])}"
    open_version = f"{valid_to} is null" + (f" or {valid_to} = {valid_to_current}" if valid_to_current else "")
    return ModelConfig(
        name=name, materialized="snapshot", strategy="merge", unique_key=[column_names["dbt_scd_id"]],
        merge_update_columns=[column_names["dbt_valid_to"]], incremental_predicates=[open_version],
        on_schema_change="append_new_columns",  # new source columns join the snapshot, as in dbt
    )


def snapshot_staging_only(column: str) -> bool:
    """Columns of dbt's snapshot staging SELECT that are not stored."""
    return column.lower() == "dbt_change_type" or column.lower().startswith("dbt_unique_key")


def choose_operation(config: ModelConfig, table_exists: bool, full_refresh: bool) -> str:
    if not table_exists:
        return CREATE
    if config.materialized == "snapshot":
        return UPSERT
    if config.materialized != "incremental" or full_refresh:
        return OVERWRITE_TABLE
    if config.strategy == "merge":
        return UPSERT
    if config.strategy == "delete+insert":
        return DELETE_INSERT
    if config.strategy == "append":
        return INSERT
    return OVERWRITE_PARTITIONS if config.partition_by else OVERWRITE_TABLE


def record_key(config: ModelConfig) -> List[str]:
    """The Hudi record key of the model's table: a merge model's unique_key; otherwise keys
    are auto-generated (delete+insert keeps rows that share a unique_key, as its predicates may)."""
    keyed = config.materialized == "snapshot" or (config.materialized == "incremental" and config.strategy == "merge")
    return list(config.unique_key) if keyed else []


def table_layout_changed(config: ModelConfig, partition_fields: List[str], record_key_fields: List[str],
                         parquet_encoding: str = PARQUET_ENCODINGS[0], virtual_keys: bool = False) -> bool:
    """A table's partitioning, record key, file encoding and meta fields are fixed when it is created."""
    lower = lambda names: [n.lower() for n in names]  # noqa: E731
    return (lower(config.partition_by) != lower(partition_fields) or lower(record_key(config)) != lower(record_key_fields)
            or config.parquet_encoding not in (None, parquet_encoding)
            or config.populate_meta_fields not in (None, not virtual_keys))


@dataclass
class SchemaPlan:
    """How to shape the model's rows before an incremental write."""

    columns: List[Tuple[str, Optional[str]]]  # (name, None: take the model's column | type: null of it)
    drop_missing_columns: bool = False  # and widen the table's types to the model's (sync_all_columns)
    casts: Dict[str, Tuple[str, str]] = field(default_factory=dict)  # column: (model's type, table's) to store as


_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def store_assignable(model_type: str, table_type: str) -> bool:
    """A model's column of `model_type` may be written to a table column of `table_type` by a
    cast, as Spark's ANSI store assignment writes it (to Delta, say): numbers to numbers,
    dates and timestamps to each other. A value that does not fit fails the build."""
    def kind(spark_type: str) -> str:
        if spark_type in _INTEGRAL + ("float", "double") or spark_type.startswith("decimal("):
            return "number"
        return "datetime" if spark_type in ("date", "timestamp", "timestamp_ntz") else spark_type
    return model_type != table_type and kind(model_type) == kind(table_type) in ("number", "datetime")


def plan_schema_change(config: ModelConfig, table: List[Tuple[str, str]], model: List[Tuple[str, str]]) -> SchemaPlan:
    """`table` and `model` are (column, Spark type) lists, meta columns excluded."""
    table_types = {n.lower(): (n, t) for n, t in table}
    model_types = {n.lower(): (n, t) for n, t in model}
    added = [n for n, _ in model if n.lower() not in table_types]
    removed = [n for n, _ in table if n.lower() not in model_types]
    retyped = [
        f"{n} ({t} -> {model_types[n.lower()][1]})" for n, t in table
        if n.lower() in model_types and model_types[n.lower()][1] != t
    ]
    changed = bool(added or removed or retyped)
    mode = config.on_schema_change
    if mode == "fail" and changed:
        details = [f"added: {', '.join(added)}" if added else "", f"removed: {', '.join(removed)}" if removed else "",
                   f"changed type: {', '.join(retyped)}" if retyped else ""]
        raise config.fail(
            "the source and target schemas of this incremental model are out of sync ("
            + "; ".join(d for d in details if d) + "); set on_schema_change or run with --full-refresh"
        )
    # ignore and append_new_columns keep the table's types: a retyped column is cast to them.
    casts = {n: (model_types[n.lower()][1], t) for n, t in table
             if n.lower() in model_types and store_assignable(model_types[n.lower()][1], t)}
    if mode == "ignore":
        if removed:
            raise config.fail(
                f"the model no longer produces column(s) {', '.join(removed)} of the table; with "
                "on_schema_change='ignore' that fails: set on_schema_change or run with --full-refresh"
            )
        return SchemaPlan(columns=[(n, None) for n, _ in table], casts=casts)
    if mode == "append_new_columns":
        return SchemaPlan(columns=[(n, None if n.lower() in model_types else t) for n, t in table] + [(n, None) for n in added],
                          casts=casts)
    # sync_all_columns: the model's columns become the table's, widened types included (the core
    # refuses a change its readers could not read the stored files with).
    return SchemaPlan(columns=[(n, None) for n, _ in model], drop_missing_columns=True)


def update_columns(config: ModelConfig, columns: Sequence[str]) -> Optional[List[str]]:
    """The columns a merge updates on existing rows; None for all."""
    if config.merge_update_columns and config.merge_exclude_columns:
        raise config.fail("set merge_update_columns or merge_exclude_columns, not both")
    if config.merge_update_columns:
        return list(config.merge_update_columns)
    if config.merge_exclude_columns:
        excluded = {c.lower() for c in config.merge_exclude_columns}
        return [c for c in columns if c.lower() not in excluded]
    return None


@dataclass(frozen=True)
class TableState:
    """What a build needs to know of an existing table."""

    partition_fields: List[str]
    record_key_fields: List[str]
    columns: List[Tuple[str, str]]  # (name, Spark type), meta columns excluded
    parquet_encoding: str = PARQUET_ENCODINGS[0]
    virtual_keys: bool = False  # hoodie.populate.meta.fields=false
    table_version: int = TABLE_VERSIONS[0]


@dataclass
class BuildPlan:
    """Everything a model build does, decided before anything is written."""

    operation: str
    partition_by: List[str]
    record_key: List[str]
    precombine_field: Optional[str]
    services: TableServices
    file_sizing: FileSizing
    parquet_encoding: Optional[str] = None  # None: the table's, or compact for a new one
    populate_meta_fields: Optional[bool] = None  # None: the table's, or true for a new one
    table_version: Optional[int] = None  # of a new table; None: 6
    write_retries: int = 0  # runs of the write again after a conflict with a concurrent writer
    recreate: bool = False  # drop the existing table first: its layout changed on a rebuild
    schema: Optional[SchemaPlan] = None  # incremental writes: how the rows are shaped
    update_columns: Optional[List[str]] = None  # merge: the columns existing rows take; None for all
    key_columns: List[str] = field(default_factory=list)  # delete+insert: the columns matched
    predicates: List[str] = field(default_factory=list)  # over the stored row (DEST_ALIAS) and the incoming (update.SOURCE_ALIAS)


def plan_build(config: ModelConfig, columns: List[Tuple[str, str]], table: Optional[TableState],
               full_refresh: bool) -> BuildPlan:
    """The plan of one build. `columns` are the model's (name, Spark type), meta columns
    excluded; `table` is None when there is no table yet. Raises `ModelConfigError`."""
    validate(config, [n for n, _ in columns])
    recreate = False
    # Another table version is taken by a table model's next build and by a --full-refresh; an
    # incremental or snapshot table keeps its history, and its version (Hudi upgrades in place).
    new_version = table is not None and config.hudi_table_version not in (None, table.table_version) and (
        config.materialized == "table" or (full_refresh and config.materialized == "incremental"))
    if table is not None and (new_version or table_layout_changed(config, table.partition_fields, table.record_key_fields,
                                                                  table.parquet_encoding, table.virtual_keys)):
        if config.materialized == "snapshot":
            raise config.fail(f"the table is not keyed by {config.unique_key[0]} (record key "
                              f"{table.record_key_fields}); it was not built as a snapshot: drop it or choose another target")
        if config.materialized == "incremental" and not full_refresh:
            if config.parquet_encoding not in (None, table.parquet_encoding):
                what = f"parquet_encoding ({config.parquet_encoding}) differs from the table's ({table.parquet_encoding})"
            elif config.populate_meta_fields not in (None, not table.virtual_keys):
                what = (f"populate_meta_fields ({str(config.populate_meta_fields).lower()}) differs from the table's "
                        f"(hoodie.populate.meta.fields={str(not table.virtual_keys).lower()})")
            else:
                what = (f"partition_by/record key ({config.partition_by}/{record_key(config)}) differ from the table's "
                        f"({table.partition_fields}/{table.record_key_fields})")
                if record_key(config) and [k.lower() for k in record_key(config)] != [
                        k.lower() for k in table.record_key_fields]:  # a merge matches stored rows by the record key
                    stored = (f"record key {table.record_key_fields}" if table.record_key_fields
                              else "auto-generated record keys (it was built without unique_key)")
                    what += (f": its rows have {stored}, so a merge by {record_key(config)} could not find them and "
                             "would duplicate every row it meant to update")
            raise config.fail(f"{what}; fixed when the table is created: run with --full-refresh to rebuild it")
        recreate = True
    operation = choose_operation(config, table is not None and not recreate, full_refresh)
    plan = BuildPlan(operation=operation, partition_by=list(config.partition_by), record_key=record_key(config),
                     precombine_field=config.precombine_field, services=config.services,
                     file_sizing=config.file_sizing,
                     parquet_encoding=config.parquet_encoding, populate_meta_fields=config.populate_meta_fields,
                     table_version=config.hudi_table_version, write_retries=0 if operation == CREATE else config.write_retries, recreate=recreate)
    if operation in (INSERT, OVERWRITE_PARTITIONS, UPSERT, DELETE_INSERT):
        model_columns = [(n, t) for n, t in columns if n.lower() != DELETE_FLAG]
        plan.schema = plan_schema_change(config, table.columns, model_columns)
    if operation == UPSERT:
        plan.update_columns = update_columns(config, [n for n, _ in plan.schema.columns])
        plan.predicates = list(config.incremental_predicates)
    if operation == DELETE_INSERT:
        plan.key_columns = list(config.unique_key)
        plan.predicates = list(config.incremental_predicates)
    return plan
