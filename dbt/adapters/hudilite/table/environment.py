"""Checks that the machine can run what a write needs, each done once and cheaply, so a
missing piece is one clear error line instead of a failure deep inside a Spark task."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Optional, Set

from .errors import SparkEnvironmentError

SUPPORTED_JAVA = (17, 21)  # what Spark 4 runs on
_checked_contexts: Set[int] = set()


def java_executable() -> Optional[str]:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def java_major_version(version_output: str) -> Optional[int]:
    """The major version in `java -version` output: `"17.0.15"` is 17, `"1.8.0_392"` is 8."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Before a JVM is started: Java must be there and one Spark supports."""
    java = java_executable()
    where = f"JAVA_HOME={os.environ['JAVA_HOME']}" if os.environ.get("JAVA_HOME") else "PATH"
    if java is None:
        raise SparkEnvironmentError(f"Spark needs Java {SUPPORTED_JAVA[0]} or {SUPPORTED_JAVA[1]}, and none was found "
                                    f"on {where}: install one (for example `apt install openjdk-17-jre-headless`) "
                                    "or point JAVA_HOME at it")
    try:
        output = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SparkEnvironmentError(f"Spark needs Java, and {java} (from {where}) does not run: {err}") from None
    major = java_major_version(output)
    if major is None or major < SUPPORTED_JAVA[0]:
        found = f"Java {major}" if major else "an unknown Java"
        raise SparkEnvironmentError(f"Spark needs Java {SUPPORTED_JAVA[0]} or {SUPPORTED_JAVA[1]}; {java} (from {where}) "
                                    f"is {found}: install Java 17 and point JAVA_HOME at it")


def check_python_workers(spark) -> None:
    """Spark's Python workers must import pyarrow (every write runs in them). They run
    `spark.pyspark.python` / PYSPARK_PYTHON, else `python3` from PATH, which is often not the
    virtualenv the driver runs in. Checked once per SparkContext, on a local master only (a
    cluster's workers are on other hosts: their Python is the cluster's set-up)."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no context here, the server's workers are its own
        return
    if id(context) in _checked_contexts:
        return
    if str(context.master).startswith("local"):
        python = context.pythonExec or "python3"
        try:
            works = subprocess.run([python, "-c", "import pyarrow"], capture_output=True, timeout=120).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            works = False
        if not works:
            raise SparkEnvironmentError(
                f"Spark's Python workers run {python!r}, which cannot import pyarrow: set PYSPARK_PYTHON={sys.executable} "
                "(or spark.pyspark.python) before the SparkSession starts, or install pyarrow for that Python")
    _checked_contexts.add(id(context))
