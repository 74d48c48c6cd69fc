"""Write stats and the commit metadata stored in a completed commit or replacecommit."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

from . import avro_metadata

SCHEMA_KEY = "schema"  # Avro, read by Hudi readers
SPARK_SCHEMA_KEY = "hudilite.spark.schema"  # exact Spark types, read by hudilite
CHECKPOINT_PREFIX = "hudilite.checkpoint."  # + an upstream table: the instant up to which a write read its changes

INSERT = "INSERT"
UPSERT = "UPSERT"
DELETE = "DELETE"
INSERT_OVERWRITE = "INSERT_OVERWRITE"
INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"
CLUSTER = "CLUSTER"


@dataclass
class WriteStat:
    """One base file written by one task, in Hudi's HoodieWriteStat shape."""

    fileId: str
    path: str
    partitionPath: str
    prevCommit: Optional[str] = None
    numWrites: int = 0
    numInserts: int = 0
    numUpdateWrites: int = 0
    numDeletes: int = 0
    totalWriteBytes: int = 0
    fileSizeInBytes: int = 0
    totalWriteErrors: int = 0

    def to_json(self) -> dict:
        # Hudi writes "null" for a file group's first slice.
        body = asdict(self)
        body["prevCommit"] = self.prevCommit or "null"
        return body

    @classmethod
    def from_json(cls, body: dict) -> "WriteStat":
        known = {k: body[k] for k in cls.__dataclass_fields__ if k in body}
        if known.get("prevCommit") == "null":
            known["prevCommit"] = None
        return cls(**known)


@dataclass
class CommitMetadata:
    operation: str
    write_stats: List[WriteStat] = field(default_factory=list)
    replaced_file_ids: Dict[str, List[str]] = field(default_factory=dict)
    extra: Dict[str, str] = field(default_factory=dict)

    def partition_to_write_stats(self) -> Dict[str, List[WriteStat]]:
        out: Dict[str, List[WriteStat]] = {}
        for stat in self.write_stats:
            out.setdefault(stat.partitionPath, []).append(stat)
        return out

    @property
    def num_writes(self) -> int:
        return sum(s.numWrites for s in self.write_stats)

    def to_json(self, is_replace: bool) -> str:
        body = {
            "partitionToWriteStats": {
                p: [s.to_json() for s in stats] for p, stats in self.partition_to_write_stats().items()
            },
            "compacted": False,
            "extraMetadata": dict(self.extra),
            "operationType": self.operation,
        }
        if is_replace:
            body["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in self.replaced_file_ids.items()}
        return json.dumps(body, indent=2)

    def to_avro(self, is_replace: bool) -> bytes:
        """The completed file's content at timeline layout 2 (table versions 8, 9)."""
        record = avro_metadata.commit_record(json.loads(self.to_json(is_replace)), is_replace)
        schema = avro_metadata.REPLACE_COMMIT_FILE_METADATA if is_replace else avro_metadata.COMMIT_FILE_METADATA
        return avro_metadata.encode(schema, record)

    @classmethod
    def from_bytes(cls, data: bytes) -> "CommitMetadata":
        """A completed commit's file: JSON (timeline layout 1) or an Avro HoodieCommitMetadata /
        HoodieReplaceCommitMetadata container (layout 2, and Hudi's archives)."""
        if data[:4] == avro_metadata.MAGIC:
            return cls.from_record(avro_metadata.decode(data))
        return cls.from_json(data.decode("utf-8"))

    @classmethod
    def from_record(cls, record: dict) -> "CommitMetadata":
        """Commit metadata read from Avro: a write stat's null fields are absent ones."""
        body = dict(record)
        body["partitionToWriteStats"] = {p: [{k: v for k, v in s.items() if v is not None} for s in per or []]
                                         for p, per in (record.get("partitionToWriteStats") or {}).items()}
        return cls.from_body(body)

    @classmethod
    def from_json(cls, text: str) -> "CommitMetadata":
        if not text.strip():
            return cls(operation="UNKNOWN")
        return cls.from_body(json.loads(text))

    @classmethod
    def from_body(cls, body: dict) -> "CommitMetadata":
        stats = [
            WriteStat.from_json(s)
            for per_partition in (body.get("partitionToWriteStats") or {}).values()
            for s in per_partition
        ]
        return cls(
            operation=body.get("operationType") or "UNKNOWN",
            write_stats=stats,
            replaced_file_ids={p: list(ids) for p, ids in (body.get("partitionToReplaceFileIds") or {}).items()},
            extra=dict(body.get("extraMetadata") or {}),
        )
