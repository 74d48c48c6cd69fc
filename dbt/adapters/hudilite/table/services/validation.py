"""Checks that a table is well-formed: what `HudiTable.validate()` and `hudilite validate` report.

Pure over what the caller gathered (properties, completed commits, files on storage), so
each rule is unit-tested without Spark or storage.
"""

from __future__ import annotations

import posixpath
from typing import Dict, Iterable, List, Set, Tuple

from ..format.commit import CommitMetadata
from ..format.file_group import BaseFile, parse_base_file_name
from ..format.instant import Instant
from ..format.properties import READ_VERSIONS
from ..storage.layout import PARTITION_METADATA, is_hoodie_path

REQUIRED_PROPERTIES = ("hoodie.table.name", "hoodie.table.type", "hoodie.table.version", "hoodie.timeline.layout.version")


def check_table(properties: Dict[str, str], commits: List[Tuple[Instant, CommitMetadata]],
                pending: List[Instant], files_on_disk: Dict[str, int], required: Set[str],
                archived: Iterable[BaseFile] = ()) -> List[str]:
    """Problems found, one sentence each; empty when the table is well-formed.

    `files_on_disk` maps each file outside `.hoodie/` (relative path) to its size; `required`
    holds the files some readable snapshot reads (all committed files until a clean);
    `archived` the slices archived instants left readable."""
    problems: List[str] = []
    for key in REQUIRED_PROPERTIES:
        if key not in properties:
            problems.append(f"hoodie.properties lacks {key}")
    version = properties.get("hoodie.table.version", "6")
    if version not in READ_VERSIONS:
        problems.append(f"table version {version} (hudilite reads versions {', '.join(READ_VERSIONS)})")
    elif properties.get("hoodie.timeline.layout.version", "1") != ("2" if int(version) >= 8 else "1"):
        problems.append(f"table version {version} with timeline layout {properties.get('hoodie.timeline.layout.version')} "
                        "(Hudi keeps layout 1 at version 6 and layout 2 from version 8)")
    for instant in pending:
        problems.append(f"instant {instant.timestamp} ({instant.action}) is {instant.state.lower()}: a write did not "
                        "finish; the next write rolls it back")

    committed: Dict[str, Tuple[str, int]] = {f.path: (f.instant, f.size) for f in archived}  # path -> (instant, size)
    known_groups = {(f.partition, f.file_id) for f in archived}
    for instant, metadata in commits:
        for stat in metadata.write_stats:
            name = parse_base_file_name(stat.path)
            where = f"instant {instant.timestamp}: {stat.path}"
            if name is None:
                problems.append(f"{where} is not a base-file name <fileId>_<token>_<instant>.parquet")
                continue
            if name.instant != instant.timestamp or name.file_id != stat.fileId:
                problems.append(f"{where} names instant {name.instant} / file id {name.file_id}, "
                                f"its write stat says {instant.timestamp} / {stat.fileId}")
            if posixpath.dirname(stat.path) != stat.partitionPath:
                problems.append(f"{where} lies outside its partition '{stat.partitionPath}'")
            committed[stat.path] = (instant.timestamp, stat.fileSizeInBytes)
            known_groups.add((stat.partitionPath, stat.fileId))
        for partition, file_ids in metadata.replaced_file_ids.items():
            for file_id in file_ids:
                if (partition, file_id) not in known_groups:
                    problems.append(f"instant {instant.timestamp} replaces unknown file group {partition}/{file_id}")

    for path, (instant, size) in sorted(committed.items()):
        if path not in files_on_disk:
            if path in required:
                problems.append(f"committed file {path} (instant {instant}) is missing from storage")
        elif size and files_on_disk[path] != size:
            problems.append(f"committed file {path} is {files_on_disk[path]} bytes, its commit says {size}")

    pending_times = {i.timestamp for i in pending}
    partitions = set()
    for path in sorted(files_on_disk):
        folder, base = posixpath.split(path)
        if base == PARTITION_METADATA or not base.endswith(".parquet"):
            continue
        partitions.add(folder)
        if path in committed:
            continue
        name = parse_base_file_name(path)
        if name is not None and name.instant in pending_times:
            continue  # reported with its pending instant
        problems.append(f"stray file {path}: no completed instant wrote it (Hudi readers may fail on it)")
    for folder in sorted(partitions):
        if posixpath.join(folder, PARTITION_METADATA).lstrip("/") not in files_on_disk:
            problems.append(f"partition '{folder or '<table root>'}' has no {PARTITION_METADATA}")
    return problems


def files_outside_hoodie(listing: Iterable[Tuple[str, int]]) -> Dict[str, int]:
    return {path: size for path, size in listing if not is_hoodie_path(path)}
