"""Timing with Spark job counts, peers in alternating order, and the rows of the results table."""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

_groups = itertools.count()


@dataclass
class Sample:
    seconds: float
    jobs: Optional[int]  # Spark jobs the operation ran (None: not a Spark operation)


@dataclass
class Side:
    """One side of a comparison: hudilite or a peer, with every sample taken."""

    name: str
    samples: List[Sample] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(s.seconds for s in self.samples)

    @property
    def jobs(self) -> Optional[int]:
        counts = [s.jobs for s in self.samples if s.jobs is not None]
        return statistics.median_high(counts) if counts else None


@dataclass
class Result:
    """A row of the results table: what was measured, our figure, the peer's, and the goal
    (a ratio ours / peer, met when at or below it)."""

    operation: str
    ours: Side
    peer: Optional[Side] = None
    goal: Optional[float] = None
    unit: str = "s"
    our_value: Optional[float] = None  # a figure that is not a time (bytes per entry, a ratio)
    peer_value: Optional[float] = None
    absolute_goal: bool = False  # the goal bounds our figure itself, not the ratio
    published: str = ""  # a figure from a paper or blog: its own column, never "same run"
    note: str = ""

    @property
    def ours_figure(self) -> float:
        return self.our_value if self.our_value is not None else self.ours.median

    @property
    def peer_figure(self) -> Optional[float]:
        if self.peer_value is not None:
            return self.peer_value
        return self.peer.median if self.peer and self.peer.samples else None

    @property
    def ratio(self) -> Optional[float]:
        peer = self.peer_figure
        return self.ours_figure / peer if peer else None

    @property
    def met(self) -> Optional[bool]:
        if self.goal is None:
            return None
        bounded = self.ours_figure if self.absolute_goal or self.peer_figure is None else self.ratio
        return bounded is not None and bounded <= self.goal

    def as_dict(self) -> dict:
        side = lambda s: s and {"name": s.name, "samples": [vars(x) for x in s.samples]}  # noqa: E731
        return {"operation": self.operation, "ours": side(self.ours), "peer": side(self.peer), "goal": self.goal,
                "unit": self.unit, "ours_figure": self.ours_figure, "peer_figure": self.peer_figure,
                "ratio": self.ratio, "met": self.met, "published": self.published, "note": self.note}


def timed(spark, fn: Callable[[], object]) -> Sample:
    """Run `fn` once; its wall time and, with a Spark session, the number of Spark jobs it ran
    (a job group per call, read back from the status tracker)."""
    tracker = group = None
    if spark is not None:
        group = f"bench-{next(_groups)}"
        spark.sparkContext.setJobGroup(group, group)
        tracker = spark.sparkContext.statusTracker()
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    jobs = len(tracker.getJobIdsForGroup(group)) if tracker else None
    if spark is not None:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return Sample(seconds, jobs)


def alternate(spark, sides: Dict[str, Callable[[int], Callable[[], object]]], rounds: int,
              warmups: int = 1) -> Dict[str, Side]:
    """Each side's operation `rounds` times, the order of the sides reversed every round so
    that neither always runs on a cache the other warmed. `sides[name](round)` prepares a round
    (outside the timing) and returns the operation to time. Warm-up rounds are not kept."""
    names = list(sides)
    results = {name: Side(name) for name in names}
    for r in range(-warmups, rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            operation = sides[name](r)
            sample = timed(spark, operation)
            if r >= 0:
                results[name].samples.append(sample)
    return results


def fmt(value: Optional[float], unit: str = "s") -> str:
    if value is None:
        return ""
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "B":
        return f"{value:.2f} B" if value >= 0.1 else f"{value:.4f} B"
    return f"{value:.2f}{unit}"


def markdown_table(results: Sequence[Result]) -> str:
    lines = ["| operation | hudilite | Spark jobs | peer (same run) | peer | ratio | goal | met | published figure |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        absolute = r.absolute_goal or r.peer_figure is None
        goal = "" if r.goal is None else (f"<= {fmt(r.goal, r.unit)}" if absolute else f"<= {r.goal:g}x")
        met = {None: "", True: "yes", False: "**no**"}[r.met]
        jobs = "" if r.ours.jobs is None else str(r.ours.jobs)
        peer_name = r.peer.name if r.peer else ""
        operation = r.operation + (f" ({r.note})" if r.note else "")
        lines.append(f"| {operation} | {fmt(r.ours_figure, r.unit)} | {jobs} | {peer_name} | "
                     f"{fmt(r.peer_figure, r.unit)} | {ratio} | {goal} | {met} | {r.published} |")
    return "\n".join(lines)
