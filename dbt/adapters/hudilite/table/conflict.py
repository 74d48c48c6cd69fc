"""Optimistic concurrency: whether a commit conflicts with the commits that completed while it
ran, as Hudi's file-level conflict resolution decides, plus record keys.

Writers never wait for each other while their Spark jobs run. At publish, under the table
lock, a writer compares its commit with every instant completed since it started:
- both gave a new slice to, or replaced, the same file group: the later one would silently
  drop the other's rows;
- it overwrites partitions (or the whole table) the other wrote into: the other's rows would
  survive an overwrite that was meant to replace them;
- on a table with record keys, both inserted the same new key: it would be stored twice;
- on an auto-keyed table, it deleted rows and inserted new ones (delete+insert) into a
  partition the other inserted into: the other's rows may share its unique_key and would
  survive beside the new ones;
- the other changed the table schema to one this write does not have: one of the two
  schemas would be lost (the later commit's wins).
Anything else (new file groups in any partition, disjoint file groups) commits side by side.
Pure over commit metadata; the key check reads keys through a function the caller passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Set, Tuple

from .format.commit import INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE, SPARK_SCHEMA_KEY, CommitMetadata

KeysOf = Callable[[List[str]], Set[str]]  # record keys stored in these base files


@dataclass(frozen=True)
class Footprint:
    """What a commit touched."""

    file_groups: Set[str]  # every file group written or replaced
    changed_groups: Set[str]  # existing file groups given a new slice or replaced
    rewritten_groups: Set[str]  # existing file groups whose rows it changed or deleted
    partitions: Set[str]  # partitions written into
    overwritten: Set[str]  # partitions an overwrite replaces
    whole_table: bool  # an overwrite of the whole table
    new_files: List[str]  # base files holding rows it inserted (new file groups, topped-up small files)
    schema: Optional[str]  # the table schema it committed (Spark JSON)

    @classmethod
    def of(cls, metadata: CommitMetadata) -> "Footprint":
        stats = metadata.write_stats
        replaced = {f for ids in metadata.replaced_file_ids.values() for f in ids}
        written = {s.partitionPath for s in stats}
        overwrite = metadata.operation in (INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE)
        return cls(
            file_groups={s.fileId for s in stats} | replaced,
            changed_groups={s.fileId for s in stats if s.prevCommit} | replaced,
            rewritten_groups={s.fileId for s in stats if s.prevCommit and not s.numInserts} | replaced,
            partitions=written,
            overwritten=(written | set(metadata.replaced_file_ids)) if overwrite else set(),
            whole_table=metadata.operation == INSERT_OVERWRITE_TABLE,
            new_files=sorted(s.path for s in stats if not s.prevCommit or s.numInserts),
            schema=metadata.extra.get(SPARK_SCHEMA_KEY),
        )


def find_conflict(ours: CommitMetadata, others: Iterable[Tuple[str, CommitMetadata]],
                  keys_of: Optional[KeysOf] = None, base_schema: Optional[str] = None) -> Optional[str]:
    """Why `ours` cannot commit after `others` (instant, metadata) completed meanwhile; None
    when it can. `keys_of` is given for tables with record keys; `base_schema` is the table
    schema when this write began."""
    mine = Footprint.of(ours)
    my_keys: Optional[Set[str]] = None
    for instant, metadata in others:
        theirs = Footprint.of(metadata)
        what = f"instant {instant} ({metadata.operation})"
        shared = sorted(mine.changed_groups & theirs.file_groups) or sorted(mine.file_groups & theirs.changed_groups)
        if shared:
            return f"{what} also rewrote file group {shared[0]} while this write ran"
        if mine.whole_table and theirs.partitions:
            return f"{what} wrote into the table this write overwrites while it ran"
        clash = sorted(mine.overwritten & theirs.partitions)
        if clash:
            return f"{what} wrote into partition '{clash[0]}', which this write overwrites, while it ran"
        if theirs.schema is not None and theirs.schema not in (base_schema, mine.schema):
            return f"{what} changed the table schema while this write ran"
        replacing = sorted(mine.partitions & theirs.partitions) if mine.rewritten_groups and mine.new_files else []
        if keys_of is None and replacing and theirs.new_files:
            return f"{what} inserted rows into partition '{replacing[0]}', where this write deletes and inserts, while it ran"
        if keys_of is not None and mine.new_files and theirs.new_files:
            if my_keys is None:
                my_keys = keys_of(mine.new_files)
            both = sorted(my_keys & keys_of(theirs.new_files))
            if both:
                return f"{what} also inserted record key '{both[0]}' while this write ran"
    return None
