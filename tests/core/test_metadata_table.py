"""Hudi's metadata table kept by hudilite: its `files` partition lists every committed file of
the table after every action (commit, replacecommit, clean, compaction of the metadata table
itself, restore), a data instant that never completed leaves nothing a reader takes, a table
without one gains it on its next write, and hudi-rs reads the same rows throughout."""

import posixpath
import shutil

from dbt.adapters.hudilite.table import HudiTable
from dbt.adapters.hudilite.table.metadata.table import MetadataTable
from dbt.adapters.hudilite.table.metadata.reader import FILES
from dbt.adapters.hudilite.table.metadata.timeline import TIMELINE_DIR
from dbt.adapters.hudilite.table.metadata.writer import FILES_GROUP, MAX_DELTA_COMMITS, MetadataTableWriter
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
    # The next deltacommit names its `files` log from the slice the newest one recorded (no
    # listing) when that one is ours and nothing is pending: it is the slice a listing finds.
    writer = MetadataTableWriter(table.context.storage)
    timeline = table.context.storage.list_names(TIMELINE_DIR)
    recorded = writer.recorded_files_slice(timeline, writing="")
    if recorded is not None:
        assert recorded == writer.latest_slices(FILES, timeline)[FILES_GROUP], step
    return recorded is not None  # not after a compaction, nor after a deltacommit Hudi's writer made


def test_the_files_partition_follows_every_action(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "events", partition_by="day", record_key="id")
    table.upsert(spark.createDataFrame([(i, "a", f"d{i % 3}") for i in range(30)], SCHEMA))
    properties = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=files,record_index\n" in properties  # a keyed table
    check(table, "first commit")
    recorded = 0
    for step in range(MAX_DELTA_COMMITS + 1):  # enough deltacommits for a compaction of the metadata table
        table.upsert(spark.createDataFrame([(step, f"s{step}", f"d{step % 3}"), (100 + step, "new", "d9")], SCHEMA))
        recorded += check(table, f"upsert {step}")
    assert recorded == MAX_DELTA_COMMITS  # every upsert's but the one the compaction followed
    bases = [n for n in (tmp_path / "t" / ".hoodie" / "metadata" / "files").iterdir() if n.name.endswith(".hfile")]
    assert any(n.name.endswith("001.hfile") for n in bases), "the metadata table was compacted"
    table.insert_overwrite(spark.createDataFrame([(500, "over", "d1")], SCHEMA))
    check(table, "insert_overwrite")
    table.delete(spark.createDataFrame([(1,)], "id long"))
    check(table, "delete")
    table.clean(retain_commits=1)
    check(table, "clean")
    assert_hudi_rs_agrees(table)
    # validate() reads the metadata table both ways: a listed file gone from storage is reported
    gone = tmp_path / "t" / sorted(committed_on_storage(table))[0]
    kept = gone.read_bytes()
    gone.unlink()
    relative = str(gone.relative_to(tmp_path / "t"))
    assert f"metadata table: {relative} is listed in its files partition but is not on storage" in table.validate()
    gone.write_bytes(kept)
    assert table.validate() == []


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
    metadata, properties = tmp_path / "t" / ".hoodie" / "metadata", tmp_path / "t" / ".hoodie" / "hoodie.properties"
    shutil.copytree(metadata, tmp_path / "saved")
    assert table.drop_metadata_table() is True
    table.upsert(spark.createDataFrame([(3, "c", "d3")], SCHEMA))
    assert not metadata.exists()  # dropped for good
    assert table.validate() == []
    # Hudi's writer with its metadata table on lists one again: hudilite keeps none, so its next
    # commit drops it rather than leave Hudi's readers a `files` partition without that commit.
    shutil.copytree(tmp_path / "saved", metadata)
    lines = [ln for ln in properties.read_text().splitlines() if not ln.startswith("hoodie.table.metadata.partitions=")]
    properties.write_text("\n".join(lines + ["hoodie.table.metadata.partitions=files"]) + "\n")
    table = HudiTable.open(spark, table.path)
    table.upsert(spark.createDataFrame([(5, "e", "d2")], SCHEMA))
    assert not metadata.exists()
    assert "hoodie.table.metadata.partitions=files" not in properties.read_text()
    assert sorted(r.id for r in table.read().collect()) == [1, 2, 3, 5]
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
    # A lookup finds hudilite's index files from what its state and the commits recorded: the
    # files a listing of the index finds.
    ctx = table.context
    completed = ctx.timeline.completed()
    recorded = ctx.index.recorded_files(ctx.index.state(), completed, ctx.timeline.metadata)
    assert recorded == ctx.index.visible_files(completed), step


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
    # ... nor left listed for Hudi's readers and writers: taken off, and built again from the snapshot
    check_record_index(table, "record_index built again after a file group went")
    # A group gone from the middle: the next write hashes no key into another group (it takes
    # record_index off), and the write after it builds record_index again.
    for gone in [f for f in folder.iterdir() if "record-index-0003-0" in f.name]:
        gone.unlink()
    table.upsert(spark.createDataFrame([(7000, "x", "d1"), (3, "moved", "d2")], SCHEMA))
    assert "record_index" not in (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text().split(
        "hoodie.table.metadata.partitions=")[1].splitlines()[0]
    table.upsert(spark.createDataFrame([(7001, "y", "d2")], SCHEMA))
    check_record_index(table, "record_index built again after a group in the middle went")
    assert_hudi_rs_agrees(table)
