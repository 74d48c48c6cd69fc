"""Rebuilds with a new layout: built beside the table, then swapped into its place.

A rebuild of `<schema>/<name>` (a `--full-refresh` that changes the partitioning, keys or
kind) builds its table in `<schema>/.hudilite_rebuilds/<name>`, while the table it replaces
stays readable with its history; `swap_in` then puts it in the table's place under the swap's
own lock (`<schema>/.hudilite_swaps/<name>/`), following a record of its steps there, so a
process killed on the way leaves the record, and the next look at the name finishes the swap.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Callable, Dict, Optional

from pyspark.sql import SparkSession

from ..table import ConfigurationError, HudiTable, Storage
from ..table.storage import faults
from ..table.format.instant import parse_instant_file_name
from ..table.storage.layout import PROPERTIES_FILE
from ..table.storage.lock import TableLock
from .names import folder_name

REBUILDS_DIR = ".hudilite_rebuilds"  # <location_root>/<schema>/.hudilite_rebuilds/<name>: the new table
SWAPS_DIR = ".hudilite_swaps"  # <location_root>/<schema>/.hudilite_swaps/<name>/: a swap's lock and record
SWAP_RECORD = "swap.json"  # {"instant": the rebuild's last completed instant file, "sha256": of its bytes}


class RebuildSwaps:
    """The rebuilds and swaps under one location_root (`storage`); `folder(schema, name)` is
    where a table lives there, relative to it (the storage catalog's names)."""

    def __init__(self, spark: SparkSession, storage: Storage, folder: Callable[..., str]):
        self.spark = spark
        self.storage = storage
        self.root = storage.base_path
        self.folder = folder

    def _table_path(self, schema: str, name: str) -> str:
        return posixpath.join(self.root, self.folder(schema, name))

    def rebuild_folder(self, schema: str, name: Optional[str] = None) -> str:
        return posixpath.join(self.folder(schema), REBUILDS_DIR, *([folder_name(name, "name").lower()] if name else []))

    def rebuild_path(self, schema: str, name: str) -> str:
        """Where a rebuild of `schema.name` with a new layout builds its table (emptied first: a
        rebuild that failed or was killed before its swap leaves one behind), while the table it
        replaces stays readable with its history. A swap of the name under way (another
        process's) is waited for, or finished when cut short, before the folder is emptied."""
        folder = self.rebuild_folder(schema, name)
        with self._lock(schema, name) as lock:
            self._finish_locked(schema, name, lock)
            self.storage.delete_dir(folder)
        return posixpath.join(self.root, folder)

    def discard(self, schema: str, name: str) -> None:
        """The rebuild of `schema.name` goes (it failed, or the name is dropped or renamed: a
        committed rebuild must not take its place)."""
        self.storage.delete_dir(self.rebuild_folder(schema, name))

    def forget(self, schema: str, name: str) -> None:
        """The record of a swap of a dropped name goes."""
        self.storage.delete_file(self._record_path(schema, name))

    def swap_in(self, schema: str, name: str, instant: str, drop_entry: Callable[[], None]) -> None:
        """Put the table at `rebuild_path`, committed at `instant`, in the place of `schema.name`
        (if it held a table: a model that was a view has none). Under the swap's own lock:
        1. a record of the rebuild's last commit (`swap.json`, phase "delete"), once the name's
           catalog entry is dropped (`drop_entry`);
        2. the old table deleted, its hoodie.properties first, under its own lock (so no commit
           of it is half published, and it stops being a table before it is partial); then the
           record's phase is "copy", and from then on the name's folder is never emptied again;
        3. the rebuild moved in (a rename; on an object store copies, hoodie.properties last,
           then the rebuild's objects deleted);
        4. the record deleted.
        A process killed on the way leaves the record: the next look at the name (or the next
        rebuild of it) finishes the swap; killed before step 2 began, the old table stays whole."""
        staged = posixpath.join(self.root, self.rebuild_folder(schema, name))
        with self._lock(schema, name) as lock:
            record = _last_commit(self.spark, staged)
            if record is None or _instant_of(record) != instant:
                raise ConfigurationError(f"{schema}.{name}: its rebuild is gone (another rebuild of it started "
                                         "meanwhile); the table is as it was")
            drop_entry()
            self._write_record(schema, name, dict(record, phase="delete"))
            self._replace(schema, name, dict(record, phase="delete"), lock)

    def finish(self, schema: str, name: str) -> bool:
        """Finish a swap cut short (its record is there); True when the name holds a table after."""
        try:
            record_path = self._record_path(schema, name)
        except ConfigurationError:
            return False
        if _read_json(self.storage, record_path) is None:  # the common case: one read
            return False
        with self._lock(schema, name) as lock:
            self._finish_locked(schema, name, lock)
        return HudiTable.exists(self._table_path(schema, name))

    def _lock(self, schema: str, name: str) -> TableLock:
        """The lock of swaps of `schema.name`, in `<schema>/.hudilite_swaps/<name>/` with its record."""
        return TableLock(Storage(posixpath.join(self.root, posixpath.dirname(self._record_path(schema, name)))))

    def _record_path(self, schema: str, name: str) -> str:
        return posixpath.join(self.folder(schema), SWAPS_DIR, folder_name(name, "name").lower(), SWAP_RECORD)

    def _write_record(self, schema: str, name: str, record: Dict[str, str]) -> None:
        path = self._record_path(schema, name)
        self.storage.write_atomic(path, json.dumps(record).encode(), posixpath.dirname(path))

    def _replace(self, schema: str, name: str, record: Dict[str, str], lock: TableLock) -> None:
        """Steps 2-4 of `swap_in`, from the record's phase: each may run again after a kill."""
        folder = self.folder(schema, name)
        if record["phase"] == "delete":
            lock.check()
            if HudiTable.exists(self._table_path(schema, name)):
                with TableLock(Storage(self._table_path(schema, name))):  # writers check it under this lock
                    self.storage.delete_file(posixpath.join(folder, PROPERTIES_FILE))
            self.storage.delete_dir(folder)  # the rest, or what a deletion cut short left
            self._write_record(schema, name, dict(record, phase="copy"))
        faults.reach("swap")
        lock.check()
        if self.storage.is_local:  # a rename needs the name free (a late writer's lock file may be back)
            self.storage.delete_dir(folder)  # (copies on a store go over such a file: no emptying there)
        self.storage.move_dir(self.rebuild_folder(schema, name), folder, last=PROPERTIES_FILE)
        self.storage.delete_file(self._record_path(schema, name))

    def _finish_locked(self, schema: str, name: str, lock: TableLock) -> None:
        record = _read_json(self.storage, self._record_path(schema, name))
        if record is None or _holds(self._table_path(schema, name), record):
            pass  # no swap, or done but for its record
        elif _holds(posixpath.join(self.root, self.rebuild_folder(schema, name)), record):
            self._replace(schema, name, record, lock)
            return
        elif record.get("phase") == "copy" or not HudiTable.exists(self._table_path(schema, name)):
            self.storage.delete_dir(self.folder(schema, name))  # the rebuild went: what was copied is no table
        self.storage.delete_file(self._record_path(schema, name))


def _last_commit(spark: SparkSession, path: str) -> Optional[Dict[str, str]]:
    """What identifies the Hudi table at `path` by its last completed instant (its file name
    and a digest of its bytes: no other table holds the same), or None when `path` holds no
    table with a completed instant."""
    try:
        if not HudiTable.exists(path):
            return None
        timeline = HudiTable.open(spark, path).context.timeline
        latest = timeline.latest_completed()
    except Exception:  # noqa: BLE001 - a half-created table is none
        return None
    if latest is None:
        return None
    file = timeline.path_of(latest)
    return {"instant": file, "sha256": hashlib.sha256(Storage(path).read_bytes(file)).hexdigest()}


def _instant_of(record: Dict[str, str]) -> Optional[str]:
    """The instant time of the completed instant file a record names (either timeline layout)."""
    parsed = parse_instant_file_name(posixpath.basename(record["instant"]))
    return parsed.timestamp if parsed is not None else None


def _holds(path: str, record: Dict[str, str]) -> bool:
    """The table at `path` is whole (its hoodie.properties there) and holds the commit `record` names."""
    storage = Storage(path)
    try:
        return (storage.exists(PROPERTIES_FILE)
                and hashlib.sha256(storage.read_bytes(record["instant"])).hexdigest() == record["sha256"])
    except (FileNotFoundError, KeyError, TypeError):
        return False


def _read_json(storage: Storage, rel: str) -> Optional[dict]:
    try:
        return json.loads(storage.read_bytes(rel))
    except (FileNotFoundError, ValueError):
        return None
