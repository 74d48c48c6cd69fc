"""AWS Glue as the catalog (boto3, `pip install 'dbt-hudilite[glue]'`), with the calls and batch
sizes of Hudi's AwsGlueCatalogSyncTool. Tried against a local Glue mock only, not against AWS."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from .client import CatalogSyncError, CatalogTable, MissingAware
from .entry import EXTERNAL_TABLE, INPUT_FORMAT, OUTPUT_FORMAT, SERDE, TableEntry

CREATE_BATCH, DELETE_BATCH = 100, 25  # BatchCreatePartition's and BatchDeletePartition's limits
# Hudi's Glue sync marks its tables so (Athena then lists files itself, not through Hudi's metadata table).
GLUE_PARAMETERS = {"hudi.metadata-listing-enabled": "FALSE"}


class GlueCatalog(MissingAware):
    kind = "glue"

    def __init__(self, region: Optional[str] = None, endpoint: Optional[str] = None):
        try:
            import boto3  # noqa: PLC0415 - an optional extra
        except ImportError:
            raise CatalogSyncError("catalog_sync: glue needs boto3: pip install 'dbt-hudilite[glue]'") from None
        # a session of its own: boto3's default session is not safe across dbt's threads
        self._glue = boto3.session.Session().client("glue", region_name=region, endpoint_url=endpoint)
        self.where = f"AWS Glue ({endpoint or region or 'default region'})"

    def close(self) -> None:
        self._glue.close()

    def _missing(self, err: Exception) -> bool:
        return getattr(err, "response", {}).get("Error", {}).get("Code") == "EntityNotFoundException"

    def ensure_database(self, name: str) -> None:
        if self._unless_missing(lambda: self._glue.get_database(Name=name)) is None:
            try:
                self._glue.create_database(DatabaseInput={"Name": name, "Description": "made by dbt-hudilite"})
            except self._glue.exceptions.AlreadyExistsException:
                pass

    def get_table(self, database: str, name: str) -> Optional[CatalogTable]:
        table = self._unless_missing(lambda: self._glue.get_table(DatabaseName=database, Name=name)["Table"])
        if table is None:
            return None
        sd = table.get("StorageDescriptor", {})
        return CatalogTable(tuple((k["Name"], k["Type"]) for k in table.get("PartitionKeys", [])), sd.get("Location"),
                            dict(table.get("Parameters", {})), tuple((c["Name"], c["Type"]) for c in sd.get("Columns", [])),
                            table.get("TableType", ""), dict(sd.get("SerdeInfo", {}).get("Parameters", {})))

    @staticmethod
    def _descriptor(entry: TableEntry, location: str) -> dict:
        return {"Columns": [{"Name": n.lower(), "Type": t} for n, t in entry.columns], "Location": location,
                "InputFormat": INPUT_FORMAT, "OutputFormat": OUTPUT_FORMAT, "Compressed": False,
                "SerdeInfo": {"SerializationLibrary": SERDE, "Parameters": dict(entry.serde_parameters)}}

    def _input(self, entry: TableEntry, parameters: Dict[str, str]) -> dict:
        return {"Name": entry.name, "TableType": EXTERNAL_TABLE, "Parameters": {**parameters, **GLUE_PARAMETERS},
                "StorageDescriptor": self._descriptor(entry, entry.location),
                "PartitionKeys": [{"Name": n.lower(), "Type": t} for n, t in entry.partition_keys]}

    def create_table(self, entry: TableEntry) -> None:
        self._glue.create_table(DatabaseName=entry.database, TableInput=self._input(entry, dict(entry.parameters)))

    def alter_table(self, entry: TableEntry, parameters: Dict[str, str], cascade: bool) -> None:
        """`cascade`: every partition takes the new columns too (Glue keeps a schema per partition,
        which Athena checks against the table's)."""
        self._glue.update_table(DatabaseName=entry.database, TableInput=self._input(entry, parameters), SkipArchive=True)
        if not cascade:
            return
        items = sorted(self.partitions(entry).items())
        for start in range(0, len(items), CREATE_BATCH):
            reply = self._glue.batch_update_partition(DatabaseName=entry.database, TableName=entry.name, Entries=[
                {"PartitionValueList": list(values),
                 "PartitionInput": {"Values": list(values), "StorageDescriptor": self._descriptor(entry, location)}}
                for values, location in items[start:start + CREATE_BATCH]])
            _refuse_errors(reply, "EntityNotFoundException", f"updating the partitions of {entry.database}.{entry.name}")

    def drop_table(self, database: str, name: str) -> bool:
        return self._done(lambda: self._glue.delete_table(DatabaseName=database, Name=name))

    def partitions(self, entry: TableEntry) -> Dict[Tuple[str, ...], str]:
        pages = self._glue.get_paginator("get_partitions").paginate(DatabaseName=entry.database, TableName=entry.name)
        return {tuple(p["Values"]): p.get("StorageDescriptor", {}).get("Location", "")
                for page in pages for p in page["Partitions"]}

    def add_partitions(self, entry: TableEntry, paths: Dict[Tuple[str, ...], str]) -> None:
        items = sorted(paths.items())
        for start in range(0, len(items), CREATE_BATCH):
            batch = [{"Values": list(values), "StorageDescriptor": self._descriptor(entry, entry.partition_location(path))}
                     for values, path in items[start:start + CREATE_BATCH]]
            reply = self._glue.batch_create_partition(DatabaseName=entry.database, TableName=entry.name,
                                                      PartitionInputList=batch)
            _refuse_errors(reply, "AlreadyExistsException", f"adding partitions to {entry.database}.{entry.name}")

    def drop_partitions(self, entry: TableEntry, values: Iterable[Tuple[str, ...]]) -> None:
        items = sorted(values)
        for start in range(0, len(items), DELETE_BATCH):
            reply = self._glue.batch_delete_partition(
                DatabaseName=entry.database, TableName=entry.name,
                PartitionsToDelete=[{"Values": list(v)} for v in items[start:start + DELETE_BATCH]])
            _refuse_errors(reply, "EntityNotFoundException", f"dropping partitions of {entry.database}.{entry.name}")

    def tables(self, database: str) -> List[str]:
        pages = self._glue.get_paginator("get_tables").paginate(DatabaseName=database)
        return self._unless_missing(lambda: [t["Name"] for page in pages for t in page["TableList"]], default=[])

    def drop_database(self, database: str) -> None:
        """Drop an empty database; nothing if there is none."""
        self._unless_missing(lambda: self._glue.delete_database(Name=database))


def _refuse_errors(reply: dict, harmless: str, doing: str) -> None:
    """A batch call answers per item: one error other than `harmless` fails the sync."""
    errors = [e for e in reply.get("Errors", []) if e.get("ErrorDetail", {}).get("ErrorCode") != harmless]
    if errors:
        detail = errors[0].get("ErrorDetail", {})
        raise CatalogSyncError(f"AWS Glue refused {doing}: {detail.get('ErrorCode')}: {detail.get('ErrorMessage')} "
                               f"(and {len(errors) - 1} more)" if len(errors) > 1 else
                               f"AWS Glue refused {doing}: {detail.get('ErrorCode')}: {detail.get('ErrorMessage')}")
