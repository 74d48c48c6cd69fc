"""`benchmarks/run.py --check`: the README's rows found in a run's results, and a ratio more than
25% worse than the published one failing the check (no Spark: results made by hand)."""

import importlib.util
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


def _load(name):
    """A benchmarks module by its path (benchmarks/ is scripts, not a package on sys.path)."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


check = _load("check")
measure = _load("measure")
Result, Sample, Side = measure.Result, measure.Sample, measure.Side


def result(operation, ours, peer, peer_name="delta-rs MERGE"):
    return Result(operation, Side("hudilite", [Sample(ours, 1)]), Side(peer_name, [Sample(peer, 1)]))


def test_every_readme_row_is_known_and_the_readme_table_is_read():
    with open(check.README) as f:
        table = check.published(f.read())
    for row in check.ROWS:
        assert any(k.startswith(row.readme) for k in table), row.readme
    assert check.workloads() == ["appends", "merges", "scaling"]


def test_a_ratio_25_percent_worse_than_published_fails(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("## Benchmarks\n\n| operation | hudilite | peer | peer | ratio |\n|---|---|---|---|---|\n"
                      "| upsert 10,000 random updates into 4,000,000 | 4 s | delta-rs MERGE | 2 s | 2.00x |\n")
    lines = []
    check.ROWS, rows = tuple(r for r in check.ROWS if r.readme.startswith("upsert 10,000 random")), check.ROWS
    try:
        random = "upsert 200,000 random updates spread over every partition into 200,000 rows"
        assert check.check([result(random, 2.4, 1.0)], lines.append, str(readme))  # 2.4x <= 2.5x
        assert not check.check([result(random, 2.6, 1.0)], lines.append, str(readme))
        assert "WORSE" in lines[-1]
        assert not check.check([result(random, 1.0, 1.0, "Spark full-rewrite merge (parquet)")], lines.append, str(readme))
        assert "no result" in lines[-1]
    finally:
        check.ROWS = rows
