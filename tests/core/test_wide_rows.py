"""Rows too wide for row-counted Arrow batches: 100k rows of a few KB, or a thousand 1 MB values,
made one batch of over 1 GiB that Spark's JVM could not take back from Python, and the JVM
died (its direct memory is its heap size). Insert, upsert, delete, the index build and a changes
read run here in a JVM of the embedded session's default size, on about 1.1 GB of rows
(`wide_rows_writer.py`). Paths that read whole rows through Spark's own parquet reader (update,
clustering, delete+insert) still need more heap for 1 MB values: Spark reads 4096 rows at once."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def expected_steps(rows):
    """What each step of `wide_rows_writer.py` leaves: (step, rows, distinct ids, payload tags)."""
    table = {i: "i:" for i in range(rows)}
    out = []

    def note(step, model):
        out.append((step, len(model), len(model), ",".join(sorted(set(model.values())))))

    note("insert", table)
    table.update({i: "u:" for i in range(rows // 2, rows // 2 + rows)})
    note("upsert", table)
    for i in range(rows // 4):
        table.pop(i, None)
    note("delete", table)
    note("build_index", table)
    return out


@pytest.mark.parametrize("rows, width", [(1100, 1_000_000), (55_000, 20_000)], ids=["1MB-values", "20KB-rows"])
def test_inserts_upserts_deletes_and_the_index_take_rows_too_wide_for_row_counted_batches(tmp_path, rows, width):
    env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=sys.executable, WIDE_DRIVER_MEMORY="1g")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "core", "wide_rows_writer.py"), str(tmp_path),
                           str(rows), str(width)], env=env, capture_output=True, text=True, timeout=900)
    lines = [line.split(" ") for line in done.stdout.splitlines()]
    assert lines and lines[-1] == ["DONE"], f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
    steps = [(s[0], int(s[1]), int(s[2]), s[3]) for s in lines if len(s) == 4]
    assert steps == expected_steps(rows)
    # Rows the upsert wrote are the changes since the first commit.
    assert [int(s[1]) for s in lines if s[0] == "changes"] == [rows]
