"""Two processes upserting into one table at once, with retries: overlapping (shared) and
disjoint keys. No update is lost: every key holds the tag of the last successful write that
touched it, and keys stay unique. `ROUNDS` rounds each (20 for the record in the README:
HUDILITE_CONCURRENT_ROUNDS=20)."""

import json
import os
import subprocess
import sys

from dbt.adapters.hudilite.table import HudiTable
from tests.core.hudi_rs import assert_hudi_rs_agrees

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROUNDS = int(os.environ.get("HUDILITE_CONCURRENT_ROUNDS", "6"))


def two_writers(path: str, rounds: int, retries: int, env: dict) -> tuple:
    """concurrent_writer.py as p1 and p2 at once on `path` (each process must exit cleanly):
    every round both reported, and those that committed in the order they ended."""
    writers = [subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "core", "concurrent_writer.py"),
                                 path, name, str(rounds), str(retries)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("p1", "p2")]
    ended = []
    for writer in writers:
        out, err = writer.communicate(timeout=1200)
        assert writer.returncode == 0, err[-3000:]
        ended += [json.loads(line[len("ROUND "):]) for line in out.splitlines() if line.startswith("ROUND ")]
    return ended, sorted((r for r in ended if r["instant"]), key=lambda r: r["ended"])


def test_two_processes_upserting_lose_no_update(spark, tmp_path):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id", partition_by="part")
    table.upsert(spark.createDataFrame([(k, "start", "p1" if k < 10 else "p2" if k < 20 else "shared")
                                        for k in list(range(20)) + list(range(100, 105))], "id long, tag string, part string"))
    rounds, done = two_writers(table.path, ROUNDS, retries=10, env=dict(os.environ, PYTHONPATH=ROOT))
    expected = {}
    for r in done:  # writes that touched a key never overlapped (they would have conflicted): end order is commit order
        expected.update({k: r["tag"] for k in r["keys"]})
    actual = {r.id: r.tag for r in table.read().collect()}
    lost = sorted(k for k in expected if actual.get(k) != expected[k])
    retries = sum(r["attempts"] - 1 for r in rounds)
    print(f"\n2 processes x {ROUNDS} rounds: {len(done)} commits, {retries} conflicts retried, "
          f"{len(rounds) - len(done)} gave up, {len(lost)} lost updates")
    assert not lost, f"lost updates on keys {lost}: expected {[expected[k] for k in lost]}, got {[actual.get(k) for k in lost]}"
    assert len(done) == 2 * ROUNDS  # with retries every round commits
    assert table.read().count() == 25
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
