"""A Hive metastore as the catalog, through its Thrift API (the client Apache Iceberg's Python
library ships, `pip install 'dbt-hudilite[hive]'`), with the calls Hudi's HMS sync mode makes."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple
from urllib.parse import urlparse

from .entry import EXTERNAL_TABLE, INPUT_FORMAT, OUTPUT_FORMAT, SERDE, TableEntry
from .client import CatalogRefusal, CatalogSyncError, CatalogTable, MissingAware

ADD_BATCH = 1000  # partitions per add_partitions request, as Hudi's hive_sync.batch_num


def _thrift():
    try:
        from hive_metastore import ThriftHiveMetastore, ttypes  # noqa: PLC0415 - an optional extra
        from thrift.protocol import TBinaryProtocol  # noqa: PLC0415
        from thrift.transport import TSocket, TTransport  # noqa: PLC0415
    except ImportError:
        raise CatalogSyncError("catalog_sync: hive needs the metastore's Thrift client: "
                               "pip install 'dbt-hudilite[hive]'") from None
    return ThriftHiveMetastore, ttypes, TBinaryProtocol, TSocket, TTransport


class _Missing(CatalogSyncError):
    """The metastore has no such database, table or partition."""


class _Exists(CatalogSyncError):
    """The metastore has it already."""


class _Calls:
    """The Thrift client's calls, each failure turned into a CatalogSyncError naming the metastore
    and the call (Thrift's own exceptions are immutable: they cannot pass a `with` block, which sets
    their traceback)."""

    def __init__(self, client, types, where: str):
        self._client, self._types, self._where = client, types, where

    def __getattr__(self, name: str):
        method = getattr(self._client, name)

        def call(*args):
            try:
                return method(*args)
            except Exception as err:  # noqa: BLE001 - re-raised as ours, with its message
                message = getattr(err, "message", None) or str(err) or type(err).__name__
                kind = (_Missing if isinstance(err, self._types.NoSuchObjectException) else
                        _Exists if isinstance(err, self._types.AlreadyExistsException) else
                        CatalogRefusal if isinstance(err, self._types.InvalidOperationException) else CatalogSyncError)
                raise kind(f"{self._where}: {name}: {message}") from None
        return call


class HiveMetastore(MissingAware):
    """One connection to a metastore at `thrift://host:port`."""

    kind = "hive"

    def __init__(self, uri: str, timeout_seconds: float = 60.0):
        parsed = urlparse(uri)
        if parsed.scheme != "thrift" or not parsed.hostname:
            raise CatalogSyncError(f"metastore_uri must be thrift://host:port, not {uri!r}")
        service, self._types, protocol, socket, transport = _thrift()
        sock = socket.TSocket(parsed.hostname, parsed.port or 9083)
        sock.setTimeout(int(timeout_seconds * 1000))
        self._transport = transport.TBufferedTransport(sock)
        self.where = f"Hive metastore {parsed.hostname}:{parsed.port or 9083}"
        self._client = _Calls(service.Client(protocol.TBinaryProtocol(self._transport)), self._types, self.where)
        try:
            self._transport.open()
        except Exception as err:  # noqa: BLE001 - Thrift's transport errors name the cause
            raise CatalogSyncError(f"{self.where} cannot be reached: {err}") from None

    def close(self) -> None:
        self._transport.close()

    @staticmethod
    def _missing(err: Exception) -> bool:
        return isinstance(err, _Missing)

    def ensure_database(self, name: str) -> None:
        if self._unless_missing(lambda: self._client.get_database(name)) is None:
            try:
                self._client.create_database(self._types.Database(name=name, description="made by dbt-hudilite",
                                                                  parameters={}))
            except _Exists:
                pass  # another build made it meanwhile

    def get_table(self, database: str, name: str) -> Optional[CatalogTable]:
        table = self._unless_missing(lambda: self._client.get_table(database, name))
        if table is None:
            return None
        sd = table.sd
        return CatalogTable(tuple((k.name, k.type) for k in table.partitionKeys or []), sd.location if sd else None,
                            dict(table.parameters or {}), tuple((c.name, c.type) for c in (sd.cols if sd else []) or []),
                            table.tableType or "", dict((sd.serdeInfo.parameters or {}) if sd and sd.serdeInfo else {}))

    def _descriptor(self, entry: TableEntry, location: str):
        t = self._types
        return t.StorageDescriptor(
            cols=[t.FieldSchema(name=n.lower(), type=kind, comment="") for n, kind in entry.columns], location=location,
            inputFormat=INPUT_FORMAT, outputFormat=OUTPUT_FORMAT, compressed=False, numBuckets=-1,
            serdeInfo=t.SerDeInfo(serializationLib=SERDE, parameters=dict(entry.serde_parameters)),
            bucketCols=[], sortCols=[], parameters={}, storedAsSubDirectories=False)

    def _table(self, entry: TableEntry, parameters: Dict[str, str]):
        t = self._types
        return t.Table(tableName=entry.name, dbName=entry.database, owner="dbt-hudilite", createTime=0,
                       lastAccessTime=0, retention=0, sd=self._descriptor(entry, entry.location),
                       partitionKeys=[t.FieldSchema(name=n.lower(), type=kind, comment="") for n, kind in entry.partition_keys],
                       parameters=parameters, tableType=EXTERNAL_TABLE)

    def create_table(self, entry: TableEntry) -> None:
        self._client.create_table(self._table(entry, dict(entry.parameters)))

    def alter_table(self, entry: TableEntry, parameters: Dict[str, str], cascade: bool) -> None:
        """The entry's columns, formats and location, with `parameters` as the table's."""
        context = self._types.EnvironmentContext(properties={"CASCADE": "true"} if cascade else {})
        self._client.alter_table_with_environment_context(entry.database, entry.name, self._table(entry, parameters),
                                                          context)

    def drop_table(self, database: str, name: str) -> bool:
        # the files are the table's, not the catalog's
        return self._done(lambda: self._client.drop_table(database, name, False))

    def partitions(self, entry: TableEntry) -> Dict[Tuple[str, ...], str]:
        """Every partition's values and location (a full sync's one read of them)."""
        return {tuple(p.values): p.sd.location if p.sd else ""
                for p in self._client.get_partitions(entry.database, entry.name, -1)}

    def add_partitions(self, entry: TableEntry, paths: Dict[Tuple[str, ...], str]) -> None:
        t = self._types
        items = sorted(paths.items())
        for start in range(0, len(items), ADD_BATCH):
            parts = [t.Partition(values=list(values), dbName=entry.database, tableName=entry.name, createTime=0,
                                 lastAccessTime=0, sd=self._descriptor(entry, entry.partition_location(path)),
                                 parameters={})
                     for values, path in items[start:start + ADD_BATCH]]
            self._client.add_partitions_req(t.AddPartitionsRequest(dbName=entry.database, tblName=entry.name,
                                                                   parts=parts, ifNotExists=True, needResult=False))

    def drop_partitions(self, entry: TableEntry, values: Iterable[Tuple[str, ...]]) -> None:
        for value in sorted(values):
            self._unless_missing(lambda: self._client.drop_partition(entry.database, entry.name, list(value), False))

    def tables(self, database: str) -> List[str]:
        return list(self._unless_missing(lambda: self._client.get_all_tables(database), default=[]))

    def drop_database(self, database: str) -> None:
        """Drop an empty database (its tables' files are theirs); nothing if there is none."""
        self._unless_missing(lambda: self._client.drop_database(database, False, False))
