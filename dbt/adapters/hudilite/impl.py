"""The hudilite adapter: dbt-spark's SQL surface over tables written by the table-format core.

Macros stay thin; each materialization calls one `@available` method here, which turns the
model's SELECT into a DataFrame and hands it to `HudiTable`.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from dbt.adapters.base import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.spark.impl import SparkAdapter, SparkConfig
from dbt_common.exceptions import CompilationError, DbtRuntimeError

from . import materialize as m
from .catalog import StorageCatalog, quote
from .column import HudiliteColumn
from .connections import HudiliteConnectionManager, catalog_for
from .relation import HudiliteRelation
from .table import HudiTable, SchemaError, TimelineError
from .table.schema import META_COLUMNS


@dataclass
class HudiliteConfig(SparkConfig):
    precombine_field: Optional[str] = None
    retain_commits: Optional[int] = None


class HudiliteAdapter(SparkAdapter):
    Relation = HudiliteRelation  # type: ignore[assignment]
    Column = HudiliteColumn  # type: ignore[assignment]
    ConnectionManager = HudiliteConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs = HudiliteConfig  # type: ignore[assignment]

    def __init__(self, config, mp_context) -> None:
        super().__init__(config, mp_context)
        config.credentials.resolve_location_root(getattr(config, "project_root", None))

    @classmethod
    def type(cls) -> str:
        return "hudilite"

    @property
    def catalog(self) -> StorageCatalog:
        return catalog_for(self.config.credentials)

    def valid_incremental_strategies(self) -> List[str]:
        return list(m.STRATEGIES)

    # ---- relations: storage first ------------------------------------------------------------
    def list_relations_without_caching(self, schema_relation: BaseRelation) -> List[BaseRelation]:
        self.catalog  # registers what storage holds before Spark is asked
        relations = super().list_relations_without_caching(schema_relation)
        # SHOW TABLES lists the session's temporary views (as-of and changes reads among them)
        # in every schema; they belong to none.
        return [r for r in relations if r.schema == schema_relation.schema]

    def drop_relation(self, relation: BaseRelation) -> None:
        catalog = self.catalog
        if catalog.is_table(relation.schema, relation.identifier):
            catalog.drop_table(relation.schema, relation.identifier)
            self.cache_dropped(relation)
            return
        catalog.forget_view(relation.schema, relation.identifier)
        super().drop_relation(relation)

    def drop_schema(self, relation: BaseRelation) -> None:
        self.catalog.drop_schema(relation.schema)
        self.cache.drop_schema(relation.database, relation.schema)

    def rename_relation(self, from_relation: BaseRelation, to_relation: BaseRelation) -> None:
        catalog = self.catalog
        if not catalog.is_table(from_relation.schema, from_relation.identifier):
            return super().rename_relation(from_relation, to_relation)
        if catalog.is_table(to_relation.schema, to_relation.identifier):
            catalog.drop_table(to_relation.schema, to_relation.identifier)
        catalog.rename_table(from_relation.schema, from_relation.identifier, to_relation.schema, to_relation.identifier)
        self.cache_renamed(from_relation, to_relation)

    def _get_columns_for_catalog(self, relation: BaseRelation):
        """dbt docs: Spark's type names, meta columns hidden, one owner for tables and views."""
        spark = self.catalog.spark
        fields = [f for f in spark.table(quote(relation.schema, relation.identifier)).schema.fields
                  if f.name not in META_COLUMNS]
        for index, field in enumerate(fields):
            yield {
                "table_database": None, "table_schema": relation.schema, "table_name": relation.identifier,
                "table_type": str(relation.type), "table_owner": spark.sparkContext.sparkUser(),
                "column_name": field.name, "column_index": index, "column_type": field.dataType.simpleString(),
                "column_comment": (field.metadata or {}).get("comment"),
            }

    @available
    def data_columns(self, names: List[str]) -> List[str]:
        """`names` without Hudi's meta columns."""
        return [n for n in names if n not in META_COLUMNS]

    # ---- builds -----------------------------------------------------------------------------
    @available
    def hudilite_build(self, relation: BaseRelation, sql: str, model: Dict[str, Any], full_refresh: bool) -> Dict[str, Any]:
        """Build a `table` or `incremental` model from its compiled SELECT."""
        config = m.ModelConfig.from_node(model)
        catalog = self.catalog
        df = self._model_rows(config, catalog, sql)
        self._validate(config, df.columns)
        schema, name = relation.schema, relation.identifier
        table = catalog.open(schema, name)
        if table is None:
            catalog.drop_view(schema, name)  # the model was a view before
        elif m.table_layout_changed(config, table.config.partition_fields, table.config.record_key_fields):
            if config.materialized == "incremental" and not full_refresh:
                raise CompilationError(
                    f"model '{config.name}': partition_by/record key ({config.partition_by}/{m.record_key(config)}) differ "
                    f"from the table's ({table.config.partition_fields}/{table.config.record_key_fields}); they are "
                    "fixed when the table is created: run with --full-refresh to rebuild it"
                )
            catalog.drop_table(schema, name)  # a rebuild with a new layout starts a new table
            table = None
        try:
            operation = m.choose_operation(config, table is not None, full_refresh)
        except m.ModelConfigError as err:
            raise CompilationError(str(err)) from None
        return self._write(config, catalog, schema, name, table, df, operation)

    @available
    def hudilite_snapshot(self, relation: BaseRelation, sql: str, model: Dict[str, Any], column_names: Dict[str, str],
                          valid_to_current: Optional[str]) -> Dict[str, Any]:
        """Apply a snapshot's SELECT (dbt's first-build or staging query) in one commit."""
        config = m.snapshot_config(model.get("name") or relation.identifier, column_names, valid_to_current)
        catalog = self.catalog
        df = self._model_rows(config, catalog, sql)
        df = df.drop(*[c for c in df.columns if m.snapshot_staging_only(c)])
        table = catalog.open(relation.schema, relation.identifier)
        if table is not None and m.table_layout_changed(config, table.config.partition_fields, table.config.record_key_fields):
            raise CompilationError(
                f"snapshot '{config.name}': {relation} is not keyed by {config.unique_key[0]} (record key "
                f"{table.config.record_key_fields}); it was not built as a snapshot: drop it or choose another target"
            )
        return self._write(config, catalog, relation.schema, relation.identifier, table, df,
                           m.choose_operation(config, table is not None, False))

    @available
    def hudilite_load_seed(self, relation: BaseRelation, agate_table, model: Dict[str, Any]) -> str:
        """Write a seed's rows as a hudilite table (created, or replaced whole)."""
        config = m.ModelConfig(name=model.get("name", relation.identifier))
        catalog = self.catalog
        column_types = (model.get("config", {}) or {}).get("column_types", {}) or {}
        columns = []
        for index, column in enumerate(agate_table.column_names):
            spark_type = column_types.get(column) or self.convert_type(agate_table, index)
            columns.append((column, spark_type))
        rows = [[_seed_text(v) for v in row] for row in agate_table.rows]
        text_schema = ", ".join(f"{quote(c)} string" for c, _ in columns)
        df = catalog.spark.createDataFrame(rows, text_schema) if columns else catalog.spark.createDataFrame([], "x string")
        df = df.select(*[df[quote(c)].cast(t).alias(c) for c, t in columns]).coalesce(1)  # seeds are small
        table = catalog.open(relation.schema, relation.identifier)
        if table is None:
            catalog.drop_view(relation.schema, relation.identifier)
        operation = m.OVERWRITE_TABLE if table is not None else m.CREATE
        result = self._write(config, catalog, relation.schema, relation.identifier, table, df, operation)
        return result["message"]

    @available
    def hudilite_remember_view(self, relation: BaseRelation, sql: str) -> None:
        """Keep a view's SQL on storage so that a later process re-creates it."""
        self.catalog.remember_view(relation.schema, relation.identifier, sql)

    def _model_rows(self, config: m.ModelConfig, catalog: StorageCatalog, sql: str):
        try:
            return catalog.spark.sql(sql)
        except Exception as err:  # noqa: BLE001 - Spark's analysis errors name what is wrong
            raise DbtRuntimeError(f"model '{config.name}': {err}") from None

    @staticmethod
    def _validate(config: m.ModelConfig, columns: List[str]) -> None:
        try:
            m.validate(config, columns)
        except m.ModelConfigError as err:
            raise CompilationError(str(err)) from None

    def _write(self, config: m.ModelConfig, catalog: StorageCatalog, schema: str, name: str,
               table: Optional[HudiTable], df, operation: str) -> Dict[str, Any]:
        try:
            if operation == m.CREATE:
                table = HudiTable.create(
                    catalog.spark, catalog.table_path(schema, name), name, partition_by=config.partition_by,
                    record_key=m.record_key(config), precombine=config.precombine_field, database=schema,
                )
                instant = table.upsert(df) if table.config.record_key_fields else table.insert(df)
            elif operation == m.OVERWRITE_TABLE:
                instant = table.insert_overwrite_table(df)
            else:
                plan = self._schema_plan(config, table, df)
                df = _shape(df, plan)
                if operation == m.UPSERT:
                    instant = table.upsert(df, m.update_columns(config, df.columns), config.incremental_predicates,
                                           drop_missing_columns=plan.drop_missing_columns)
                elif operation == m.DELETE_INSERT:
                    instant = table.delete_insert(df, config.unique_key, config.incremental_predicates)
                else:
                    write = table.insert if operation == m.INSERT else table.insert_overwrite
                    instant = write(df, drop_missing_columns=plan.drop_missing_columns)
        except Exception as err:
            if operation == m.CREATE and table is not None:  # a failed first build leaves no table behind
                catalog.drop_table(schema, name)
            if isinstance(err, (m.ModelConfigError, SchemaError, TimelineError)):
                raise CompilationError(_name_model(config, err)) from None
            if isinstance(err, DbtRuntimeError):
                raise
            raise DbtRuntimeError(_name_model(config, err)) from None  # Spark task failures carry the reason
        catalog.register(schema, name, table)
        table.clean(retain_commits=config.retain_commits)
        metadata = table.commit_metadata(instant)
        rows = metadata.num_writes
        return {
            "message": f"{metadata.operation} {rows} rows at {instant}",
            "code": metadata.operation,
            "rows": rows,
            "instant": instant,
        }

    @staticmethod
    def _schema_plan(config: m.ModelConfig, table: HudiTable, df) -> m.SchemaPlan:
        current = table.schema()
        table_columns = [(f.name, f.dataType.simpleString()) for f in current.fields] if current else []
        model_columns = [(f.name, f.dataType.simpleString()) for f in df.schema.fields
                         if f.name not in META_COLUMNS and f.name.lower() != m.DELETE_FLAG]
        return m.plan_schema_change(config, table_columns, model_columns)

    # ---- reads in SQL -----------------------------------------------------------------------
    @available
    def hudilite_as_of(self, relation: BaseRelation, as_of: Union[str, dt.datetime]) -> str:
        """The name of a temporary view holding the snapshot of `relation` as of an instant."""
        return self._read_view(lambda c: c.as_of_view(relation.schema, relation.identifier, str(as_of)), relation)

    @available
    def hudilite_changes(self, relation: BaseRelation, start: str, end: Optional[str] = None) -> str:
        """The name of a temporary view of the rows of `relation` changed in (start, end]."""
        return self._read_view(
            lambda c: c.changes_view(relation.schema, relation.identifier, str(start), None if end is None else str(end)),
            relation,
        )

    def _read_view(self, make_view, relation: BaseRelation) -> str:
        try:
            return make_view(self.catalog)
        except (TimelineError, ValueError) as err:
            raise CompilationError(f"{relation}: {err}") from None


def _shape(df, plan: m.SchemaPlan):
    from pyspark.sql import functions as F

    actual = {c.lower(): c for c in df.columns}
    flag = [F.col(quote(actual[m.DELETE_FLAG]))] if m.DELETE_FLAG in actual else []  # merge deletes ride along
    return df.select(
        *[
            F.col(quote(actual[name.lower()])).alias(name) if null_type is None else F.lit(None).cast(null_type).alias(name)
            for name, null_type in plan.columns
        ],
        *flag,
    )


def _seed_text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, decimal.Decimal)):
        return str(value)
    return str(value)


def _name_model(config: m.ModelConfig, err: Exception) -> str:
    text = str(err).strip() or repr(err)
    return text if f"'{config.name}'" in text else f"model '{config.name}': {text}"
