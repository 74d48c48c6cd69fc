"""The metadata table's record_index partition as hudilite writes it, without Spark: cells built
by Arrow kernels equal the cell-by-cell writer's, records equal Avro's encoding, each shard's
log file holds the keys Hudi's hash sends there, and a compaction folds bootstrap, upserts and
deletes into what a reader then finds."""

import uuid

import pyarrow as pa

from dbt.adapters.hudilite.table.format import hfile, log_format, metadata_record
from dbt.adapters.hudilite.table.metadata import record_index
from dbt.adapters.hudilite.table.metadata.reader import DELETE_BLOCK, HFILE_DATA_BLOCK, RECORD_INDEX, deleted_keys
from dbt.adapters.hudilite.table.metadata.writer import MAX_DELTA_COMMITS, WRITE_TOKEN, MetadataTableWriter, files_records
from dbt.adapters.hudilite.table.storage.filesystem import Storage
from dbt.adapters.hudilite.table.storage.layout import marker_path
from tests.unit.test_metadata_table_reader import T, data_instant, reader

FILE_A = f"{uuid.UUID(int=7)}-0"
FILE_B = "not-a-uuid-file-id"


def test_cells_built_by_arrow_equal_the_cell_by_cell_writer():
    cells = [(f"key-{i:05d}-{'é' * (i % 3)}".encode(), bytes([i % 251]) * (i % 70)) for i in range(3000)]
    columns = hfile.write_columns(pa.array([c[0] for c in cells], pa.binary()), pa.array([c[1] for c in cells], pa.binary()),
                                  {b"schema": b"s"}, block_size=4096)
    assert columns == hfile.write(cells, {b"schema": b"s"}, block_size=4096)
    assert dict(hfile.HFileReader.of_bytes(columns).scan()) == dict(cells)
    assert hfile.HFileReader.of_bytes(hfile.write_columns(pa.array([], pa.binary()), pa.array([], pa.binary()))).file_info


def test_rows_out_of_order_are_refused():
    try:
        hfile.write_columns(pa.array(["b", "a"]), pa.array([b"", b""]))
    except hfile.HFileError as err:
        assert "'a' after b'b'" in str(err).replace('b"', "b'")
    else:
        raise AssertionError("rows out of order were written")


def test_a_bare_uuid_file_id_hudi_stored_with_file_index_minus_one_reads_back_bare():
    bare = str(uuid.UUID(int=9))
    info = metadata_record.location("eu", bare + "-0", T[1])
    info["fileIndex"] = -1  # as Hudi's writer stores a file id without the `-<n>` suffix
    assert metadata_record.location_of({"recordIndexMetadata": info}) == metadata_record.Location("eu", bare)
    assert metadata_record.location_of({"recordIndexMetadata": metadata_record.location("eu", bare, T[1])}).file_id == bare


def test_values_equal_avros_encoding_of_each_record():
    partitions = pa.array(["eu", "us", "eu", ""])
    file_ids = pa.array([FILE_A, FILE_B, FILE_A, FILE_B])
    instants = pa.array([T[1], T[2], T[1], T[3]])
    values = metadata_record.record_index_values(partitions, file_ids, instants).to_pylist()
    for value, p, f, t in zip(values, partitions.to_pylist(), file_ids.to_pylist(), instants.to_pylist()):
        assert value == metadata_record.encode(metadata_record.record_index(p, f, t))
        assert metadata_record.location_of(metadata_record.decode(value)) == metadata_record.Location(p, f)


def test_each_shard_log_holds_its_keys_and_deletes_behind_a_marker(tmp_path):
    storage = Storage(str(tmp_path))
    paths = record_index.log_paths(T[5], {record_index.file_group(s): (T[0], 1) for s in range(10)}, 10)
    files = record_index.RecordIndexFiles(str(tmp_path), T[5], paths, {FILE_A: ("eu", T[5])})
    keys = [f"k{i}" for i in range(200)]
    entries = pa.table({"key": keys + ["gone-1", "gone-2"], "file_id": [FILE_A] * 200 + [FILE_B, FILE_B],
                        "deleted": [False] * 200 + [True, True]})
    written = record_index.write_shards(files, entries, storage)
    assert sum(w["entries"] for w in written) == 202
    found, deleted = {}, []
    for w in written:
        shard = paths.index(w["path"])
        assert (tmp_path / marker_path(T[5], w["path"])).exists()
        assert w["size"] == len(storage.read_bytes(w["path"]))
        for block in log_format.decode_blocks(storage.read_bytes(w["path"])):
            assert block.header[log_format.INSTANT_TIME] == T[5]
            if block.block_type == HFILE_DATA_BLOCK:
                rows = [row.decode() for row, _ in hfile.HFileReader.of_bytes(block.content).scan()]
                assert rows == sorted(rows) and all(metadata_record.shard_of(k, 10) == shard for k in rows)
                found.update((row.decode(), metadata_record.location_of(metadata_record.decode(v)))
                             for row, v in hfile.HFileReader.of_bytes(block.content).scan())
            else:
                assert block.block_type == DELETE_BLOCK
                deleted += deleted_keys(block.content)
    assert found == {k: metadata_record.Location("eu", FILE_A) for k in keys}
    assert sorted(deleted) == ["gone-1", "gone-2"]


def bootstrapped(tmp_path):
    """A metadata table whose record_index was built at `<T1>011` with keys k0..k49 in FILE_A."""
    storage = Storage(str(tmp_path))
    (tmp_path / ".hoodie").mkdir()
    writer = MetadataTableWriter(storage)
    writer.create("t", {"eu": {"a.parquet": 1}})
    data_instant(tmp_path, T[1], "completed")
    init = T[1] + "011"
    writer.begin_record_index(init)
    boot = record_index.RecordIndexFiles(str(tmp_path), init, record_index.base_paths(init, 10, WRITE_TOKEN),
                                         {FILE_A: ("eu", T[1])}, bootstrap=True)
    writer.finish_record_index(init, 10, record_index.write_shards(
        boot, pa.table({"key": [f"k{i}" for i in range(50)], "file_id": [FILE_A] * 50, "deleted": [False] * 50}), storage))
    return storage, writer, init


def test_a_compaction_folds_the_bootstrap_upserts_and_deletes(tmp_path):
    storage, writer, init = bootstrapped(tmp_path)
    expected = {f"k{i}": ("eu", FILE_A) for i in range(50)}
    for step in range(2, 2 + MAX_DELTA_COMMITS):
        instant = T[step]
        data_instant(tmp_path, instant, "completed")
        files = record_index.RecordIndexFiles(str(tmp_path), instant,
                                              record_index.log_paths(instant, writer.record_index_slices(), 10),
                                              {FILE_B: ("us", instant)})
        entries = pa.table({"key": [f"n{step}", f"k{step}"], "file_id": [FILE_B, FILE_A], "deleted": [False, True]})
        logs = {w["path"]: w["size"] for w in record_index.write_shards(files, entries, storage)}
        writer.deltacommit(instant, files_records({"us": {f"b{step}.parquet": 1}}, {}), None, logs)
        expected[f"n{step}"] = ("us", FILE_B)
        del expected[f"k{step}"]
    data_instant(tmp_path, T[20], "requested")  # a write in flight holds the compaction back
    assert writer.compact_if_due(reader(storage), data_in_flight=True) is None
    compaction = writer.compact_if_due(reader(storage), data_in_flight=False)
    assert compaction == T[1 + MAX_DELTA_COMMITS] + "001"
    now = reader(storage)
    assert all(piece.base_instant == compaction and not piece.logs
               for piece in now.slices(RECORD_INDEX).values() if piece.base is not None and piece.base.endswith("001.hfile"))
    records = now.records(RECORD_INDEX)
    assert {k: tuple(metadata_record.location_of(r).__dict__.values()) for k, r in records.items()} == expected


def test_a_pending_compaction_moves_only_the_groups_its_plan_lists(tmp_path):
    """Logs of a group the plan leaves out stay with that group's base: Java's readers would take
    a log named after the compaction for a slice of its own, without the base."""
    from dbt.adapters.hudilite.table.format import avro_metadata
    from dbt.adapters.hudilite.table.metadata.writer import COMPACTION_PLAN

    storage, writer, init = bootstrapped(tmp_path)
    pending = T[2] + "001"
    plan = {"operations": [{"baseInstantTime": init, "deltaFilePaths": [], "dataFilePath": None,
                            "fileId": record_index.file_group(0), "partitionPath": RECORD_INDEX, "metrics": None,
                            "bootstrapFilePath": None}]}
    (tmp_path / ".hoodie" / "metadata" / ".hoodie" / f"{pending}.compaction.requested").write_bytes(
        avro_metadata.encode(COMPACTION_PLAN, plan))
    slices = writer.record_index_slices()
    assert slices[record_index.file_group(0)][0] == pending
    assert {base for group, (base, _) in slices.items() if group != record_index.file_group(0)} == {init}


def test_executors_read_every_live_entry_as_the_driver_judged_the_instants(tmp_path):
    """`entries_task` (a task per file group, given the driver's `Validity`, which travels
    pickled) finds the bootstrap's keys, a commit's moves and deletes, and skips the logs of a
    data instant still in flight: the keys a private index is rebuilt from."""
    import pickle

    storage, writer, init = bootstrapped(tmp_path)
    expected = {f"k{i}": FILE_A for i in range(50)}

    def commit(instant, entries, state="completed"):
        data_instant(tmp_path, instant, state)
        files = record_index.RecordIndexFiles(str(tmp_path), instant,
                                              record_index.log_paths(instant, writer.record_index_slices(), 10),
                                              {FILE_A: ("eu", instant), FILE_B: ("us", instant)})
        logs = {w["path"]: w["size"] for w in record_index.write_shards(files, pa.table(entries), storage)}
        writer.deltacommit(instant, files_records({"us": {f"b{instant}.parquet": 1}}, {}), None, logs)

    commit(T[2], {"key": ["k1", "k2", "new"], "file_id": [FILE_B, FILE_A, FILE_B], "deleted": [False, True, False]})
    expected.update(k1=FILE_B, new=FILE_B)
    del expected["k2"]
    commit(T[3], {"key": ["k3", "later"], "file_id": [FILE_A, FILE_B], "deleted": [True, False]}, state="inflight")
    now = reader(storage)
    valid = pickle.loads(pickle.dumps(now.valid))
    slices = [piece for _, piece in sorted(now.slices(RECORD_INDEX).items())]
    ids = pa.RecordBatch.from_pydict({"id": pa.array(range(len(slices)), pa.int64())})
    found = pa.Table.from_batches(list(record_index.entries_task(str(tmp_path), valid, slices, iter([ids]))),
                                  schema=record_index.ENTRIES)
    assert not any(found.column("deleted").to_pylist())
    assert dict(zip(found.column("key").to_pylist(), found.column("file_id").to_pylist())) == expected
    assert found.num_rows == len(expected)
