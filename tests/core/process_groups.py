"""Child processes in a process group of their own, so that a test can end everything a child
started (its JVM, Spark's Python workers) and not just the child."""

import os
import signal
import subprocess
from typing import List, Optional, Tuple


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to the group `process` leads (started with start_new_session=True); a group
    already gone is no error."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_in_own_group(args: List[str], timeout: float, env: Optional[dict] = None,
                     cwd: Optional[str] = None) -> Tuple[int, str, str]:
    """Run `args` to its end (or `timeout`) in a group of its own, then kill whatever of the
    group is left: (return code, stdout, stderr). The return code is -SIGKILL for a child
    that was killed, by itself or by the timeout."""
    child = subprocess.Popen(args, env=env, cwd=cwd, start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        out, err = child.communicate(timeout=timeout)
    finally:
        kill_group(child)
    return child.returncode, out, err
