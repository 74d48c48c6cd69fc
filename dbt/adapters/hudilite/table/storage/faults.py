"""Fault injection for crash tests: `HUDILITE_KILL_AT=<phase>` makes the writing process kill
itself with SIGKILL when it reaches that phase, as a power cut or an OOM killer would. Tasks
kill the driver (its pid in `HUDILITE_KILL_PID`, inherited by the executors) so that a
phase inside the Spark job ends the whole write. Unset, `reach` costs one dict lookup.

Phases: `requested` (instant claimed, requested and inflight written), `task` (a task closed
its first base file), `before_publish` (files reconciled, nothing published), `metadata_deltacommit`
(the metadata table's deltacommit completed, the data instant not), `after_publish`
(completed instant renamed into place, index work not done), `clean` (the cleaner recorded
its plan and deleted one file), `compaction` (a new index base written, not published),
`archive` (archived instants written and folded into the archived view, still on the active
timeline); and `restore` (a restore rolled back its newest commit, the others still there),
which is not in the crash matrix: a dead restore blocks writes until it is run again; `swap`
(a rebuild with a new layout committed beside its table, the old table deleted, the new one
not yet in its place: `StorageCatalog.swap_in`), killed by the dbt tests; and `move` (an object
store's folder move with every object copied but the last, `ObjectStorage.move_dir`).

`HUDILITE_KILL_BARRIER=<folder>:<n>` makes a process (or thread) that reaches the phase first
leave a file in `<folder>` and wait until `n` are there: several writes of one process (or the
tasks of several writes) are then all at the phase when the kill comes (the S3 crash tests kill
three writes with one process).
"""

from __future__ import annotations

import os
import signal

KILL_AT = "HUDILITE_KILL_AT"
KILL_PID = "HUDILITE_KILL_PID"
KILL_BARRIER = "HUDILITE_KILL_BARRIER"
BARRIER_TIMEOUT_S = 600.0
PHASES = ("requested", "task", "before_publish", "metadata_deltacommit", "after_publish", "clean", "compaction",
          "archive")  # the crash matrix's


def reach(phase: str) -> None:
    if os.environ.get(KILL_AT) == phase:
        if os.environ.get(KILL_BARRIER):
            _wait_at_barrier(os.environ[KILL_BARRIER])
        os.kill(int(os.environ.get(KILL_PID) or os.getpid()), signal.SIGKILL)


def _wait_at_barrier(barrier: str) -> None:
    import time
    import uuid
    folder, n = barrier.rsplit(":", 1)
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"{os.getpid()}-{uuid.uuid4().hex}"), "w").close()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(os.listdir(folder)) < int(n) and time.monotonic() < deadline:
        time.sleep(0.05)
