"""The Avro-encoded timeline metadata of Hudi's table services: cleaner plans and clean
metadata, savepoints, restore plans and restore metadata, clustering plans; and the records
of Hudi's archived timeline (HoodieArchivedMetaEntry, with commit metadata as Avro).

Hudi serializes each of these as an Avro object container file (schema embedded, no codec)
in the instant's file under `.hoodie/`; commits and replacecommits stay JSON at table version 6
and are Avro too from version 8 (`CommitMetadata.from_bytes`). The schemas are
Hudi's own (`org.apache.hudi.avro.model`), so Java Hudi reads what we write and we read what
it writes.
"""

from __future__ import annotations

import io
from typing import Dict

import fastavro

_NAMESPACE = "org.apache.hudi.avro.model"
MAGIC = b"Obj\x01"  # how an Avro object container file begins
_STRINGS = {"type": "array", "items": "string"}


def _record(name: str, fields: list) -> dict:
    return {"type": "record", "name": name, "namespace": _NAMESPACE, "fields": fields}


def _optional(name: str, avro_type, default=None) -> dict:
    return {"name": name, "type": ["null", avro_type], "default": default}


_VERSION = {"name": "version", "type": ["int", "null"], "default": 1}
_ACTION_INSTANT = _record("HoodieActionInstant", [
    {"name": "timestamp", "type": "string"}, {"name": "action", "type": "string"}, {"name": "state", "type": "string"}])
_CLEAN_FILE_INFO = _record("HoodieCleanFileInfo", [
    _optional("filePath", "string"), _optional("isBootstrapBaseFile", "boolean")])
_CLEAN_PARTITION = _record("HoodieCleanPartitionMetadata", [
    {"name": "partitionPath", "type": "string"},
    {"name": "policy", "type": "string"},
    {"name": "deletePathPatterns", "type": _STRINGS},
    {"name": "successDeleteFiles", "type": _STRINGS},
    {"name": "failedDeleteFiles", "type": _STRINGS},
    _optional("isPartitionDeleted", "boolean")])
_INSTANT_INFO = _record("HoodieInstantInfo", [
    {"name": "commitTime", "type": "string"}, {"name": "action", "type": "string"}])
_ROLLBACK_PARTITION = _record("HoodieRollbackPartitionMetadata", [
    {"name": "partitionPath", "type": "string"},
    {"name": "successDeleteFiles", "type": _STRINGS},
    {"name": "failedDeleteFiles", "type": _STRINGS},
    _optional("rollbackLogFiles", {"type": "map", "values": "long"}),
    _optional("writtenLogFiles", {"type": "map", "values": "long"})])
_ROLLBACK = _record("HoodieRollbackMetadata", [
    {"name": "startRollbackTime", "type": "string"},
    {"name": "timeTakenInMillis", "type": "long"},
    {"name": "totalFilesDeleted", "type": "int"},
    {"name": "commitsRollback", "type": _STRINGS},
    {"name": "partitionMetadata", "type": {"type": "map", "values": _ROLLBACK_PARTITION}},
    _VERSION,
    {"name": "instantsRollback", "type": {"type": "array", "items": _INSTANT_INFO}, "default": []}])

CLEANER_PLAN = _record("HoodieCleanerPlan", [
    _optional("earliestInstantToRetain", _ACTION_INSTANT),
    {"name": "policy", "type": "string"},
    _optional("filesToBeDeletedPerPartition", {"type": "map", "values": _STRINGS}),  # deprecated by Hudi
    {"name": "version", "type": ["int", "null"], "default": 1},
    _optional("filePathsToBeDeletedPerPartition", {"type": "map", "values": {"type": "array", "items": _CLEAN_FILE_INFO}}),
    _optional("partitionsToBeDeleted", _STRINGS)])
CLEAN_METADATA = _record("HoodieCleanMetadata", [
    {"name": "policy", "type": "string", "default": ""},
    {"name": "startCleanTime", "type": "string"},
    {"name": "timeTakenInMillis", "type": "long"},
    {"name": "totalFilesDeleted", "type": "int"},
    {"name": "earliestCommitToRetain", "type": "string"},
    {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
    {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
    _VERSION,
    _optional("bootstrapPartitionMetadata", {"type": "map", "values": "HoodieCleanPartitionMetadata"})])
SAVEPOINT_METADATA = _record("HoodieSavepointMetadata", [
    {"name": "savepointedBy", "type": "string"},
    {"name": "savepointedAt", "type": "long"},
    {"name": "comments", "type": "string"},
    {"name": "partitionMetadata", "type": {"type": "map", "values": _record("HoodieSavepointPartitionMetadata", [
        {"name": "partitionPath", "type": "string"},
        {"name": "savepointDataFile", "type": _STRINGS}])}},
    _VERSION])
RESTORE_PLAN = _record("HoodieRestorePlan", [
    {"name": "instantsToRollback", "type": {"type": "array", "items": _INSTANT_INFO}, "default": []},
    {"name": "version", "type": ["int", "null"], "default": 2},
    {"name": "savepointToRestoreTimestamp", "type": ["string", "null"], "default": None}])
RESTORE_METADATA = _record("HoodieRestoreMetadata", [
    {"name": "startRestoreTime", "type": "string"},
    {"name": "timeTakenInMillis", "type": "long"},
    {"name": "instantsToRollback", "type": _STRINGS},
    {"name": "hoodieRestoreMetadata", "type": {"type": "map", "values": {"type": "array", "items": ["null", _ROLLBACK]}}},
    _VERSION,
    {"name": "restoreInstantInfo", "type": {"type": "array", "items": "HoodieInstantInfo"}, "default": []},
    _optional("extraMetadata", {"type": "map", "values": "string"})])

_SLICE_INFO = _record("HoodieSliceInfo", [
    _optional("dataFilePath", "string"),
    _optional("deltaFilePaths", _STRINGS),
    {"name": "fileId", "type": ["null", "string"]},
    _optional("partitionPath", "string"),
    _optional("bootstrapFilePath", "string"),
    _VERSION])
_CLUSTERING_GROUP = _record("HoodieClusteringGroup", [
    _optional("slices", {"type": "array", "items": _SLICE_INFO}),
    _optional("metrics", {"type": "map", "values": "double"}),
    {"name": "numOutputFileGroups", "type": ["int", "null"], "default": 1},
    _VERSION])
_CLUSTERING_STRATEGY = _record("HoodieClusteringStrategy", [
    _optional("strategyClassName", "string"),
    _optional("strategyParams", {"type": "map", "values": "string"}),
    _VERSION])
_CLUSTERING_PLAN = _record("HoodieClusteringPlan", [
    _optional("inputGroups", {"type": "array", "items": _CLUSTERING_GROUP}),
    {"name": "strategy", "type": [_CLUSTERING_STRATEGY, "null"], "default": None},
    _optional("extraMetadata", {"type": "map", "values": "string"}),
    _VERSION,
    _optional("preserveHoodieMetadata", "boolean")])
REQUESTED_REPLACE_METADATA = _record("HoodieRequestedReplaceMetadata", [
    {"name": "operationType", "type": ["null", "string"], "default": None},
    {"name": "clusteringPlan", "type": [_CLUSTERING_PLAN, "null"], "default": None},
    _optional("extraMetadata", {"type": "map", "values": "string"}),
    _VERSION])

# The archived timeline (`archival`): each archived instant state is a HoodieArchivedMetaEntry
# record in an Avro data block of `.hoodie/archived/.commits_.archive.N_<token>` (`log_format`).
# Commits go in as Avro records of their JSON metadata. These writer schemas carry the fields
# we fill; Hudi's reader resolves them against its own (every other field has a default).
WRITE_STAT = _record("HoodieWriteStat", [
    _optional("fileId", "string"), _optional("path", "string"), _optional("prevCommit", "string"),
    _optional("numWrites", "long"), _optional("numDeletes", "long"), _optional("numUpdateWrites", "long"),
    _optional("totalWriteBytes", "long"), _optional("totalWriteErrors", "long"), _optional("partitionPath", "string"),
    _optional("totalLogRecords", "long"), _optional("totalLogFiles", "long"),
    _optional("totalUpdatedRecordsCompacted", "long"), _optional("numInserts", "long"),
    _optional("totalLogBlocks", "long"), _optional("totalCorruptLogBlock", "long"),
    _optional("totalRollbackBlocks", "long"), _optional("fileSizeInBytes", "long"),
    _optional("logVersion", "int"), _optional("logOffset", "long"), _optional("baseFile", "string"),
    _optional("logFiles", _STRINGS), _optional("cdcStats", {"type": "map", "values": "long"}),
    _optional("prevBaseFile", "string"), _optional("minEventTime", "long"), _optional("maxEventTime", "long"),
    _optional("totalLogFilesCompacted", "long"), _optional("totalLogReadTimeMs", "long"),
    _optional("totalLogSizeCompacted", "long"), _optional("tempPath", "string"), _optional("numUpdates", "long")])
WRITE_STAT_FIELDS = {f["name"]: f["type"][1] for f in WRITE_STAT["fields"]}
COMMIT_METADATA = _record("HoodieCommitMetadata", [
    _optional("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": WRITE_STAT}}),
    _optional("compacted", "boolean"),
    _optional("extraMetadata", {"type": "map", "values": "string"}),
    _VERSION,
    _optional("operationType", "string")])
REPLACE_COMMIT_METADATA = _record("HoodieReplaceCommitMetadata", [
    _optional("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": "HoodieWriteStat"}}),
    _optional("extraMetadata", {"type": "map", "values": "string"}),
    _VERSION,
    _optional("operationType", "string"),
    _optional("partitionToReplaceFileIds", {"type": "map", "values": _STRINGS})])
# Hudi's classes mark their strings as Java Strings, and Hudi 1.1's archived timeline casts
# stateTransitionTime read with the writer's schema to one: so do we, or it reads a Utf8.
_JAVA_STRING = {"type": "string", "avro.java.string": "String"}
ARCHIVED_META_ENTRY = _record("HoodieArchivedMetaEntry", [
    _optional("hoodieCommitMetadata", COMMIT_METADATA),
    _optional("commitTime", _JAVA_STRING),
    _optional("actionType", _JAVA_STRING),
    _VERSION,
    _optional("actionState", _JAVA_STRING),
    _optional("hoodieReplaceCommitMetadata", REPLACE_COMMIT_METADATA),
    _optional("stateTransitionTime", _JAVA_STRING)])



def _long(value):
    return None if value is None or isinstance(value, bool) else int(value)


def _avro_stat(stat: dict) -> dict:
    """A write stat of a commit's JSON as HoodieWriteStat; fields outside the schema are dropped."""
    out = {}
    for name, avro_type in WRITE_STAT_FIELDS.items():
        value = stat.get(name)
        if value is None:
            out[name] = None
        elif avro_type in ("long", "int"):
            out[name] = _long(value) if isinstance(value, (int, float, str)) else None
        elif avro_type == "string":
            out[name] = str(value)
        elif isinstance(avro_type, dict) and avro_type["type"] == "array":
            out[name] = [str(v) for v in value] if isinstance(value, list) else None
        elif isinstance(avro_type, dict) and avro_type["type"] == "map":
            out[name] = {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else None
    return out


def commit_record(body: dict, is_replace: bool) -> dict:
    """A commit's metadata (the JSON form's fields) as a HoodieCommitMetadata record, or a
    HoodieReplaceCommitMetadata one: what Hudi's archiver stores, and layout 2's completed file."""
    stats = {str(p): [_avro_stat(s) for s in (per or [])]
             for p, per in (body.get("partitionToWriteStats") or {}).items() if p is not None}
    extra = {str(k): "" if v is None else str(v) for k, v in (body.get("extraMetadata") or {}).items()}
    record = {"partitionToWriteStats": stats, "extraMetadata": extra, "version": 1,
              "operationType": body.get("operationType"), "compacted": bool(body.get("compacted") or False)}
    if is_replace:
        record["partitionToReplaceFileIds"] = {str(p): [str(i) for i in ids or []]
                                               for p, ids in (body.get("partitionToReplaceFileIds") or {}).items()}
    return record


def _java_strings(avro_type):
    """`avro_type` with its strings (and maps' keys) marked as Java Strings, as Hudi's classes are."""
    if avro_type == "string":
        return _JAVA_STRING
    if isinstance(avro_type, list):
        return [_java_strings(t) for t in avro_type]
    if isinstance(avro_type, dict):
        out = dict(avro_type)
        if out["type"] == "record":
            out["fields"] = [{**f, "type": _java_strings(f["type"])} for f in out["fields"]]
        elif out["type"] == "array":
            out["items"] = _java_strings(out["items"])
        elif out["type"] == "map":
            out.update(values=_java_strings(out["values"]), **{"avro.java.string": "String"})
        return out
    return avro_type


# Timeline layout 2 (table versions 8, 9) keeps a completed commit's metadata in its file as Avro,
# with the writer schemas Hudi 1.x's classes have: every field of HoodieWriteStat (runtimeStats
# too), `compacted` in a replacecommit as well, Java strings.
_RUNTIME_STATS = _record("HoodieRuntimeStats", [
    _optional("totalScanTime", "long"), _optional("totalCreateTime", "long"), _optional("totalUpsertTime", "long")])
_STAT_FIELDS = WRITE_STAT["fields"]
_WRITE_STAT_V2 = _java_strings(_record("HoodieWriteStat", _STAT_FIELDS[:25] + [_optional("runtimeStats", _RUNTIME_STATS)]
                                       + _STAT_FIELDS[25:]))
_COMMIT_FIELDS_V2 = [
    _optional("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": _WRITE_STAT_V2}}),
    _optional("compacted", "boolean"),
    _optional("extraMetadata", {"type": "map", "values": "string"}),
    _VERSION,
    _optional("operationType", "string")]
COMMIT_FILE_METADATA = _java_strings(_record("HoodieCommitMetadata", _COMMIT_FIELDS_V2))
REPLACE_COMMIT_FILE_METADATA = _java_strings(_record("HoodieReplaceCommitMetadata", _COMMIT_FIELDS_V2 + [
    _optional("partitionToReplaceFileIds", {"type": "map", "values": _STRINGS})]))

_PARSED: Dict[int, dict] = {}


def encode(schema: dict, record: dict) -> bytes:
    """One record as Hudi writes timeline metadata: an Avro container file, uncompressed."""
    parsed = _PARSED.get(id(schema))  # the schemas are this module's constants
    if parsed is None:
        parsed = _PARSED[id(schema)] = fastavro.parse_schema(schema)
    out = io.BytesIO()
    fastavro.writer(out, parsed, [record], codec="null")
    return out.getvalue()


def decode(data: bytes) -> dict:
    """The record of an Avro container file written by `encode` or by Hudi (the writer's
    schema is embedded, so older and newer Hudi versions' files read alike)."""
    records = list(fastavro.reader(io.BytesIO(data)))
    if len(records) != 1:
        raise ValueError(f"expected one Avro record, found {len(records)}")
    return records[0]
