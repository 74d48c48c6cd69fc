"""Storage is the catalog: every hudilite table under `location_root` is a Spark table.

A table at `<location_root>/<schema>/<name>` is registered in the Spark session's catalog as
`<schema>.<name>`: an external parquet table whose path is a glob naming exactly the base
files of its latest snapshot, with the table's data schema given (no meta columns: those are
in `meta_view`). Plain SQL, `ref()` and
`describe` see it like any table, and Spark's native scan reads it. Views are kept beside
the tables as their SQL text.

Entries are made when a statement names them, not up front: before a statement runs, every
table or view it names (through views too) is registered, or re-registered when another
writer (another process, another host) committed since. So start-up does not grow with the
number of tables, a new `dbt run` resolves what an earlier one built, and a long-lived
process never reads a snapshot older than the statement.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import threading
import uuid
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame, SparkSession

from .sql.reader import read_statement
from .table import ConfigurationError, HudiTable, Storage, is_connect, quote
from .table.storage import faults
from .table.storage.layout import HOODIE_DIR, LOCK_FILE, PROPERTIES_FILE
from .table.storage.lock import TableLock

VIEWS_DIR = ".hudilite_views"  # <location_root>/<schema>/.hudilite_views/<view>.sql
DOCS_DIR = ".hudilite_docs"  # <location_root>/<schema>/.hudilite_docs/<relation>.json: persist_docs
# A rebuild that changes a table's layout is built beside it, then swapped in (`swap_in`):
REBUILDS_DIR = ".hudilite_rebuilds"  # <location_root>/<schema>/.hudilite_rebuilds/<name>: the new table
SWAPS_DIR = ".hudilite_swaps"  # <location_root>/<schema>/.hudilite_swaps/<name>/: a swap's lock and record
SWAP_RECORD = "swap.json"  # {"instant": the rebuild's last completed instant file, "sha256": of its bytes}
READ_ONLY_OPTION = "maxRecordsPerFile"  # see `register`
_GLOB_SPECIAL = re.compile(r"([\\{}\[\]*?,])")
_FOLDER_SPECIAL = re.compile(r"[\\{}\[\]*?,:]")


def snapshot_glob(base_uri: str, relative_paths: List[str]) -> str:
    """One Hadoop glob naming exactly these files (braces may span folders).

    Hadoop ignores backslash escapes inside braces, so a glob character in a partition
    folder becomes `?` (any one character), and so does `:` (Hadoop would read what precedes
    it as a URI scheme). The match stays exact: base-file names carry a UUID, so no other
    folder holds a file of the same name."""
    alternatives = []
    for path in relative_paths:
        folder, name = posixpath.split(path)
        if _GLOB_SPECIAL.search(name):
            raise ValueError(f"not a base-file name: {name}")
        alternatives.append(posixpath.join(_FOLDER_SPECIAL.sub("?", folder), name) if folder else name)
    escaped_base = _GLOB_SPECIAL.sub(r"\\\1", base_uri)  # outside braces, escapes work
    return f"{escaped_base}/{{{','.join(alternatives)}}}"


def _canonical(schema: str, name: str) -> Tuple[str, str]:
    """How this catalog keys a name: lower case, as Spark's catalog does (see `_spelled`)."""
    return schema.lower(), name.lower()


def folder_name(part: str, kind: str) -> str:
    """`part` as one folder name, or a ConfigurationError naming it."""
    if not part or part.startswith(".") or any(c in part for c in "/\\:\0"):
        raise ConfigurationError(f"{kind} {part!r} cannot be a folder under location_root: use a plain name "
                                 "(no '/', '\\', ':', no leading '.')")
    return part


class StorageCatalog:
    _instances: Dict[Tuple[int, str], "StorageCatalog"] = {}
    _instances_lock = threading.Lock()

    @classmethod
    def get(cls, spark: SparkSession, location_root: str) -> "StorageCatalog":
        """The catalog of `location_root` for this session."""
        key = (id(spark), location_root)
        with cls._instances_lock:
            if key not in cls._instances:
                cls._instances[key] = cls(spark, location_root)
                cls._instances[key].create_namespaces()
            return cls._instances[key]

    def create_namespaces(self) -> None:
        """A Spark namespace for every schema on storage: few, and `USE <schema>` needs one
        before any of its tables is named."""
        for schema in self.schemas():
            self.spark.sql(f"create namespace if not exists {quote(schema)}")

    def __init__(self, spark: SparkSession, location_root: str):
        self.spark = spark
        self.storage = Storage(location_root)
        self.root = self.storage.base_path
        self._lock = threading.RLock()
        # (schema, name) -> what its Spark entry shows: ("table", latest instant) or ("view", sql)
        self._entries: Dict[Tuple[str, str], tuple] = {}
        # (schema, name) -> what Spark's catalog showed of a table's entry right after we made it
        # (`_identity`): anything else found there later was put there behind our back
        self._identities: Dict[Tuple[str, str], str] = {}
        # folder -> {lower-cased name: name} of what it holds in capitals (`_spelled`)
        self._capitalised: Dict[str, Dict[str, str]] = {}

    # ---- where things live ------------------------------------------------------------------
    def folder(self, schema: str, name: Optional[str] = None) -> str:
        """`<schema>[/<name>]` under location_root; names that would lead anywhere else (empty,
        `.`, `..`, a path, a hidden folder of ours) are refused before any path is built."""
        schema_folder = self._spelled("", folder_name(schema, "schema"))
        if name is None:
            return schema_folder
        return posixpath.join(schema_folder, self._spelled(schema_folder, folder_name(name, "name")))

    def _spelled(self, parent: str, part: str) -> str:
        """Names are lower case on storage, as Spark's catalog and dbt-spark keep them: a model
        `MODEL` is the folder `model`, and `MODEL`, `Model` and `model` name one table. A folder
        or file an older hudilite made in capitals keeps its spelling, found by one listing of
        its parent per catalog (nothing new is made in capitals, so the listing stays true)."""
        with self._lock:
            if parent not in self._capitalised:
                self._capitalised[parent] = {n.lower(): n for n in self.storage.list_names(parent) if n != n.lower()}
            return self._capitalised[parent].get(part.lower(), part.lower())

    def _forget_spellings(self) -> None:
        """After a drop or rename: a capitalised folder that went must not be made again."""
        with self._lock:
            self._capitalised.clear()

    def table_path(self, schema: str, name: str) -> str:
        return posixpath.join(self.root, self.folder(schema, name))

    def is_table(self, schema: str, name: str) -> bool:
        return HudiTable.exists(self.table_path(schema, name)) or self._finish_swap(schema, name)

    def open(self, schema: str, name: str) -> Optional[HudiTable]:
        if not self.is_table(schema, name):
            return None
        return HudiTable.open(self.spark, self.table_path(schema, name))

    def is_view(self, schema: str, name: str) -> bool:
        """A view remembered on storage holds the name."""
        return self._remembered_view(schema, name) is not None

    def schemas(self) -> List[str]:
        return sorted(n for n in self.storage.list_names("") if not n.startswith("."))

    def tables(self, schema: str) -> List[str]:
        names = set(self.storage.list_names(self.folder(schema))) | set(self.storage.list_names(self._rebuild_folder(schema)))
        return sorted(n for n in names if not n.startswith(".") and self.is_table(schema, n))

    # ---- rebuilds with a new layout: built beside the table, then swapped in -----------------
    def _rebuild_folder(self, schema: str, name: Optional[str] = None) -> str:
        return posixpath.join(self.folder(schema), REBUILDS_DIR, *([folder_name(name, "name").lower()] if name else []))

    def rebuild_path(self, schema: str, name: str) -> str:
        """Where a rebuild of `schema.name` with a new layout builds its table (emptied first: a
        rebuild that failed or was killed before its swap leaves one behind), while the table it
        replaces stays readable with its history. A swap of the name under way (another
        process's) is waited for, or finished when cut short, before the folder is emptied."""
        folder = self._rebuild_folder(schema, name)
        with self._swap_lock(schema, name) as lock:
            self._finish_swap_locked(schema, name, lock)
            self.storage.delete_dir(folder)
        return posixpath.join(self.root, folder)

    def discard_rebuild(self, schema: str, name: str) -> None:
        self.storage.delete_dir(self._rebuild_folder(schema, name))

    def swap_in(self, schema: str, name: str, instant: str) -> HudiTable:
        """Put the table at `rebuild_path`, committed at `instant`, in the place of `schema.name`
        (if it held a table: a model that was a view has none). Under the swap's own lock:
        1. a record of the rebuild's last commit (`swap.json`, phase "delete");
        2. the old table deleted, its hoodie.properties first, under its own lock (so no commit
           of it is half published, and it stops being a table before it is partial); then the
           record's phase is "copy", and from then on the name's folder is never emptied again;
        3. the rebuild moved in (a rename; on an object store copies, hoodie.properties last,
           then the rebuild's objects deleted);
        4. the record deleted.
        A process killed on the way leaves the record: the next look at the name (or the next
        rebuild of it) finishes the swap; killed before step 2 began, the old table stays whole."""
        staged = posixpath.join(self.root, self._rebuild_folder(schema, name))
        with self._swap_lock(schema, name) as lock:
            record = _last_commit(self.spark, staged)
            if record is None or posixpath.basename(record["instant"]).split(".")[0] != instant:
                raise ConfigurationError(f"{schema}.{name}: its rebuild is gone (another rebuild of it started "
                                         "meanwhile); the table is as it was")
            with self._lock:
                self._drop_entry(schema, name)
            self._write_record(schema, name, dict(record, phase="delete"))
            self._replace(schema, name, dict(record, phase="delete"), lock)
        return self.open(schema, name)

    def _swap_lock(self, schema: str, name: str) -> TableLock:
        """The lock of swaps of `schema.name`, in `<schema>/.hudilite_swaps/<name>/` with its record."""
        return TableLock(Storage(posixpath.join(self.root, posixpath.dirname(self._swap_record(schema, name)))))

    def _swap_record(self, schema: str, name: str) -> str:
        return posixpath.join(self.folder(schema), SWAPS_DIR, folder_name(name, "name").lower(), SWAP_RECORD)

    def _write_record(self, schema: str, name: str, record: Dict[str, str]) -> None:
        path = self._swap_record(schema, name)
        self.storage.write_atomic(path, json.dumps(record).encode(), posixpath.dirname(path))

    def _replace(self, schema: str, name: str, record: Dict[str, str], lock: TableLock) -> None:
        """Steps 2-4 of `swap_in`, from the record's phase: each may run again after a kill."""
        folder = self.folder(schema, name)
        if record["phase"] == "delete":
            lock.check()
            if HudiTable.exists(self.table_path(schema, name)):
                with TableLock(Storage(self.table_path(schema, name))):  # writers check it under this lock
                    self.storage.delete_file(posixpath.join(folder, PROPERTIES_FILE))
            self.storage.delete_dir(folder)  # the rest, or what a deletion cut short left
            self._write_record(schema, name, dict(record, phase="copy"))
        faults.reach("swap")
        lock.check()
        if self.storage.is_local:  # a rename needs the name free (a late writer's lock file may be back)
            self.storage.delete_dir(folder)  # (copies on a store go over such a file: no emptying there)
        self.storage.move_dir(self._rebuild_folder(schema, name), folder, last=PROPERTIES_FILE)
        self.storage.delete_file(self._swap_record(schema, name))

    def _finish_swap(self, schema: str, name: str) -> bool:
        """Finish a swap cut short (its record is there); True when the name holds a table after."""
        try:
            record_path = self._swap_record(schema, name)
        except ConfigurationError:
            return False
        if _read_json(self.storage, record_path) is None:  # the common case: one read
            return False
        with self._swap_lock(schema, name) as lock:
            self._finish_swap_locked(schema, name, lock)
        return HudiTable.exists(self.table_path(schema, name))

    def _finish_swap_locked(self, schema: str, name: str, lock: TableLock) -> None:
        record = _read_json(self.storage, self._swap_record(schema, name))
        if record is None or _holds(self.table_path(schema, name), record):
            pass  # no swap, or done but for its record
        elif _holds(posixpath.join(self.root, self._rebuild_folder(schema, name)), record):
            self._replace(schema, name, record, lock)
            return
        elif record.get("phase") == "copy" or not HudiTable.exists(self.table_path(schema, name)):
            self.storage.delete_dir(self.folder(schema, name))  # the rebuild went: what was copied is no table
        self.storage.delete_file(self._swap_record(schema, name))

    # ---- the Spark catalog ------------------------------------------------------------------
    def resolve(self, names: Iterable[Sequence[str]]) -> None:
        """Make the entries these names (as a statement wrote them) point at current: hudilite
        tables as of their latest commit, remembered views with what they read. Names that
        are not ours are left to Spark. A name is looked up only when its schema's folder
        lists it (one listing per schema), so a statement's many names cost little."""
        seen: set = set()
        listed: Dict[str, Dict[str, str]] = {}
        current = self.spark.catalog.currentDatabase()
        for parts in names:
            key = self.table_key(parts, current)
            key = None if key is None else _canonical(*key)
            if key is not None and key not in self._entries:
                key = self.stored_key(key, listed)
            if key is not None:
                self._refresh(key, seen)

    def stored_key(self, key: Tuple[str, str], listed: Optional[Dict[str, Dict[str, str]]] = None
                   ) -> Optional[Tuple[str, str]]:
        """(schema, name), lower-cased (`_canonical`), of the table or view `key` names, or None
        (one listing per schema). Spark matches names without regard to case: `S.T` is `s/t`."""
        listed = {} if listed is None else listed
        schemas = self._names_in("", listed)
        schema = key[0] if key[0] in schemas.values() else schemas.get(key[0].lower())
        if schema is None:
            return None
        folder = self.folder(schema)
        names = self._names_in(folder, listed)
        view_folder = posixpath.join(folder, VIEWS_DIR)
        views = {k[: -len(".sql")]: v[: -len(".sql")] for k, v in self._names_in(view_folder, listed).items()
                 if k.endswith(".sql")}
        found = names.get(key[1].lower()) or views.get(key[1].lower())
        if found is None and self._finish_swap(schema, key[1]):  # a rebuild's swap was cut short
            found = key[1]
        return None if found is None else _canonical(schema, found)

    def _names_in(self, folder: str, listed: Dict[str, Dict[str, str]]) -> Dict[str, str]:
        """{lower-cased name: name} of what `folder` holds."""
        if folder not in listed:
            listed[folder] = {n.lower(): n for n in self.storage.list_names(folder) if not n.startswith(".")}
        return listed[folder]

    def table_key(self, parts: Sequence[str], current: Optional[str] = None) -> Optional[Tuple[str, str]]:
        """(schema, name) of a name as a statement wrote it (`spark_catalog.` dropped, the
        current schema added); None when it cannot name a table of ours."""
        parts = list(parts)
        if len(parts) == 3 and parts[0].lower() == "spark_catalog":
            parts = parts[1:]
        if len(parts) == 1:
            parts = [current or self.spark.catalog.currentDatabase()] + parts
        if len(parts) != 2:
            return None
        try:
            self.folder(*parts)
        except ConfigurationError:  # not a name a table of ours can have
            return None
        return parts[0], parts[1]

    def _refresh(self, key: Tuple[str, str], seen: set) -> None:
        key = _canonical(*key)
        if key in seen:
            return
        seen.add(key)
        schema, name = key
        table = self.open(schema, name)
        if table is not None:
            if self._entries.get(key) != _table_state(table) or not self._in_spark(schema, name):
                self.register(schema, name, table)
            return
        sql = self._remembered_view(schema, name)
        if sql is None:
            if self._entries.pop(key, None) is not None:  # dropped by another process
                with self._lock:
                    self._drop_entry(schema, name)
            return
        statement = read_statement(self.spark, sql)
        for parts in statement.names if statement is not None else ():
            inner = self.table_key(parts)
            if inner is not None:
                self._refresh(inner, seen)
        if self._entries.get(key) != ("view", sql) or not self._in_spark(schema, name):
            with self._lock:
                self.spark.sql(f"create namespace if not exists {quote(schema)}")
                try:
                    self.spark.sql(f"create or replace view {quote(schema, name)} as {sql}")
                except Exception as err:  # noqa: BLE001 - named here, not as a missing view later
                    raise ConfigurationError(f"view {schema}.{name} cannot be re-created: {err}") from None
                self._entries[key] = ("view", sql)  # no identity: a view model's CREATE OR REPLACE VIEW is Spark's

    def _in_spark(self, schema: str, name: str) -> bool:
        """Spark's catalog still holds the entry: a DROP or rename of it the router did not see
        (`EXECUTE IMMEDIATE`, `IDENTIFIER(...)`) is noticed, and the entry made again."""
        return self.spark.catalog.tableExists(quote(schema, name))

    def register(self, schema: str, name: str, table: Optional[HudiTable] = None) -> None:
        schema, name = _canonical(schema, name)
        table = table or self.open(schema, name)
        if table is None:
            return
        state = _table_state(table)  # read first: a commit landing meanwhile makes the next look register again
        # Never one path: Spark writes into a one-path relation (an INSERT OVERWRITE would
        # replace the base file by a folder of its own), and refuses more.
        files = [f.path for f in table.latest_base_files()] + table.read_only_companions()
        path = snapshot_glob(self.table_path(schema, name), files)
        # The model's columns only: `select *` is what the model selected, as dbt users expect.
        # Parquet's reader takes the columns named, so the meta columns are not even read;
        # `meta_view` has them.
        spark_schema = table.schema() or table.schema(with_meta=True)
        # A write-only option no reader looks at and Spark's file writer cannot parse: a
        # DataFrame's saveAsTable in append mode (which writes to the location as one folder,
        # not through the glob) fails before it creates anything, with this text as its error.
        # The token makes the entry ours: an entry made again by someone else has another.
        refusal = f"{_refusal(schema, name)} (registration {uuid.uuid4().hex[:12]})"
        with self._lock:
            self.spark.sql(f"create namespace if not exists {quote(schema)}")
            self._drop_entry(schema, name)
            self.spark.catalog.createTable(quote(schema, name), path=path, source="parquet", schema=spark_schema,
                                           **{READ_ONLY_OPTION: refusal})
            self._entries[(schema, name)] = state
            self._identities[(schema, name)] = self._spark_entry(schema, name)

    def forget_entry(self, schema: str, name: str) -> None:
        """Drop Spark's entry of `schema.name` and forget it: the next statement naming it makes
        it again from storage, as a new process would."""
        with self._lock:
            self._drop_entry(schema, name)

    def _drop_entry(self, schema: str, name: str) -> None:
        self._entries.pop(_canonical(schema, name), None)
        self._identities.pop(_canonical(schema, name), None)
        for kind in ("view", "table"):
            try:
                self.spark.sql(f"drop {kind} if exists {quote(schema, name)}")
            except Exception:  # noqa: BLE001 - the other kind of entry holds the name
                continue

    # ---- entries changed behind our back -------------------------------------------------------
    def _spark_entries(self, schema: str) -> Dict[str, str]:
        """{name: what identifies it} of every entry Spark's catalog holds in `schema`: one
        `SHOW TABLE EXTENDED` (a classic session and Spark Connect alike). Temporary views are
        not entries of the schema."""
        return self._shown(schema, "*")

    def _shown(self, schema: str, pattern: str) -> Dict[str, str]:
        try:
            rows = self.spark.sql(f"show table extended in {quote(schema)} like '{pattern}'").collect()
        except Exception:  # noqa: BLE001 - the namespace is gone: so are its entries
            return {}
        return {r.tableName.lower(): _identity(r.information) for r in rows if not r.isTemporary}

    def _spark_entry(self, schema: str, name: str) -> Optional[str]:
        """What identifies Spark's entry `schema.name` (see `_spark_entries`), or None."""
        pattern = name if re.fullmatch(r"[A-Za-z0-9_]+", name) else "*"  # LIKE here is a regular expression
        return self._shown(schema, pattern).get(name.lower())

    def check_entries(self, files: bool = False) -> None:
        """Every entry this catalog made is still the one it made: same kind, location, options
        and creation (so the same snapshot). An entry that was dropped, replaced (a DataFrame's
        `saveAsTable` in overwrite mode, DROP + CREATE) or re-pointed (ALTER TABLE ... SET
        LOCATION) by Spark itself is registered again, and a ConfigurationError names it.
        With `files`, a table's folder holding files a Spark writer put there (`part-*`,
        `_SUCCESS`, a folder named after the entry's glob) is named too."""
        if not self._identities:
            return
        broken, stray = [], []
        with self._lock:  # another thread's registration is never half seen
            shown: Dict[str, Dict[str, str]] = {}
            for (schema, name), identity in sorted(self._identities.items()):
                if schema not in shown:
                    shown[schema] = self._spark_entries(schema)
                now = shown[schema].get(name.lower())
                if now == identity:
                    continue
                if identity is not None and now is not None and _registered_by_hudilite(schema, name, identity, now):
                    self._identities[(schema, name)] = now  # another process's registration, of a newer commit
                    continue
                if now is None and is_connect(self.spark):
                    # a Connect server's catalog is shared by every session: another dbt process's
                    # drop or rebuild of the table drops it too; a missing entry reads nothing wrong
                    self._drop_entry(schema, name)
                    continue
                broken.append((schema, name))
            for key in broken:
                self._drop_entry(*key)  # Spark's own table in its place goes, with its warehouse files
                self._refresh(key, set())
            tables = [key for key, state in self._entries.items() if state[0] == "table"] if files else []
        for schema, name in tables:
            found = [n for n in self.storage.list_names(self.folder(schema, name)) if _foreign(n)]
            if found:
                stray.append((schema, name, found))
        problems = [f"{s}.{n}: its Spark catalog entry was dropped, replaced or re-pointed by Spark itself (a "
                    "DataFrame write such as saveAsTable, or DROP, CREATE or ALTER TABLE run by Spark), not by "
                    "hudilite; " + ("it is registered again as of the table's latest commit" if self._entries.get((s, n))
                                    else "the table is no longer on storage") for s, n in broken]
        problems += [f"{s}.{n}: a Spark writer put files into the table's folder that no commit holds ("
                     f"{', '.join(sorted(f)[:5])}): those rows are in no snapshot; delete them (hudilite validate "
                     "lists them)" for s, n, f in stray]
        if problems:
            raise ConfigurationError("; ".join(problems) + ". Write hudilite tables through dbt models, SQL INSERT, "
                                     "UPDATE or DELETE, or the hudilite CLI, never through Spark's DataFrame writer")

    def create_table(self, schema: str, name: str, rows: DataFrame) -> HudiTable:
        """A new hudilite table holding `rows` (auto keys, not partitioned), registered; a
        failed write leaves no table behind."""
        table = HudiTable.create(self.spark, self.table_path(schema, name), name, database=schema,
                                 schema=rows.schema)
        try:
            table.insert(rows)
        except Exception:
            self.drop_table(schema, name)
            raise
        self.register(schema, name, table)
        return table

    def drop_table(self, schema: str, name: str) -> None:
        folder = self.folder(schema, name)
        with self._lock:
            self._drop_entry(schema, name)
        self.discard_rebuild(schema, name)  # first: a committed rebuild must not take the dropped table's place
        self.storage.delete_file(self._swap_record(schema, name))
        self.storage.delete_file(posixpath.join(folder, PROPERTIES_FILE))  # first: a drop cut short leaves no table
        self.storage.delete_dir(folder)
        self.set_docs(schema, name, None, {})
        self._forget_spellings()

    def drop_view(self, schema: str, name: str) -> None:
        with self._lock:
            self._drop_entry(schema, name)
        self.forget_view(schema, name)
        self.set_docs(schema, name, None, {})

    def rename_view(self, schema: str, name: str, new_schema: str, new_name: str) -> None:
        """Move a remembered view to a new name: its SQL and descriptions go with it (the entry
        under the old name is dropped, the new one made from the SQL)."""
        sql = self._remembered_view(schema, name)
        if sql is None:
            raise ConfigurationError(f"{schema}.{name} is not a view under {self.root}")
        if self.is_table(new_schema, new_name) or self.is_view(new_schema, new_name):
            raise ConfigurationError(f"cannot rename view {schema}.{name} to {new_schema}.{new_name}: "
                                     "the name is taken")
        docs = self.docs(schema, name)
        self.storage.make_dirs(posixpath.dirname(self._view_file(new_schema, new_name)))
        self.storage.write_text(self._view_file(new_schema, new_name), sql)
        self.set_docs(new_schema, new_name, *docs)
        self.drop_view(schema, name)
        self._refresh((new_schema, new_name), set())

    def rename_table(self, schema: str, name: str, new_schema: str, new_name: str) -> None:
        """Move the table to a new name, which must hold nothing. Under the table's lock, so no
        commit lands in the old folder while it moves (on an object store a move is copies)."""
        target = self.folder(new_schema, new_name)
        if self.storage.exists(target) or self.is_view(new_schema, new_name):
            raise ConfigurationError(f"cannot rename table {schema}.{name} to {new_schema}.{new_name}: the name is "
                                     f"taken ({posixpath.join(self.root, target)} holds files, or a view has it)")
        with self._lock:
            self._drop_entry(schema, name)
        self.discard_rebuild(schema, name)  # a rebuild of the old name is not the renamed table's
        with TableLock(Storage(self.table_path(schema, name))):
            self.storage.move_dir(self.folder(schema, name), target, last=PROPERTIES_FILE)
            self.storage.delete_file(posixpath.join(target, LOCK_FILE))  # the moved lock is ours: the new name's is free
        self.set_docs(new_schema, new_name, *self.docs(schema, name))
        self.set_docs(schema, name, None, {})
        self._forget_spellings()
        self.register(new_schema, new_name)

    def drop_schema(self, schema: str) -> None:
        self.folder(schema)  # refuses a name that leads outside location_root before anything happens
        with self._lock:
            self.spark.sql(f"drop namespace if exists {quote(schema)} cascade")
            self._entries = {k: v for k, v in self._entries.items() if k[0] != schema.lower()}
            self._identities = {k: v for k, v in self._identities.items() if k[0] != schema.lower()}
        self.storage.delete_dir(self.folder(schema))
        self._forget_spellings()

    # ---- descriptions (persist_docs), kept on storage beside the schema's tables --------------
    def _docs_file(self, schema: str, name: str) -> str:
        folder = posixpath.join(self.folder(schema), DOCS_DIR)
        return posixpath.join(folder, self._spelled(folder, folder_name(name, "name") + ".json"))

    def set_docs(self, schema: str, name: str, comment: Optional[str], columns: Dict[str, str]) -> None:
        """Keep a relation's description and its columns' (none: forget them)."""
        path = self._docs_file(schema, name)
        if comment or columns:
            self.storage.write_text(path, json.dumps({"comment": comment, "columns": columns}, indent=1))
        elif self.storage.exists(path):
            self.storage.delete_file(path)

    def docs(self, schema: str, name: str) -> Tuple[Optional[str], Dict[str, str]]:
        """(description, column descriptions) kept for a relation."""
        path = self._docs_file(schema, name)
        if not self.storage.exists(path):
            return None, {}
        kept = json.loads(self.storage.read_text(path))
        return kept.get("comment"), kept.get("columns") or {}

    # ---- views ------------------------------------------------------------------------------
    def _view_file(self, schema: str, name: str) -> str:
        folder = posixpath.join(self.folder(schema), VIEWS_DIR)
        return posixpath.join(folder, self._spelled(folder, folder_name(name, "name") + ".sql"))

    def remember_view(self, schema: str, name: str, sql: str) -> None:
        """Keep a view's SQL (the view was just created from it in this session)."""
        self.storage.write_text(self._view_file(schema, name), sql)
        self._entries[_canonical(schema, name)] = ("view", sql)

    def forget_view(self, schema: str, name: str) -> None:
        self.storage.delete_file(self._view_file(schema, name))
        self._forget_spellings()

    def views(self, schema: str) -> List[str]:
        names = self.storage.list_names(posixpath.join(self.folder(schema), VIEWS_DIR))
        return sorted(n[: -len(".sql")] for n in names if n.endswith(".sql"))

    def _remembered_view(self, schema: str, name: str) -> Optional[str]:
        path = self._view_file(schema, name)
        return self.storage.read_text(path) if self.storage.exists(path) else None

    # ---- reads for SQL ----------------------------------------------------------------------
    def _temp_view(self, prefix: str, schema: str, name: str, key: str, df: DataFrame) -> str:
        digest = hashlib.sha1(f"{schema}.{name}.{key}".encode()).hexdigest()[:10]
        view = re.sub(r"[^A-Za-z0-9_]", "_", f"{prefix}_{schema}_{name}_{digest}")
        df.createOrReplaceTempView(view)
        return view

    def meta_view(self, schema: str, name: str) -> str:
        """A temporary view of the latest snapshot with Hudi's meta columns first."""
        table = self._require(schema, name)
        latest = table.context.timeline.latest_completed()
        return self._temp_view("hudilite_meta", schema, name, latest.timestamp if latest else "", table.read())

    def as_of_view(self, schema: str, name: str, as_of: str) -> str:
        table = self._require(schema, name)
        instant = table.resolve_instant(as_of)
        return self._temp_view("hudilite_as_of", schema, name, instant, table.read(as_of=instant))

    def changes_view(self, schema: str, name: str, start: Optional[str], end: Optional[str] = None) -> Tuple[str, str]:
        """A temporary view of the rows changed in (start, end] (every row when `start` is
        None), and the instant the read ends at."""
        table = self._require(schema, name)
        start, end = table.changes_range(start, end)
        return self._temp_view("hudilite_changes", schema, name, f"{start}-{end}", table.read_changes(start, end)), end

    def instants(self, schema: str, name: str) -> List[str]:
        """The completed instants of a table's writes, oldest first."""
        return [i.timestamp for i in self._require(schema, name).context.timeline.completed()]

    def _require(self, schema: str, name: str) -> HudiTable:
        table = self.open(schema, name)
        if table is None:
            raise ConfigurationError(f"{schema}.{name} is not a hudilite table under {self.root}")
        return table


def _last_commit(spark: SparkSession, path: str) -> Optional[Dict[str, str]]:
    """What identifies the Hudi table at `path` by its last completed instant (its file name
    and a digest of its bytes: no other table holds the same), or None when `path` holds no
    table with a completed instant."""
    try:
        if not HudiTable.exists(path):
            return None
        latest = HudiTable.open(spark, path).context.timeline.latest_completed()
    except Exception:  # noqa: BLE001 - a half-created table is none
        return None
    if latest is None:
        return None
    file = posixpath.join(HOODIE_DIR, latest.file_name)
    return {"instant": file, "sha256": hashlib.sha256(Storage(path).read_bytes(file)).hexdigest()}


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


_IDENTITY_FIELDS = ("Created Time", "Type", "Provider", "Location", "Storage Properties", "View Text")


def _identity(information: str) -> str:
    """What identifies an entry in `SHOW TABLE EXTENDED`'s text (not statistics or access times,
    which ANALYZE TABLE and reads change)."""
    lines = [line for line in information.splitlines() if line.split(":", 1)[0] in _IDENTITY_FIELDS]
    return "\n".join(lines)


def _refusal(schema: str, name: str) -> str:
    return f"{schema}.{name} is a hudilite table, read-only to Spark's writers"


def _registered_by_hudilite(schema: str, name: str, ours: str, now: str) -> bool:
    """`now` is a registration of the same table by another hudilite session (several dbt
    processes on one Spark Connect server share its catalog): same kind and provider, a glob
    under the same folder, and the read-only option. A table made by Spark has no such option,
    and SET LOCATION leaves the folder."""
    def fields(identity: str) -> Dict[str, str]:
        return dict(line.split(": ", 1) for line in identity.splitlines() if ": " in line)

    before, after = fields(ours), fields(now)
    return (all(before.get(k) == after.get(k) for k in ("Type", "Provider"))
            and before.get("Location", "").split("{")[0] == after.get("Location", "-").split("{")[0]
            and f"{READ_ONLY_OPTION}={_refusal(schema, name)} (registration " in after.get("Storage Properties", ""))


def _foreign(name: str) -> bool:
    """A name in a table's folder that only Spark's file writer makes."""
    return name.startswith(("part-", ".part-", "_SUCCESS", "._SUCCESS", "_temporary", "{", "_committed", "_started"))


def _table_state(table: HudiTable) -> tuple:
    latest = table.context.timeline.latest_completed()
    return ("table", None) if latest is None else ("table", latest.timestamp, latest.action)
