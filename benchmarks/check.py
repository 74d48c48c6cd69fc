"""`run.py --check`: the README's benchmark rows run again at small sizes, each ratio against the
published one. A ratio more than 25% worse than the README's fails the check (exit status 1).
Small sizes move ratios (fixed costs weigh more): the check catches a regression the size of the
last round's, not a drift of a few percent; CI does not run it (timings are noisy)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
TOLERANCE = 1.25  # a measured ratio may be this much worse than the published one


@dataclass(frozen=True)
class Row:
    """A README row: how to find its result among a run's, and which workload makes it."""
    readme: str  # how the README's row begins
    workload: Optional[str]  # run.py's workload; None: not run at small sizes
    matches: Callable[[object], bool]


def _peer(result) -> str:
    return result.peer.name if result.peer is not None else ""


ROWS = (
    Row("append, 2,000,000 rows of 14 columns", "appends",
        lambda r: r.operation.startswith("append with auto keys, 14-column")),
    Row("append, 4,000,000 rows of 5 columns", "appends",
        lambda r: r.operation.startswith("append with auto keys, 5-column")),
    Row("upsert 10,000 rows (recent days\\*) into 4,000,000", "merges",
        lambda r: "half updates in the last 2" in r.operation and "(reference)" not in r.operation
        and _peer(r) == "delta-rs MERGE"),
    Row("upsert 10,000 random updates into 4,000,000", "merges",
        lambda r: "random updates" in r.operation and _peer(r) == "delta-rs MERGE"),
    Row("upsert 10,000 rows (recent days\\*) into 10,000,000", "scaling",
        lambda r: r.operation.endswith("(reference)")),
    Row("demo `dbt build`, day 3", None, lambda r: False),  # each dbt command starts its own JVM
)


def published(readme_text: str) -> dict:
    """The README's benchmark table: row text -> published ratio."""
    section = readme_text.split("## Benchmarks", 1)[1]
    out = {}
    for line in section.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and re.fullmatch(r"\d+(\.\d+)?x", cells[-1]):
            out[cells[0]] = float(cells[-1][:-1])
    return out


def workloads() -> List[str]:
    return sorted({row.workload for row in ROWS if row.workload})


def check(results: Sequence, log: Callable[[str], None], readme_path: str = README) -> bool:
    """Compare `results` with the README; log one line a row; False if any row is too slow or
    missing."""
    with open(readme_path) as f:
        table = published(f.read())
    ok = True
    log(f"{'README row':<52}{'published':>10}{'measured':>10}{'limit':>8}  verdict")
    for row in ROWS:
        ratio = next((v for k, v in table.items() if k.startswith(row.readme)), None)
        if ratio is None:
            log(f"{row.readme:<52}  not in the README's table")
            ok = False
            continue
        if row.workload is None:
            log(f"{row.readme:<52}{ratio:>9.2f}x{'':>10}{'':>8}  not run at small sizes")
            continue
        found = [r for r in results if row.matches(r) and r.ratio is not None]
        if not found:
            log(f"{row.readme:<52}{ratio:>9.2f}x  no result: the run made no such row")
            ok = False
            continue
        measured, limit = found[0].ratio, ratio * TOLERANCE
        verdict = "ok" if measured <= limit else "WORSE"
        ok = ok and measured <= limit
        log(f"{row.readme:<52}{ratio:>9.2f}x{measured:>9.2f}x{limit:>7.2f}x  {verdict}")
    return ok
