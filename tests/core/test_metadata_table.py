"""Hudi's metadata table kept by hudilite: its `files` partition lists every committed file of
the table after every action (commit, replacecommit, clean, compaction of the metadata table
itself, restore), a data instant that never completed leaves nothing a reader takes, a table
without one gains it on its next write, and hudi-rs reads the same rows throughout."""

import posixpath
import shutil

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.metadata.table import MetadataTable
from dbt.adapters.hudilite.table.metadata.reader import FILES
from dbt.adapters.hudilite.table.metadata.writer import FILES_GROUP, MAX_DELTA_COMMITS
from dbt.adapters.hudilite.table.storage.layout import METADATA_TABLE_DIR
from tests.core.hudi_rs import assert_hudi_rs_agrees

SCHEMA = "id long, v string, day string"


def listed_files(table):
    """What the metadata table lists: relative path -> size."""
    reader = MetadataTable(table.context.storage).reader()
    assert reader is not None, "the table lists no metadata table"
    return {posixpath.join(p, name) if p else name: size for p, files in reader.files().items() for name, size in files.items()}


def committed_on_storage(table):
    storage = table.context.storage
    committed = {s.path for _, m in table.context.timeline.commits() for s in m.write_stats}
    return {path: size for path, size in storage.list_files_with_sizes("") if path in committed}


def check(table, step):
    assert listed_files(table) == committed_on_storage(table), step
    assert table.validate() == [], step


def test_the_files_partition_follows_every_action(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by="day", record_key="id")
    table.upsert(spark.createDataFrame([(i, "a", f"d{i % 3}") for i in range(30)], SCHEMA))
    properties = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=files,record_index\n" in properties  # a keyed table
    check(table, "first commit")
    for step in range(MAX_DELTA_COMMITS + 1):  # enough deltacommits for a compaction of the metadata table
        table.upsert(spark.createDataFrame([(step, f"s{step}", f"d{step % 3}"), (100 + step, "new", "d9")], SCHEMA))
        check(table, f"upsert {step}")
    bases = [n for n in (tmp_path / "t" / ".hoodie" / "metadata" / "files").iterdir() if n.name.endswith(".hfile")]
    assert any(n.name.endswith("001.hfile") for n in bases), "the metadata table was compacted"
    table.insert_overwrite(spark.createDataFrame([(500, "over", "d1")], SCHEMA))
    check(table, "insert_overwrite")
    table.delete(spark.createDataFrame([(1,)], "id long"))
    check(table, "delete")
    table.clean(retain_commits=1)
    check(table, "clean")
    assert_hudi_rs_agrees(table)


def test_a_write_stopped_between_the_two_deltacommits_leaves_nothing_readers_take(spark, tmp_path, monkeypatch):
    from dbt.adapters.hudilite.table.storage import faults

    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by="day", record_key="id")
    table.upsert(spark.createDataFrame([(1, "a", "d1")], SCHEMA))
    before = listed_files(table)

    def killed(phase):
        if phase == "metadata_deltacommit":
            raise KeyboardInterrupt("stopped after the metadata deltacommit")
    monkeypatch.setattr(faults, "reach", killed)
    try:
        table.upsert(spark.createDataFrame([(2, "b", "d2")], SCHEMA))
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    table = HudiTable.open(spark, table.path)
    assert listed_files(table) == before
    assert sorted(r.id for r in table.read().collect()) == [1]
    table.upsert(spark.createDataFrame([(3, "c", "d3")], SCHEMA))
    check(table, "after the rollback")
    assert_hudi_rs_agrees(table)


def test_a_table_without_one_gains_it_on_its_next_write_and_a_dropped_one_stays_dropped(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by="day", record_key="id")
    table.upsert(spark.createDataFrame([(1, "a", "d1"), (2, "b", "d2")], SCHEMA))
    assert table.drop_metadata_table() is True
    table.upsert(spark.createDataFrame([(3, "c", "d3")], SCHEMA))
    assert not (tmp_path / "t" / ".hoodie" / "metadata").exists()  # dropped for good
    assert table.validate() == []
    MetadataTable(table.context.storage).enable()
    table.upsert(spark.createDataFrame([(4, "d", "d1")], SCHEMA))
    check(table, "bootstrapped from the snapshot")
    group = [n.name for n in (tmp_path / "t" / METADATA_TABLE_DIR / FILES).iterdir() if n.name.startswith(FILES_GROUP)]
    assert any(n.endswith("_00000000000000010.hfile") for n in group)
    assert_hudi_rs_agrees(table)


def test_a_restore_takes_the_metadata_table_down_and_the_next_write_builds_it_again(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by="day", record_key="id")
    first = table.upsert(spark.createDataFrame([(1, "a", "d1")], SCHEMA))
    table.savepoint(first)
    table.upsert(spark.createDataFrame([(2, "b", "d2")], SCHEMA))
    table.restore(first)
    assert MetadataTable(table.context.storage).reader() is None
    assert table.validate() == []
    table.upsert(spark.createDataFrame([(3, "c", "d3")], SCHEMA))
    check(table, "after the restore")
    assert sorted(r.id for r in table.read().collect()) == [1, 3]


def record_index_of(table):
    """What the metadata table's record_index holds: key -> (partition, fileId)."""
    located = MetadataTable(table.context.storage).record_index_locations()
    assert located is not None, "the table lists no record_index"
    return {k: (p, f) for k, p, f in zip(*(located.column(c).to_pylist() for c in ("key", "partition", "file_id")))}


def snapshot_locations(table):
    return {r._hoodie_record_key: (r._hoodie_partition_path, r._hoodie_file_name.split("_")[0])
            for r in table.read().select("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name").collect()}


def check_record_index(table, step):
    check(table, step)
    assert record_index_of(table) == snapshot_locations(table), step


def test_the_record_index_follows_every_action(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by="day", record_key="id")
    table.upsert(spark.createDataFrame([(i, "a", f"d{i % 3}") for i in range(30)], SCHEMA))
    table.upsert(spark.createDataFrame([(1, "b", "d1"), (40, "new", "d4")], SCHEMA))  # builds it from the snapshot
    properties = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=files,record_index\n" in properties
    groups = {n.name.split("_")[0].lstrip(".") for n in (tmp_path / "t" / ".hoodie" / "metadata" / "record_index").iterdir()
              if n.name.startswith((".record-index-", "record-index-"))}
    assert groups == {f"record-index-{i:04d}-0" for i in range(10)}
    check_record_index(table, "bootstrap and one upsert")
    for step in range(MAX_DELTA_COMMITS + 1):  # enough deltacommits for a compaction of the metadata table
        table.upsert(spark.createDataFrame([(step, f"s{step}", f"d{step % 3}"), (100 + step, "new", "d9")], SCHEMA))
    check_record_index(table, "upserts and a compaction")
    bases = [n.name for n in (tmp_path / "t" / ".hoodie" / "metadata" / "record_index").iterdir() if n.name.endswith("001.hfile")]
    assert bases, "record_index was compacted"
    table.insert_overwrite(spark.createDataFrame([(500, "over", "d1"), (4, "moved", "d1")], SCHEMA))
    check_record_index(table, "insert_overwrite")
    table.delete(spark.createDataFrame([(2,), (500,)], "id long"))
    check_record_index(table, "delete")
    table.upsert(spark.createDataFrame([(i, "big", f"d{i % 5}") for i in range(1000, 3000)], SCHEMA))
    check_record_index(table, "a larger upsert")
    table.clean(retain_commits=1)
    check_record_index(table, "clean")
    # hudilite's own index is a cache of record_index: gone, the next write builds it from there
    shutil.rmtree(tmp_path / "t" / ".hoodie" / ".hudilite" / "record_index")
    table.upsert(spark.createDataFrame([(1001, "again", "d1"), (9000, "new", "d2")], SCHEMA))
    assert table.index.state()["built_from"] == "record_index"
    check_record_index(table, "the cache built again from record_index")
    assert sorted((r.id, r.v) for r in table.read().where("id in (1001, 1002, 9000)").collect()) == [
        (1001, "again"), (1002, "big"), (9000, "new")]  # one row each: key 1001 was found, not inserted again
    assert table.read().count() == len(snapshot_locations(table))  # no key stored twice
    assert_hudi_rs_agrees(table)
    # A record_index missing a file group (a writer died deleting it) is not taken: the snapshot is.
    folder = tmp_path / "t" / ".hoodie" / "metadata" / "record_index"
    for gone in [f for f in folder.iterdir() if "record-index-0000-0" in f.name]:
        gone.unlink()
    assert table.build_index(num_shards=table.index.num_shards) == len(snapshot_locations(table))
    assert table.index.state()["built_from"] == "snapshot"
    assert [p for p in table.validate() if not p.startswith("metadata table")] == []
