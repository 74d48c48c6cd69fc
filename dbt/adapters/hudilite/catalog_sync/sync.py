"""Bring a catalog's entry for one table in step with the table's latest commit, as Hudi's meta
sync does after each commit: the database, the table (made, altered, or made again for a new
layout), the partitions the commits since the last sync touched, and the sync point last, so
that a sync that fails part way is done again whole by the next one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .changes import SyncPoint, partition_changes
from .client import GLUE, HIVE, NONE, Catalog, CatalogRefusal, CatalogSettings, CatalogSyncError
from .entry import TableEntry, partition_values, same_location, table_entry


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


RECORD = ".hoodie/.hudilite/catalog_sync.json"  # where a table was last synced to (kind, database, name, location)
TIMESTAMP_KEYGENS = ("org.apache.hudi.keygen.TimestampBasedKeyGenerator",)
VIEW_TYPES = ("VIRTUAL_VIEW", "MATERIALIZED_VIEW")


def synced_as(table) -> Optional[Tuple[str, str, str, str]]:
    """Where the table was last synced to, (kind, database, name, location), as its own storage
    records it (so that a drop, a rename or an opt-out finds the entry whatever naming made it)."""
    try:
        record = json.loads(table.storage.read_text(RECORD))
        return record["kind"], record["database"], record["name"], record["location"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember(table, kind: str, database: str, name: str, location: str, previous=False) -> None:
    """Write the record unless it says so already (`previous`: the record as read before, if it was)."""
    if (synced_as(table) if previous is False else previous) != (kind, database, name, location):
        table.storage.write_text(RECORD, json.dumps({"kind": kind, "database": database, "name": name,
                                                     "location": location}))


def mark_unsynced(table) -> None:
    """Record that the table is kept out of catalogs (`catalog_sync=false`): `hudilite sync`
    leaves it out too."""
    _remember(table, NONE, "", "", "")


def formatted_partition_fields(config) -> List[str]:
    """Partition fields whose folders hold a timestamp key generator's formatted text."""
    if config.keygen_class in TIMESTAMP_KEYGENS:
        return list(config.partition_fields)
    types = config.partition_types or []
    return [f for f, kind in zip(config.partition_fields, types) if str(kind).upper() == "TIMESTAMP"]


def sync_table(catalog: Catalog, table, database: str, name: str, meta_columns: bool = True,
               spark_version: Optional[str] = None) -> SyncResult:
    """Sync `table` (a HudiTable) to `catalog` as `database`.`name`; the entry it was synced to
    before under another name (its storage's record) is removed."""
    config, schema = table.config, table.schema()
    if schema is None:  # no commit yet: nothing a reader could read
        return SyncResult(database, name, False, False, 0, 0, None)
    location = location_uri(table.path)
    entry = table_entry(database, name, location, schema, config.partition_fields,
                        meta_columns=meta_columns and not config.virtual_keys, spark_version=spark_version,
                        formatted_fields=formatted_partition_fields(config))
    previous = synced_as(table)
    if previous is not None and previous[0] == catalog.kind and previous[1:3] != (database, name):
        drop_entry(catalog, previous[1], previous[2], previous[3])  # moved to another database or name
    current = catalog.get_table(database, name)
    if current is not None and not _recorded(previous, catalog.kind, database, name, current.location):
        _check_owner(catalog, current, entry)
    if current is None:
        catalog.ensure_database(database)
    elif not entry.same_layout(current.partition_keys, current.location):
        catalog.drop_table(database, name)  # a new layout: the catalog cannot alter one into it
        current = None
    since = SyncPoint.of(current.parameters) if current is not None else SyncPoint()
    if current is not None and _differs(entry, current):
        try:
            catalog.alter_table(entry, {**current.parameters, **entry.parameters},
                                cascade=bool(entry.partition_keys) and _columns(entry.columns) != _columns(current.columns))
        except CatalogRefusal:  # a change the catalog refuses (a type it will not convert); not a timeout
            catalog.drop_table(database, name)  # made again, as Hudi 1.x's sync does on an error
            current, since = None, SyncPoint()
    changes = partition_changes(table.context.timeline, since)
    if current is None:
        catalog.create_table(entry)
    added = dropped = 0
    if entry.partition_keys:
        fields = config.partition_fields
        want = {tuple(partition_values(p, fields)): p for p in changes.live}
        if changes.full:
            held = catalog.partitions(entry)
            # a partition held elsewhere than its folder (a table rebuilt with other folder names) is made again
            gone = {v for v, at in held.items() if v not in want or not same_location(at, entry.partition_location(want[v]))}
            want = {v: p for v, p in want.items() if v not in held or v in gone}
        else:
            gone = {tuple(partition_values(p, fields)) for p in changes.emptied}
        catalog.drop_partitions(entry, gone)
        catalog.add_partitions(entry, want)
        added, dropped = len(want), len(gone)
    parameters = {**(current.parameters if current is not None else {}), **entry.parameters,
                  **changes.point.parameters()}
    if current is None or any(current.parameters.get(k) != v for k, v in parameters.items()):
        catalog.alter_table(entry, parameters, cascade=False)
    _remember(table, catalog.kind, database, name, location, previous)  # the record read above: no second read
    return SyncResult(database, name, current is None, changes.full, added, dropped, changes.point.instant)


def _recorded(previous, kind: str, database: str, name: str, location: Optional[str]) -> bool:
    """Whether the entry at the name is the one this table's record says it made (a table that
    moved since: its entry is registered again at the new place)."""
    return (previous is not None and previous[:3] == (kind, database, name)
            and same_location(previous[3], location or ""))


def _check_owner(catalog: Catalog, current, entry: TableEntry) -> None:
    """Refuse to take over an entry that is not this table's: a view, or a table elsewhere."""
    if current.table_type in VIEW_TYPES or not same_location(current.location or "", entry.location):
        what = "a view" if current.table_type in VIEW_TYPES else f"a table at {current.location}"
        raise CatalogSyncError(f"{catalog.where}: {entry.database}.{entry.name} is {what}, not this table "
                               f"({entry.location}): drop it, or sync this model under another catalog_database")


def _columns(columns) -> tuple:
    return tuple((n.lower(), t.lower()) for n, t in columns)


def _differs(entry: TableEntry, current) -> bool:
    """Whether the entry's columns, formats or properties are not what the catalog holds."""
    return (_columns(entry.columns) != _columns(current.columns)
            or any(current.parameters.get(k) != v for k, v in entry.parameters.items())
            or any(current.serde_parameters.get(k) != v for k, v in entry.serde_parameters.items()))


def drop_entry(catalog: Catalog, database: str, name: str, location: Optional[str] = None) -> bool:
    """Remove a table's entry (its files stay: they are the table's); False when there was none,
    or (with `location`) when the entry there is another table's."""
    if location is not None:
        current = catalog.get_table(database, name)
        if current is None or not same_location(current.location or "", location):
            return False
    return catalog.drop_table(database, name)


def drop_database_if_empty(catalog: Catalog, database: str) -> None:
    """After dbt drops a schema: its database, once no table is left in it (never the catalog's
    own `default`)."""
    if database != "default" and not catalog.tables(database):
        catalog.drop_database(database)
