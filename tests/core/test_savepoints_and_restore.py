"""Savepoints, restore, and cleans recorded as Hudi records them (Avro instants). Each test
checks the timeline files, the files on disk, the rows, the record index and hudi-rs."""

import json
import os

import pytest

from dbt.adapters.hudilite import cli
from dbt.adapters.hudilite.table import ConcurrentWriteError, HudiTable, TableServices, TimelineError
from dbt.adapters.hudilite.table.format import avro_metadata
from dbt.adapters.hudilite.table.storage import faults
from dbt.adapters.hudilite.table.services import restore as restore_module
from dbt.adapters.hudilite.table.format.file_group import parse_base_file_name
from tests.core.hudi_rs import assert_hudi_rs_agrees, hudi_rs_snapshot, rows_of_arrow
from tests.core.test_concurrency import while_writing

SMALL = TableServices(retain_commits=2, keep_min_commits=3, keep_max_commits=5)
COLUMNS = ["id", "name", "region"]


def customers(spark, rows):
    return spark.createDataFrame(rows, "id int, name string, region string")


def rows(table, as_of=None):
    return sorted((r.id, r.name, r.region) for r in table.read(as_of).collect())


def hoodie(table, suffix):
    return sorted(n for n in os.listdir(os.path.join(table.path, ".hoodie")) if n.endswith(suffix))


def avro(table, name):
    with open(os.path.join(table.path, ".hoodie", name), "rb") as f:
        return avro_metadata.decode(f.read())


def base_file_instants(table):
    out = set()
    for folder, _, files in os.walk(table.path):
        if ".hoodie" not in folder:
            out |= {parse_base_file_name(n).instant for n in files if parse_base_file_name(n)}
    return out


def history_with_a_savepoint(spark, tmp_path, services=SMALL):
    """Writes, a savepoint at the third, then upserts, a delete, an overwrite and more
    upserts with the services after each. Returns the table, the savepoint and its rows."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    for n in range(3):
        table.upsert(customers(spark, [(n, f"v{n}", "us"), (10 + n, f"e{n}", "eu")]))
        table.run_services(services)
    savepoint = table.savepoint(comments="before the migration")
    at_savepoint = rows(table)
    table.delete(spark.createDataFrame([(0,)], "id int"))
    table.run_services(services)
    table.insert_overwrite(customers(spark, [(20, "over", "eu")]))
    table.run_services(services)
    for n in range(8):
        table.upsert(customers(spark, [(1, f"late{n}", "us"), (30 + n, "new", "us")]))
        table.run_services(services)
    return table, savepoint, at_savepoint


def test_a_savepoint_keeps_its_snapshot_through_cleaning_and_archival(spark, tmp_path):
    table, savepoint, at_savepoint = history_with_a_savepoint(spark, tmp_path)
    assert table.savepoints() == [savepoint]
    record = avro(table, f"{savepoint}.savepoint")
    assert record["comments"] == "before the migration"
    kept = {os.path.join(p["partitionPath"], n) for p in record["partitionMetadata"].values() for n in p["savepointDataFile"]}
    assert kept == {f.path for f in table.latest_base_files(savepoint)}
    assert all(os.path.exists(os.path.join(table.path, p)) for p in kept)
    assert hoodie(table, ".savepoint.inflight") == [f"{savepoint}.savepoint.inflight"]

    # The cleaner moved on past the savepoint; archival stopped before it.
    assert table.earliest_readable_instant() > savepoint
    archived = table.context.timeline.archived()
    assert archived.through is None or archived.through < savepoint
    assert savepoint in [i.timestamp for i in table.timeline()]
    assert rows(table, as_of=savepoint) == at_savepoint
    assert rows_of_arrow(hudi_rs_snapshot(table.path, savepoint), COLUMNS) == at_savepoint
    assert table.validate() == []
    # An instant between the savepoint and the cleaner's bound is gone, as before.
    between = [i.timestamp for i in table.timeline() if savepoint < i.timestamp < table.earliest_readable_instant()]
    with pytest.raises(TimelineError, match="was cleaned"):
        table.read(as_of=between[0])

    # Deleted, the savepoint no longer holds the cleaner or archival back.
    table.delete_savepoint(savepoint)
    assert table.savepoints() == [] and hoodie(table, ".savepoint.inflight") == []
    table.upsert(customers(spark, [(99, "x", "us")]))
    table.run_services(SMALL)
    assert table.context.timeline.archived().through > savepoint
    assert not [p for p in kept - {f.path for f in table.latest_base_files()}
                if os.path.exists(os.path.join(table.path, p))]
    with pytest.raises(TimelineError):
        table.read(as_of=savepoint)
    with pytest.raises(TimelineError, match="no savepoint at"):
        table.delete_savepoint(savepoint)
    assert table.validate() == []


def test_an_index_whose_base_another_writers_restore_removed_is_built_again(spark, tmp_path, monkeypatch):
    """Hudi's restore (or a rollback of completed commits) knows nothing of hudilite's index: a
    base at a removed instant holds the removed commits' keys (here: key 2 deleted), and an
    upsert would store key 2 again in a new file group."""
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    table.upsert(customers(spark, [(1, "a", "us"), (2, "b", "us")]))
    first = table.timeline()[-1].timestamp
    table.savepoint(first)
    table.delete(customers(spark, [(2, None, "us")]).select("id"))
    table.build_index()  # its base: the delete
    monkeypatch.setattr(restore_module, "_restore_index", lambda ctx, target: None)  # as Hudi's restore
    table.restore(first)
    monkeypatch.undo()
    table = HudiTable.open(spark, table.path)
    assert rows(table) == [(1, "a", "us"), (2, "b", "us")]
    table.upsert(customers(spark, [(2, "again", "us")]))
    assert rows(table) == [(1, "a", "us"), (2, "again", "us")]  # found, not stored twice
    assert table.validate() == []


def test_restore_to_a_savepoint_rolls_back_later_commits_their_files_and_the_index(spark, tmp_path):
    table, savepoint, at_savepoint = history_with_a_savepoint(spark, tmp_path)
    table.context.compact_index()  # the index base is now newer than the savepoint
    later = [i.timestamp for i in table.timeline() if i.is_completed and i.timestamp > savepoint]

    rolled_back = table.restore(savepoint)

    assert rolled_back == list(reversed(later))
    assert [i.timestamp for i in table.timeline()][-1] == savepoint
    assert rows(table) == at_savepoint
    assert rows(HudiTable.open(spark, table.path)) == at_savepoint
    assert rows_of_arrow(hudi_rs_snapshot(table.path), COLUMNS) == at_savepoint
    assert not {t for t in base_file_instants(table) if t > savepoint}  # every later file is gone
    restores = hoodie(table, ".restore")
    assert len(restores) == 1 and hoodie(table, ".restore.requested") and hoodie(table, ".restore.inflight")
    record = avro(table, restores[0])
    assert record["instantsToRollback"] == rolled_back
    assert record["extraMetadata"] == {"savepointToRestoreTimestamp": savepoint}
    assert table.savepoints() == [savepoint]  # the savepoint itself stays
    assert table.validate() == []
    assert_hudi_rs_agrees(table)

    # The index went back too: key 0 (deleted after the savepoint) is updated, not duplicated,
    # and key 30 (inserted after it) is inserted again, once.
    table.upsert(customers(spark, [(0, "again", "us"), (30, "again", "us")]))
    after = rows(table)
    assert [r for r in after if r[0] in (0, 30)] == [(0, "again", "us"), (30, "again", "us")]
    assert len(after) == len(at_savepoint) + 1
    assert table.validate() == []
    history = [(h["action"], h["state"]) for h in table.history()]
    assert ("savepoint", "COMPLETED") in history and ("restore", "COMPLETED") in history


def test_restore_refuses_what_the_cleaner_removed_and_a_write_in_flight(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    first = table.upsert(customers(spark, [(1, "a", "us")]))
    for n in range(3):
        table.upsert(customers(spark, [(1, f"b{n}", "us")]))
    table.clean(retain_commits=1)
    with pytest.raises(TimelineError, match="was cleaned"):
        table.restore(first)
    with pytest.raises(TimelineError, match="nothing to savepoint|was cleaned"):
        table.savepoint(first)
    latest = table.timeline()[-1].timestamp
    assert table.restore(latest) == []  # already there

    other = HudiTable.open(spark, table.path)
    while_writing(table, lambda: other.restore(latest))
    with pytest.raises(ConcurrentWriteError, match="is being written; restore once it has finished"):
        table.upsert(customers(spark, [(2, "c", "us")]))
    assert rows(table) == [(1, "b2", "us")]


def test_a_write_that_began_before_a_restore_is_not_published(spark, tmp_path, monkeypatch):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    first = table.upsert(customers(spark, [(1, "a", "us")]))
    table.upsert(customers(spark, [(1, "b", "us")]))
    other = HudiTable.open(spark, table.path)
    # The window the lock leaves: the write claimed its instant after the restore looked.
    monkeypatch.setattr(restore_module, "_refuse_writes_in_flight", lambda ctx: None)
    while_writing(table, lambda: other.restore(first))
    with pytest.raises(ConcurrentWriteError, match="restored (while this write ran|to before)"):
        table.upsert(customers(spark, [(2, "c", "us")]))
    assert rows(table) == [(1, "a", "us")]
    assert table.validate() == []


def test_a_restore_that_dies_blocks_writes_until_it_is_run_again(spark, tmp_path, monkeypatch):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    target = table.upsert(customers(spark, [(1, "a", "us"), (2, "b", "eu")]))
    seen = []
    for n in range(3):
        table.upsert(customers(spark, [(1, f"u{n}", "us"), (10 + n, "n", "eu")]))
        seen.append(rows(table))

    def die_after_the_first_rollback(phase):
        if phase == "restore":
            raise RuntimeError("killed")
    monkeypatch.setattr(faults, "reach", die_after_the_first_rollback)
    with pytest.raises(RuntimeError):
        table.restore(target)
    monkeypatch.undo()

    assert rows(table) == seen[-2]  # readers see the table one commit back: never a half-removed one
    assert hoodie(table, ".restore.inflight") and not hoodie(table, ".restore")
    with pytest.raises(TimelineError, match=f"a restore to {target} is unfinished"):
        table.upsert(customers(spark, [(3, "c", "us")]))
    with pytest.raises(TimelineError, match=f"restore to {target} first"):
        table.restore(table.timeline()[-1].timestamp)
    table.restore(target)
    assert rows(table) == [(1, "a", "us"), (2, "b", "eu")]
    assert not {t for t in base_file_instants(table) if t > target}
    table.upsert(customers(spark, [(3, "c", "us")]))
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_cleans_are_recorded_as_hudi_clean_instants_and_a_dead_clean_is_finished(spark, tmp_path, monkeypatch):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    for n in range(4):
        table.upsert(customers(spark, [(1, f"v{n}", "us"), (2, f"w{n}", "eu")]))
    before = {f.path for i in table.timeline() for f in table.latest_base_files(i.timestamp)}

    def die_after_one_file(phase):
        if phase == "clean":
            raise RuntimeError("killed")
    monkeypatch.setattr(faults, "reach", die_after_one_file)
    with pytest.raises(RuntimeError):
        table.clean(retain_commits=1)
    monkeypatch.undo()
    (requested,) = hoodie(table, ".clean.requested")
    assert hoodie(table, ".clean.inflight") and not hoodie(table, ".clean")
    plan = avro(table, requested)
    earliest = table.timeline()[-1].timestamp
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["earliestInstantToRetain"]["timestamp"] == earliest
    planned = {os.path.join(p, os.path.basename(f["filePath"]))
               for p, files in plan["filePathsToBeDeletedPerPartition"].items() for f in files}
    assert planned == before - {f.path for f in table.latest_base_files()} and len(planned) == 6
    with pytest.raises(TimelineError, match="was cleaned"):  # recorded before the first file went
        table.read(as_of=table.timeline()[-2].timestamp)

    table.clean(retain_commits=1)  # finishes the dead clean, and has nothing of its own to do
    (done,) = hoodie(table, ".clean")
    metadata = avro(table, done)
    assert done[:17] == requested[:17] and metadata["earliestCommitToRetain"] == earliest
    assert metadata["totalFilesDeleted"] == 5  # the dead clean deleted one itself
    assert sorted(n for p in metadata["partitionMetadata"].values() for n in p["deletePathPatterns"]) == \
        sorted(os.path.basename(p) for p in planned)
    assert not [p for p in planned if os.path.exists(os.path.join(table.path, p))]
    assert rows(table) == [(1, "v3", "us"), (2, "w3", "eu")]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_the_file_versions_policy_keeps_slices_per_file_group(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    instants = [table.upsert(customers(spark, [(1, f"v{n}", "us")] + ([(2, "w", "eu")] if n == 0 else [])))
                for n in range(4)]
    plan = table.clean(policy="keep_latest_file_versions", retain_file_versions=2)
    us = [f for f in plan.files_to_delete]
    assert [parse_base_file_name(os.path.basename(f.path)).instant for f in us] == instants[:2]
    # eu's one slice stays, us keeps two: the snapshot as of instant 3 is the oldest intact one.
    assert table.earliest_readable_instant() == instants[2]
    assert rows(table, as_of=instants[2]) == [(1, "v2", "us"), (2, "w", "eu")]
    with pytest.raises(TimelineError, match="was cleaned"):
        table.read(as_of=instants[1])
    (done,) = hoodie(table, ".clean")
    assert avro(table, done)["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_the_cli_savepoints_restores_and_shows_the_service_instants(spark, tmp_path, capsys):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    first = table.upsert(customers(spark, [(1, "a", "us")]))
    assert cli.main(["savepoint", table.path]) == 0
    assert f"savepointed {first}" in capsys.readouterr().out
    assert cli.main(["stats", table.path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["savepoints"] == [first]
    table.upsert(customers(spark, [(1, "b", "us")]))
    table.upsert(customers(spark, [(2, "c", "us")]))
    table.upsert(customers(spark, [(1, "d", "us")]))
    assert cli.main(["clean", table.path, "--retain", "1"]) == 0
    assert cli.main(["timeline", table.path]) == 0
    out = capsys.readouterr().out
    assert "deleted 1 file;" in out  # the second slice of key 1's file group; the savepoint keeps the first
    assert " savepoint " in out and " clean " in out
    assert cli.main(["restore", table.path, first]) == 0
    assert "rolled back 3 instants" in capsys.readouterr().out
    assert rows(HudiTable.open(spark, table.path)) == [(1, "a", "us")]
    assert cli.main(["savepoint", table.path, first, "--delete"]) == 0
    assert "savepoints: none" in capsys.readouterr().out
    assert cli.main(["timeline", table.path]) == 0
    assert "restore to " + first in capsys.readouterr().out


def test_a_savepoint_drop_that_died_is_finished_by_the_next_clean(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    savepoint = table.upsert(customers(spark, [(1, "a", "us")]))
    table.savepoint()
    kept = {f.path for f in table.latest_base_files()}
    for n in range(3):
        table.upsert(customers(spark, [(1, f"b{n}", "us")]))
    table.clean(retain_commits=1)
    assert all(os.path.exists(os.path.join(table.path, p)) for p in kept)
    os.remove(os.path.join(table.path, ".hoodie", f"{savepoint}.savepoint"))  # the drop died after its first step
    assert table.savepoints() == []
    table.clean(retain_commits=1)
    assert hoodie(table, ".savepoint.inflight") == []
    assert not [p for p in kept if os.path.exists(os.path.join(table.path, p))]
    assert rows(table) == [(1, "b2", "us")]
    assert table.validate() == []


def test_a_savepoint_waits_for_an_older_write_in_flight(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    table.upsert(customers(spark, [(1, "a", "us")]))
    other, third = HudiTable.open(spark, table.path), HudiTable.open(spark, table.path)

    def publish_then_savepoint():  # the savepointed instant is newer than the write still in flight
        other.upsert(customers(spark, [(2, "b", "us")]))
        return third.savepoint()
    while_writing(table, publish_then_savepoint)
    with pytest.raises(ConcurrentWriteError, match="is being written; savepoint"):
        table.upsert(customers(spark, [(3, "c", "us")]))
    assert third.savepoints() == []
    assert rows(table) == [(1, "a", "us"), (2, "b", "us")]


def test_the_file_versions_policy_lets_archival_go_on_and_leaves_no_file_behind(spark, tmp_path):
    services = TableServices(keep_min_commits=3, keep_max_commits=5, cleaner_policy="keep_latest_file_versions",
                             retain_file_versions=2)
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by="region", record_key="id")
    for n in range(3):  # eu's file group gets three slices, then is never written again
        table.upsert(customers(spark, [(1, f"u{n}", "us"), (2, f"e{n}", "eu")]))
        table.run_services(services)
    for n in range(9):
        table.upsert(customers(spark, [(1, f"v{n}", "us")]))
        table.run_services(services)
    archived = table.context.timeline.archived()
    assert archived.through is not None and len(table.timeline()) <= 5
    view = table.context.timeline.view()
    known = {s.path for g in view.groups.values() for s in g.slices}
    on_disk = {os.path.relpath(os.path.join(d, f), table.path) for d, _, fs in os.walk(table.path)
               if ".hoodie" not in d for f in fs if f.endswith(".parquet")}
    assert on_disk <= known  # nothing orphaned by the archival
    per_group = {}
    for path in on_disk:
        file_id = parse_base_file_name(os.path.basename(path)).file_id
        per_group[file_id] = per_group.get(file_id, 0) + 1
    assert sorted(per_group.values()) == [1, 2]  # eu keeps its newest slice (the rest went with archival), us two
    cleans = hoodie(table, ".clean")
    table.run_services(services)  # nothing new to delete: no new clean instant
    assert hoodie(table, ".clean") == cleans
    assert rows(table) == [(1, "v8", "us"), (2, "e2", "eu")]
    assert table.validate() == []
    # The cleans archival made never moved the earliest readable instant back: every instant
    # from it on reads, every one before it is refused by name (not a missing file).
    earliest = table.earliest_readable_instant()
    for instant in [i.timestamp for i in table.timeline() if i.is_completed]:
        if instant >= earliest:
            rows(table, as_of=instant)
        else:
            with pytest.raises(TimelineError, match="was cleaned"):
                table.read(as_of=instant)
    assert_hudi_rs_agrees(table)


def test_a_restore_still_running_when_a_write_begins_is_not_counted_as_seen(spark, tmp_path, monkeypatch):
    """The interleaving: a write passes check_writable; a restore starts and rolls back a
    commit; the write claims its instant while the restore is in flight, and would publish once
    the restore completed, over an index the restore rebuilt under it. Only restores completed
    when a write began count as seen."""
    import threading

    from dbt.adapters.hudilite.table.format.commit import CommitMetadata
    from dbt.adapters.hudilite.table.format.instant import COMMIT

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    first = table.upsert(customers(spark, [(1, "a", "us")]))
    table.upsert(customers(spark, [(1, "b", "us")]))
    write = table.context.transaction(COMMIT)  # checked writable: no restore yet
    rolled_back, go_on = threading.Event(), threading.Event()

    def reach(phase):
        if phase == "restore":  # a commit rolled back, the restore instant in flight
            rolled_back.set()
            assert go_on.wait(120)

    monkeypatch.setattr(restore_module.faults, "reach", reach)
    other = HudiTable.open(spark, table.path)
    failed = []

    def restore():
        try:
            other.restore(first)
        except Exception as err:  # noqa: BLE001 - reported below
            failed.append(err)

    restoring = threading.Thread(target=restore)
    restoring.start()
    assert rolled_back.wait(120)
    with pytest.raises(ConcurrentWriteError, match="restored while this write ran"):
        with write:  # claims now, the restore still running
            go_on.set()
            restoring.join(120)
            assert not failed and [i.timestamp for i in table.timeline() if i.is_completed] == [first]
            write.commit(CommitMetadata(operation="upsert"))
    assert rows(table) == [(1, "a", "us")] and table.validate() == []
