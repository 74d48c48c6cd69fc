"""The hudilite adapter: dbt-spark's SQL surface over tables written by the table-format core.

Macros stay thin; each materialization calls one `@available` method here, which turns the
model's SELECT into a DataFrame and hands it to `HudiTable`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from dbt.adapters.base import ConstraintSupport, available
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.relation import RelationType
from dbt_common.contracts.constraints import ConstraintType
from dbt.adapters.spark.impl import SparkAdapter, SparkConfig
from dbt_common.exceptions import CompilationError, DbtDatabaseError, DbtRuntimeError

from . import materialize as m
from .catalog.storage_catalog import StorageCatalog
from .catalog_sync import (CatalogSettings, connect, drop_database_if_empty, drop_entry, location_uri, mark_unsynced,
                           sync_table, synced_as)
from .column import HudiliteColumn
from .connections import HudiliteConnection, HudiliteConnectionManager, catalog_for
from .sql.dml import run_statement
from .object_store_settings import configure_process
from .python_model import run_python_model
from .relation import HudiliteRelation
from .session import session_user
from .table import META_COLUMNS, ConcurrentWriteError, ConfigurationError, HudiTable, quote
from .table.format.instant import parse_instant_time
from .table.storage.object_store import ObjectStoreError, check_location
from .table.format.properties import PARQUET_ENCODINGS, TABLE_VERSIONS

logger = AdapterLogger("hudilite")


@dataclass
class HudiliteConfig(SparkConfig):
    precombine_field: Optional[str] = None
    retain_commits: Optional[int] = None
    keep_min_commits: Optional[int] = None
    keep_max_commits: Optional[int] = None
    cluster_every: Optional[int] = None
    cluster_by: Optional[List[str]] = None
    cleaner_policy: Optional[str] = None
    retain_hours: Optional[int] = None
    retain_file_versions: Optional[int] = None
    small_file_limit: Optional[int] = None
    max_file_size: Optional[int] = None
    write_retries: Optional[int] = None
    small_write_bytes: Optional[int] = None
    driver_write_bytes: Optional[int] = None
    parquet_encoding: Optional[str] = None
    drop_metadata_table: Optional[bool] = None
    populate_meta_fields: Optional[bool] = None
    hudi_table_version: Optional[int] = None
    catalog_sync: Optional[str] = None
    catalog_database: Optional[str] = None


class HudiliteAdapter(SparkAdapter):
    # not_null and check hold for every row of a build with an enforced contract (`_enforce`);
    # keys are Hudi's record key, not a constraint.
    CONSTRAINT_SUPPORT = {
        ConstraintType.check: ConstraintSupport.ENFORCED,
        ConstraintType.not_null: ConstraintSupport.ENFORCED,
        ConstraintType.unique: ConstraintSupport.NOT_ENFORCED,
        ConstraintType.primary_key: ConstraintSupport.NOT_ENFORCED,
        ConstraintType.foreign_key: ConstraintSupport.NOT_ENFORCED,
    }
    Relation = HudiliteRelation  # type: ignore[assignment]
    Column = HudiliteColumn  # type: ignore[assignment]
    ConnectionManager = HudiliteConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs = HudiliteConfig  # type: ignore[assignment]

    def __init__(self, config, mp_context) -> None:
        super().__init__(config, mp_context)
        config.credentials.resolve_location_root(getattr(config, "project_root", None))
        # Per model being built: for each upstream its `hudilite_changes` read, (the checkpoint
        # it read from, the instant it read to), kept in the model's next commit.
        self._checkpoints: Dict[Tuple[str, str], Dict[str, Tuple[Optional[str], str]]] = {}

    @classmethod
    def type(cls) -> str:
        return "hudilite"

    @property
    def catalog(self) -> StorageCatalog:
        """The storage catalog of this thread's connection (made once per connection)."""
        connection = self.connections.get_if_exists()
        handle = getattr(getattr(connection, "handle", None), "handle", None) if connection is not None else None
        if isinstance(handle, HudiliteConnection):
            return handle.catalog
        return catalog_for(self.config.credentials)

    def valid_incremental_strategies(self) -> List[str]:
        return list(m.STRATEGIES)

    # ---- relations: storage first ------------------------------------------------------------
    def debug_query(self) -> None:
        """`dbt debug`: Spark answers, and an object-store location_root is reachable, writable
        and honours conditional puts (one error naming the cause otherwise)."""
        credentials = self.config.credentials
        configure_process(credentials.location_root, **credentials.object_store())
        try:
            check_location(credentials.location_root)
        except ObjectStoreError as err:
            raise DbtRuntimeError(f"location_root: {err}") from None
        super().debug_query()

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> List[BaseRelation]:
        """What storage holds in the schema: its tables and remembered views (Spark's catalog
        holds only what this session has registered so far), named in lower case as Spark's
        catalog names them (a folder an older hudilite made in capitals included), so that dbt
        finds a model `MODEL` as `model` (`StorageCatalog._spelled`)."""
        catalog, schema = self.catalog, schema_relation.schema
        try:
            catalog.folder(schema)
        except ConfigurationError:
            return []
        kinds = {name.lower(): RelationType.View for name in catalog.views(schema)}
        kinds.update({name.lower(): RelationType.Table for name in catalog.tables(schema)})
        return [self.Relation.create(schema=schema, identifier=name, type=kind) for name, kind in sorted(kinds.items())]

    def drop_relation(self, relation: BaseRelation) -> None:
        catalog = self.catalog
        if catalog.is_table(relation.schema, relation.identifier):
            dropped = self._synced_tables(relation.schema, [relation.identifier])
            catalog.drop_table(relation.schema, relation.identifier)
            self.cache_dropped(relation)
            self._unsync_catalog(relation.schema, dropped)
            return
        catalog.forget_view(relation.schema, relation.identifier)
        catalog.set_docs(relation.schema, relation.identifier, None, {})
        if relation.type is None:  # not a table of ours: a view (SQLAdapter refuses a typeless drop)
            relation = relation.incorporate(type=RelationType.View)
        super().drop_relation(relation)

    def drop_schema(self, relation: BaseRelation) -> None:
        catalog = self.catalog
        try:
            dropped = self._synced_tables(relation.schema, catalog.tables(relation.schema))
        except ConfigurationError:
            dropped = []
        catalog.drop_schema(relation.schema)
        self.cache.drop_schema(relation.database, relation.schema)
        self._unsync_catalog(relation.schema, dropped, drop_database=True)

    def rename_relation(self, from_relation: BaseRelation, to_relation: BaseRelation) -> None:
        catalog = self.catalog
        if not catalog.is_table(from_relation.schema, from_relation.identifier):
            return super().rename_relation(from_relation, to_relation)
        # What held the new name is replaced, and leaves dbt's cache with it (the cache refuses a
        # rename onto a name it holds).
        if catalog.is_table(to_relation.schema, to_relation.identifier):
            catalog.drop_table(to_relation.schema, to_relation.identifier)
        elif catalog.is_view(to_relation.schema, to_relation.identifier):
            catalog.drop_view(to_relation.schema, to_relation.identifier)
        self.cache_dropped(to_relation)
        catalog.rename_table(from_relation.schema, from_relation.identifier, to_relation.schema, to_relation.identifier)
        self.cache_renamed(from_relation, to_relation.incorporate(type=RelationType.Table))
        renamed = catalog.open(to_relation.schema, to_relation.identifier)
        record = synced_as(renamed) if renamed is not None else None
        if record is not None:  # synced before: under the new name now (the old entry goes with the sync)
            self._sync_catalog(m.ModelConfig(name=to_relation.identifier, catalog_sync=record[0]), to_relation,
                               renamed, None)

    def _synced_tables(self, schema: str, names: Sequence[str]) -> List[Tuple[str, Optional[Tuple[str, ...]], Optional[str]]]:
        """Of tables about to be dropped: their names, sync records and locations (nothing read
        without a catalog in the profile)."""
        if not self.config.credentials.catalog_settings().enabled:
            return []
        out = []
        for name in names:
            try:
                table = self.catalog.open(schema, name)
            except Exception:  # noqa: BLE001 - a table that cannot be opened is still dropped; its entry by name
                table = None
            location = location_uri(table.path if table else self.catalog.table_path(schema, name))
            out.append((name, synced_as(table) if table else None, location))
        return out

    def _get_columns_for_catalog(self, relation: BaseRelation):
        """dbt docs: Spark's type names, meta columns hidden, descriptions kept by persist_docs,
        and a hudilite table's stats (rows, files, bytes, last commit, record key, partitioning)."""
        catalog = self.catalog
        catalog.resolve([(relation.schema, relation.identifier)])
        spark = catalog.spark
        fields = [f for f in spark.table(quote(relation.schema, relation.identifier)).schema.fields
                  if f.name not in META_COLUMNS]
        comment, column_comments = catalog.docs(relation.schema, relation.identifier)
        column_comments = {k.lower(): v for k, v in column_comments.items()}
        table = catalog.open(relation.schema, relation.identifier)
        stats = _catalog_stats(table) if table is not None else {}
        owner = session_user(spark)
        for index, field in enumerate(fields):
            yield {
                "table_database": None, "table_schema": relation.schema, "table_name": relation.identifier,
                "table_type": str(relation.type), "table_owner": owner,
                "table_comment": comment,
                "column_name": field.name, "column_index": index, "column_type": field.dataType.simpleString(),
                "column_comment": column_comments.get(field.name.lower()) or (field.metadata or {}).get("comment"),
                **stats,
            }

    @available
    def hudilite_persist_docs(self, relation: BaseRelation, comment: Optional[str],
                              column_comments: Dict[str, str]) -> None:
        """Keep a relation's description and its columns' on storage (persist_docs): a later
        process's `dbt docs generate` shows them."""
        self.catalog.set_docs(relation.schema, relation.identifier, comment or None,
                              {k: v for k, v in (column_comments or {}).items() if v})

    @available
    def data_columns(self, names: List[str]) -> List[str]:
        """`names` without Hudi's meta columns."""
        return [n for n in names if n not in META_COLUMNS]

    # ---- builds -----------------------------------------------------------------------------
    @available
    def hudilite_build(self, relation: BaseRelation, sql: str, model: Dict[str, Any], full_refresh: bool) -> Dict[str, Any]:
        """Build a `table` or `incremental` model from its compiled SELECT (with an enforced
        contract, its not_null and check constraints hold for every row or nothing is committed)."""
        config = m.ModelConfig.from_node(model)
        constraints: List[m.RowConstraint] = []

        def rows(catalog: StorageCatalog):
            df = self._model_rows(config, catalog, sql)
            try:
                constraints.extend(m.row_constraints(model, df.columns))
                _enforce(df, constraints)  # analysed now: a check naming no column fails before anything is written
            except m.ModelConfigError as err:
                raise CompilationError(str(err)) from None
            except Exception as err:  # noqa: BLE001 - a check Spark cannot analyse names its column
                raise CompilationError(f"model '{config.name}': a check constraint cannot be evaluated: {err}") from None
            return df

        result = self._build(config, relation, rows, full_refresh, constraints)
        return {**result, "constraints": [str(c) for c in constraints]}

    @available
    def hudilite_build_python(self, relation: BaseRelation, code: str, model: Dict[str, Any],
                              full_refresh: bool) -> Dict[str, Any]:
        """Build a `table` or `incremental` dbt Python model: its `model(dbt, session)` runs
        here with this connection's SparkSession (python_model.py)."""
        config = m.ModelConfig.from_node(model)
        this = (relation.schema, relation.identifier)
        return self._build(config, relation, lambda catalog: run_python_model(catalog, code, config.name, this),
                           full_refresh)

    @available
    def hudilite_snapshot(self, relation: BaseRelation, sql: str, model: Dict[str, Any], column_names: Dict[str, str],
                          valid_to_current: Optional[str]) -> Dict[str, Any]:
        """Apply a snapshot's SELECT (dbt's first-build or staging query) in one commit."""
        config = m.snapshot_config(model.get("name") or relation.identifier, column_names, valid_to_current)

        def rows(catalog: StorageCatalog):
            df = self._model_rows(config, catalog, sql)
            return df.drop(*[c for c in df.columns if m.snapshot_staging_only(c)])

        return self._build(config, relation, rows, full_refresh=False)

    @available
    def hudilite_load_seed(self, relation: BaseRelation, agate_table, model: Dict[str, Any]) -> str:
        """Write a seed's rows as a hudilite table (created, or replaced whole)."""
        config = m.ModelConfig(name=model.get("name", relation.identifier))
        column_types = (model.get("config", {}) or {}).get("column_types", {}) or {}
        columns = []
        for index, column in enumerate(agate_table.column_names):
            spark_type = column_types.get(column) or self.convert_type(agate_table, index)
            columns.append((column, spark_type))

        def rows(catalog: StorageCatalog):
            text_rows = [[_seed_text(v) for v in row] for row in agate_table.rows]
            text_schema = ", ".join(f"{quote(c)} string" for c, _ in columns)
            df = catalog.spark.createDataFrame(text_rows, text_schema) if columns else catalog.spark.createDataFrame([], "x string")
            return df.select(*[df[quote(c)].cast(t).alias(c) for c, t in columns]).coalesce(1)  # seeds are small

        return self._build(config, relation, rows, full_refresh=False)["message"]

    @available
    def hudilite_remember_view(self, relation: BaseRelation, sql: str) -> None:
        """Keep a view's SQL on storage so that a later process re-creates it."""
        self.catalog.remember_view(relation.schema, relation.identifier, sql)
        if self.config.credentials.catalog_settings().enabled:
            logger.info(f"view {relation.schema}.{relation.identifier} is not synced to the catalog: it is a Spark view "
                        "over hudilite's tables, which Trino, Athena and Hive cannot read (its tables are synced)")

    def _model_rows(self, config: m.ModelConfig, catalog: StorageCatalog, sql: str):
        try:
            return run_statement(catalog, sql)
        except Exception as err:  # noqa: BLE001 - Spark's analysis errors name what is wrong
            raise DbtRuntimeError(f"model '{config.name}': {err}") from None

    def _build(self, config: m.ModelConfig, relation: BaseRelation, rows, full_refresh: bool,
               constraints: Sequence[m.RowConstraint] = ()) -> Dict[str, Any]:
        """Plan the build from the model's rows and the table's state, then carry the plan out
        (every row keeping `constraints`, or nothing committed)."""
        if config.hudi_table_version is None:  # the profile's, for the models that set none
            config = replace(config, hudi_table_version=self.config.credentials.hudi_table_version)
        try:  # a mistake in the model's catalog_sync fails before anything is written
            self.config.credentials.catalog_settings(config.catalog_sync, config.catalog_database)
        except DbtRuntimeError as err:
            raise CompilationError(f"model '{config.name}': {err.msg}") from None
        result, table = self._build_table(config, relation, rows, full_refresh, constraints)
        # Synced after the write's pinned picture is let go: the catalog is brought to the table as
        # it is now (another build may have committed and synced since this one's commit).
        self._sync_catalog(config, relation, table, result["instant"])
        return result

    def _build_table(self, config: m.ModelConfig, relation: BaseRelation, rows, full_refresh: bool,
                     constraints: Sequence[m.RowConstraint] = ()) -> Tuple[Dict[str, Any], HudiTable]:
        catalog = self.catalog
        schema, name = relation.schema, relation.identifier
        df = rows(catalog)
        table = catalog.open(schema, name)
        if table is not None and config.drop_metadata_table:
            table.drop_metadata_table()
        # A table without a commit (a first build killed or failing before it published) holds
        # nothing: it is built as new, in place when its layout fits.
        built = table is not None and table.context.timeline.latest_completed() is not None
        state = m.TableState(table.config.partition_fields, table.config.record_key_fields,
                             _columns(table.schema()), table.config.parquet_encoding,
                             table.config.virtual_keys, table.config.table_version) if built else None
        try:
            plan = m.plan_build(config, _columns(df.schema), state, full_refresh)
        except m.ModelConfigError as err:
            raise CompilationError(str(err)) from None
        # A rebuild with a new layout, or the first build of a model that was a view, is built
        # beside the name and swapped in once committed: until then what the name held stays,
        # the old table with its history, whatever fails or is killed (on object stores too).
        was_view = table is None and catalog.is_view(schema, name)
        beside = (table is not None and built and plan.recreate) or was_view
        if table is not None and not beside and (plan.recreate or (not built and not _layout_fits(table, plan))):
            catalog.drop_table(schema, name)  # no commit: nothing to keep
            table = None
        if plan.operation == m.CREATE and (table is None or beside):
            path = catalog.swaps.rebuild_path(schema, name) if beside else catalog.table_path(schema, name)
            try:
                table = HudiTable.create(catalog.spark, path, name,
                                         partition_by=plan.partition_by, record_key=plan.record_key,
                                         precombine=plan.precombine_field, database=schema, schema=df.schema,
                                         parquet_encoding=plan.parquet_encoding or PARQUET_ENCODINGS[0],
                                         virtual_keys=plan.populate_meta_fields is False,
                                         table_version=plan.table_version or TABLE_VERSIONS[0])
            except Exception as err:  # nothing of ours to clean up: the table is not created
                raise _dbt_error(config, err) from None
        # The write and the services after it on one picture of the table: the services judge
        # on what the commit saw under its lock, and list or lock again only for work.
        with table.pinned():
            table.checkpoints = self._checkpoints.pop((schema, name), {})
            try:
                instant = _with_retries(plan.write_retries, lambda: self._carry_out(plan, table, df, constraints, config.name))
            except Exception as err:
                if beside:
                    catalog.swaps.discard(schema, name)
                elif plan.operation == m.CREATE:  # a failed first build leaves no table behind
                    catalog.drop_table(schema, name)
                raise _dbt_error(config, err) from None
            finally:
                table.checkpoints = {}
            if beside:
                table = catalog.swap_in(schema, name, instant)
            if was_view:  # the model was a view before: the table takes its place once it holds the rows
                catalog.drop_view(schema, name)
            # After a build that changed nothing, the entry its SELECT made is kept (a listing and
            # three statements saved); after a commit it is made again.
            catalog.register(schema, name, table, unless_current=instant is None and not beside and not was_view)
            if instant is None:
                return {"message": "no rows changed (nothing committed)", "code": "NOOP", "rows": 0, "instant": None}, table
            metadata = table.commit_metadata(instant)
            try:
                table.run_services(plan.services)
            except Exception as err:  # noqa: BLE001 - the build is committed; the next one runs them again
                logger.warning(f"model '{config.name}': table services after the commit failed, the next build runs them "
                               f"again: {err}")
            return {
                "message": f"{metadata.operation} {metadata.num_writes} rows at {instant}",
                "code": metadata.operation,
                "rows": metadata.num_writes,
                "instant": instant,
            }, table

    # ---- catalog sync (catalog_sync/) ----------------------------------------------------------
    def _sync_catalog(self, config: m.ModelConfig, relation: BaseRelation, table: HudiTable,
                      instant: Optional[str]) -> None:
        """Bring the model's catalog entry in step with its table. A failure fails the model
        (dbt exits non-zero) but leaves the commit standing: the next build syncs again. A model
        taken out of the catalog has its entry removed."""
        credentials = self.config.credentials
        if not credentials.catalog_settings().enabled and not config.catalog_sync:
            return  # no catalog in the profile, none in the model: nothing to read or write
        settings = credentials.catalog_settings(config.catalog_sync, config.catalog_database)
        database, name = settings.database_of(relation.schema), relation.identifier.lower()
        table.context.storage.refresh()
        try:
            if not settings.enabled:  # taken out of the catalog: its entry goes
                record = synced_as(table)
                if record is None or record[0] != "none":
                    if record is not None:
                        self._drop_synced(relation.schema, relation.identifier, record, location_uri(table.path))
                    mark_unsynced(table)  # `hudilite sync` leaves it out too
                return
            with _connected(settings) as catalog:
                result = sync_table(catalog, table, database, name, settings.meta_columns, self.catalog.spark.version)
        except Exception as err:  # noqa: BLE001 - the catalog's own errors name the cause
            done = f"committed at {instant}" if instant else "nothing to commit"
            raise DbtRuntimeError(
                f"model '{config.name}': {done}, but syncing {database}.{name} to the {settings.kind} catalog failed: "
                f"{err}. The table holds the build; the next build or `hudilite sync` brings the catalog in step"
            ) from None
        logger.info(f"model '{config.name}': catalog {result}")

    def _drop_synced(self, schema: str, name: str, record: Optional[Tuple[str, ...]], location: Optional[str]) -> None:
        """Remove the entry a table was synced to: its storage's `record` (kind, database, name,
        location), or with none the profile's catalog and naming; only an entry at the table's place."""
        settings = self.config.credentials.catalog_settings(record[0] if record else None)
        if not settings.enabled:
            return
        database, entry = (record[1], record[2]) if record else (settings.database_of(schema), name.lower())
        location = record[3] if record else location
        with _connected(settings) as catalog:
            drop_entry(catalog, database, entry, location)

    def _unsync_catalog(self, schema: str, tables: Sequence[Tuple[str, Optional[Tuple[str, ...]], Optional[str]]],
                        drop_database: bool = False) -> None:
        """Remove the entries of dropped tables: (name, sync record, location) read before the drop."""
        settings = self.config.credentials.catalog_settings()
        try:
            for name, record, location in tables:
                self._drop_synced(schema, name, record, location)
            if drop_database and settings.enabled:
                with _connected(settings) as catalog:
                    drop_database_if_empty(catalog, settings.database_of(schema))
        except Exception as err:  # noqa: BLE001
            names = ", ".join(n for n, _, _ in tables) or "the schema"
            raise DbtRuntimeError(f"{schema}: {names} dropped from storage, but removing it from the catalog "
                                  f"failed: {err}") from None

    @staticmethod
    def _carry_out(plan: m.BuildPlan, table: HudiTable, df, constraints: Sequence[m.RowConstraint] = (),
                   model: str = "?") -> str:
        """The plan's write, its rows checked against `constraints` as they are written;
        returns its instant."""
        table.file_sizing = plan.file_sizing
        table.context.storage.refresh()  # an attempt after a conflict plans on the table as it is now
        if plan.operation == m.CREATE:
            df = _enforce(df, constraints)
            return table.upsert(df) if plan.record_key else table.insert(df)
        if plan.operation == m.OVERWRITE_TABLE:
            return table.insert_overwrite_table(_enforce(df, constraints))
        df = _enforce(_shape(df, plan.schema, model), constraints)  # on the columns that are written
        drop_missing = plan.schema.drop_missing_columns
        if plan.operation == m.UPSERT:
            return table.upsert(df, plan.update_columns, plan.predicates, drop_missing_columns=drop_missing,
                                predicate_alias=m.DEST_ALIAS)
        if plan.operation == m.DELETE_INSERT:
            return table.delete_insert(df, plan.key_columns, plan.predicates, predicate_alias=m.DEST_ALIAS)
        if plan.operation == m.INSERT:
            return table.insert(df, drop_missing_columns=drop_missing)
        return table.insert_overwrite(df, drop_missing_columns=drop_missing)

    # ---- table services on demand (`dbt run-operation`, macros/table_services.sql) -----------
    @available
    def hudilite_table_service(self, schema: str, name: str, operation: str, args: Optional[Dict[str, Any]] = None) -> str:
        """Run one table service on `schema.name`: savepoint, delete_savepoint, restore, clean,
        archive or cluster (with the keyword `args` of the `HudiTable` method of that name).
        Returns what it did, in one line."""
        config = m.ModelConfig(name=f"{schema}.{name}")
        table = self.catalog.open(schema, name)
        if table is None:
            raise CompilationError(f"model '{config.name}': not a hudilite table under {self.catalog.root}")
        args = {k: v for k, v in (args or {}).items() if v is not None}
        operations = {
            "savepoint": lambda: f"savepointed {table.savepoint(**args)}; savepoints: {', '.join(table.savepoints())}",
            "delete_savepoint": lambda: f"deleted the savepoint at {table.delete_savepoint(**args)}",
            "restore": lambda: f"rolled back {len(table.restore(**args))} instants; the latest is now "
                               f"{table.timeline()[-1].timestamp}",
            "clean": lambda: f"deleted {len(table.clean(**args).files_to_delete)} files; earliest readable instant: "
                             f"{table.earliest_readable_instant()}",
            "archive": lambda: f"archived {len(table.archive(**args))} instants; {len(table.timeline())} active",
            "cluster": lambda: f"clustering: {table.cluster(**args) or 'nothing small enough to cluster'}",
        }
        if operation not in operations:
            raise CompilationError(f"unknown table service {operation!r}; choose one of {', '.join(operations)}")
        try:
            message = operations[operation]()
        except TypeError as err:  # an argument the method does not take
            raise CompilationError(f"model '{config.name}': {operation}: {err}") from None
        except Exception as err:
            raise _dbt_error(config, err) from None
        self.catalog.register(schema, name, table)
        return f"{schema}.{name}: {message}"

    # ---- reads in SQL -----------------------------------------------------------------------
    @available
    def hudilite_with_meta(self, relation: BaseRelation) -> str:
        """The name of a temporary view of `relation`'s latest snapshot with Hudi's five meta
        columns (`_hoodie_commit_time`, ...) first: the relation itself has the model's only."""
        return self._read_view(lambda c: c.meta_view(relation.schema, relation.identifier), relation)

    @available
    def hudilite_as_of(self, relation: BaseRelation, as_of: Union[str, dt.datetime]) -> str:
        """The name of a temporary view holding the snapshot of `relation` as of an instant."""
        return self._read_view(lambda c: c.as_of_view(relation.schema, relation.identifier, str(as_of)), relation)

    @available
    def hudilite_changes(self, relation: BaseRelation, start: Optional[str] = None, end: Optional[str] = None,
                         reader: Optional[BaseRelation] = None, resume: bool = False) -> str:
        """The name of a temporary view of the rows of `relation` changed in (start, end].
        Without a start, `reader` (the model being built) reads from the checkpoint its last
        commit kept when `resume` (an incremental run), else every row; its next commit keeps
        where this read ended as the new checkpoint, and publishes only if no other run moved
        the checkpoint meanwhile."""
        source = f"{relation.schema}.{relation.identifier}"
        if start is None and resume and reader is not None:
            start = self._resume_point(reader, relation, source)
        view, end_instant = self._read_view(
            lambda c: c.changes_view(relation.schema, relation.identifier, None if start is None else str(start),
                                     None if end is None else str(end)),
            relation,
        )
        if reader is not None:
            self._checkpoints.setdefault((reader.schema, reader.identifier), {})[source] = (start, end_instant)
        return view

    def _resume_point(self, reader: BaseRelation, relation: BaseRelation, source: str) -> Optional[str]:
        """The checkpoint `reader` kept for `source`; an error when it kept none or the source
        no longer has that instant (restored or rebuilt): reading from the beginning again
        would add rows twice, so a full refresh is asked for."""
        catalog = self.catalog
        table = catalog.open(reader.schema, reader.identifier)
        if table is None or table.context.timeline.latest_completed() is None:
            return None
        checkpoint = table.checkpoint(source)
        fix = f"rebuild {reader.schema}.{reader.identifier} with --full-refresh"
        if checkpoint is None:
            raise CompilationError(f"model '{reader.identifier}': no commit of its table keeps a checkpoint of {source}'s "
                                   f"changes (archived, or the model read with an explicit start before); {fix}")
        upstream = catalog.open(relation.schema, relation.identifier)
        if upstream is None or not upstream.context.timeline.has_completion(checkpoint):
            raise CompilationError(f"model '{reader.identifier}': its checkpoint {checkpoint} is no longer an instant of "
                                   f"{source} (restored or rebuilt since), so which rows changed cannot be told; {fix}")
        return checkpoint

    @available
    def hudilite_instants(self, relation: BaseRelation) -> List[str]:
        """The completed instants of `relation`, oldest first (for `hudilite_as_of`)."""
        return self._read_view(lambda c: c.instants(relation.schema, relation.identifier), relation)

    def _read_view(self, make_view, relation: BaseRelation):
        try:
            return make_view(self.catalog)
        except ConfigurationError as err:
            raise CompilationError(f"{relation}: {err}") from None


def _catalog_stats(table: HudiTable) -> Dict[str, Any]:
    """A hudilite table's stats in dbt's catalog form (`stats:<id>:label/value/...`), from
    storage alone."""
    stats = table.stats()
    completed = table.context.timeline.completed()
    values = [
        ("rows", "Rows", stats["rows"]), ("files", "Files", stats["files"]), ("bytes", "Bytes", stats["bytes"]),
        # text, not a number, for agate: the instant and its UTC time
        ("last_commit", "Last commit", f"{completed[-1].timestamp} ({parse_instant_time(completed[-1].timestamp):%Y-%m-%d %H:%M:%S} UTC)"
         if completed else None),
        ("record_key", "Record key", ", ".join(table.config.record_key_fields) or "auto-generated"),
        ("partitioned_by", "Partitioned by", ", ".join(table.config.partition_fields) or "not partitioned"),
    ]
    out: Dict[str, Any] = {}
    for key, label, value in values:
        out.update({f"stats:{key}:label": label, f"stats:{key}:value": value, f"stats:{key}:description": "",
                    f"stats:{key}:include": value is not None})
    return out


def _shape(df, plan: m.SchemaPlan, model: str):
    from pyspark.sql import functions as F

    actual = {c.lower(): c for c in df.columns}
    flag = [F.col(quote(actual[m.DELETE_FLAG]))] if m.DELETE_FLAG in actual else []  # merge deletes ride along

    def column(name: str, null_type: Optional[str]):
        if null_type is not None:
            return F.lit(None).cast(null_type).alias(name)
        if name in plan.casts:
            return _stored_as(F.col(quote(actual[name.lower()])), name, *plan.casts[name], model).alias(name)
        return F.col(quote(actual[name.lower()])).alias(name)

    return df.select(*[column(name, null_type) for name, null_type in plan.columns], *flag)


_INTEGRAL_RANGES = {"tinyint": 7, "smallint": 15, "int": 31, "bigint": 63}  # bits below the sign
_FLOAT_MAX = 3.4028234663852886e38


def _stored_as(value, name: str, model_type: str, table_type: str, model: str):
    """`value` cast to the table's type, as Spark's ANSI store assignment writes it: a value
    that does not fit fails the build, naming the column (Spark's legacy cast, which dbt-spark
    sessions use, would wrap an integer or store a null instead)."""
    from pyspark.sql import functions as F

    stored = value.cast(table_type)
    misfit = value.isNotNull() & stored.isNull()  # a decimal too large
    if table_type in _INTEGRAL_RANGES:
        bits = _INTEGRAL_RANGES[table_type]  # compared as the value's type: a double of 2^63 is out
        misfit = misfit | (value < -(2 ** bits)) | (value >= float(2 ** bits)) | F.isnan(value.cast("double"))
    elif table_type == "float":  # NaN and the infinities are floats too
        finite = ~F.isnan(value.cast("double")) & (F.abs(value.cast("double")) != float("inf"))
        misfit = misfit | (finite & (F.abs(value) > _FLOAT_MAX))
    message = (f"model '{model}': column '{name}' holds a value that does not fit the table's type {table_type} "
               f"(the model's is {model_type}): widen the column with on_schema_change='sync_all_columns', or "
               "rebuild with --full-refresh")
    return F.when(F.coalesce(misfit, F.lit(False)), F.raise_error(F.lit(message))).otherwise(stored)


def _broken(df, rule: m.RowConstraint):
    """A row breaks `rule` (deletes of a merge carry no values to check)."""
    from pyspark.sql import functions as F

    broken = F.col(quote(rule.column)).isNull() if rule.column else ~F.coalesce(F.expr(rule.expression), F.lit(True))
    flag = next((c for c in df.columns if c.lower() == m.DELETE_FLAG.lower()), None)
    return broken & ~F.coalesce(F.col(quote(flag)).cast("boolean"), F.lit(False)) if flag else broken


def _enforce(df, constraints: Sequence[m.RowConstraint]):
    """`df` with each constraint checked as its rows are computed: inside the core's write job,
    so a violating row fails the build before anything is committed. The check rides on the
    first column, which every write path writes."""
    if not constraints:
        return df
    from pyspark.sql import functions as F

    first = df.columns[0]
    guarded = F.col(quote(first))
    for rule in reversed(constraints):
        guarded = F.when(_broken(df, rule), F.raise_error(F.lit(rule.message))).otherwise(guarded)
    return df.select(guarded.alias(first), *[F.col(quote(c)) for c in df.columns[1:]])


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


def _layout_fits(table: HudiTable, plan: m.BuildPlan) -> bool:
    config = table.config
    return (config.partition_fields, config.record_key_fields, config.precombine_field) == (
        plan.partition_by, plan.record_key, plan.precombine_field) and plan.parquet_encoding in (None, config.parquet_encoding) \
        and plan.populate_meta_fields in (None, not config.virtual_keys) \
        and plan.table_version in (None, config.table_version)


def _with_retries(retries: int, write):
    """Run `write`; after a conflict with a concurrent writer (nothing of it was published),
    run it again, up to `retries` more times."""
    for attempt in range(retries + 1):
        try:
            return write()
        except ConcurrentWriteError:
            if attempt == retries:
                raise


def _columns(schema) -> List[Tuple[str, str]]:
    """(name, Spark type) of a schema's data columns."""
    return [(f.name, f.dataType.simpleString()) for f in (schema.fields if schema else []) if f.name not in META_COLUMNS]


def _dbt_error(config: m.ModelConfig, err: Exception) -> Exception:
    """The dbt error for a failed build, by the kind of error: a configuration the table cannot
    take is a compilation error; conflicts, bad data, a corrupt table and Spark's own failures
    (a task's error carries its reason) are database errors."""
    if isinstance(err, DbtRuntimeError):
        return err
    text = str(err).strip() or repr(err)
    raised = re.search(r"\[USER_RAISED_EXCEPTION\] (.*?)(?: SQLSTATE|\n|$)", text)
    if raised:  # a row broke a constraint (`_enforce`): its message, without Spark's stack
        return DbtDatabaseError(raised.group(1))
    in_task = re.search(r"hudilite\.table\.errors\.\w+: (.*?)(?:\n|$)", text)
    if in_task:  # a write task refused a row (`keygen.PartitionFormat`): its message, not the traceback
        text = in_task.group(1)
    text = text if f"'{config.name}'" in text else f"model '{config.name}': {text}"
    return CompilationError(text) if isinstance(err, ConfigurationError) else DbtDatabaseError(text)


@contextmanager
def _connected(settings: CatalogSettings):
    """One connection to the settings' catalog for the calls of one sync (a metastore's Thrift
    client serves one thread: a connection per sync keeps dbt's threads apart)."""
    catalog = connect(settings)
    try:
        yield catalog
    finally:
        catalog.close()
