"""What sync needs of a catalog (a Hive metastore, AWS Glue), and how one is chosen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Tuple

from .entry import TableEntry

HIVE, GLUE, NONE = "hive", "glue", "none"
KINDS = (HIVE, GLUE, NONE)


class CatalogSyncError(Exception):
    """A catalog could not be reached or refused a change (the table itself is not touched)."""


class CatalogRefusal(CatalogSyncError):
    """The catalog answered and refused the change itself (a column type it will not convert),
    as opposed to failing to answer: only this makes an entry worth registering again."""


class MissingAware:
    """What both catalogs' clients share: a call whose object may not be there."""

    def _missing(self, err: Exception) -> bool:
        raise NotImplementedError

    def _unless_missing(self, call: Callable[[], Any], default: Any = None) -> Any:
        """`call()`, or `default` when the database, table or partition it names is not there."""
        try:
            return call()
        except Exception as err:  # noqa: BLE001 - re-raised unless it says "not there"
            if self._missing(err):
                return default
            raise

    def _done(self, call: Callable[[], Any]) -> bool:
        """Whether `call()` did its work: False when what it names was not there."""
        return self._unless_missing(lambda: (call(), True)[1], default=False)


@dataclass(frozen=True)
class CatalogTable:
    """What a catalog holds for a name, as far as sync reads it."""
    partition_keys: Tuple[Tuple[str, str], ...]
    location: Optional[str]
    parameters: Dict[str, str]
    columns: Tuple[Tuple[str, str], ...] = ()
    table_type: str = ""
    serde_parameters: Dict[str, str] = field(default_factory=dict)


class Catalog(Protocol):
    kind: str
    where: str  # the catalog, as an error names it

    def ensure_database(self, name: str) -> None: ...
    def get_table(self, database: str, name: str) -> Optional[CatalogTable]: ...
    def create_table(self, entry: TableEntry) -> None: ...
    def alter_table(self, entry: TableEntry, parameters: Dict[str, str], cascade: bool) -> None: ...
    def drop_table(self, database: str, name: str) -> bool: ...
    def partitions(self, entry: TableEntry) -> Dict[Tuple[str, ...], str]: ...
    def add_partitions(self, entry: TableEntry, paths: Dict[Tuple[str, ...], str]) -> None: ...
    def drop_partitions(self, entry: TableEntry, values: Iterable[Tuple[str, ...]]) -> None: ...
    def tables(self, database: str) -> List[str]: ...
    def drop_database(self, database: str) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class CatalogSettings:
    """Where tables are synced to (the profile's `catalog_sync` fields)."""
    kind: str = NONE
    metastore_uri: Optional[str] = None  # hive: thrift://host:port
    glue_region: Optional[str] = None
    glue_endpoint: Optional[str] = None  # glue: a compatible service (tests: a local server)
    database: str = "{schema}"  # the catalog database of a dbt schema
    meta_columns: bool = True  # Hudi's five meta columns in the entry, as Hudi's sync does

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise CatalogSyncError(f"catalog_sync must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.kind == HIVE and not self.metastore_uri:
            raise CatalogSyncError("catalog_sync: hive needs metastore_uri (thrift://host:port)")
        if "{schema}" not in self.database and not self.database.strip():
            raise CatalogSyncError("catalog_database must name a database, or hold {schema}")

    @property
    def enabled(self) -> bool:
        return self.kind != NONE

    def database_of(self, schema: str) -> str:
        return self.database.replace("{schema}", schema).lower()
