"""Profile fields of `type: hudilite`: dbt-spark's, plus where tables live and Spark settings."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Tuple

from dbt.adapters.spark.connections import SparkCredentials
from dbt_common.dataclass_schema import StrEnum
from dbt_common.exceptions import DbtRuntimeError

from .catalog_sync import NONE, CatalogSettings, CatalogSyncError
from .object_store_settings import spark_conf


class HudiliteConnectionMethod(StrEnum):
    SESSION = "session"  # Spark in this process (local, or the driver of `spark.master`'s cluster)
    CONNECT = "connect"  # a Spark Connect server at `host` (sc://host:port) runs Spark


@dataclass
class HudiliteCredentials(SparkCredentials):
    method: HudiliteConnectionMethod = HudiliteConnectionMethod.SESSION  # type: ignore[assignment]
    # `session`: ignored; `connect`: the server's URL, sc://host:port[/;param=value...]
    host: Optional[str] = "local"
    # Tables live at <location_root>/<schema>/<alias>; default: lakehouse/ beside the project.
    location_root: Optional[str] = None
    # Spark settings for the embedded session (spark.master among them); dbt-spark's
    # server_side_parameters are applied too.
    spark_conf: Dict[str, str] = field(default_factory=dict)
    # Keep the Spark catalog in a Hive metastore (Derby unless configured) instead of memory.
    use_hive_metastore: bool = False
    # Tables on S3 (`location_root: s3://bucket/prefix`): an S3-compatible endpoint (MinIO, a
    # local server), the region, and path-style addressing; each defaults to the AWS chain's.
    s3_endpoint: Optional[str] = None
    s3_region: Optional[str] = None
    s3_path_style: Optional[bool] = None
    # Hudi's table version new tables are created at (6, 8 or 9; a model's hudi_table_version
    # overrides it). Unset: 6, which every Hudi reader from 0.14 on reads.
    hudi_table_version: Optional[int] = None
    # Catalog sync after every build (catalog_sync.py): `hive` (a metastore at metastore_uri,
    # thrift://host:port) or `glue` (glue_region, glue_endpoint for a compatible service); each
    # dbt schema is the catalog database `catalog_database` names ({schema} stands for it).
    catalog_sync: Optional[str] = None
    metastore_uri: Optional[str] = None
    glue_region: Optional[str] = None
    glue_endpoint: Optional[str] = None
    catalog_database: Optional[str] = None
    catalog_meta_columns: bool = True  # Hudi's five meta columns in the catalog's columns, as Hudi's sync

    def __post_init__(self) -> None:
        methods = [m.value for m in HudiliteConnectionMethod]
        if str(self.method) not in methods:
            raise DbtRuntimeError(f"hudilite supports `method: session` or `method: connect`, not `{self.method}`")
        super().__post_init__()
        self.spark_conf = {str(k): str(v) for k, v in self.spark_conf.items()}
        if self.hudi_table_version is not None:
            from .materialize import ModelConfigError, table_version  # noqa: PLC0415 - the adapter's own parsing
            try:
                self.hudi_table_version = table_version(self.hudi_table_version, "profile")
            except ModelConfigError as err:
                raise DbtRuntimeError(str(err)) from None
        self.catalog_settings()  # a mistake in the catalog fields fails here, before any build
        if self.is_connect:
            if not str(self.host).startswith("sc://"):
                raise DbtRuntimeError(f"`method: connect` needs `host: sc://<server>:<port>` (got `{self.host}`)")
            fixed = [k for k in ("spark.master", "spark.sql.catalogImplementation") if k in self.spark_conf]
            if fixed or self.use_hive_metastore:
                raise DbtRuntimeError(
                    f"`method: connect`: {', '.join(fixed) or 'use_hive_metastore'} belong(s) to the Spark Connect "
                    "server's own start-up settings; a profile can set only session settings (spark.sql.*)")

    def catalog_settings(self, kind: Optional[str] = None, database: Optional[str] = None) -> CatalogSettings:
        """The profile's catalog sync, or a model's choice of kind and database over it."""
        try:
            return CatalogSettings(kind=(kind or self.catalog_sync or NONE).lower(), metastore_uri=self.metastore_uri,
                                   glue_region=self.glue_region or self.s3_region, glue_endpoint=self.glue_endpoint,
                                   database=database or self.catalog_database or "{schema}",
                                   meta_columns=self.catalog_meta_columns)
        except CatalogSyncError as err:
            raise DbtRuntimeError(str(err)) from None

    @property
    def is_connect(self) -> bool:
        return str(self.method) == HudiliteConnectionMethod.CONNECT.value

    @property
    def type(self) -> str:
        return "hudilite"

    @property
    def unique_field(self) -> str:
        return self.location_root or "lakehouse"

    def _connection_keys(self) -> Tuple[str, ...]:
        return ("method", "host", "schema", "location_root", "spark_conf", "use_hive_metastore")

    def connection_info(self, *, with_aliases: bool = False) -> Iterable[Tuple[str, Any]]:
        """What `dbt debug` prints: the profile's fields as they take effect, that is the
        resolved `location_root` (not `None` when the profile leaves it out), `host` only where
        it means something (`method: connect`), and where Spark's own log goes."""
        for key, value in super().connection_info(with_aliases=with_aliases):
            if key == "host" and not self.is_connect:
                continue
            if key == "location_root":
                value = self.absolute_location_root(_project_dir())
                if not self.location_root:
                    value = f"{value}  (default: lakehouse/ beside the project)"
            yield key, value
        if self.is_connect:
            yield "spark_log", "kept by the Spark Connect server"
        else:
            from .session import SPARK_LOG, default_log_dir

            yield "spark_log", os.path.join(default_log_dir(), SPARK_LOG)

    def absolute_location_root(self, project_root: Optional[str]) -> str:
        """`location_root` made absolute: relative paths are relative to the dbt project."""
        root = self.location_root or "lakehouse"
        if "://" not in root and not os.path.isabs(root):
            root = os.path.abspath(os.path.join(project_root or os.getcwd(), root))
        return root

    def resolve_location_root(self, project_root: Optional[str]) -> str:
        """Make `location_root` absolute: relative paths are relative to the dbt project."""
        self.location_root = self.absolute_location_root(project_root)
        return self.location_root

    def object_store(self) -> Dict[str, Any]:
        """Where the tables' object store is, for `object_store_settings` (nothing for S3's defaults)."""
        return {"endpoint": self.s3_endpoint, "region": self.s3_region, "path_style": self.s3_path_style}

    def session_conf(self) -> Dict[str, str]:
        # S3A and its jars for an s3:// location_root (nothing otherwise), under the profile's own settings.
        conf = {} if self.is_connect else spark_conf(self.location_root, **self.object_store())
        conf.update(self.server_side_parameters)
        conf.update(self.spark_conf)
        if self.use_hive_metastore:
            conf["spark.sql.catalogImplementation"] = "hive"
        return conf


def _project_dir() -> Optional[str]:
    """The dbt project's folder while a dbt command runs (`--project-dir`, else the working
    directory, as dbt itself takes it)."""
    try:
        from dbt.flags import get_flags

        path = getattr(get_flags(), "PROJECT_DIR", None)
    except Exception:  # not inside a dbt command
        path = None
    return os.path.abspath(str(path)) if path else None
