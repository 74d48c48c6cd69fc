"""Table versions 8 and 9 (timeline layout 2) as Hudi 1.0 and 1.1 write them, read without an
engine: instant file names with completion times, Avro commit metadata, the properties, and
the metadata table's timeline and slices. The tables are hudi-rs's test data
(`tests/fixtures/hudi-1x-tables/`)."""

import os
import zipfile

import pytest

from dbt.adapters.hudilite.table.context import read_config
from dbt.adapters.hudilite.table.format.commit import CommitMetadata
from dbt.adapters.hudilite.table.format.instant import (CLUSTERING, COMMIT, COMPLETED, INFLIGHT, REPLACE_COMMIT,
                                                         REQUESTED, Instant, parse_instant_file_name)
from dbt.adapters.hudilite.table.format.properties import TableConfig, loads
from dbt.adapters.hudilite.table.format.timeline import Timeline
from dbt.adapters.hudilite.table.metadata.reader import latest_slices
from dbt.adapters.hudilite.table.metadata.table import MetadataTable
from dbt.adapters.hudilite.table.metadata.timeline import MetadataTimeline
from dbt.adapters.hudilite.table.storage.filesystem import Storage

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hudi-1x-tables")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("hudi-1x-tables")
    for name in ("v8_simplekeygen_nonhivestyle", "v8_empty", "v9_txns_simple_meta", "v9_txns_simple_overwrite"):
        with zipfile.ZipFile(os.path.join(FIXTURES, name + ".zip")) as archive:
            archive.extractall(root, [m for m in archive.namelist() if not m.startswith("__MACOSX")])
    return root


@pytest.mark.parametrize("name, instant", [
    ("20250713011315930.commit.requested", Instant("20250713011315930", COMMIT, REQUESTED)),
    ("20250713011315930.inflight", Instant("20250713011315930", COMMIT, INFLIGHT)),
    ("20250713011315930_20250713011316231.commit", Instant("20250713011315930", COMMIT, COMPLETED, "20250713011316231")),
    ("20260307162454799.clustering.requested", Instant("20260307162454799", CLUSTERING, REQUESTED)),
    ("20260307162454799.clustering.inflight", Instant("20260307162454799", CLUSTERING, INFLIGHT)),
    ("20260307162454799_20260307162456102.replacecommit",
     Instant("20260307162454799", REPLACE_COMMIT, COMPLETED, "20260307162456102")),
    ("20260307162457540.indexing.requested", None),  # no part of the commit timeline
    ("20260307162454799_20260307162456102.clustering", None),  # clustering completes as replacecommit
    ("20260307162454799_20260307162456102.commit.inflight", None),  # only a completed instant has a completion
    ("20260307162454799.clustering", None),
])
def test_layout_2_instant_file_names_parse_and_round_trip(name, instant):
    parsed = parse_instant_file_name(name)
    assert parsed == instant
    if instant is not None:
        assert parsed.completion_time == instant.completion_time and parsed.file_name == name


def test_a_completed_instant_orders_by_its_requested_time_and_knows_when_it_completed():
    early = Instant("20260101000000000", COMMIT, COMPLETED, "20260101000009000")
    late = Instant("20260101000001000", COMMIT, COMPLETED, "20260101000002000")
    assert sorted([late, early]) == [early, late]
    assert (early.completed_at, late.completed_at) == ("20260101000009000", "20260101000002000")
    assert Instant("20260101000000000", COMMIT, COMPLETED).completed_at == "20260101000000000"  # layout 1


def test_every_commit_of_a_version_9_table_decodes_from_avro(tables):
    storage = Storage(str(tables / "v9_txns_simple_meta"))
    timeline = Timeline.of_table(storage, loads(storage.read_text(".hoodie/hoodie.properties")))
    commits = timeline.commits()
    assert [m.operation for _, m in commits] == [
        "INSERT", "UPSERT_PREPPED", "DELETE_PREPPED", "UPSERT_PREPPED", "DELETE_PREPPED", "UPSERT_PREPPED", "INSERT",
        "INSERT_OVERWRITE", "INSERT", "INSERT", "CLUSTER", "INSERT"]
    first, metadata = commits[0]
    assert first.completion_time == "20260307162438653" and len(metadata.write_stats) == 3
    assert all(s.path.startswith(s.partitionPath + "/") and s.fileSizeInBytes > 0 for s in metadata.write_stats)
    assert metadata.write_stats[0].prevCommit is None  # Hudi writes "null" for a first slice
    assert '"name":"txn_id"' in metadata.extra["schema"].replace(" ", "")
    overwrite = dict(commits)[[i for i, m in commits if m.operation == "INSERT_OVERWRITE"][0]]
    assert sum(len(ids) for ids in overwrite.replaced_file_ids.values()) == 2
    # the same decoding from the file's bytes, as an archive's row carries them
    data = storage.read_bytes(timeline.path_of(first))
    assert data[:4] == b"Obj\x01" and CommitMetadata.from_bytes(data) == metadata


@pytest.mark.parametrize("name, version, ordering, keygen", [
    ("v8_simplekeygen_nonhivestyle", 8, "longField", "org.apache.hudi.keygen.SimpleKeyGenerator"),
    ("v8_empty", 8, None, "org.apache.hudi.keygen.NonpartitionedKeyGenerator"),
    ("v9_txns_simple_meta", 9, "txn_ts", "org.apache.hudi.keygen.SimpleKeyGenerator"),  # hoodie.table.ordering.fields
])
def test_the_properties_of_hudi_1x_tables_read_with_their_version_and_layout(tables, name, version, ordering, keygen):
    config = read_config(Storage(str(tables / name)))
    assert (config.table_version, config.timeline_folder, config.history_folder) == (version, "timeline", "history")
    assert (config.precombine_field, config.keygen_class) == (ordering, keygen)
    assert config.not_writable is None  # hudilite continues them at their version


def test_a_version_6_table_keeps_layout_1_and_an_unknown_version_is_refused():
    config = TableConfig.from_properties({"hoodie.table.name": "t", "hoodie.table.version": "6"})
    assert (config.table_version, config.timeline_folder, config.not_writable) == (6, None, None)
    with pytest.raises(Exception, match="table version 10 is not one hudilite reads"):
        TableConfig.from_properties({"hoodie.table.name": "t", "hoodie.table.version": "10"})


def test_a_version_9_metadata_table_reads_its_layout_2_timeline_and_slices_by_completion(tables):
    storage = Storage(str(tables / "v9_txns_simple_meta"))
    timeline = MetadataTimeline(storage)
    assert timeline.dir == ".hoodie/metadata/.hoodie/timeline"
    # Its compaction took a new time, not `<T>001`, and completed before the deltacommit of the
    # data instant requested just before it.
    assert "20260307162449278" in timeline.own_instants()
    assert timeline.completions["20260307162449244"] > timeline.completions["20260307162449278"]
    names = storage.list_names(".hoodie/metadata/files")
    (piece,) = latest_slices(names, lambda instant: True, timeline.completions).values()
    assert piece.base_instant == "20260307162449278"
    assert piece.logs[0] == ".files-0000-0_20260307162449244.log.1_3-184-443"  # completed after the compaction began
    # its `files` partition lists exactly the files of the active commits' latest slices and their history
    files = MetadataTable(storage).reader().files()
    listed = {f"{p}/{n}" for p, names in files.items() for n in names}
    data = Timeline.of_table(storage, loads(storage.read_text(".hoodie/hoodie.properties")))
    assert {f.path for f in data.view().latest_base_files()} <= listed


def _t(n: int) -> str:
    return f"202611290000{n:05d}"


def _layout_2_table(root, instants):
    """A version 8 table of one-file commits: (requested, completed, archived) by small numbers."""
    from dbt.adapters.hudilite.table.format import lsm_history
    from dbt.adapters.hudilite.table.format.commit import UPSERT, WriteStat
    from dbt.adapters.hudilite.table.format.properties import dumps

    storage = Storage(str(root))
    properties = TableConfig(name="t", record_key_fields=["id"], table_version=8, timeline_folder="timeline").to_properties()
    storage.write_bytes(".hoodie/hoodie.properties", dumps(properties).encode())
    history = []
    for requested, completed, archived in instants:
        t = _t(requested)
        body = CommitMetadata(UPSERT, [WriteStat(fileId=f"f{requested}", path=f"f{requested}_0-0-0_{t}.parquet",
                                                  partitionPath="", numWrites=1)]).to_avro(False)
        if archived:
            history.append(lsm_history.HistoryEntry(t, _t(completed), COMMIT, body, None))
            continue
        for name, data in ((f"{t}.commit.requested", b""), (f"{t}.inflight", b""), (f"{t}_{_t(completed)}.commit", body)):
            storage.write_bytes(f".hoodie/timeline/{name}", data)
    if history:
        lsm_history.write_history(storage, ".hoodie/timeline/history", history)
    return Timeline.of_table(storage, properties)


def test_a_changes_read_reaches_an_archived_instant_that_completed_after_an_active_one(tmp_path):
    """Hudi archives by instant time: X, requested first, completed last but is archived; a
    reader whose checkpoint is W's completion must still read X."""
    timeline = _layout_2_table(tmp_path, [(1, 5, True), (2, 3, False), (6, 7, False)])
    assert timeline.archived().through == _t(1)
    _, changed = timeline.completed_view(_t(3), _t(7))
    assert changed == {_t(1), _t(6)}
    assert timeline.completion_bound(_t(3), None) == _t(7)
    assert timeline.has_completion(_t(5)) and timeline.has_completion(_t(3)) and not timeline.has_completion(_t(4))


def test_a_changes_read_ending_inside_the_history_is_refused_not_empty(tmp_path):
    timeline = _layout_2_table(tmp_path, [(1, 5, True), (2, 3, False), (6, 7, False)])
    end = timeline.completion_bound("0", _t(4))
    assert end == _t(3)
    with pytest.raises(Exception, match="archived part of the timeline"):
        timeline.completed_view("0", end)


def test_a_restore_at_layout_2_rolls_back_what_completed_after_its_target(tmp_path):
    """As Hudi 1.x restores: by completion. A (requested 1, completed 30) and B (requested 10,
    completed 20): restoring to A keeps B, which completed before it; restoring to B takes A."""
    timeline = _layout_2_table(tmp_path, [(1, 30, False), (10, 20, False), (40, 50, False)])
    assert [i.timestamp for i in timeline.completed_after(_t(1))] == [_t(40)]
    assert [i.timestamp for i in timeline.completed_after(_t(10))] == [_t(1), _t(40)]


@pytest.mark.parametrize("name", ["v8_simplekeygen_nonhivestyle", "v8_empty", "v8_archived_history"])
def test_an_upgrade_from_8_to_9_edits_the_properties_as_hudi_does_and_keeps_the_rest(tmp_path, name):
    """No Spark: the timeline stays, the properties change only where version 9 names things
    otherwise (the merge mode, time zone, checksum and database stay as they were)."""
    from dbt.adapters.hudilite.table.context import TableContext
    from dbt.adapters.hudilite.table.services import upgrade

    with zipfile.ZipFile(os.path.join(FIXTURES, name + ".zip")) as archive:
        archive.extractall(tmp_path, [m for m in archive.namelist() if not m.startswith("__MACOSX")])
    storage = Storage(str(tmp_path / name))
    before = loads(storage.read_text(".hoodie/hoodie.properties"))
    timeline = sorted(storage.list_names(".hoodie/timeline"))
    assert upgrade.upgrade(TableContext(None, storage, read_config(storage)), 9) is True
    after = loads(storage.read_text(".hoodie/hoodie.properties"))
    assert sorted(storage.list_names(".hoodie/timeline")) == timeline
    assert after["hoodie.table.version"] == "9" and after["hoodie.table.format"] == "native"
    for key in ("hoodie.record.merge.mode", "hoodie.table.checksum", "hoodie.table.initial.version",
                "hoodie.table.timeline.timezone", "hoodie.database.name", "hoodie.timeline.layout.version"):
        assert after.get(key) == before.get(key), key
    assert "hoodie.record.merge.strategy.id" not in after and "hoodie.compaction.payload.class" not in after
    assert after["hoodie.table.legacy.payload.class"] == before["hoodie.compaction.payload.class"]
    assert after.get("hoodie.table.ordering.fields") == before.get("hoodie.table.precombine.field")
    assert "hoodie.table.precombine.field" not in after
    assert read_config(storage).table_version == 9
    with pytest.raises(Exception, match="never downgrades"):
        upgrade.upgrade(TableContext(None, storage, read_config(storage)), 8)
