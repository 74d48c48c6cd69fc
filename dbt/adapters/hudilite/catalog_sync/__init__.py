"""Catalog sync: hudilite tables registered by name in a Hive metastore or AWS Glue after every
commit, as Hudi's own sync tools register theirs, so that Trino, Athena, Presto, Hive and Spark
SQL find them (`entry`: what a catalog holds for a table; `changes`: which partitions changed
since the last sync; `sync`: the operation; `hive`, `glue`: the catalogs)."""

from .client import GLUE, HIVE, NONE, Catalog, CatalogSettings, CatalogSyncError
from .sync import SyncResult, connect, drop_entry, forget, location_uri, sync_table, synced_as

__all__ = ["GLUE", "HIVE", "NONE", "Catalog", "CatalogSettings", "CatalogSyncError", "SyncResult", "connect", "drop_entry", "forget",
           "location_uri", "sync_table", "synced_as"]
