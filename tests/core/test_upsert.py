"""Upserts and deletes through the record index, read back through hudi-rs."""

import datetime
import itertools
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import ConfigurationError, DataError, FileSizing, HudiTable, SchemaError
from dbt.adapters.hudilite.table.operations import upsert as upsert_module
from dbt.adapters.hudilite.table.format.file_group import parse_base_file_name
from dbt.adapters.hudilite.table.storage.layout import MARKERS_DIR, staged_dir
from dbt.adapters.hudilite.table.index.record_index import (DIGESTS, MURMUR3, RECORD_KEYS, XXHASH64, Sharding,
                                                            key_digests)
from dbt.adapters.hudilite.table.spark.jobs import estimated_bytes, shuffle_partitions
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.core.test_writes import committed_files, parquet_files_on_disk


def customers(spark, rows):
    return spark.createDataFrame(rows, "id long, name string, region string, version long")


def test_upsert_rewrites_only_the_file_groups_it_touches(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region",
                             precombine="version")
    t1 = table.insert(customers(spark, [(1, "ann", "eu", 1), (2, "bob", "eu", 1), (3, "cy", "us", 1), (4, "di", "apac", 1)]))
    groups_before = {f.file_id: f for f in table.latest_base_files()}
    t2 = table.upsert(customers(spark, [(2, "bobby", "eu", 2), (5, "eve", "us", 1)]))

    rows = {r.id: (r.name, r._hoodie_commit_time) for r in table.read().collect()}
    assert rows == {1: ("ann", t1), 2: ("bobby", t2), 3: ("cy", t1), 4: ("di", t1), 5: ("eve", t2)}
    meta = table.commit_metadata(t2)
    assert meta.operation == "UPSERT"
    rewritten = [s for s in meta.write_stats if s.prevCommit]
    eu_group = {f.file_id for f in groups_before.values() if f.partition == "region=eu"}
    assert {s.fileId for s in rewritten} == eu_group and all(s.prevCommit == t1 for s in rewritten)
    assert sum(s.numUpdateWrites for s in rewritten) == 1
    untouched = {f.file_id for f in groups_before.values() if f.partition != "region=eu"}
    assert untouched <= {f.file_id for f in table.latest_base_files() if f.instant == t1}
    assert [r.id for r in table.read_changes(t1).collect()] in ([2, 5], [5, 2])  # unchanged rows keep their commit time
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


@pytest.mark.parametrize("predicates", [(), ["stored.version < 5"]])
def test_an_upsert_never_opens_a_file_group_it_does_not_touch(spark, tmp_path, predicates):
    """The base files of every untouched file group are moved away during the upsert: any read
    of one (tagging, merging, the precombine and predicate checks, conflict checks) fails."""
    import shutil

    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region",
                             precombine="version")
    table.insert(customers(spark, [(i, f"n{i}", f"r{i % 20}", 1) for i in range(200)]))
    table.upsert(customers(spark, [(0, "warm", "r0", 1)]))  # the index exists before the files go
    touched = {"region=r1", "region=r2", "region=r3"}
    away = tmp_path / "away"
    moved = [f.path for f in table.latest_base_files() if f.partition not in touched]
    assert len({os.path.dirname(p) for p in moved}) == 20 - len(touched)
    for path in moved:
        os.makedirs(away / os.path.dirname(path), exist_ok=True)
        shutil.move(os.path.join(table.path, path), away / path)
    try:
        table.upsert(customers(spark, [(1, "updated", "r1", 2),     # in place
                                       (2, "moved", "r3", 2),       # from r2 to r3
                                       (23, "stale", "r1", 0),      # older than stored, leaving r3
                                       (1000, "new", "r_new", 1)]),  # a new partition
                     predicates=predicates, predicate_alias="stored")
    finally:
        for path in moved:
            shutil.move(away / path, os.path.join(table.path, path))
    rows = {r.id: (r.name, r.region) for r in table.read().collect()}
    assert (rows[1], rows[2], rows[23], rows[1000]) == (("updated", "r1"), ("moved", "r3"), ("n23", "r3"), ("new", "r_new"))
    assert len(rows) == 201
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_precombine_moves_and_deletes(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region",
                             precombine="version")
    table.insert(customers(spark, [(1, "ann", "eu", 5), (2, "bob", "eu", 1), (3, "cy", "us", 1)]))
    table.upsert(customers(spark, [
        (1, "stale", "eu", 4),        # older than the stored row: ignored
        (2, "b1", "eu", 2), (2, "b2", "eu", 3),  # duplicates: the largest version wins
        (3, "cy", "apac", 2),         # moves partition: leaves us, lands in apac
    ]))
    rows = sorted((r.id, r.name, r.region) for r in table.read().collect())
    assert rows == [(1, "ann", "eu"), (2, "b2", "eu"), (3, "cy", "apac")]
    t3 = table.delete(spark.createDataFrame([(2,)], "id long"))
    assert sorted(r.id for r in table.read().collect()) == [1, 3]
    assert table.commit_metadata(t3).operation == "DELETE"
    flagged = customers(spark, [(1, "ann", "eu", 9)]).withColumn("_hoodie_is_deleted", F.lit(True))
    table.upsert(flagged)
    assert [r.id for r in table.read().collect()] == [3]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_upsert_errors(spark, tmp_path):
    keyed = HudiTable.create(spark, str(tmp_path / "k"), "k", record_key="id")
    keyed.insert(customers(spark, [(1, "a", "eu", 1)]))
    with pytest.raises(DataError, match="record key '7' more than once"):
        keyed.upsert(customers(spark, [(7, "x", "eu", 1), (7, "y", "eu", 2)]))
    auto = HudiTable.create(spark, str(tmp_path / "a"), "a")
    with pytest.raises(ConfigurationError, match="need a record key"):
        auto.upsert(customers(spark, [(1, "a", "eu", 1)]))
    assert len(keyed.timeline()) == 1


def test_validate_finds_an_index_out_of_step(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id")
    table.insert(customers(spark, [(1, "a", "eu", 1), (2, "b", "eu", 1)]))
    table.upsert(customers(spark, [(3, "c", "us", 1)]))
    assert table.validate() == []
    index = table.index
    table.build_index(num_shards=index.num_shards)  # rebuilt as of now: fine
    assert table.validate() == []
    # An index built before the last commit, without its delta, misses key 4.
    latest = table.timeline()[-1].timestamp
    t4 = table.insert(customers(spark, [(4, "d", "eu", 1)]))
    for shard_dir in os.listdir(os.path.join(table.path, ".hoodie/.hudilite/record_index")):
        delta = os.path.join(table.path, ".hoodie/.hudilite/record_index", shard_dir, f"{t4}.delta.parquet")
        if os.path.exists(delta):
            os.remove(delta)
    problems = table.validate()
    assert any("record index lacks key '4'" in p for p in problems), (latest, problems)


def test_index_compaction_folds_deltas_into_a_new_base(spark, tmp_path, monkeypatch):
    from dbt.adapters.hudilite.table.index import files as index_files

    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id")
    table.insert(customers(spark, [(1, "a", "eu", 1)]))
    table.build_index(num_shards=1)
    table.upsert(customers(spark, [(2, "b", "eu", 1)]))
    t3 = table.upsert(customers(spark, [(3, "c", "eu", 1), (1, "a2", "eu", 2)]))  # second delta: compacts
    index = table.index
    assert index.state()["base_instant"] == t3
    assert [p for _, p in index.visible_files(table.context.timeline.completed())[0]] == [
        f".hoodie/.hudilite/record_index/shard=0/{t3}.base.parquet"]  # what it superseded goes at the next one
    assert table.validate() == []
    assert sorted((r.id, r.name) for r in table.read().collect()) == [(1, "a2"), (2, "b"), (3, "c")]


def test_predicates_keep_stored_rows_from_matching(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    t1 = table.upsert(customers(spark, [(1, "ann", "eu", 1), (2, "bob", "eu", 1), (3, "cy", "us", 9)]))
    table.upsert(customers(spark, [(1, "ann2", "eu", 2), (3, "cy2", "us", 10), (4, "new", "us", 1)]),
                 predicates=["stored.version < 5"], predicate_alias="stored")
    rows = sorted((r.id, r.name) for r in table.read().collect())
    assert rows == [(1, "ann2"), (2, "bob"), (3, "cy"), (4, "new")]  # 3's stored row (version 9) is protected
    assert {r.id for r in table.read_changes(t1).collect()} == {1, 4}
    with pytest.raises(SchemaError, match="incremental predicates"):
        table.upsert(customers(spark, [(1, "x", "eu", 3)]), predicates=["no_such_column > 1"])
    assert len(table.timeline()) == 2
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def assert_each_shard_holds_its_own_keys(spark, table):
    """Every index file holds the digests of keys of its own shard only, every live key's digest is held."""
    index = table.index
    assert index.entry_key() == DIGESTS
    keys = table.read().select("_hoodie_record_key", index.sharding.shard_of(F.col("_hoodie_record_key")).alias("s"))
    shard_of_digest = {}
    for r in keys.collect():
        shard_of_digest[key_digests(pa.array([r[0]]))[0].as_py()] = r.s
    held = set()
    for shard, files in index.visible_files(table.context.timeline.completed()).items():
        for _, path in files:
            with index.storage.open_input(path) as source:
                digests = pq.read_table(source).column("key").to_pylist()
            assert digests == sorted(digests)
            assert {shard_of_digest[d] for d in digests if d in shard_of_digest} <= {shard}
            held |= set(digests)
    assert set(shard_of_digest) <= held


def test_every_key_is_found_in_its_own_shard(spark, tmp_path, monkeypatch):
    """Also after a compaction, which takes a digest's shard from its file's folder: the table's
    own path holds a `shard=` folder of its own to mislead it."""
    from dbt.adapters.hudilite.table.index import files as index_files

    table = HudiTable.create(spark, str(tmp_path / "shard=5" / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(i, f"n{i}", ["eu", "us"][i % 2], 1) for i in range(300)]))
    table.build_index(num_shards=7)
    table.upsert(customers(spark, [(i, "moved", "apac", 2) for i in range(0, 300, 50)]))  # deltas in several shards
    index = table.index
    completed, view = table.context.timeline.completed(), table.context.timeline.view()
    assert_each_shard_holds_its_own_keys(spark, table)
    found = {r.key: r.partition for r in index.lookup(completed, view, table.read().select("_hoodie_record_key")).collect()}
    assert len(found) == 300 and found["50"] == "region=apac" and found["51"] == "region=us"
    assert table.validate() == []
    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    t3 = table.upsert(customers(spark, [(i, "again", "eu", 3) for i in range(0, 300, 30)] + [(900, "new", "us", 1)]))
    assert index.state()["base_instant"] == t3 and index.entry_key() == DIGESTS
    assert_each_shard_holds_its_own_keys(spark, table)
    completed, view = table.context.timeline.completed(), table.context.timeline.view()
    found = {r.key: r.partition for r in index.lookup(completed, view, table.read().select("_hoodie_record_key")).collect()}
    assert len(found) == 301 and found["60"] == "region=eu" and found["51"] == "region=us" and found["900"] == "region=us"
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_rebuild_at_the_same_instant_leaves_no_file_of_the_old_build(spark, tmp_path):
    """A rebuild with fewer shards, another hash and format, as of the same instant as the base
    it replaces: the old base files of that instant are overwritten or deleted, none is read."""
    from dbt.adapters.hudilite.table.index.files import BASE
    from dbt.adapters.hudilite.table.index.record_index import entries_of

    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(i, f"n{i}", ["eu", "us"][i % 2], 1) for i in range(40)]))
    index, latest = table.index, table.timeline()[-1].timestamp
    index._write(entries_of(table.read()), latest, BASE, Sharding(4, XXHASH64), RECORD_KEYS)
    index.files.write_state({"num_shards": 4, "base_instant": latest, "entries_at_build": 40})
    root = os.path.join(table.path, ".hoodie/.hudilite/record_index")
    assert sorted(d for d in os.listdir(root) if d.startswith("shard=") and os.listdir(os.path.join(root, d))) == [
        f"shard={i}" for i in range(4)]
    assert table.build_index(num_shards=2) == 40
    held = {d: os.listdir(os.path.join(root, d)) for d in os.listdir(root) if d.startswith("shard=")}
    assert {d: names for d, names in held.items() if names} == {f"shard={i}": [f"{latest}.base.parquet"] for i in range(2)}
    assert index.entry_key() == DIGESTS and table.validate() == []
    assert_each_shard_holds_its_own_keys(spark, table)
    table.upsert(customers(spark, [(3, "moved", "apac", 2), (99, "new", "eu", 1)]))
    assert table.read().count() == 41 and table.validate() == []


def test_a_compaction_deletes_a_base_an_earlier_attempt_left_at_its_instant(spark, tmp_path):
    """An earlier compaction at the same instant that did not publish left base files; a shard
    that is empty now gets none from this one: the earlier attempt's file must not be read."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(i, f"n{i}", "eu", 1) for i in range(40)]))
    table.build_index(num_shards=2)
    index = table.index
    in_shard_1 = [r[0] for r in table.read().where(index.sharding.shard_of(F.col("_hoodie_record_key")) == 1)
                  .select("id").collect()]
    table.delete(spark.createDataFrame([(i, "eu") for i in in_shard_1], "id long, region string"))
    latest = table.timeline()[-1].timestamp
    root = os.path.join(table.path, ".hoodie/.hudilite/record_index")
    stale = os.path.join(root, "shard=1", f"{latest}.base.parquet")
    with open(os.path.join(root, "shard=1", os.listdir(os.path.join(root, "shard=1"))[0]), "rb") as f:
        old_base = f.read()  # an unpublished attempt's file: the keys before the delete
    with open(stale, "wb") as f:
        f.write(old_base)
    table.context.compact_index()
    assert index.state()["base_instant"] == latest and not os.path.exists(stale)
    assert table.read().count() == 40 - len(in_shard_1) and table.validate() == []
    table.upsert(customers(spark, [(in_shard_1[0], "back", "eu", 2)]))
    assert table.read().where(f"id = {in_shard_1[0]}").count() == 1 and table.validate() == []


@pytest.mark.parametrize("num_shards", [2, 3, 5, 8])
def test_a_shuffle_by_key_gives_each_task_one_whole_shard(spark, num_shards):
    keys = spark.range(2000).select(F.col("id").cast("string").alias("key"))
    sharding = Sharding(num_shards)
    rows = sharding.distribute(keys.withColumn("shard", sharding.shard_of(F.col("key"))), "key", "shard")
    placed = rows.select("shard", F.spark_partition_id().alias("task")).distinct().collect()
    assert sorted((r.shard, r.task) for r in placed) == [(i, i) for i in range(num_shards)]


@pytest.mark.parametrize("small_write_bytes", [None, 0])  # the one-job path, the shuffle path
def test_an_index_sharded_by_the_older_hash_keeps_working_and_is_resharded_at_compaction(spark, tmp_path, monkeypatch,
                                                                                          small_write_bytes):
    from dbt.adapters.hudilite.table.index import files as index_files
    from dbt.adapters.hudilite.table.index.files import BASE
    from dbt.adapters.hudilite.table.index.record_index import entries_of

    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    if small_write_bytes is not None:
        table.file_sizing = FileSizing(small_write_bytes=small_write_bytes)
    table.insert(customers(spark, [(i, f"n{i}", ["eu", "us"][i % 2], 1) for i in range(200)]))
    index, latest = table.index, table.timeline()[-1].timestamp
    legacy = Sharding(3, XXHASH64)  # as tables indexed before the hash changed: no hash in the state
    index._write(entries_of(table.read()), latest, BASE, legacy, RECORD_KEYS)  # and keyed by the record keys
    index.files.write_state({"num_shards": 3, "base_instant": latest, "entries_at_build": 200})
    assert index.sharding == legacy and index.entry_key() == RECORD_KEYS and table.validate() == []
    table.upsert(customers(spark, [(i, "u", ["eu", "us"][i % 2], 2) for i in range(0, 200, 7)]
                           + [(i, "new", "apac", 1) for i in range(500, 520)]))
    table.upsert(customers(spark, [(i, "moved", "apac", 3) for i in range(1, 200, 11)]))
    assert table.read().count() == 220 and table.validate() == []
    monkeypatch.setattr(index_files, "COMPACT_AFTER_DELTAS", 1)
    table.upsert(customers(spark, [(7, "again", "eu", 4)]))  # third delta: compacts, with the current hash
    assert index.sharding == Sharding(3, MURMUR3) and index.entry_key() == DIGESTS
    # A version that knows only xxhash64 reads `num_shards`: gone, so it fails instead of misfiling keys.
    assert "num_shards" not in index.state() and index.state()["shards"] == 3
    assert_each_shard_holds_its_own_keys(spark, table)
    table.upsert(customers(spark, [(i, "after", "us", 5) for i in range(0, 200, 13)]))
    assert table.read().count() == 220 and table.validate() == []
    assert {r.name for r in table.read().where("id = 13").collect()} == {"after"}
    assert_hudi_rs_agrees(table)


def test_upsert_can_drop_columns_the_batch_lacks(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.upsert(customers(spark, [(1, "ann", "eu", 1), (2, "bob", "us", 1)]))
    table.upsert(spark.createDataFrame([(1, "eu", 5)], "id long, region string, version long"), drop_missing_columns=True)
    assert [f.name for f in table.schema().fields] == ["id", "region", "version"]
    assert sorted(tuple(r) for r in table.read().select("id", "region", "version").collect()) == [(1, "eu", 5), (2, "us", 1)]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_new_keys_of_a_small_upsert_land_in_one_file_group_per_partition(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    t1 = table.upsert(customers(spark, [(i, "x", ["eu", "us"][i % 2], 1) for i in range(40)]).repartition(4))
    assert sorted((s.partitionPath, s.numInserts) for s in table.commit_metadata(t1).write_stats) == [
        ("region=eu", 20), ("region=us", 20)]
    t2 = table.upsert(customers(spark, [(i, "y", "apac", 1) for i in range(100, 140)]).repartition(4))
    new_groups = [s for s in table.commit_metadata(t2).write_stats if not s.prevCommit]
    assert [(s.partitionPath, s.numInserts) for s in new_groups] == [("region=apac", 40)]
    assert table.validate() == []


def test_an_older_row_changes_nothing_even_when_it_moves_or_deletes(spark, tmp_path):
    """Precombine against the stored row on every path (issue 12, defect 13): a stale row that
    moves partition, or a stale delete, loses to the newer stored row; ties and newer rows win."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region",
                             precombine="version")
    table.insert(customers(spark, [(1, "ann", "eu", 5), (2, "bob", "eu", 5), (3, "cy", "us", 5), (4, "di", "us", 5)]))
    files_before = {f.file_id: f.instant for f in table.latest_base_files()}
    stale_move = customers(spark, [(1, "late", "apac", 4)]).withColumn("_hoodie_is_deleted", F.lit(False))
    stale_delete = customers(spark, [(3, "cy", "us", 4)]).withColumn("_hoodie_is_deleted", F.lit(True))
    table.upsert(stale_move.unionByName(stale_delete))
    assert sorted((r.id, r.name, r.region) for r in table.read().collect()) == [
        (1, "ann", "eu"), (2, "bob", "eu"), (3, "cy", "us"), (4, "di", "us")]
    assert {f.file_id: f.instant for f in table.latest_base_files()} == files_before  # nothing was rewritten
    tie_move = customers(spark, [(2, "bob2", "apac", 5)]).withColumn("_hoodie_is_deleted", F.lit(False))
    newer_delete = customers(spark, [(4, "di", "us", 6)]).withColumn("_hoodie_is_deleted", F.lit(True))
    table.upsert(tie_move.unionByName(newer_delete))
    assert sorted((r.id, r.name, r.region) for r in table.read().collect()) == [
        (1, "ann", "eu"), (2, "bob2", "apac"), (3, "cy", "us")]
    table.delete(spark.createDataFrame([(3,)], "id long"))  # an explicit delete by key has no order: it wins
    assert sorted(r.id for r in table.read().collect()) == [1, 2]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_key_is_built_once_from_the_table_names_and_types(spark, tmp_path):
    """A key column arriving in another case, or an int arriving for a double key, keys the
    row the table holds (issue 12, defect 4): no second row with a differently spelled key."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "c", record_key="id,kind", partition_by="kind")
    table.upsert(spark.createDataFrame([(1.0, "a", "x")], "id double, kind string, v string"))
    table.upsert(spark.createDataFrame([(1, "a", "y")], "ID int, KIND string, v string"))
    assert [(r.id, r.kind, r.v) for r in table.read().collect()] == [(1.0, "a", "y")]
    assert table.read().select("_hoodie_record_key").collect()[0][0] == "id:1.0,kind:a"
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_inserts_into_a_keyed_table_keep_keys_unique(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(1, "a", "eu", 1), (2, "b", "us", 1)]))
    before = [(i.timestamp, i.state) for i in table.timeline()]
    with pytest.raises(DataError, match="record key '3' more than once"):
        table.insert(customers(spark, [(3, "c", "eu", 1), (3, "c2", "us", 1)]))
    with pytest.raises(DataError, match="keys the table holds already"):
        table.insert(customers(spark, [(2, "b2", "eu", 1)]))  # held in another partition
    with pytest.raises(DataError, match="keys the table holds already"):
        table.insert_overwrite(customers(spark, [(2, "b2", "eu", 1)]))  # us is not replaced: 2 would be twice
    with pytest.raises(DataError, match="record key '5' more than once"):
        table.insert_overwrite_table(customers(spark, [(5, "e", "eu", 1), (5, "e", "eu", 2)]))
    assert [(i.timestamp, i.state) for i in table.timeline()] == before
    assert sorted(r.id for r in table.read().collect()) == [1, 2]
    table.insert_overwrite(customers(spark, [(2, "b2", "us", 2)]))  # replaces the group holding 2: fine
    table.insert_overwrite_table(customers(spark, [(1, "a3", "eu", 3), (2, "b3", "eu", 3)]))
    assert sorted((r.id, r.name) for r in table.read().collect()) == [(1, "a3"), (2, "b3")]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def _snapshot(table):
    """Rows with the step (position on the timeline) that last wrote each, and the index's view."""
    steps = {i.timestamp: n for n, i in enumerate(table.timeline())}
    rows = sorted((r.id, r.name, r.region, r.version, r._hoodie_record_key, r._hoodie_partition_path,
                   steps[r._hoodie_commit_time]) for r in table.read().collect())
    completed = table.context.timeline.completed()
    index = sorted((r.key, r.partition) for r in table.index.entries(completed, table.context.timeline.view()).collect())
    return rows, index


def _jobs(spark, operation):
    """The Spark jobs `operation` runs (Spark's adaptive execution runs a shuffle's map stage
    and a cached plan as jobs of their own)."""
    group = f"counted-{next(_groups)}"
    spark.sparkContext.setJobGroup(group, group)
    try:
        operation()
        return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


_groups = itertools.count()


def test_small_and_large_upserts_give_the_same_table(spark, tmp_path):
    """Small upserts on the driver (`driver_write_bytes`), a thread per file group, the one-job
    path on Spark's tasks (`small_write_bytes`), in one task or several, and the shuffle path
    write the same rows, commit times, write stats and index, through moves, deletes, stale rows
    and duplicates; on the driver a write is one Spark job, the one-job path three."""
    tables = {}
    sizings = {"driver, a thread per file group": FileSizing(),
               "small": FileSizing(driver_write_bytes=0), "small, a task per file group": FileSizing(driver_write_bytes=0),
               "large": FileSizing(small_write_bytes=0, driver_write_bytes=0)}
    for name, sizing in sizings.items():
        table = HudiTable.create(spark, str(tmp_path / name.replace(" ", "_")), "customers", record_key="id",
                                 partition_by="region", precombine="version")
        table.file_sizing = sizing
        table.insert(customers(spark, [(i, f"n{i}", f"r{i % 4}", 5) for i in range(60)]).repartition(3))
        tables[name] = table
    batches = [
        customers(spark, [(1, "in place", "r1", 6), (2, "moved", "r9", 6), (3, "stale", "r3", 1),  # older: nothing
                          (7, "stale move", "r0", 1), (100, "new", "r1", 1), (101, "new part", "r8", 1),
                          (5, "first", "r1", 7), (5, "second", "r1", 8)]),  # duplicates: the largest version wins
        customers(spark, [(4, "bye", "r0", 9)]).withColumn("_hoodie_is_deleted", F.lit(True)),
        customers(spark, [(i, f"again{i}", f"r{(i + 1) % 4}", 10) for i in range(0, 60, 3)]),  # every partition
        customers(spark, [(10, "ten", "r2", 20), (11, "eleven", "r3", 20)]),  # in place only
    ]
    batches = [b.cache() for b in batches]  # sized for Spark's estimate (rows from a Python list are not)
    for batch in batches:
        batch.count()
    counts = {}
    for batch in batches:
        for name, table in tables.items():
            with pytest.MonkeyPatch.context() as patch:
                if name.endswith("per file group"):  # the tasks share the work: the new rows in one of them
                    patch.setattr(upsert_module, "MIN_TASK_BYTES", 1)
                    patch.setattr(upsert_module, "driver_threads", lambda: 8)
                counts.setdefault(name, []).append(_jobs(spark, lambda: table.upsert(batch)))
    deleted = spark.createDataFrame([(8,), (100,)], "id long")
    for table in tables.values():
        table.delete(deleted)
    small = tables["small"]
    assert len({repr(_snapshot(t)) for t in tables.values()}) == 1
    for table in tables.values():  # a commit's seqnos are unique (merge and insert number apart)
        seqnos = [(r._hoodie_commit_time, r._hoodie_commit_seqno) for r in table.read().collect()]
        assert len(seqnos) == len(set(seqnos))
    rows = {r[0]: r for r in _snapshot(small)[0]}
    assert rows[1][1:4] == ("in place", "r1", 6) and rows[2][1:3] == ("moved", "r9") and rows[3][1:3] == ("again3", "r0")
    assert rows[7][1:3] == ("n7", "r3") and rows[5][1] == "second" and not {4, 8, 100} & set(rows)
    assert rows[10][1:4] == ("ten", "r2", 20)
    split, threads = tables["small, a task per file group"], tables["driver, a thread per file group"]
    summary = lambda t, i: sorted((s.partitionPath, bool(s.prevCommit), s.numWrites, s.numInserts,  # noqa: E731
                                   s.numUpdateWrites, s.numDeletes) for s in t.commit_metadata(i).write_stats)
    for instants in zip(*[t.timeline()[1:] for t in tables.values()]):
        assert len({repr(summary(t, i)) for t, i in zip(tables.values(), instants)}) == 1
    # In place only: on the driver, the batch brought over; on Spark's tasks, tagging (with
    # adaptive execution the shuffle's map stage is a job of its own), then one write. Batch 1
    # also builds the index; 2 and 3 check leaving rows' precombine.
    assert counts["driver, a thread per file group"][3] == 1, counts
    assert counts["small"][3] == counts["small, a task per file group"][3] == 3, counts
    tasks = lambda t, i: {parse_base_file_name(s.path).write_token.split("-")[0]  # noqa: E731
                          for s in t.commit_metadata(i).write_stats}
    written = split.commit_metadata(split.timeline()[3]).write_stats  # every partition, moves: new rows too
    work = sum(1 for s in written if s.prevCommit) + 1  # the rewritten file groups and the new rows
    assert len(tasks(split, split.timeline()[3])) == min(work, shuffle_partitions(spark)) > 1
    assert len(tasks(threads, threads.timeline()[3])) == work > 1
    assert len(tasks(small, small.timeline()[3])) == 1
    assert all(small <= large - 2 for small, large in zip(counts["small"], counts["large"])), counts
    assert all(driver <= small - 2 for driver, small in zip(counts["driver, a thread per file group"], counts["small"])), counts
    for table in tables.values():
        assert table.validate() == []
    assert_hudi_rs_agrees(small)


def test_a_small_upsert_failing_on_the_driver_leaves_the_table_as_it_was(spark, tmp_path, monkeypatch):
    """One of the driver's threads fails after writing its files while the others rewrite
    theirs: the upsert fails once all have stopped, and its rollback leaves no file of it."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(i, "old", f"r{i % 4}", 1) for i in range(40)]))
    table.build_index()
    before, files = _snapshot(table), parquet_files_on_disk(table.path)
    real = upsert_module.write_task

    def fails_after_writing(spec, rows):
        yield from real(spec, rows)
        raise RuntimeError("disk full")

    monkeypatch.setattr(upsert_module, "write_task", fails_after_writing)
    monkeypatch.setattr(upsert_module, "driver_threads", lambda: 4)
    batch = customers(spark, [(i, "new", f"r{i % 4}", 2) for i in range(0, 60, 3)]).cache()  # updates everywhere, new keys
    with pytest.raises(RuntimeError, match="disk full"):
        table.upsert(batch)
    assert _snapshot(table) == before and parquet_files_on_disk(table.path) == files == committed_files(table)
    assert table.context.timeline.pending() == [] and table.validate() == []
    monkeypatch.setattr(upsert_module, "write_task", real)
    table.upsert(batch)
    assert sorted(r.name for r in table.read().where("id % 3 = 0").collect()) == ["new"] * 20


def test_a_small_upsert_on_the_driver_in_another_session_zone_merges_stored_and_new_timestamps(spark, tmp_path):
    """In a session zone other than UTC (rows across a DST change), a slice written on Spark's
    tasks and a batch upserted on the driver read back as written, and as hudi-rs reads them."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        table = HudiTable.create(spark, str(tmp_path / "z"), "events", record_key="id", partition_by="day")
        rows = lambda r: spark.createDataFrame(r, "id long, day string, at timestamp")  # noqa: E731
        first = [(i, f"d{i % 2}", datetime.datetime(2026, 3, 8, 1, i)) for i in range(6)]  # across the DST change
        table.file_sizing = FileSizing(driver_write_bytes=0)
        table.insert(rows(first))
        table.build_index()
        table.file_sizing = FileSizing()
        later = rows([(1, "d1", datetime.datetime(2026, 3, 8, 3, 30)), (9, "d1", datetime.datetime(2026, 11, 1, 1, 30))]).cache()
        later.count()
        assert _jobs(spark, lambda: table.upsert(later)) == 1  # on the driver
        got = sorted((r.id, r.at) for r in table.read().collect())
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    want = sorted([(i, t) for i, _, t in first if i != 1] + [(1, datetime.datetime(2026, 3, 8, 3, 30)),
                                                             (9, datetime.datetime(2026, 11, 1, 1, 30))])
    assert got == want
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_spark_estimates_a_batch_only_where_its_plan_bounds_it(spark):
    """The driver takes a batch by Spark's estimate of its size, trusted only for rows held in
    memory: none for rows from a Python list, rows a plan computes (a 1 MB string counts 20
    bytes) or multiplies, or files (their compressed bytes)."""
    cached = spark.range(1000).cache()
    cached.count()
    assert 0 < estimated_bytes(cached) < 1 << 20
    assert 0 < estimated_bytes(cached.where("id > 5").select("id")) < 1 << 20
    assert estimated_bytes(spark.createDataFrame([(1,)], "a long")) is None
    assert estimated_bytes(spark.range(420).selectExpr("repeat(uuid(), 30000) as payload")) is None
    assert estimated_bytes(cached.select(F.explode(F.array("id", "id")))) is None
    assert estimated_bytes(cached.mapInArrow(lambda batches: batches, "id long")) is None


def test_a_retried_small_upsert_task_leaves_one_copy(spark, tmp_path):
    """A small upsert's tagging task and its write task fail once after writing: the retry's files and index entries
    are the commit's, the failed attempt's files are gone."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(i, "x", f"r{i % 2}", 1) for i in range(20)]))
    table.write_options = {"fail_task_attempt": (0, 0)}
    instant = table.upsert(customers(spark, [(1, "y", "r1", 2), (50, "new", "r5", 1)]))
    table.write_options = {}
    assert parquet_files_on_disk(table.path) == committed_files(table)
    written = table.commit_metadata(instant).write_stats
    assert sorted((s.partitionPath, bool(s.prevCommit)) for s in written) == [("region=r1", True), ("region=r5", False)]
    assert sorted((r.id, r.name) for r in table.read().collect()) == sorted(
        [(i, "x") for i in range(20) if i != 1] + [(1, "y"), (50, "new")])
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_seqnos_of_an_upsert_on_the_parallel_path_are_unique(spark, tmp_path):
    """The merge job and the insert job of one commit both have a task 0: the inserts number
    their tasks after the merge's, so no two rows of the commit share a seqno."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.file_sizing = FileSizing(small_write_bytes=0)
    table.insert(customers(spark, [(i, "old", f"r{i % 40}", 1) for i in range(80)]))
    instant = table.upsert(customers(spark, [(i, "new", f"r{i % 40}", 2) for i in range(120)]))  # all changed, 40 new
    seqnos = [r._hoodie_commit_seqno for r in table.read().collect() if r._hoodie_commit_time == instant]
    assert len(seqnos) == 120 and len(set(seqnos)) == 120
    assert table.validate() == []


@pytest.mark.parametrize("small_write_bytes", [None, 0])  # the one-job path, the shuffle path
def test_a_rewritten_slice_keeps_its_rows_in_file_order_and_an_exact_bloom_footer(spark, tmp_path, small_write_bytes):
    """An update-only rewrite keeps the stored row order and the stored footer (the same bytes
    a rebuild gives); a rewrite that deletes, moves out or adds keys gets a footer of its own
    keys. Either way every file's footer is what Hudi's writer gives its keys, in file order."""
    import pyarrow.parquet as pq

    from dbt.adapters.hudilite.table.format.bloom import BLOOM_FILTER_KEY, DynamicBloomFilter, footer_metadata

    def footer_of(path):
        return {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items() if k != b"ARROW:schema"}

    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    if small_write_bytes is not None:
        table.file_sizing = FileSizing(small_write_bytes=small_write_bytes)
    ids = [17, 3, 99, 42, 8, 61, 25, 70]  # not in key order: the file keeps the order it was written in
    table.insert(customers(spark, [(i, f"n{i}", "eu", 1) for i in ids]).coalesce(1))
    path = lambda: os.path.join(table.path, table.latest_base_files()[0].path)  # noqa: E731
    before, order_before = path(), pq.read_table(path(), columns=["_hoodie_record_key"]).column(0)
    table.upsert(customers(spark, [(99, "u", "eu", 2), (8, "u", "eu", 2)]))
    assert path() != before and pq.read_table(path(), columns=["_hoodie_record_key"]).column(0) == order_before
    assert footer_of(path()) == footer_of(before) == footer_metadata(order_before)  # the stored footer, kept
    table.upsert(customers(spark, [(42, "moved", "us", 3), (5, "new", "eu", 1)]))
    table.delete(spark.createDataFrame([(17, "eu")], "id long, region string"))
    for f in table.latest_base_files():
        footer = {k.decode(): v.decode() for k, v in pq.read_metadata(os.path.join(table.path, f.path)).metadata.items()}
        keys = pq.read_table(os.path.join(table.path, f.path), columns=["_hoodie_record_key"]).column(0)
        expected = footer_metadata(keys)
        assert {k: footer.get(k) for k in expected} == expected
        assert DynamicBloomFilter.deserialize(footer[BLOOM_FILTER_KEY]).might_contain_all(keys).all()
    assert sorted(r.id for r in table.read().where("region = 'eu'").collect()) == [3, 5, 8, 25, 61, 70, 99]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def _files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


@pytest.mark.parametrize("small_write_bytes", [None, 0])  # the one-job path, the shuffle path
def test_the_tagged_batch_is_staged_once_and_leaves_with_the_write(spark, tmp_path, small_write_bytes, monkeypatch):
    """Tagging stages the batch in a file per tagging task, which every later job reads (the
    batch itself is evaluated once): they are gone once the upsert commits, and once it fails
    (a duplicated key found by the tagging). A speculative twin's staged file is never read."""
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    if small_write_bytes is not None:
        table.file_sizing = FileSizing(small_write_bytes=small_write_bytes)
    table.insert(customers(spark, [(i, "old", f"r{i % 3}", 1) for i in range(30)]))
    table.build_index()
    shards = table.index.lookup_plan(table.context.timeline.completed(), 4).sharding.num_shards
    staged_then = []
    for name in ("_write_small", "_write_large"):  # the driver's side of the writing job: the files are there
        real = getattr(upsert_module, name)

        def seeing(ctx, rows, spec, *args, real=real):
            staged_then.append(_files_under(os.path.join(ctx.storage.base_path, staged_dir(spec.instant))))
            return real(ctx, rows, spec, *args)
        monkeypatch.setattr(upsert_module, name, seeing)
    markers = os.path.join(table.path, MARKERS_DIR)
    table.write_options = {"speculative_task": 0}
    instant = table.upsert(customers(spark, [(i, "new", f"r{i % 3}", 2) for i in range(20, 40)]).repartition(3))
    table.write_options = {}
    assert sorted((r.id, r.name) for r in table.read().collect()) == sorted(
        [(i, "old") for i in range(20)] + [(i, "new") for i in range(20, 40)])  # the twin's rows were not read
    (files,) = staged_then
    assert len(files) == shards + 1 and all(f.startswith("tagged-") and f.endswith(".arrow") for f in files)
    assert instant and _files_under(markers) == []
    with pytest.raises(DataError, match="record key '7' more than once"):
        table.upsert(customers(spark, [(7, "a", "r1", 3), (7, "b", "r1", 3)]))
    assert _files_under(markers) == []
    assert table.validate() == []


def test_an_upsert_rolled_back_by_another_writer_while_it_runs_says_so(spark, tmp_path, monkeypatch):
    """A writer that took this one for dead rolls its instant back, staged rows included, while
    it still runs: its next job cannot read them, and the error says what happened."""
    from dbt.adapters.hudilite.table import ConcurrentWriteError
    from dbt.adapters.hudilite.table.transaction import rollback

    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    table.insert(customers(spark, [(i, "old", f"r{i % 2}", 1) for i in range(10)]))
    real = upsert_module._write_small

    def rolled_back_meanwhile(ctx, staged, spec, *args):
        (pending,) = [i for i in ctx.timeline.pending() if i.timestamp == spec.instant]
        rollback(ctx.storage, ctx.timeline, pending)
        return real(ctx, staged, spec, *args)

    monkeypatch.setattr(upsert_module, "_write_small", rolled_back_meanwhile)
    with pytest.raises(ConcurrentWriteError, match="rolled back by another writer"):
        table.upsert(customers(spark, [(1, "new", "r1", 2), (20, "new", "r0", 1)]))
    assert sorted((r.id, r.name) for r in table.read().collect()) == [(i, "old") for i in range(10)]
    assert table.validate() == []


@pytest.mark.parametrize("small_write_bytes", [None, 0])  # the one-job path, the shuffle path
def test_strange_values_and_nested_types_come_through_the_staged_batch(spark, tmp_path, small_write_bytes):
    """The tagged batch goes to staged Arrow files and back (into the write tasks, into Spark on
    the shuffle path, and staged again after a stale move is dropped): unicode and punctuated
    keys and partition values, exact and nested types, a batch whose columns come in another
    case and order, all arrive as they were."""
    from datetime import date, datetime
    from decimal import Decimal

    schema = ("id string, part string, version long, amount decimal(20,4), at timestamp, day date, "
              "tags array<string>, info struct<a:int,b:string>, attrs map<string,int>, raw binary")

    def row(key, part, version, n):
        return (key, part, version, Decimal(f"{n}.0125"), datetime(2024, 1, 1, n % 24, 30), date(2024, 2, n % 28 + 1),
                [f"t{n}", None, "ü"], (n, f"b,{n}"), {"k": n, "ß": -n}, bytes([n % 256, 0, 255]))

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="part", precombine="version")
    if small_write_bytes is not None:
        table.file_sizing = FileSizing(small_write_bytes=small_write_bytes)
    keys, parts = ["ключ-1", "a,b", "x y", "😀", "é/e", "tab\tkey"], ["été 2024", "a b", "東京"]
    table.insert(spark.createDataFrame([row(k, parts[i % 3], 1, i) for i, k in enumerate(keys)], schema))
    batch = [row("ключ-1", "été 2024", 5, 40),  # in place
             row("a,b", "東京", 5, 41),  # moves
             row("x y", "a b", 0, 42),  # a stale move (older): dropped, the rest staged again
             row("new 🔑", "東京", 1, 43)]  # a new key
    shuffled = spark.createDataFrame(batch, schema)
    shuffled = shuffled.select(*[F.col(c).alias(c.upper()) for c in reversed(shuffled.columns)])
    table.upsert(shuffled)
    expected = {r[0]: r for r in [row(k, parts[i % 3], 1, i) for i, k in enumerate(keys)]}
    for r in batch:
        if r[0] not in expected or r[2] >= expected[r[0]][2]:
            expected[r[0]] = r
    normal = lambda r: (*r[:6], list(r[6]), tuple(r[7]), dict(r[8]), bytes(r[9]))  # noqa: E731
    got = sorted(normal(tuple(r)[5:]) for r in table.read().collect())
    assert got == sorted(normal(r) for r in expected.values())
    assert expected["x y"][2] == 1 and expected["a,b"][1] == "東京"
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


@pytest.mark.parametrize("write", ["insert", "insert_overwrite", "insert_overwrite_table"])
def test_every_keyed_write_takes_the_newest_row_per_key_and_leaves_flagged_rows_out(spark, tmp_path, write):
    """One semantics for the delete flag and the precombine field on every path that takes keyed
    rows: what an insert or a rebuild stores equals what an upsert of the same rows stores."""
    rows = [(1, "ann", "eu", 1, False), (1, "ann2", "eu", 3, False), (1, "ann1", "eu", 2, False),  # newest: 3
            (2, "bob", "eu", 1, False), (2, "bob-gone", "eu", 2, True),  # its newest row deletes it
            (3, "cy-old", "eu", 1, True), (3, "cy", "eu", 2, False),  # deleted, then back
            (4, "di", "eu", None, False), (4, "di2", "eu", 1, None)]  # a null version loses; a null flag keeps
    batch = spark.createDataFrame(rows, "id long, name string, region string, version long, _hoodie_is_deleted boolean")
    expected = [(1, "ann2", 3), (3, "cy", 2), (4, "di2", 1)]

    def stored(table):
        assert "_hoodie_is_deleted" not in table.schema().fieldNames()  # a control column, never stored
        return sorted((r.id, r.name, r.version) for r in table.read().collect())

    upserted = HudiTable.create(spark, str(tmp_path / "u"), "u", record_key="id", partition_by="region",
                                precombine="version")
    upserted.upsert(batch)
    assert stored(upserted) == expected
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="region", precombine="version")
    table.insert(customers(spark, [(9, "zed", "eu", 1)]))
    getattr(table, write)(batch)
    assert stored(table) == sorted(expected + ([(9, "zed", 1)] if write == "insert" else []))
    table.upsert(batch.where("id = 1").withColumn("version", F.lit(5)).withColumn("name", F.lit("ann5")))
    assert dict((i, n) for i, n, _ in stored(table))[1] == "ann5"  # incremental runs go on as before
    assert table.validate() == []
    assert_hudi_rs_agrees(table)

    plain = HudiTable.create(spark, str(tmp_path / "p"), "p", record_key="id")  # no precombine field
    with pytest.raises(DataError, match="record key '1' more than once"):
        plain.insert_overwrite_table(batch.where("id = 1"))
    plain.insert_overwrite_table(batch.where("id = 2 and not _hoodie_is_deleted"))
    assert [r.name for r in plain.read().collect()] == ["bob"]


@pytest.mark.parametrize("small_write_bytes", [None, 0], ids=["one-job", "parallel"])
def test_a_row_that_changes_partition_keeps_the_columns_the_merge_does_not_update(spark, tmp_path, small_write_bytes):
    """dbt's MERGE updates only merge_update_columns: with the partition column outside them a
    matched row stays where it is; inside them it moves, its other frozen columns as stored
    (dbt-spark's `update set` on Delta gives the same rows)."""
    def accounts(rows):
        return spark.createDataFrame(rows, "id long, region string, amount long, name string")

    table = HudiTable.create(spark, str(tmp_path / "a"), "a", record_key="id", partition_by="region")
    if small_write_bytes is not None:
        table.file_sizing = FileSizing(small_write_bytes=small_write_bytes)
    table.insert(accounts([(1, "eu", 10, "alice"), (2, "eu", 20, "bob"), (3, "us", 30, "cy")]))
    incoming = accounts([(1, "us", 11, "ALICE-NEW"), (2, "apac", 21, "BOB-NEW"), (4, "us", 40, "di")])

    table.upsert(incoming, update_columns=["amount"])
    rows = lambda: sorted((r.id, r.region, r.amount, r.name, r._hoodie_partition_path) for r in table.read().collect())  # noqa: E731
    assert rows() == [(1, "eu", 11, "alice", "region=eu"), (2, "eu", 21, "bob", "region=eu"),
                      (3, "us", 30, "cy", "region=us"), (4, "us", 40, "di", "region=us")]
    table.upsert(incoming.where("id = 1").withColumn("amount", F.lit(12)), update_columns=["amount", "region"])
    assert rows()[0] == (1, "us", 12, "alice", "region=us")  # moved, its name as stored
    # A column the batch adds is frozen too: the moved row had none (null), as a row updated in place.
    table.upsert(incoming.where("id = 1").withColumn("region", F.lit("apac")).withColumn("note", F.lit("n")),
                 update_columns=["amount", "region"])
    assert sorted((r.id, r.region, r.note) for r in table.read().collect())[0] == (1, "apac", None)
    keys = [r._hoodie_record_key for r in table.read().collect()]
    assert sorted(keys) == ["1", "2", "3", "4"]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)


def test_a_delete_changes_no_schema_and_a_cleaned_end_of_a_changes_read_is_named(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region")
    first = table.insert(customers(spark, [(1, "ann", "eu", 1), (2, "bob", "eu", 1), (3, "cy", "us", 1)]))
    schema = table.schema()
    with pytest.raises(ConfigurationError, match="delete takes the record key columns \\(id\\); reason is not a column"):
        table.delete(spark.createDataFrame([(1, "gdpr")], "id long, reason string"))
    assert table.schema() == schema and len(table.timeline()) == 1
    table.delete(table.read().where("id = 1"))  # rows as read, meta columns and all
    assert sorted(r.id for r in table.read().collect()) == [2, 3] and table.schema() == schema
    table.upsert(customers(spark, [(2, "bobby", "eu", 2)]))
    table.clean(retain_commits=1)
    with pytest.raises(Exception, match=f"instant {first} was cleaned; the earliest readable instant is"):
        table.read_changes(None, first)


def test_a_keyed_table_an_older_version_stored_the_delete_flag_in_keeps_taking_writes(spark, tmp_path):
    """hudilite before the flag had one meaning stored `_hoodie_is_deleted` as a column on
    rebuilds; upserts then failed ('the new rows lack column'). The next write drops it."""
    from dbt.adapters.hudilite.table.operations import insert as inserts
    from dbt.adapters.hudilite.table.format.commit import INSERT_OVERWRITE_TABLE
    from dbt.adapters.hudilite.table.context import REPLACE
    from dbt.adapters.hudilite.table.format.instant import REPLACE_COMMIT

    table = HudiTable.create(spark, str(tmp_path / "c"), "customers", record_key="id", partition_by="region",
                             precombine="version")
    flagged = customers(spark, [(1, "ann", "eu", 1), (2, "bob", "us", 1)]).withColumn("_hoodie_is_deleted", F.lit(False))
    inserts.write_file_groups(table.context, flagged, REPLACE_COMMIT, INSERT_OVERWRITE_TABLE, REPLACE,
                              replace=inserts.TABLE)  # as the older rebuild wrote it
    assert "_hoodie_is_deleted" in table.schema().fieldNames()
    table.upsert(customers(spark, [(1, "ann2", "eu", 2)]).withColumn("_hoodie_is_deleted", F.lit(False)))
    table.upsert(customers(spark, [(2, "bob", "us", 2)]).withColumn("_hoodie_is_deleted", F.lit(True)))
    table.insert(customers(spark, [(3, "cy", "us", 1)]))
    assert table.schema().fieldNames() == ["id", "name", "region", "version"]
    assert sorted((r.id, r.name) for r in table.read().collect()) == [(1, "ann2"), (3, "cy")]
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
