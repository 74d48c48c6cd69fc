"""Catalog sync: hudilite tables registered by name in a Hive metastore or AWS Glue after every
commit, as Hudi's own sync tools register theirs, so that Trino, Athena, Presto, Hive and Spark
SQL find them (`entry`: what a catalog holds for a table; `changes`: which partitions changed
since the last sync; `sync`: the operation; `hive`, `glue`: the catalogs)."""

from .client import GLUE, HIVE, NONE, Catalog, CatalogRefusal, CatalogSettings, CatalogSyncError
from .sync import (SyncResult, connect, drop_database_if_empty, drop_entry, location_uri, mark_unsynced, sync_table,
                   synced_as)

__all__ = ["GLUE", "HIVE", "NONE", "Catalog", "CatalogRefusal", "CatalogSettings", "CatalogSyncError", "SyncResult",
           "connect", "drop_database_if_empty", "drop_entry", "mark_unsynced",
           "location_uri", "sync_table", "synced_as"]
