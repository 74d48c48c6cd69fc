"""PNG charts of a benchmark run (matplotlib, from the `[bench]` extra)."""

from __future__ import annotations

import os
from typing import List, Tuple


def draw(bench, folder: str, stamp: str) -> List[Tuple[str, str]]:
    """[(title, path)] of the charts this run's results allow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = []
    if bench.curves:
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for name, points in bench.curves.items():
            sizes = sorted(points)
            ax.plot([n / 1e6 for n in sizes], [points[n] for n in sizes], marker="o", label=name)
        ax.set_xlabel("table rows (millions)")
        ax.set_ylabel("seconds (median)")
        ax.set_title("Cost against table size: upsert of one batch, lookup of a key set")
        ax.set_ylim(bottom=0)
        ax.legend()
        drawn.append(("cost against table size", _save(fig, folder, f"run-{stamp}-scaling.png")))
    bars = [r for r in bench.results if r.peer is not None and r.peer.samples and r.unit == "s"
            and ("append" in r.operation or "upsert" in r.operation or "insert_overwrite" in r.operation)
            and "vs into" not in r.operation]
    if bars:
        fig, ax = plt.subplots(figsize=(10, 0.8 * len(bars) + 1.5))
        labels = [_short(r.operation) + f"\nvs {r.peer.name}" for r in bars]
        y = range(len(bars))
        ax.barh([i + 0.2 for i in y], [r.ours_figure for r in bars], height=0.4, label="hudilite")
        ax.barh([i - 0.2 for i in y], [r.peer_figure for r in bars], height=0.4, label="peer (same run)")
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (median)")
        ax.set_title("Writes against their peers")
        ax.legend()
        drawn.append(("writes against peers", _save(fig, folder, f"run-{stamp}-writes.png")))
    return drawn


def _short(operation: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(operation, 48)[:2])


def _save(fig, folder: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(folder, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
