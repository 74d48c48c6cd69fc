"""Rows too wide for row-counted batches, on every write path. 100k rows of a few KB, or a thousand
1 MB values, made one Arrow batch of over 1 GiB that Spark's JVM could not take back from Python;
and Spark's parquet reader decodes 4096 rows at once, from pages that held a whole row group when
rows were wide (pyarrow checks a page's size every 1024 values): reading 1 MB values back for an
update, a delete+insert or a clustering ran the JVM out of heap, and the JVM died. Each path runs
here (`wide_rows_writer.py`, in a process of its own so that a dead JVM fails only this test) in a
JVM of Spark's smallest heap, 512 MiB."""

import collections
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from dbt.adapters.hudilite.table.spark import reader
from dbt.adapters.hudilite.table.errors import DataError
from dbt.adapters.hudilite.table.format.file_group import BaseFile
from dbt.adapters.hudilite.table.storage.filesystem import Storage
from dbt.adapters.hudilite.table.spark.writer import parquet_writer
from tests.core.process_groups import kill_group
from tests.selection import selected_cases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def expected_steps(rows):
    """What each step of `wide_rows_writer.py` leaves: (step, rows, distinct ids, rows per payload tag)."""
    out = []

    def note(step, model):
        tags = collections.Counter(model.values())
        out.append((step, len(model), len(model), ",".join(f"{t}{n}" for t, n in sorted(tags.items()))))

    keyed = {i: "i:" for i in range(rows)}
    note("insert", keyed)
    keyed.update({i: "u:" for i in range(rows // 2, rows // 2 + rows)})
    note("upsert", keyed)
    for i in range(rows // 4):
        keyed.pop(i, None)
    note("delete", keyed)
    note("build_index", keyed)
    keyed.update({i: "v:" for i in keyed if i % 2 == 0})
    note("update", keyed)
    keyed = {i: t for i, t in keyed.items() if i % 3}
    keyed.update({i: "o:" for i in range(rows) if i % 3 == 0 and i % 4 == 0})
    note("overwrite", keyed)
    auto = {i: ("i:" if i < rows // 2 else "j:") for i in range(rows)}
    note("auto_insert", auto)
    auto.update({i: "d:" for i in range(rows // 4)})
    note("delete_insert", auto)
    note("clustering", auto)
    return out


WIDE_CASES = {"1MB-values": (420, 1_000_000), "20KB-rows": (3000, 20_000)}  # rows, bytes per row


@pytest.fixture(scope="module")
def wide_writers(request, tmp_path_factory):
    """The writer of every selected case, all started at once: the cases run side by side, each
    in a process and a JVM of its own (a JVM that dies fails only its case)."""
    selected = selected_cases(request, "test_every_write_path_takes_rows_too_wide_for_row_counted_batches")
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, WIDE_DRIVER_MEMORY="512m")
    writers = {}
    try:
        for case in selected:
            rows, width = WIDE_CASES[case]
            folder = tmp_path_factory.mktemp(case)
            with open(folder / "stdout.txt", "w") as out, open(folder / "stderr.txt", "w") as err:
                writers[case] = (subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "core", "wide_rows_writer.py"),
                                                   str(folder), str(rows), str(width)],
                                                  env=env, stdout=out, stderr=err, start_new_session=True), folder)
        yield writers
    finally:
        for writer, _ in writers.values():
            kill_group(writer)


@pytest.mark.parametrize("case", list(WIDE_CASES))
def test_every_write_path_takes_rows_too_wide_for_row_counted_batches(wide_writers, case):
    rows, _ = WIDE_CASES[case]
    writer, folder = wide_writers[case]
    try:
        writer.wait(timeout=900)
    finally:
        kill_group(writer)  # its JVM and Python workers, if it timed out
    stdout, stderr = (folder / "stdout.txt").read_text(), (folder / "stderr.txt").read_text()
    lines = [line.split(" ") for line in stdout.splitlines()]
    assert lines and lines[-1] == ["DONE"], f"exit {writer.returncode}\n{stdout}\n{stderr[-4000:]}"
    steps = [(s[0], int(s[1]), int(s[2]), s[3]) for s in lines if len(s) == 5]
    assert steps == expected_steps(rows)
    # Rows the upsert wrote are the changes since the first commit.
    assert [int(s[1]) for s in lines if s[0] == "changes"] == [rows]
    files = {s[0]: int(s[4]) for s in lines if len(s) == 5}
    assert files["clustering"] == 3 < files["delete_insert"]  # one file group per partition after


def test_spark_reads_wide_stored_rows_in_batches_their_width_allows(tmp_path):
    """The batch of Spark's parquet reader comes from the files' own footers: 4096 rows for narrow
    rows, fewer for wide ones, and a row too wide for the heap is refused naming the table."""
    storage = Storage(str(tmp_path))
    files = []
    for name, width, count in [("narrow.parquet", 100, 5000), ("wide.parquet", 1_000_000, 20)]:
        table = pa.table({"id": pa.array(range(count), pa.int64()), "payload": pa.array([f"{i:08}" + "x" * width for i in range(count)])})
        with open(tmp_path / name, "wb") as sink, parquet_writer(sink, table.schema, row_bytes=table.nbytes / count) as w:
            w.write_table(table)
        files.append(BaseFile("", name.split(".")[0], "1", name, count, os.path.getsize(tmp_path / name)))
    narrow = reader.widest_row_bytes(storage, files[:1])
    wide = reader.widest_row_bytes(storage, files)
    assert narrow < 200 and 1_000_000 <= wide < 1_100_000
    assert reader.reader_batch_rows(narrow) is None
    assert reader.reader_batch_rows(wide) == int(reader.READER_BATCH_BYTES // wide) == 8
    assert reader.reader_batch_rows(20_000) == reader.READER_BATCH_BYTES // 20_000

    class Conf(dict):
        def get(self, key, default=None):
            return dict.get(self, key, default)

        def set(self, key, value):
            self[key] = value

        def unset(self, key):
            self.pop(key, None)

    class Spark:
        conf = Conf()

    spark = Spark()
    with reader.bounded_stored_reads(spark, storage, files, "wide_model") as rows:
        assert spark.conf["spark.sql.parquet.columnarReaderBatchSize"] == str(rows) and rows < 64
        with reader.bounded_stored_reads(spark, storage, files[:1], "narrow_model") as none:
            assert none is None and spark.conf["spark.sql.parquet.columnarReaderBatchSize"] == str(rows)
    assert "spark.sql.parquet.columnarReaderBatchSize" not in spark.conf  # put back as it was
    reader_heap = reader.jvm_heap_bytes
    try:
        reader.jvm_heap_bytes = lambda _: 4 << 20  # a 4 MiB heap: a 1 MB row is more than an eighth
        with pytest.raises(DataError, match="table wide_model: its rows take up to 1 MiB .* raise spark.driver.memory"):
            with reader.bounded_stored_reads(spark, storage, files, "wide_model"):
                pass
    finally:
        reader.jvm_heap_bytes = reader_heap
