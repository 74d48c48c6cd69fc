"""Small-file handling on insert, as Hudi's writer does it by default: new rows for a partition
first top up that partition's file groups smaller than `small_file_limit`, up to
`max_file_size`, as a new slice of the same file group; the rest go to new file groups.

A table appended to every hour would otherwise gain one file per partition and task per run.
The plan is made on the driver from the timeline alone (no Spark job): each writing task
takes the small file group at its own task number in its partition's list, so no two tasks
top up the same group, and a retried task tops up the same one with the same rows. How many
rows fit comes from the average record size of earlier commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Tuple

from ..format.commit import CommitMetadata
from ..format.file_group import FileGroup

MB = 1024 * 1024
DEFAULT_RECORD_BYTES = 1024  # Hudi's estimate before any commit says better
RECENT_COMMITS = 10  # the average record size comes from the newest commits with rows


@dataclass(frozen=True)
class FileSizing:
    small_file_limit: int = 100 * MB  # a base file below this many bytes takes new rows (0: never)
    max_file_size: int = 120 * MB  # ... until it would reach this many
    # An upsert whose tagged batch comes to at most this many bytes in Arrow writes in one
    # Spark job without a shuffle, each of its tasks holding the whole batch
    # (`upsert.small_write_task`); 0: always the shuffle to rewrite tasks. Kept modest for
    # small executors.
    small_write_bytes: int = 32 * MB
    # A write whose rows Spark sizes (held in memory) at most this many bytes brings them to the driver and
    # tags them there (one Spark job, no Python worker); an upsert whose touched file groups and
    # new rows come to at most this many is also written there, without a Spark job. A Spark
    # job's fixed cost is that of rewriting about 16 MB on the driver. 0: never on the driver.
    driver_write_bytes: int = 16 * MB


@dataclass(frozen=True)
class TopUp:
    """A small file group a writing task gives a new slice: its rows, then up to `rows` new ones."""

    file_id: str
    prev_commit: str  # the instant of its latest slice
    path: str  # that slice's base file
    rows: int


def average_record_bytes(commits: Iterable[Tuple[str, CommitMetadata]]) -> int:
    """Bytes per record over the newest commits that wrote rows (newest last in `commits`)."""
    size = records = seen = 0
    for _, metadata in reversed(list(commits)):
        written = [s for s in metadata.write_stats if s.numWrites]
        if not written:
            continue
        size += sum(s.fileSizeInBytes for s in written)
        records += sum(s.numWrites for s in written)
        seen += 1
        if seen == RECENT_COMMITS:
            break
    return max(1, size // records) if records else DEFAULT_RECORD_BYTES


def plan_top_ups(groups: Iterable[FileGroup], sizing: FileSizing, record_bytes: int) -> Dict[str, List[TopUp]]:
    """Per partition path, its small live file groups, smallest first (task i takes entry i)."""
    if sizing.small_file_limit <= 0:
        return {}
    small: Dict[str, List[Tuple[int, TopUp]]] = {}
    for group in groups:
        latest = group.latest
        room = (sizing.max_file_size - latest.size) // max(1, record_bytes)
        if latest.size < sizing.small_file_limit and room > 0:
            small.setdefault(group.partition, []).append(
                (latest.size, TopUp(group.file_id, latest.instant, latest.path, int(room))))
    return {p: [t for _, t in sorted(entries, key=lambda e: (e[0], e[1].file_id))] for p, entries in small.items()}
