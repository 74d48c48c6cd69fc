"""The row layouts a writer task receives: named meta columns first, then the data columns in
table order. Every producer builds its rows with `RowLayout.select` and every task reads them
with `RowLayout.meta_column` / `RowLayout.data`, so a new meta column is added here once.

- `INSERT` / `INSERT_AUTO_KEYS` (new file groups): the row's index in its task (with the
  partition, the sort that groups a task's rows by partition keeps their input order), the
  record key unless it is auto-generated, the partition path (a null column when the task
  makes it from the partition columns, `keygen.PartitionFormat`). An unpartitioned table's rows
  need no sort and carry neither (`*_UNPARTITIONED`): less to move from the JVM per row.
- `REWRITE` (new slices of existing file groups, rows grouped by file group): the fileId,
  the commit time and seqno (null for a changed row, which gets this instant's), the record
  key, the partition path.
- `SLICE`: the rows of one new slice as a task hands them to the slice writer (`REWRITE`
  without the fileId); what `merge.merge_slice` returns.
- `CLUSTER_ROWS` (clustering: rows moved, unchanged, into new file groups): the clustering
  group's number, then `SLICE`'s columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import pyarrow as pa

from .schema import COMMIT_SEQNO, COMMIT_TIME, PARTITION_PATH, RECORD_KEY

ROW_INDEX = "_hudilite_row_index"  # shipped to the writer, not written
FILE_ID = "_hudilite_file_id"
CLUSTER_GROUP = "_hudilite_cluster_group"


@dataclass(frozen=True)
class RowLayout:
    name: str
    meta: Tuple[str, ...]

    @property
    def data_start(self) -> int:
        return len(self.meta)

    def select(self, meta: Dict[str, object], data: Sequence[object]) -> List[object]:
        """Spark columns in this layout: `meta` maps each meta column name to its column."""
        missing = [n for n in self.meta if n not in meta]
        if missing or len(meta) != len(self.meta):
            raise ValueError(f"{self.name} rows take meta columns {list(self.meta)}, got {sorted(meta)}")
        return [meta[n].alias(n) for n in self.meta] + list(data)

    def check(self, schema: pa.Schema) -> None:
        """Tasks call this on their first batch: a producer out of step fails loudly."""
        if tuple(schema.names[: self.data_start]) != self.meta:
            raise ValueError(f"{self.name} rows must start with {list(self.meta)}, got {schema.names[: self.data_start]}")

    def meta_column(self, batch, name: str) -> pa.Array:
        return batch.column(self.meta.index(name))

    def data(self, batch) -> List[pa.Array]:
        return list(batch.columns[self.data_start:])

    def data_fields(self, schema: pa.Schema) -> List[pa.Field]:
        return list(schema)[self.data_start:]


INSERT = RowLayout("insert", (ROW_INDEX, RECORD_KEY, PARTITION_PATH))
INSERT_AUTO_KEYS = RowLayout("insert with auto keys", (ROW_INDEX, PARTITION_PATH))
INSERT_UNPARTITIONED = RowLayout("insert, unpartitioned", (RECORD_KEY,))
INSERT_AUTO_KEYS_UNPARTITIONED = RowLayout("insert with auto keys, unpartitioned", ())
SLICE = RowLayout("slice", (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH))
REWRITE = RowLayout("rewrite", (FILE_ID,) + SLICE.meta)
CLUSTER_ROWS = RowLayout("cluster", (CLUSTER_GROUP,) + SLICE.meta)


def insert_layout(auto_keys: bool, partitioned: bool) -> RowLayout:
    if partitioned:
        return INSERT_AUTO_KEYS if auto_keys else INSERT
    return INSERT_AUTO_KEYS_UNPARTITIONED if auto_keys else INSERT_UNPARTITIONED
