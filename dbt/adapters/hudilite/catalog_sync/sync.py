"""Bring a catalog's entry for one table in step with the table's latest commit, as Hudi's meta
sync does after each commit: the database, the table (made, altered, or made again for a new
layout), the partitions the commits since the last sync touched, and the sync point last, so
that a sync that fails part way is done again whole by the next one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .changes import SyncPoint, partition_changes
from .client import GLUE, HIVE, Catalog, CatalogSettings, CatalogSyncError
from .entry import TableEntry, partition_values, table_entry


@dataclass(frozen=True)
class SyncResult:
    database: str
    name: str
    created: bool
    full: bool
    added: int
    dropped: int
    instant: Optional[str]

    def __str__(self) -> str:
        what = "made" if self.created else ("synced in full" if self.full else "synced")
        return (f"{self.database}.{self.name} {what} to {self.instant or 'no commit'} "
                f"(+{self.added} -{self.dropped} partitions)")


def connect(settings: CatalogSettings) -> Catalog:
    """A connection to the settings' catalog."""
    if settings.kind == HIVE:
        from .hive import HiveMetastore  # noqa: PLC0415 - its client is an optional extra

        return HiveMetastore(settings.metastore_uri)
    if settings.kind == GLUE:
        from .glue import GlueCatalog  # noqa: PLC0415

        return GlueCatalog(settings.glue_region, settings.glue_endpoint)
    raise CatalogSyncError("catalog_sync is none: nothing to connect to")


def location_uri(path: str) -> str:
    """A table's location as catalogs and their engines take it: a URI (`file:` for a local path)."""
    return path if "://" in path else "file:" + path


def sync_table(catalog: Catalog, table, database: str, name: str, meta_columns: bool = True,
               spark_version: Optional[str] = None) -> SyncResult:
    """Sync `table` (a HudiTable) to `catalog` as `database`.`name`."""
    config = table.config
    entry = table_entry(database, name, location_uri(table.path), table.schema(), config.partition_fields,
                        meta_columns=meta_columns and not config.virtual_keys, spark_version=spark_version)
    current = catalog.get_table(database, name)
    if current is None:
        catalog.ensure_database(database)
    elif not entry.same_layout(current.partition_keys, current.location):
        catalog.drop_table(database, name)  # a new layout or place: the catalog cannot alter one into it
        current = None
    since = SyncPoint.of(current.parameters) if current is not None else SyncPoint()
    changes = partition_changes(table.context.timeline, since)
    if current is None:
        catalog.create_table(entry)
    elif _differs(entry, current):
        catalog.alter_table(entry, {**current.parameters, **entry.parameters}, cascade=bool(entry.partition_keys))
    added = dropped = 0
    if entry.partition_keys:
        fields = config.partition_fields
        want = {tuple(partition_values(p, fields)): p for p in changes.live}
        if changes.full:
            held = catalog.partitions(entry)
            gone = held - set(want)
            want = {v: p for v, p in want.items() if v not in held}
        else:
            gone = {tuple(partition_values(p, fields)) for p in changes.emptied}
        catalog.add_partitions(entry, want)
        catalog.drop_partitions(entry, gone)
        added, dropped = len(want), len(gone)
    parameters = {**(current.parameters if current is not None else {}), **entry.parameters,
                  **changes.point.parameters()}
    if current is None or any(current.parameters.get(k) != v for k, v in parameters.items()):
        catalog.alter_table(entry, parameters, cascade=False)
    return SyncResult(database, name, current is None, changes.full, added, dropped, changes.point.instant)


def _differs(entry: TableEntry, current) -> bool:
    """Whether the entry's columns, formats or properties are not what the catalog holds."""
    columns = tuple((n.lower(), t.lower()) for n, t in entry.columns)
    held = tuple((n.lower(), t.lower()) for n, t in current.columns)
    return (columns != held or any(current.parameters.get(k) != v for k, v in entry.parameters.items())
            or any(current.serde_parameters.get(k) != v for k, v in entry.serde_parameters.items()))


def drop_entry(catalog: Catalog, database: str, name: str) -> bool:
    """Remove a table's entry (its files stay: they are the table's); False when there was none."""
    return catalog.drop_table(database, name)
