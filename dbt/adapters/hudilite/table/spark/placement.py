"""Which task of a Spark job does which file group.

A shuffle by a column puts a row in partition `pmod(murmur3(value, seed 42), n)`, so a shuffle
by a file id or a small task number spreads work unevenly: two of three values can share a
task while another idles. To place work exactly, a row carries a *routing value*: an int whose
hash lands in the partition chosen for it (`routing_values`, from a port of Spark's
`Murmur3_x86_32.hashInt`, checked against Spark's own `hash` in the tests).

File groups are packed into tasks by stored size, largest first onto the least loaded task
(`pack`): a task costs about 60 ms of fixed cost however small its file group, so a
rewrite runs at most as many tasks as the session's shuffle partitions.
"""

from __future__ import annotations

import heapq
from typing import Dict, List

_MASK = 0xFFFFFFFF
SEED = 42  # Spark's HashPartitioning and `hash` seed


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def spark_hash_int(value: int, seed: int = SEED) -> int:
    """Spark's Murmur3 hash of an int column value (`hash(int)`), as a signed 32-bit int."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def routing_values(num_partitions: int) -> List[int]:
    """Per partition i, the smallest int a shuffle into `num_partitions` partitions by an int
    column sends to partition i."""
    out: Dict[int, int] = {}
    value = 0
    while len(out) < num_partitions:
        out.setdefault(spark_hash_int(value) % num_partitions, value)  # Python's % is pmod
        value += 1
    return [out[i] for i in range(num_partitions)]


def pack(sizes: Dict[str, int], max_tasks: int, min_task_bytes: int = 0) -> Dict[str, int]:
    """fileId -> task, for at most `max_tasks` tasks (one per file group when there are no
    more, and no more than one per `min_task_bytes` of work): the largest file group first,
    each onto the task with the fewest bytes so far."""
    tasks = max(1, min(len(sizes), max_tasks))
    if min_task_bytes > 0:
        tasks = max(1, min(tasks, sum(sizes.values()) // min_task_bytes))
    load = [(0, task) for task in range(tasks)]
    out: Dict[str, int] = {}
    for file_id in sorted(sizes, key=lambda f: (-sizes[f], f)):
        done, task = heapq.heappop(load)
        out[file_id] = task
        heapq.heappush(load, (done + sizes[file_id], task))
    return out
