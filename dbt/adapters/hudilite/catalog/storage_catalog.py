"""Storage is the catalog: every hudilite table under `location_root` is a Spark table.

A table at `<location_root>/<schema>/<name>` is registered in the Spark session's catalog as
`<schema>.<name>` (`spark_entries`). Views are kept beside the tables as their SQL text, and
descriptions (persist_docs) as JSON; a rebuild with a new layout is built beside its table and
swapped in (`swap`).

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
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame, SparkSession

from ..sql.reader import read_statement
from ..table import ConfigurationError, HudiTable, Storage
from ..table.storage.layout import LOCK_FILE, PROPERTIES_FILE
from ..table.storage.lock import TableLock
from .names import canonical, folder_name
from .spark_entries import SparkEntries, table_state
from .swap import RebuildSwaps

VIEWS_DIR = ".hudilite_views"  # <location_root>/<schema>/.hudilite_views/<view>.sql
DOCS_DIR = ".hudilite_docs"  # <location_root>/<schema>/.hudilite_docs/<relation>.json: persist_docs


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
            self.entries.create_namespace(schema)

    def __init__(self, spark: SparkSession, location_root: str):
        self.spark = spark
        self.storage = Storage(location_root)
        self.root = self.storage.base_path
        self._lock = threading.RLock()
        # folder -> {lower-cased name: name} of what it holds in capitals (`_spelled`)
        self._capitalised: Dict[str, Dict[str, str]] = {}
        self.entries = SparkEntries(spark)
        self.swaps = RebuildSwaps(spark, self.storage, self.folder)

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
        return HudiTable.exists(self.table_path(schema, name)) or self.swaps.finish(schema, name)

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
        names = set(self.storage.list_names(self.folder(schema))) | set(self.storage.list_names(self.swaps.rebuild_folder(schema)))
        return sorted(n for n in names if not n.startswith(".") and self.is_table(schema, n))

    # ---- rebuilds with a new layout: built beside the table, then swapped in (`swap`) ----------
    def swap_in(self, schema: str, name: str, instant: str) -> HudiTable:
        """Put the rebuild of `schema.name` committed at `instant` in its place (`RebuildSwaps.swap_in`)."""
        self.swaps.swap_in(schema, name, instant, drop_entry=lambda: self.entries.drop(schema, name))
        return self.open(schema, name)

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
            key = None if key is None else canonical(*key)
            if key is not None and not self.entries.knows(key):
                key = self.stored_key(key, listed)
            if key is not None:
                self._refresh(key, seen)

    def stored_key(self, key: Tuple[str, str], listed: Optional[Dict[str, Dict[str, str]]] = None
                   ) -> Optional[Tuple[str, str]]:
        """(schema, name), lower-cased (`names.canonical`), of the table or view `key` names, or None
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
        if found is None and self.swaps.finish(schema, key[1]):  # a rebuild's swap was cut short
            found = key[1]
        return None if found is None else canonical(schema, found)

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
        key = canonical(*key)
        if key in seen:
            return
        seen.add(key)
        schema, name = key
        table = self.open(schema, name)
        if table is not None:
            self.register(schema, name, table, unless_current=True)
            return
        sql = self._remembered_view(schema, name)
        if sql is None:
            if self.entries.forget(key):  # dropped by another process
                self.entries.drop(schema, name)
            return
        statement = read_statement(self.spark, sql)
        for parts in statement.names if statement is not None else ():
            inner = self.table_key(parts)
            if inner is not None:
                self._refresh(inner, seen)
        if self.entries.state(key) != ("view", sql) or not self.entries.in_spark(schema, name):
            self.entries.register_view(schema, name, sql)

    def register(self, schema: str, name: str, table: Optional[HudiTable] = None, unless_current: bool = False) -> None:
        """Spark's entry of the table `schema.name` as of its latest commit; `unless_current`:
        only when the entry this process made no longer shows it (or Spark lost it)."""
        table = table or self.open(schema, name)
        if table is None:
            return
        key = canonical(schema, name)
        if unless_current and self.entries.state(key) == table_state(table) and self.entries.in_spark(*key):
            return
        self.entries.register_table(schema, name, table, self.table_path(schema, name))

    def forget_entry(self, schema: str, name: str) -> None:
        """Drop Spark's entry of `schema.name` and forget it: the next statement naming it makes
        it again from storage, as a new process would."""
        self.entries.drop(schema, name)

    # ---- entries changed behind our back -------------------------------------------------------
    def check_entries(self, files: bool = False) -> None:
        """Every entry this catalog made is still the one it made: same kind, location, options
        and creation (so the same snapshot). An entry that was dropped, replaced (a DataFrame's
        `saveAsTable` in overwrite mode, DROP + CREATE) or re-pointed (ALTER TABLE ... SET
        LOCATION) by Spark itself is registered again, and a ConfigurationError names it.
        With `files`, a table's folder holding files a Spark writer put there (`part-*`,
        `_SUCCESS`, a folder named after the entry's glob) is named too."""
        if not self.entries.has_identities():
            return
        stray = []
        with self.entries.lock:  # another thread's registration is never half seen
            broken = self.entries.changed()
            for key in broken:
                self.entries.drop(*key)  # Spark's own table in its place goes, with its warehouse files
                self._refresh(key, set())
            tables = self.entries.tables() if files else []
        for schema, name in tables:
            found = [n for n in self.storage.list_names(self.folder(schema, name)) if _foreign(n)]
            if found:
                stray.append((schema, name, found))
        problems = [f"{s}.{n}: its Spark catalog entry was dropped, replaced or re-pointed by Spark itself (a "
                    "DataFrame write such as saveAsTable, or DROP, CREATE or ALTER TABLE run by Spark), not by "
                    "hudilite; " + ("it is registered again as of the table's latest commit" if self.entries.state((s, n))
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
        self.entries.drop(schema, name)
        self.swaps.discard(schema, name)  # first: a committed rebuild must not take the dropped table's place
        self.swaps.forget(schema, name)
        self.storage.delete_file(posixpath.join(folder, PROPERTIES_FILE))  # first: a drop cut short leaves no table
        self.storage.delete_dir(folder)
        self.set_docs(schema, name, None, {})
        self._forget_spellings()

    def drop_view(self, schema: str, name: str) -> None:
        self.entries.drop(schema, name)
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
        self.entries.drop(schema, name)
        self.swaps.discard(schema, name)  # a rebuild of the old name is not the renamed table's
        with TableLock(Storage(self.table_path(schema, name))):
            self.storage.move_dir(self.folder(schema, name), target, last=PROPERTIES_FILE)
            self.storage.delete_file(posixpath.join(target, LOCK_FILE))  # the moved lock is ours: the new name's is free
        self.set_docs(new_schema, new_name, *self.docs(schema, name))
        self.set_docs(schema, name, None, {})
        self._forget_spellings()
        self.register(new_schema, new_name)

    def drop_schema(self, schema: str) -> None:
        self.folder(schema)  # refuses a name that leads outside location_root before anything happens
        self.entries.drop_schema(schema)
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
        self.entries.remember_view(schema, name, sql)

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


def _foreign(name: str) -> bool:
    """A name in a table's folder that only Spark's file writer makes."""
    return name.startswith(("part-", ".part-", "_SUCCESS", "._SUCCESS", "_temporary", "{", "_committed", "_started"))
