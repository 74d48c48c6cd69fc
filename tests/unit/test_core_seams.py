"""The seams every write path shares: row layouts, index files, the table's paths, errors,
quoting (no Spark)."""

import posixpath
import re

import pyarrow as pa
import pytest

from dbt.adapters.hudilite.table import errors, quote
from dbt.adapters.hudilite.table.index import files as files
from dbt.adapters.hudilite.table.storage import layout
from dbt.adapters.hudilite.table.format.instant import Instant
from dbt.adapters.hudilite.table.format.rows import INSERT, INSERT_AUTO_KEYS, REWRITE, ROW_INDEX, SLICE, insert_layout
from dbt.adapters.hudilite.table.format.schema import COMMIT_TIME, PARTITION_PATH, RECORD_KEY
from dbt.adapters.hudilite.table.storage.filesystem import Storage


class Col:
    """Stands in for a Spark column: `RowLayout.select` only aliases."""

    def __init__(self, name):
        self.name = name

    def alias(self, name):
        return f"{self.name} AS {name}"


def test_a_layout_puts_named_meta_columns_first_and_refuses_a_producer_out_of_step():
    meta = {PARTITION_PATH: Col("p"), ROW_INDEX: Col("i"), RECORD_KEY: Col("k")}
    assert INSERT.select(meta, ["data"]) == [f"i AS {ROW_INDEX}", f"k AS {RECORD_KEY}", f"p AS {PARTITION_PATH}", "data"]
    with pytest.raises(ValueError, match="insert with auto keys rows take meta columns"):
        INSERT_AUTO_KEYS.select(meta, [])  # one meta column too many
    with pytest.raises(ValueError, match="rewrite rows take meta columns"):
        REWRITE.select({RECORD_KEY: Col("k")}, [])
    assert insert_layout(True, partitioned=True) is INSERT_AUTO_KEYS and insert_layout(False, partitioned=True) is INSERT
    assert insert_layout(True, partitioned=False).meta == () and insert_layout(False, partitioned=False).meta == (RECORD_KEY,)


def test_a_task_reads_columns_by_name_from_its_layout():
    batch = pa.record_batch([pa.array(["t"]), pa.array(["s"]), pa.array(["k"]), pa.array(["p"]), pa.array([7])],
                            names=list(SLICE.meta) + ["amount"])
    SLICE.check(batch.schema)
    assert SLICE.meta_column(batch, RECORD_KEY).to_pylist() == ["k"]
    assert [f.name for f in SLICE.data_fields(batch.schema)] == ["amount"] and SLICE.data(batch)[0].to_pylist() == [7]
    swapped = pa.record_batch([batch.column(1), batch.column(0)] + batch.columns[2:], names=[
        batch.schema.names[1], COMMIT_TIME] + batch.schema.names[2:])
    with pytest.raises(ValueError, match="slice rows must start with"):
        SLICE.check(swapped.schema)


def test_index_file_names_and_which_files_an_index_reads():
    assert layout.index_file_name("20260101000000001", "delta") == "20260101000000001.delta.parquet"
    assert layout.parse_index_file_name("20260101000000001.base.parquet") == ("20260101000000001", "base")
    assert layout.parse_index_file_name("index.json") is None
    base, done = "20260101000000002", {"20260101000000001", "20260101000000002", "20260101000000003"}
    assert files.is_visible(("20260101000000002", files.BASE), base, done)
    assert not files.is_visible(("20260101000000001", files.BASE), base, done)  # an older base
    assert not files.is_visible(("20260101000000002", files.DELTA), base, done)  # folded into the base
    assert files.is_visible(("20260101000000003", files.DELTA), base, done)
    assert not files.is_visible(("20260101000000004", files.DELTA), base, done)  # its instant did not complete
    completed = [Instant("20260101000000001", "commit", "COMPLETED"), Instant("20260101000000003", "commit", "COMPLETED")]
    assert files.completed_set(completed, as_of="20260101000000002") == {"20260101000000001"}


def test_index_files_on_storage_compact_to_one_base(tmp_path):
    storage = Storage(str(tmp_path))
    index = files.IndexFiles(storage, layout.KEY_RANGES_DIR)
    assert index.state() is None
    table = pa.table({"x": [1]})
    for instant, kind in [("20260101000000001", files.BASE), ("20260101000000002", files.DELTA),
                          ("20260101000000003", files.DELTA), ("20260101000000004", files.DELTA)]:
        files.write_index_file(storage, index.path(instant, kind), table, instant if kind == files.DELTA else None)
    index.write_state({"base_instant": "20260101000000001"})
    visible = index.visible("20260101000000001", {"20260101000000002", "20260101000000003"})
    assert [i for i, _ in visible] == ["20260101000000001", "20260101000000002", "20260101000000003"]
    # a delta is written after its marker, so a rollback of its instant finds it
    assert storage.exists(layout.marker_path("20260101000000004", index.path("20260101000000004", files.DELTA)))
    files.write_index_file(storage, index.path("20260101000000003", files.BASE), table)
    index.finish_compaction({"base_instant": "20260101000000003"}, [p for _, p in visible])
    superseded = [index.path("20260101000000001", files.BASE), index.path("20260101000000002", files.DELTA),
                  index.path("20260101000000003", files.DELTA)]
    assert index.state() == {"base_instant": "20260101000000003", "superseded": superseded}
    assert all(storage.exists(p) for p in superseded)  # kept one generation for readers that listed them
    files.write_index_file(storage, index.path("20260101000000004", files.BASE), table)
    index.finish_compaction({"base_instant": "20260101000000004"},
                            [index.path("20260101000000003", files.BASE), index.path("20260101000000004", files.DELTA)])
    assert sorted(storage.list_names(layout.KEY_RANGES_DIR)) == [
        "20260101000000003.base.parquet", "20260101000000004.base.parquet", "20260101000000004.delta.parquet",
        "index.json"]


def test_every_core_error_shares_one_base_and_the_kinds_stay_apart():
    for kind in (errors.ConfigurationError, errors.SchemaError, errors.TimelineError, errors.DataError,
                 errors.ConcurrentWriteError, errors.CorruptTableError):
        assert issubclass(kind, errors.HudiliteError)
    assert issubclass(errors.SchemaError, errors.ConfigurationError)
    assert not issubclass(errors.DataError, errors.ConfigurationError)
    assert not issubclass(errors.ConcurrentWriteError, errors.ConfigurationError)


def test_one_quoting_helper_for_columns_and_tables():
    assert quote("a b") == "`a b`"
    assert quote("we`ird") == "`we``ird`"
    assert quote("s", "t.x") == "`s`.`t.x`"


@pytest.mark.parametrize("body", [b"", b"   ", b'{"partitionToWriteStats": {"p": [{"fileId": "f1", "path": "p/f1_0-1-0_2026'])
def test_an_empty_or_truncated_completed_instant_is_a_corrupt_table(tmp_path, body):
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    storage.write_atomic(".hoodie/20261123000000001.commit", body, layout.TMP_DIR)
    timeline = Timeline(storage)
    (instant,) = timeline.completed()
    with pytest.raises(errors.CorruptTableError, match=r"completed instant .hoodie/20261123000000001.commit is unreadable"):
        timeline.metadata(instant)


def test_an_atomic_write_leaves_no_temporary_file(tmp_path):
    storage = Storage(str(tmp_path))
    storage.write_atomic("a/b.json", b"{}", layout.TMP_DIR)
    storage.write_atomic("a/b.json", b"[1]", layout.TMP_DIR)
    assert storage.read_text("a/b.json") == "[1]" and storage.list_names(layout.TMP_DIR) == []


def test_the_table_lock_excludes_threads_and_processes_and_dies_with_its_holder(tmp_path):
    import subprocess
    import sys
    import threading

    from dbt.adapters.hudilite.table.storage.lock import TableLock

    storage = Storage(str(tmp_path))
    with TableLock(storage):
        outcome = []
        waiter = threading.Thread(target=lambda: outcome.append(_try_lock(storage)))
        waiter.start()
        waiter.join()
        assert outcome == ["timed out"]  # another thread of this process waits
    assert _try_lock(storage) == "acquired"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from dbt.adapters.hudilite.table.storage.lock import TableLock;"
        "from dbt.adapters.hudilite.table.storage.filesystem import Storage;"
        f"lock = TableLock(Storage({str(tmp_path)!r})).__enter__(); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert _try_lock(storage) == "timed out"  # another process holds it
    finally:
        holder.kill()
        holder.wait()
    assert _try_lock(storage) == "acquired"  # a killed holder's lock is gone at once: nothing to break


def _try_lock(storage):
    from dbt.adapters.hudilite.table.storage.lock import TableLock

    try:
        with TableLock(storage, wait_s=0.3):
            return "acquired"
    except errors.ConcurrentWriteError:
        return "timed out"


def test_schema_changes_of_concurrent_commits_conflict():
    from dbt.adapters.hudilite.table.format.commit import SPARK_SCHEMA_KEY, CommitMetadata, WriteStat
    from dbt.adapters.hudilite.table.conflict import find_conflict

    def commit(schema, file_id):
        return CommitMetadata(operation="INSERT", extra={SPARK_SCHEMA_KEY: schema},
                              write_stats=[WriteStat(fileId=file_id, path=f"{file_id}_0-1-0_1.parquet", partitionPath="")])

    same = [("20260101000000002", commit("s1", "f2"))]
    assert find_conflict(commit("s1", "f1"), same, base_schema="s1") is None
    assert find_conflict(commit("s2", "f1"), same, base_schema="s1") is None  # only mine changed it: mine is latest
    grown = [("20260101000000002", commit("s3", "f2"))]
    assert "changed the table schema" in find_conflict(commit("s1", "f1"), grown, base_schema="s1")
    assert find_conflict(commit("s3", "f1"), grown, base_schema="s1") is None  # both arrived at the same schema


def test_a_delete_insert_conflicts_with_a_concurrent_insert_into_its_partitions():
    from dbt.adapters.hudilite.table.format.commit import CommitMetadata, WriteStat
    from dbt.adapters.hudilite.table.conflict import find_conflict

    def stat(file_id, partition, prev=None):
        return WriteStat(fileId=file_id, path=f"{partition}/{file_id}_0-1-0_2.parquet", partitionPath=partition,
                         prevCommit=prev)

    delete_insert = CommitMetadata(operation="INSERT", write_stats=[stat("f1", "d=1", prev="1"), stat("f9", "d=1")])
    append_same_day = [("20260101000000002", CommitMetadata(operation="INSERT", write_stats=[stat("f5", "d=1")]))]
    append_other_day = [("20260101000000002", CommitMetadata(operation="INSERT", write_stats=[stat("f6", "d=2")]))]
    assert "inserted rows into partition 'd=1', where this write deletes and inserts" in find_conflict(
        delete_insert, append_same_day)
    assert find_conflict(delete_insert, append_other_day) is None
    plain_append = CommitMetadata(operation="INSERT", write_stats=[stat("f7", "d=1")])
    assert find_conflict(plain_append, append_same_day) is None  # appends never conflict


def test_seqnos_are_instant_task_and_row_for_any_run_of_rows():
    from dbt.adapters.hudilite.table.format.keygen import seqno_array

    for start, count in ((0, 0), (0, 1), (0, 1005), (95, 20), (999_995, 10), (8_589_934_590, 5)):
        built = seqno_array("20261125080000123", 7, start, count)
        assert built.type == pa.string()
        assert built.to_pylist() == [f"20261125080000123_7_{row}" for row in range(start, start + count)]


def test_a_repeated_value_is_sliced_from_one_array_per_value():
    from dbt.adapters.hudilite.table.spark.writer import repeated

    for n in (0, 1, 1023, 1025, 100_000):
        column = repeated("f1_0-1-0_20261125.parquet", n)
        assert len(column) == n and column.type == pa.string()
        assert column.to_pylist() == ["f1_0-1-0_20261125.parquet"] * n
    assert repeated("x", 3).buffers()[2] is not None and repeated("", 2).to_pylist() == ["", ""]


def test_dictionary_columns_are_those_whose_first_rows_repeat():
    from dbt.adapters.hudilite.table.spark.writer import DICTIONARY_SAMPLE_ROWS, dictionary_columns

    n = DICTIONARY_SAMPLE_ROWS * 2
    distinct_then_repeating = list(range(DICTIONARY_SAMPLE_ROWS)) + [0] * DICTIONARY_SAMPLE_ROWS
    batch = pa.RecordBatch.from_pydict({
        "unique": list(range(n)), "constant": ["a"] * n, "nulls": pa.nulls(n, pa.int64()),
        "half": [i // 2 for i in range(n)], "more_than_half": [i * 2 // 3 for i in range(n)],
        "judged_by_first_rows": distinct_then_repeating, "nested": [[i] for i in range(n)],
        "untyped": pa.nulls(n), "decimal": pa.array(range(n), pa.decimal128(12, 2)),
    })
    assert dictionary_columns(pa.Table.from_batches([batch])) == ["constant", "nulls", "half", "nested", "untyped"]
    # The first rows across batches: a file whose first batch holds one row is judged by the next.
    split = pa.Table.from_batches([batch.slice(0, 1), batch.slice(1)])
    assert dictionary_columns(split) == ["constant", "nulls", "half", "nested", "untyped"]
    assert dictionary_columns(pa.Table.from_batches([batch.slice(0, 255)])) is None  # too few rows to judge


@pytest.mark.parametrize("portable", [False, True])
def test_parquet_writer_dictionary_reaches_nested_columns_and_skips_the_rest(portable):
    import io

    import pyarrow.parquet as pq

    from dbt.adapters.hudilite.table.spark.writer import parquet_writer

    n = 1000
    table = pa.table({"_hoodie_record_key": [str(i) for i in range(n)], "id": list(range(n)), "s": [{"x": 1, "y": {"z": "q"}}] * n,
                      "l": [[1, 2]] * n, "m": pa.array([[("k", [1])]] * n, pa.map_(pa.string(), pa.list_(pa.int64())))})

    def dictionary_pages(dictionary):
        buf = io.BytesIO()
        with parquet_writer(buf, table.schema, portable, dictionary) as writer:
            writer.write_table(table)
        row_group = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata.row_group(0)
        return {row_group.column(i).path_in_schema: row_group.column(i).has_dictionary_page
                for i in range(row_group.num_columns)}

    nested = {"s.x": True, "s.y.z": True, "l.list.element": True, "m.key_value.key": True,
              "m.key_value.value.list.element": True}
    assert dictionary_pages(None) == {"_hoodie_record_key": portable, "id": True, **nested}
    assert dictionary_pages(["s", "l", "m"]) == {"_hoodie_record_key": False, "id": False, **nested}


def test_partition_format_makes_hudi_paths_and_refuses_what_no_folder_can_hold():
    import datetime

    from dbt.adapters.hudilite.table.format.keygen import DEFAULT_PARTITION, PartitionFormat

    batch = pa.RecordBatch.from_pydict({
        "_hoodie_partition_path": pa.nulls(4), "Region": ["eu", None, "", "a b"],
        "day": pa.array([datetime.date(2026, 1, 2), None, datetime.date(1, 1, 1), datetime.date(9999, 12, 31)]),
    })
    hive = PartitionFormat(("region", "DAY"), True, "t").paths(batch).to_pylist()
    assert hive == ["Region=eu/day=2026-01-02", f"Region={DEFAULT_PARTITION}/day={DEFAULT_PARTITION}",
                    f"Region={DEFAULT_PARTITION}/day=0001-01-01", "Region=a b/day=9999-12-31"]
    assert PartitionFormat(("region",), False, "t").paths(batch).to_pylist() == ["eu", DEFAULT_PARTITION, DEFAULT_PARTITION, "a b"]
    for bad in ("a/b", "c:d", ".", ".."):
        with pytest.raises(errors.DataError, match=f"table t: partition column 'p' has a value that cannot be a folder "
                                                   rf"name .*: {re.escape(bad)}$"):
            PartitionFormat(("p",), False, "t").paths(pa.RecordBatch.from_pydict({"p": ["ok", bad]}))
    late = pa.array([2932897], pa.int32()).cast(pa.date32())
    with pytest.raises(errors.DataError, match="partition column 'd' has a date outside 0001-01-01 to 9999-12-31"):
        PartitionFormat(("d",), True, "t").paths(pa.RecordBatch.from_arrays([late], ["d"]))


def test_a_task_makes_one_path_per_run_of_partition_values_and_joins_runs_of_one_path():
    from dbt.adapters.hudilite.table.format.keygen import DEFAULT_PARTITION, PartitionFormat
    from dbt.adapters.hudilite.table.spark.writer import partition_runs, run_starts

    assert run_starts([pa.array([None, None, "a", "a", None, "", ""])]) == [0, 2, 4, 5]
    assert run_starts([pa.array([1, 1, 1, 2]), pa.array(["x", "y", "y", "y"])]) == [0, 1, 3]
    assert run_starts([pa.array([], pa.int64())]) == []

    class Spec:
        partition_format = PartitionFormat(("region", "n"), True, "t")

    # As the grouping sort delivers them: null, '' and the default's own name sort as one value.
    regions = [None, "", None, DEFAULT_PARTITION, "", "eu", "eu", "eu"]
    numbers = [1, 1, 1, 1, 1, 1, 1, 2]
    batch = pa.RecordBatch.from_pydict({ROW_INDEX: list(range(8)), PARTITION_PATH: pa.nulls(8), "Region": regions,
                                        "n": numbers})
    runs = [(path, run.column(0).to_pylist()) for path, run in partition_runs(Spec, INSERT_AUTO_KEYS, batch)]
    assert runs == [(f"Region={DEFAULT_PARTITION}/n=1", [0, 1, 2, 3, 4]), ("Region=eu/n=1", [5, 6]), ("Region=eu/n=2", [7])]
    # A value no folder can hold is refused wherever its run is.
    bad = pa.RecordBatch.from_pydict({ROW_INDEX: [0, 1, 2], PARTITION_PATH: pa.nulls(3), "Region": ["eu", "eu", "a/b"],
                                      "n": [1, 1, 1]})
    with pytest.raises(errors.DataError, match="partition column 'Region' has a value that cannot be a folder name .*: a/b$"):
        list(partition_runs(Spec, INSERT_AUTO_KEYS, bad))
    for control in ("a\x01b", "new\nline", "del\x7f"):  # no object-store key holds one: refused on every store
        bad = pa.RecordBatch.from_pydict({ROW_INDEX: [0], PARTITION_PATH: pa.nulls(1), "Region": [control], "n": [1]})
        with pytest.raises(errors.DataError, match="partition column 'Region' has a value that cannot be a folder name"):
            list(partition_runs(Spec, INSERT_AUTO_KEYS, bad))
    # Paths made in Spark come with each row.
    made = pa.RecordBatch.from_pydict({ROW_INDEX: [0, 1, 2], PARTITION_PATH: ["a", "a", "b"], "Region": ["x", "y", "z"],
                                       "n": [1, 2, 3]})
    assert [(p, r.num_rows) for p, r in partition_runs(Spec, INSERT_AUTO_KEYS, made)] == [("a", 2), ("b", 1)]
    for empty in (batch.slice(0, 0), made.slice(0, 0)):  # a batch without rows has no runs
        assert list(partition_runs(Spec, INSERT_AUTO_KEYS, empty)) == []

def test_task_made_paths_are_for_plain_strings_integers_and_dates():
    from pyspark.sql import types as T

    from dbt.adapters.hudilite.table.format.keygen import formats_in_task

    assert formats_in_task([T.StringType(), T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType(), T.DateType()])
    for other in (T.TimestampType(), T.DecimalType(10, 2), T.DoubleType(), T.BooleanType(), T.BinaryType()):
        assert not formats_in_task([T.StringType(), other])
    try:
        collated = T.StringType("UTF8_LCASE")  # Spark 4: 'eu' and 'EU' compare equal, yet are two folders
    except TypeError:  # PySpark 3.5 has no collations
        collated = None
    assert collated is None or not formats_in_task([collated])


def test_batches_back_to_the_jvm_are_bounded_by_bytes_as_well_as_rows():
    from dbt.adapters.hudilite.table.spark.jobs import _byte_size
    from dbt.adapters.hudilite.table.spark.writer import bounded_batches

    narrow = pa.table({"v": pa.array(["x"] * 1000)})
    assert [b.num_rows for b in bounded_batches(narrow, max_rows=300, max_bytes=1 << 20)] == [300, 300, 300, 100]
    # three wide rows among narrow ones: only their batch is cut, a row wider than the bound goes alone
    values = ["n"] * 40 + ["w" * 5000] * 3 + ["n"] * 40
    rows = pa.table({"id": pa.array(range(len(values))), "v": pa.array(values)})
    batches = list(bounded_batches(rows, max_rows=1000, max_bytes=4000))
    assert pa.Table.from_batches(batches).equals(rows)  # every row, in order
    assert all(b.nbytes <= 4000 or b.num_rows == 1 for b in batches)
    assert sum(1 for b in batches if b.num_rows == 1 and b.nbytes > 4000) == 3
    assert list(bounded_batches(rows.slice(0, 0))) == []
    assert [_byte_size(t) for t in ("268435456", "256m", "1g", "64MB", None, "lots")] == [
        268435456, 256 << 20, 1 << 30, 64 << 20, float("inf"), float("inf")]


@pytest.mark.parametrize("portable", [False, True])
def test_keyed_base_file_keeps_its_one_value_meta_columns_small(tmp_path, portable):
    """A 100-row keyed base file (issue 33: a keyed table within 2x plain parquet): the file
    name and partition path, one value per file, are stored uncompressed; the file name and
    seqno carry no min/max statistics; every other column keeps its codec and statistics, and
    Hudi's bloom footer stays readable."""
    import pyarrow.parquet as pq

    from dbt.adapters.hudilite.table.format.bloom import DynamicBloomFilter
    from dbt.adapters.hudilite.table.storage.filesystem import Storage
    from dbt.adapters.hudilite.table.spark.writer import WriteSpec, _OpenBaseFile

    instant, n = "20261126100000000", 100
    spec = WriteSpec(base_path=str(tmp_path), instant=instant, partitioned=True, partition_depth=1, auto_keys=False,
                     bloom_footers=True, portable_encoding=portable)
    storage = Storage(str(tmp_path))
    storage.make_dirs(".hoodie/.temp")
    fields = [pa.field("id", pa.int64()), pa.field("p", pa.int64()), pa.field("name", pa.string())]
    ids = [7 + 1000 * i for i in range(n)]
    out = _OpenBaseFile(spec, storage, "0-1-0", "p=7", fields)
    out.add(pa.array([instant] * n), pa.array([f"{instant}_0_{i}" for i in range(n)]), pa.array([str(i) for i in ids]),
            pa.array(["p=7"] * n), [pa.array(ids), pa.array([7] * n), pa.array([f"customer-{i % 5000}" for i in ids])], n)
    stat = out.close()
    parquet = pq.ParquetFile(str(tmp_path / stat["path"]))
    group = parquet.metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    codec = "SNAPPY" if portable else "ZSTD"
    assert {name: chunk.compression for name, chunk in chunks.items()} == {
        "_hoodie_commit_time": codec, "_hoodie_commit_seqno": codec, "_hoodie_record_key": codec,
        "_hoodie_partition_path": "UNCOMPRESSED", "_hoodie_file_name": "UNCOMPRESSED", "id": codec, "p": codec, "name": codec}
    assert {name for name, chunk in chunks.items() if chunk.is_stats_set} == {
        "_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path", "id", "p", "name"}
    rows = parquet.read()
    assert rows.column("_hoodie_file_name").to_pylist() == [posixpath.basename(stat["path"])] * n
    assert rows.column("_hoodie_partition_path").to_pylist() == ["p=7"] * n
    assert rows.column("_hoodie_commit_seqno").to_pylist()[-1] == f"{instant}_0_99"
    footer = parquet.metadata.metadata
    bloom = DynamicBloomFilter.deserialize(footer[b"org.apache.hudi.bloomfilter"].decode())
    assert all(bloom.might_contain(str(i)) for i in ids)
    keys = sorted(str(i).encode() for i in ids)
    assert (footer[b"hoodie_min_record_key"], footer[b"hoodie_max_record_key"]) == (keys[0], keys[-1])


@pytest.mark.parametrize("answer_lost", [True, False])
def test_a_lease_lost_after_a_publish_went_out_unanswered_leaves_the_publish_in_doubt(monkeypatch, answer_lost):
    """A publishing PUT whose answer was lost may land later: when the lease is then found lost,
    the error is an OSError, so the transaction looks for the completed instant before calling
    the write failed (and rolling back files a completed instant may name). Lost before any
    attempt went out, it is the plain conflict."""
    import obstore
    from obstore.exceptions import GenericError

    from dbt.adapters.hudilite.table.storage import object_store

    storage = object_store.ObjectStorage("s3://bucket/t")
    storage._publish_store = object()
    monkeypatch.setattr(storage, "verify_conditional_puts", lambda: None)
    monkeypatch.setattr(object_store.time, "sleep", lambda s: None)
    landed = {}

    def put(store, key, data, **kwargs):
        landed[key] = data  # applied by the store ...
        raise GenericError("connection reset")  # ... its answer lost on the way back

    checks = []

    def check_lease():
        checks.append(1)
        if len(checks) > (1 if answer_lost else 0):
            raise errors.ConcurrentWriteError("the table's lease was taken over")

    monkeypatch.setattr(obstore, "put", put)
    with pytest.raises(errors.ConcurrentWriteError, match="lease was taken over") as raised:
        storage.publish(".hoodie/20261126000000000.commit", b"{}", ".hoodie/.hudilite/tmp", check_lease)
    assert isinstance(raised.value, OSError) is answer_lost
    assert list(landed) == (["t/.hoodie/20261126000000000.commit"] if answer_lost else [])


def test_a_claim_that_goes_while_it_is_judged_is_not_a_live_writer(tmp_path, monkeypatch):
    """A pending instant's claim file disappears when its writer finishes (and its instant is
    archived or its tombstone cleaned): judging it then is 'not alive', never an error that
    fails the writer doing the judging (it looks again under the lock before rolling back)."""
    import json

    from dbt.adapters.hudilite.table import transaction
    from dbt.adapters.hudilite.table.storage.layout import writer_path

    storage = Storage(str(tmp_path))
    storage.write_bytes(writer_path("20261126000000001"), json.dumps({"host": "elsewhere", "pid": 1}).encode())

    def gone(rel):
        raise FileNotFoundError(rel)

    assert transaction._writer_is_alive(storage, "20261126000000001", 60.0)  # fresh claim of another host
    monkeypatch.setattr(storage, "mtime_seconds", gone)  # deleted between the read and the stat
    assert not transaction._writer_is_alive(storage, "20261126000000001", 60.0)
    monkeypatch.setattr(storage, "read_text", gone)  # deleted between the existence check and the read
    assert not transaction._writer_is_alive(storage, "20261126000000001", 60.0)


def test_an_object_store_refuses_a_completed_instant_written_past_publish():
    """Only `Storage.publish` writes a completed instant on an object store (create-if-absent,
    after a lease check); a plain `write_atomic` of one would replace it, so it is refused before
    any request. Requested and inflight states, and files elsewhere, are plain writes."""
    from dbt.adapters.hudilite.table import Storage
    from dbt.adapters.hudilite.table.storage.layout import is_completed_instant_path
    from dbt.adapters.hudilite.table.storage.object_store import ObjectStoreError

    completed = [".hoodie/20260101000000001.commit", ".hoodie/20260101000000001.replacecommit",
                 ".hoodie/20260101000000001.clean", ".hoodie/20260101000000001.savepoint"]
    others = [".hoodie/20260101000000001.inflight", ".hoodie/20260101000000001.commit.requested",
              ".hoodie/20260101000000001.clean.inflight", ".hoodie/archived/20260101000000001.commit",
              "p=1/20260101000000001.commit", ".hoodie/hoodie.properties"]
    assert [is_completed_instant_path(p) for p in completed] == [True] * 4
    assert [is_completed_instant_path(p) for p in others] == [False] * 6
    with pytest.raises(ObjectStoreError, match="written only by Storage.publish"):
        Storage("s3://bucket/t").write_atomic(completed[0], b"{}", ".hoodie/.hudilite/tmp")


def _listings(storage, monkeypatch):
    """Counts the listings of each folder of `storage` (names, and names with sizes)."""
    counted = []
    for method in ("list_names", "list_files_with_sizes"):
        listed = getattr(storage, method)
        monkeypatch.setattr(storage, method, lambda rel, listed=listed: (counted.append(rel), listed(rel))[1])
    return counted


def test_a_pinned_timeline_is_listed_once_and_takes_in_its_own_transitions(tmp_path, monkeypatch):
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    storage.write_atomic(".hoodie/20261123000000001.commit", b"{}", layout.TMP_DIR)
    timeline = Timeline(storage)
    counted = _listings(storage, monkeypatch)
    with timeline.pinned():
        assert [i.timestamp for i in timeline.completed()] == ["20261123000000001"]
        storage.write_atomic(".hoodie/20261123000000002.commit", b"{}", layout.TMP_DIR)  # another writer's
        assert len(timeline.completed()) == 1 and timeline.pending() == [] and timeline.service_instants("clean") == []
        assert counted.count(".hoodie") == 1
        timeline.create_requested("20261123000000003", "commit")  # its own transition: taken in, not listed
        assert [i.timestamp for i in timeline.instants()] == ["20261123000000001", "20261123000000003"]
        timeline.delete_pending(Instant("20261123000000003", "commit", "REQUESTED"))
        assert [i.timestamp for i in timeline.instants()] == ["20261123000000001"]
        assert counted.count(".hoodie") == 1
        timeline.refresh()  # what others did too
        assert [i.timestamp for i in timeline.completed()] == ["20261123000000001", "20261123000000002"]
        assert counted.count(".hoodie") == 2

        def refused(path, data):
            raise OSError("the store refused the put")

        monkeypatch.setattr(storage, "write_bytes", refused)
        with pytest.raises(OSError):
            timeline.create_requested("20261123000000004", "commit")  # unknown outcome: the picture goes
        timeline.pending()
        assert counted.count(".hoodie") == 3
    timeline.completed()
    timeline.completed()  # unpinned: every question lists
    assert counted.count(".hoodie") == 5


def test_hudis_archive_folder_is_listed_again_once_an_instant_it_archived_is_gone(tmp_path, monkeypatch):
    """Hudi's archiver writes an archive file, then removes the instants it archived; until it
    does, Hudi reads them as active. So the archive folder (a LIST) is listed again only when a
    listed instant file is gone; our own archived view is read at every listing."""
    from dbt.adapters.hudilite.table.format.archived_timeline import write_archive
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    stamps = ["20261123000000001", "20261123000000002", "20261123000000003"]
    for t in stamps:
        storage.write_atomic(f".hoodie/{t}.commit.requested", b"", layout.TMP_DIR)
        storage.write_atomic(f".hoodie/{t}.commit", b'{"operationType": "UPSERT"}', layout.TMP_DIR)
    timeline = Timeline(storage)
    counted = _listings(storage, monkeypatch)
    for _ in range(3):
        assert [i.timestamp for i in timeline.completed()] == stamps
    assert counted.count(".hoodie") == 3 and counted.count(layout.ARCHIVED_DIR) == 1
    first = Instant(stamps[0], "commit", "COMPLETED")
    write_archive(storage, [(first, storage.read_text(f".hoodie/{stamps[0]}.commit"))])  # Java's archiver, then:
    looks = counted.count(layout.ARCHIVED_DIR)
    assert [i.timestamp for i in timeline.completed()] == stamps and counted.count(layout.ARCHIVED_DIR) == looks
    for name in (f"{stamps[0]}.commit.requested", f"{stamps[0]}.commit"):
        storage.delete_file(f".hoodie/{name}")
    assert [i.timestamp for i in timeline.completed()] == stamps[1:] and counted.count(layout.ARCHIVED_DIR) == looks + 1
    assert timeline.archived().through == stamps[0]


def test_the_first_write_in_flight_is_seen_when_it_finishes_between_the_listings(tmp_path, monkeypatch):
    """A writer pending at the first listing, whose claim goes before the claims are read and
    whose instant completes before the second listing, is completed, not lost between the two."""
    from dbt.adapters.hudilite.table import transaction
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    for name in ("20261123000000001.commit", "20261123000000002.commit.requested", "20261123000000003.commit.requested"):
        storage.write_atomic(f".hoodie/{name}", b"{}" if name.endswith("commit") else b"", layout.TMP_DIR)
    timeline = Timeline(storage)
    claims = iter([[], ["20261123000000003"]])

    def finishing(_storage):
        storage.write_atomic(".hoodie/20261123000000002.commit", b"{}", layout.TMP_DIR)
        return next(claims), []

    monkeypatch.setattr(transaction, "claims_by_state", finishing)
    with timeline.pinned():  # a caller's pin does not hide what finished
        completed, first = transaction.first_write_in_flight(storage, timeline)
    assert completed == ["20261123000000001", "20261123000000002"] and first == "20261123000000003"


def test_a_claimed_time_is_later_than_a_writer_that_finished_while_the_claims_were_read(tmp_path, monkeypatch):
    """The timeline is listed after the claims, whatever the caller pinned: a writer (its clock
    ahead) that completed and dropped its claim meanwhile is on that listing, and the new time
    comes after it."""
    from dbt.adapters.hudilite.table import transaction
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    storage.write_atomic(".hoodie/20261123000000001.commit", b"{}", layout.TMP_DIR)
    timeline = Timeline(storage)

    def finishing(_storage):
        storage.write_atomic(".hoodie/20991231000000001.commit", b"{}", layout.TMP_DIR)
        return []

    monkeypatch.setattr(transaction, "claimed_instants", finishing)
    with timeline.pinned():
        assert [i.timestamp for i in timeline.completed()] == ["20261123000000001"]
        claimed = transaction._claim_time(timeline, {"state": "writing"})
        assert claimed > "20991231000000001"
        assert [i.timestamp for i in timeline.completed()] == ["20261123000000001", "20991231000000001"]


def test_a_write_that_fails_after_its_claim_is_undone_at_once(tmp_path, monkeypatch):
    """A claimed instant whose requested file cannot be written is rolled back there and then:
    its heartbeat stops, and it no longer counts as a write in flight of this process."""
    import json

    from dbt.adapters.hudilite.table import transaction
    from dbt.adapters.hudilite.table.format.timeline import Timeline
    from dbt.adapters.hudilite.table.storage.layout import writer_path

    storage = Storage(str(tmp_path))
    timeline = Timeline(storage)

    def refused(timestamp, action):
        raise OSError("the store refused the put")

    monkeypatch.setattr(timeline, "create_requested", refused)
    txn = transaction.WriteTransaction(storage, timeline, "commit", heartbeat_interval_s=0.05)
    with pytest.raises(OSError, match="refused the put"):
        txn.__enter__()
    assert txn.instant is not None and txn.instant not in transaction._active_in_this_process
    assert not txn._heartbeat.is_alive()
    assert json.loads(storage.read_text(writer_path(txn.instant)))["state"] == transaction.ROLLED_BACK
    assert transaction.first_write_in_flight(storage, timeline) == ([], None)


def test_a_claim_is_made_on_the_writes_first_listing_only_while_it_is_recent_and_behind_the_clock(tmp_path, monkeypatch):
    from dbt.adapters.hudilite.table import transaction
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(str(tmp_path))
    storage.write_atomic(".hoodie/20261123000000001.commit", b"{}", layout.TMP_DIR)
    storage.write_bytes(layout.writer_path("20261123000000002"), b"{}")  # a writer between claim and requested
    timeline = Timeline(storage)
    counted = _listings(storage, monkeypatch)
    with timeline.pinned():
        transaction.list_writers_first(timeline)
        assert transaction._claims_of_first_listing(timeline) == ["20261123000000002"]
        assert transaction._claims_of_first_listing(timeline) is None  # once
        assert counted.count(".hoodie") == 1
    with timeline.pinned():  # too old: the claim lists again
        clock = iter([0.0, transaction.CLAIM_ON_LISTING_S + 1.0])
        monkeypatch.setattr(transaction.time, "monotonic", lambda: next(clock))
        transaction.list_writers_first(timeline)
        assert transaction._claims_of_first_listing(timeline) is None
    monkeypatch.undo()
    storage.write_atomic(".hoodie/29991231000000001.commit", b"{}", layout.TMP_DIR)  # ahead of this clock
    with timeline.pinned():  # the claim would take `newest + 1 ms`, not the clock: it lists again
        transaction.list_writers_first(timeline)
        assert transaction._claims_of_first_listing(timeline) is None
