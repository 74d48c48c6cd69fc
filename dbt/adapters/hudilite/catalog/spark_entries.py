"""Registration in Spark: each hudilite table is an entry of the session's catalog.

A table is registered as an external parquet table whose path is a glob naming exactly the
base files of its latest snapshot, with the table's data schema given (no meta columns: the
storage catalog's `meta_view` has them), so plain SQL, `ref()` and `describe` see it like any
table and Spark's native scan reads it. A view is an entry made from its SQL.

An entry is ours only as long as Spark's catalog still shows it as we made it: `changed`
finds the entries Spark itself dropped, replaced or re-pointed (a DataFrame's saveAsTable,
DROP + CREATE, ALTER TABLE ... SET LOCATION), by what identifies them in `SHOW TABLE EXTENDED`.
"""

from __future__ import annotations

import posixpath
import re
import threading
import uuid
from typing import Dict, List, Optional, Tuple

from pyspark.sql import SparkSession

from ..table import ConfigurationError, HudiTable, is_connect, quote
from .names import canonical

READ_ONLY_OPTION = "maxRecordsPerFile"  # see `SparkEntries.register_table`
_GLOB_SPECIAL = re.compile(r"([\\{}\[\]*?,])")
_FOLDER_SPECIAL = re.compile(r"[\\{}\[\]*?,:]")
_IDENTITY_FIELDS = ("Created Time", "Type", "Provider", "Location", "Storage Properties", "View Text")


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


def table_state(table: HudiTable) -> tuple:
    """What a table's entry shows: the table's path and its completed instants (the latest and
    how many: an older writer's commit that completes after a newer one's changes the count)."""
    completed = table.context.timeline.completed()
    if not completed:
        return ("table", table.path, None)
    latest = table.context.timeline.latest_completed()
    return ("table", table.path, latest.timestamp, latest.action, len(completed))


class SparkEntries:
    """The entries this process made in a session's catalog, and what each showed when made."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.lock = threading.RLock()  # another thread's registration is never half seen
        # (schema, name) -> what its entry shows: ("table", latest instant) or ("view", sql)
        self._states: Dict[Tuple[str, str], tuple] = {}
        # (schema, name) -> what Spark's catalog showed of a table's entry right after we made it
        # (`_identity`): anything else found there later was put there behind our back
        self._identities: Dict[Tuple[str, str], str] = {}

    def state(self, key: Tuple[str, str]) -> Optional[tuple]:
        return self._states.get(key)

    def knows(self, key: Tuple[str, str]) -> bool:
        return key in self._states

    def tables(self) -> List[Tuple[str, str]]:
        return [key for key, state in self._states.items() if state[0] == "table"]

    def in_spark(self, schema: str, name: str) -> bool:
        """Spark's catalog still holds the entry: a DROP or rename of it the router did not see
        (`EXECUTE IMMEDIATE`, `IDENTIFIER(...)`) is noticed, and the entry made again."""
        return self.spark.catalog.tableExists(quote(schema, name))

    def register_table(self, schema: str, name: str, table: HudiTable, table_path: str) -> None:
        """The entry of `table` (at `table_path`) as of its latest commit, made again."""
        schema, name = canonical(schema, name)
        state = table_state(table)  # read first: a commit landing meanwhile makes the next look register again
        # Never one path: Spark writes into a one-path relation (an INSERT OVERWRITE would
        # replace the base file by a folder of its own), and refuses more.
        files = [f.path for f in table.latest_base_files()] + table.read_only_companions()
        path = snapshot_glob(table_path, files)
        # The model's columns only: `select *` is what the model selected, as dbt users expect.
        # Parquet's reader takes the columns named, so the meta columns are not even read;
        # `meta_view` has them.
        spark_schema = table.schema() or table.schema(with_meta=True)
        # A write-only option no reader looks at and Spark's file writer cannot parse: a
        # DataFrame's saveAsTable in append mode (which writes to the location as one folder,
        # not through the glob) fails before it creates anything, with this text as its error.
        # The token makes the entry ours: an entry made again by someone else has another.
        refusal = f"{_refusal(schema, name)} (registration {uuid.uuid4().hex[:12]})"
        with self.lock:
            self.create_namespace(schema)
            self.drop(schema, name)
            self.spark.catalog.createTable(quote(schema, name), path=path, source="parquet", schema=spark_schema,
                                           **{READ_ONLY_OPTION: refusal})
            self._states[(schema, name)] = state
            self._identities[(schema, name)] = self._spark_entry(schema, name)

    def register_view(self, schema: str, name: str, sql: str) -> None:
        with self.lock:
            self.create_namespace(schema)
            try:
                self.spark.sql(f"create or replace view {quote(schema, name)} as {sql}")
            except Exception as err:  # noqa: BLE001 - named here, not as a missing view later
                raise ConfigurationError(f"view {schema}.{name} cannot be re-created: {err}") from None
            self.remember_view(schema, name, sql)  # no identity: a view model's CREATE OR REPLACE VIEW is Spark's

    def remember_view(self, schema: str, name: str, sql: str) -> None:
        """The entry of a view made from `sql` (by this session)."""
        self._states[canonical(schema, name)] = ("view", sql)

    def create_namespace(self, schema: str) -> None:
        """`CREATE NAMESPACE IF NOT EXISTS schema`, skipped when the session's own catalog (the
        current one) already holds it: a look-up costs a few milliseconds, the statement ~20."""
        if not self._namespace_exists(schema):
            self.spark.sql(f"create namespace if not exists {quote(schema)}")

    def _namespace_exists(self, schema: str) -> bool:
        """The current catalog is Spark's session catalog and holds `schema` (as the statement
        would name it); False when that cannot be told here (Spark Connect: the statement runs)."""
        if is_connect(self.spark):
            return False
        try:
            state = self.spark._jsparkSession.sessionState()
            if state.catalogManager().currentCatalog().name() != "spark_catalog":
                return False
            return bool(state.catalog().databaseExists(schema))
        except Exception:  # noqa: BLE001 - the statement decides
            return False

    def drop(self, schema: str, name: str) -> None:
        """Drop Spark's entry of `schema.name` (of either kind) and forget it. Spark's DROP TABLE
        drops a view too, so one statement does it; a Spark that refuses a view there gets DROP
        VIEW next."""
        with self.lock:
            self._states.pop(canonical(schema, name), None)
            self._identities.pop(canonical(schema, name), None)
            for kind in ("table", "view"):
                try:
                    self.spark.sql(f"drop {kind} if exists {quote(schema, name)}")
                    return
                except Exception:  # noqa: BLE001 - the other kind of entry holds the name
                    continue

    def forget(self, key: Tuple[str, str]) -> bool:
        """Forget an entry another process dropped with its table; True when there was one."""
        return self._states.pop(key, None) is not None

    def drop_schema(self, schema: str) -> None:
        with self.lock:
            self.spark.sql(f"drop namespace if exists {quote(schema)} cascade")
            self._states = {k: v for k, v in self._states.items() if k[0] != schema.lower()}
            self._identities = {k: v for k, v in self._identities.items() if k[0] != schema.lower()}

    def changed(self) -> List[Tuple[str, str]]:
        """The tables whose entries Spark itself dropped, replaced or re-pointed since we made
        them (one `SHOW TABLE EXTENDED` per schema). Call under `lock`."""
        broken = []
        shown: Dict[str, Dict[str, str]] = {}
        for (schema, name), identity in sorted(self._identities.items()):
            if schema not in shown:
                shown[schema] = self._shown(schema, "*")
            now = shown[schema].get(name.lower())
            if now == identity:
                continue
            if identity is not None and now is not None and _registered_by_hudilite(schema, name, identity, now):
                self._identities[(schema, name)] = now  # another process's registration, of a newer commit
                continue
            if now is None and is_connect(self.spark):
                # a Connect server's catalog is shared by every session: another dbt process's
                # drop or rebuild of the table drops it too; a missing entry reads nothing wrong
                self.drop(schema, name)
                continue
            broken.append((schema, name))
        return broken

    def has_identities(self) -> bool:
        return bool(self._identities)

    def _shown(self, schema: str, pattern: str) -> Dict[str, str]:
        """{name: what identifies it} of the entries Spark's catalog holds in `schema` matching
        `pattern` (a classic session and Spark Connect alike). Temporary views are not entries
        of the schema."""
        try:
            rows = self.spark.sql(f"show table extended in {quote(schema)} like '{pattern}'").collect()
        except Exception:  # noqa: BLE001 - the namespace is gone: so are its entries
            return {}
        return {r.tableName.lower(): _identity(r.information) for r in rows if not r.isTemporary}

    def _spark_entry(self, schema: str, name: str) -> Optional[str]:
        """What identifies Spark's entry `schema.name`, or None."""
        pattern = name if re.fullmatch(r"[A-Za-z0-9_]+", name) else "*"  # LIKE here is a regular expression
        return self._shown(schema, pattern).get(name.lower())


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
