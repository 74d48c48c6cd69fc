"""`hudilite upgrade`: a table version 6 table to version 8 (Hudi 1.0) or 9 (Hudi 1.1), and 8 to 9,
the steps Hudi 1.x's own upgrade takes, so that its writers and readers then treat the table as
one they made. Never implicit, never down.

Under the table lock, with nothing in flight:
1. the metadata table goes (hudilite writes none at 8 and 9; Hudi 1.x's writer builds it again);
2. `.hoodie/timeline/` is written afresh: every instant file of `.hoodie/` under its layout 2
   name, a completed one as `<T>_<T>.<action>` (its completion time taken as its instant time:
   the order the table had, and a changes checkpoint taken before the upgrade still names an
   instant after it) with commit metadata in Avro, the services' files as they are;
3. the archived timeline becomes the LSM history (`.hoodie/timeline/history/`);
4. hoodie.properties switches the table (version, layout 2, the 1.x keys; 9 reconciles 8's);
5. the old instant files leave `.hoodie/`.

Until 4 the table is the version 6 table it was (layout 1 readers do not look into
`timeline/`), and an upgrade killed before it starts over; one killed after it finishes 5.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from typing import Dict, List

from ..context import TableContext
from ..errors import ConcurrentWriteError, ConfigurationError
from ..format import avro_metadata, lsm_history
from ..format import properties as props
from ..format.archived_timeline import archive_files, is_archive_file, read_archive_file
from ..format.instant import COMMIT, COMPLETED, REPLACE_COMMIT
from ..metadata.table import HADOOP_CHECKSUM, MetadataTable
from ..storage.layout import HOODIE_DIR, PROPERTIES_FILE, TMP_DIR, history_dir, timeline_dir
from ..storage.lock import TableLock, check_lease
from ..transaction import rollback_dead_writers

logger = logging.getLogger("hudilite")

TIMELINE_FOLDER = "timeline"
# Any layout 1 instant file: `<T>.<action>`, `<T>.<action>.requested|.inflight`, `<T>.inflight`.
_V1_INSTANT = re.compile(r"^(\d{17})\.([a-z]+)(\.requested|\.inflight)?$")
_COMMIT_ACTIONS = (COMMIT, REPLACE_COMMIT)


def upgrade(ctx: TableContext, to_version: int) -> bool:
    """Upgrade the table to `to_version` (8 or 9); False when it is at that version already."""
    current = ctx.config.table_version
    if ctx.config.not_writable:
        raise ConfigurationError(f"table {ctx.name}: hudilite cannot upgrade it: {ctx.config.not_writable}")
    if to_version not in (8, 9):
        raise ConfigurationError(f"table {ctx.name}: hudilite upgrades to table version 8 or 9, not {to_version}")
    if to_version < current:
        raise ConfigurationError(f"table {ctx.name}: it is at table version {current}; hudilite never downgrades")
    rollback_dead_writers(ctx.storage, ctx.timeline)
    with TableLock(ctx.storage):
        listed = props.loads(ctx.storage.read_text(PROPERTIES_FILE))
        current = int(listed.get("hoodie.table.version", props.TABLE_VERSION))
        if current == 6:
            _refuse_in_flight(ctx)
            MetadataTable(ctx.storage).drop(keep_dropped=False)
            _write_layout_2_timeline(ctx)
        if current < to_version:
            # Unlisted, then removed: the next write builds it at the new version (8 to 9 too).
            MetadataTable(ctx.storage).drop(keep_dropped=False)
            _write_properties(ctx, to_version)
        _remove_layout_1_instants(ctx)
    if current < to_version:
        logger.info("table %s: upgraded from table version %s to %s", ctx.name, current, to_version)
    return current < to_version


def _refuse_in_flight(ctx: TableContext) -> None:
    ctx.timeline.refresh()
    pending = [n for n in ctx.storage.list_names(HOODIE_DIR) if _V1_INSTANT.match(n)
               and not ctx.storage.exists(posixpath.join(HOODIE_DIR, _V1_INSTANT.match(n).group(1) + "."
                                                         + _completed_action(n)))]
    if pending:
        raise ConcurrentWriteError(f"table {ctx.name}: {pending[0]} is in flight; upgrade once nothing is being written")


def _completed_action(name: str) -> str:
    """The action whose completed file ends an instant file's instant (`<T>.inflight` is a commit's)."""
    instant, action, _ = _V1_INSTANT.match(name).groups()
    return COMMIT if action == "inflight" else action


def _write_layout_2_timeline(ctx: TableContext) -> None:
    storage = ctx.storage
    active, history = timeline_dir(TIMELINE_FOLDER), history_dir(TIMELINE_FOLDER, ctx.config.history_folder)
    storage.delete_dir(active)  # what an upgrade killed earlier wrote: the timeline may have changed since
    storage.make_dirs(history)
    for name in sorted(storage.list_names(HOODIE_DIR)):
        found = _V1_INSTANT.match(name)
        if not found:
            continue
        instant, action, state = found.groups()
        data = storage.read_bytes(posixpath.join(HOODIE_DIR, name))
        if state or action == "inflight":
            storage.write_atomic(posixpath.join(active, name), data, TMP_DIR)
            continue
        if action in _COMMIT_ACTIONS:
            body = json.loads(data.decode("utf-8")) if data.strip() else {}
            is_replace = action == REPLACE_COMMIT
            data = avro_metadata.encode(
                avro_metadata.REPLACE_COMMIT_FILE_METADATA if is_replace else avro_metadata.COMMIT_FILE_METADATA,
                avro_metadata.commit_record(body, is_replace))
        storage.publish(posixpath.join(active, f"{instant}_{instant}.{action}"), data, TMP_DIR,
                        lambda: check_lease(storage))
    entries = _archived_entries(ctx)
    if entries:
        lsm_history.write_history(storage, history, entries)


def _archived_entries(ctx: TableContext) -> List[lsm_history.HistoryEntry]:
    """The completed commits of the layout 1 archive, as rows of the LSM history."""
    folder = ctx.timeline.archived_dir
    found: Dict[str, lsm_history.HistoryEntry] = {}
    names = ctx.storage.list_names(folder)  # Hudi's archive files, and older hudilite's JSON ones
    for name in archive_files(names) + sorted(n for n in names if is_archive_file(n) and n not in archive_files(names)):
        for entry in read_archive_file(ctx.storage, name, folder):
            if entry.state != COMPLETED or entry.action not in _COMMIT_ACTIONS:
                continue
            is_replace = entry.action == REPLACE_COMMIT
            data = avro_metadata.encode(
                avro_metadata.REPLACE_COMMIT_FILE_METADATA if is_replace else avro_metadata.COMMIT_FILE_METADATA,
                avro_metadata.commit_record(entry.metadata or {}, is_replace))
            found[entry.timestamp] = lsm_history.HistoryEntry(entry.timestamp, entry.timestamp, entry.action, data, None)
    return [found[t] for t in sorted(found)]


def _write_properties(ctx: TableContext, to_version: int) -> None:
    """The switch, as Hudi 1.x's upgrade edits the file: every key kept (the time zone, the
    checksum, a merge mode or payload set before) but those the new version names otherwise.
    6 to 8: layout 2 and where it lives, the initial version, the merge mode (the one hudilite's
    writes followed at 6: event time with a precombine field, else commit time) with its strategy
    id and payload, the key generator's type. 8 to 9: the precombine field becomes the ordering
    field, the built-in payload moves to the legacy key, the strategy id goes, the table format."""
    text = ctx.storage.read_text(PROPERTIES_FILE)  # as the metadata table's drop left it
    listed = props.loads(text)
    config = props.TableConfig.from_properties(listed)
    upgraded = dict(listed)
    if config.table_version == 6:
        mode = listed.get("hoodie.record.merge.mode") or (
            props.EVENT_TIME_ORDERING if config.precombine_field else props.COMMIT_TIME_ORDERING)
        upgraded.update({"hoodie.timeline.layout.version": "2", "hoodie.table.initial.version": "6",
                         "hoodie.timeline.path": TIMELINE_FOLDER, "hoodie.timeline.history.path": config.history_folder,
                         "hoodie.record.merge.mode": mode})
        upgraded.setdefault("hoodie.record.merge.strategy.id", props.MERGE_STRATEGY_IDS[mode])
        upgraded.setdefault("hoodie.compaction.payload.class", props.PAYLOADS[mode])
        if config.keygen_type:
            upgraded["hoodie.table.keygenerator.type"] = config.keygen_type
    if to_version == 9:
        if upgraded.get("hoodie.table.precombine.field"):
            upgraded["hoodie.table.ordering.fields"] = upgraded.pop("hoodie.table.precombine.field")
        payload = upgraded.pop("hoodie.compaction.payload.class", None)
        if payload:
            upgraded["hoodie.table.legacy.payload.class"] = payload
        upgraded.pop("hoodie.record.merge.strategy.id", None)
        upgraded["hoodie.table.format"] = "native"
    upgraded["hoodie.table.version"] = str(to_version)
    header = text.splitlines()[0] if text.startswith("#") else props.SAVED_BY_HUDILITE
    if ctx.storage.is_file(HADOOP_CHECKSUM):  # Hadoop's local file system would refuse the new file
        ctx.storage.delete_file(HADOOP_CHECKSUM)
    ctx.storage.write_atomic(PROPERTIES_FILE, props.dumps(upgraded, header).encode(), TMP_DIR)


def _remove_layout_1_instants(ctx: TableContext) -> None:
    """The layout 1 instant files left in `.hoodie/` once the table is at layout 2, those that
    were copied: newest instant first, its completed file first, so that a reader still on
    layout 1 sees an older snapshot while they go, never a timeline with a hole."""
    copied = set(ctx.storage.list_names(timeline_dir(TIMELINE_FOLDER)))
    names = []
    for name in ctx.storage.list_names(HOODIE_DIR):
        found = _V1_INSTANT.match(name)
        if not found:
            continue
        instant, action, state = found.groups()
        if name in copied or (not state and action != "inflight" and f"{instant}_{instant}.{action}" in copied):
            names.append(name)
    completed_first = lambda n: not (_V1_INSTANT.match(n).group(3) or n.endswith(".inflight"))  # noqa: E731
    for name in sorted(names, key=lambda n: (n[:17], completed_first(n)), reverse=True):
        ctx.storage.delete_file(posixpath.join(HOODIE_DIR, name))
