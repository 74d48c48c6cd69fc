"""The embedded SparkSession as a dbt connection.

`method: session` runs Spark in this process (or as the driver of the cluster named by
`spark.master`); `method: connect` sends everything to a Spark Connect server. Every statement goes through `HudiliteCursor`, which sends writes aimed at
hudilite tables (INSERT INTO / INSERT OVERWRITE) to the table-format core, so plain SQL
never drops stray files into a table.
"""

from __future__ import annotations

import posixpath
from typing import Any, Optional

from dbt.adapters.contracts.connection import AdapterResponse, Connection, ConnectionState
from dbt.adapters.spark.connections import SparkConnectionManager
from dbt.adapters.spark.session import Cursor, SessionConnectionWrapper
from dbt_common.exceptions import DbtRuntimeError

from .catalog.storage_catalog import StorageCatalog
from .credentials import HudiliteCredentials
from .sql.dml import run_statement
from .object_store_settings import configure_process
from .session import connect_session, spark_session
from .table import HudiliteError


def session_for(credentials: HudiliteCredentials):
    conf = credentials.session_conf()
    if credentials.is_connect:
        return connect_session(credentials.host, conf)
    root = credentials.location_root or "lakehouse"
    if "://" not in root:  # keep Spark's own warehouse folder out of the project directory
        conf.setdefault("spark.sql.warehouse.dir", posixpath.join(root, ".spark-warehouse"))
    return spark_session(conf=conf, app_name="dbt-hudilite")


def catalog_for(credentials: HudiliteCredentials) -> StorageCatalog:
    configure_process(credentials.location_root, **credentials.object_store())  # this process's own store client
    return StorageCatalog.get(session_for(credentials), credentials.location_root)


class HudiliteConnection:
    """One dbt connection: its SparkSession and storage catalog, made on first use."""

    def __init__(self, credentials: HudiliteCredentials) -> None:
        self.credentials = credentials
        self._catalog: Optional[StorageCatalog] = None

    @property
    def catalog(self) -> StorageCatalog:
        if self._catalog is None:
            self._catalog = catalog_for(self.credentials)
        return self._catalog

    def cursor(self) -> "HudiliteCursor":
        return HudiliteCursor(self)


class HudiliteCursor(Cursor):
    def __init__(self, connection: HudiliteConnection) -> None:
        super().__init__(server_side_parameters=connection.credentials.server_side_parameters)
        self.connection = connection

    def execute(self, sql: str, *parameters: Any) -> None:
        if parameters:
            sql = sql % parameters
        from pyspark.errors import AnalysisException

        catalog = self.connection.catalog
        try:
            self._df = run_statement(catalog, sql)
        except (AnalysisException, HudiliteError) as exc:
            raise DbtRuntimeError(str(exc)) from exc
        self._rows = None


class HudiliteConnectionManager(SparkConnectionManager):
    TYPE = "hudilite"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.state == ConnectionState.OPEN:
            return connection
        connection.handle = SessionConnectionWrapper(HudiliteConnection(connection.credentials))
        connection.state = ConnectionState.OPEN
        return connection

    @classmethod
    def get_response(cls, cursor: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")
