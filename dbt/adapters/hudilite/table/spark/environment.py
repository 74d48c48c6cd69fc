"""Checks that the machine can run what a write needs, each done once and cheaply, so a
missing piece is one clear error line instead of a failure deep inside a Spark task."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Optional, Set

from ..errors import SparkEnvironmentError
from .sessions import is_connect

SUPPORTED_JAVA = (17, 21)  # what Spark 4 runs on
_checked_contexts: Set[int] = set()
_checked_servers: Set[str] = set()


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
    cluster's workers are on other hosts: their Python is the cluster's set-up); over Spark
    Connect, once per session, by a job that imports what the writer needs."""
    if spark is None:  # storage only (the CLI's `tables`): nothing runs in Spark
        return
    if is_connect(spark):
        _check_connect_workers(spark)
        return
    context = spark.sparkContext
    if id(context) in _checked_contexts:
        return
    if str(context.master).startswith("local") and not _is_this_python(context.pythonExec or "python3"):
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


def _is_this_python(python: str) -> bool:
    """Whether the workers' Python is the driver's own (the adapter's default), which imports
    pyarrow already: then no process is started to ask it (a third of a second per dbt command).
    Paths compare unresolved: two virtualenvs share a resolved interpreter, not their packages."""
    found = shutil.which(python) or python
    return os.path.abspath(found) == os.path.abspath(sys.executable)


def _check_connect_workers(spark) -> None:
    """Over Spark Connect the Python workers are the server's: one tiny job per session shows
    they import pyarrow and this package, in this version (their tasks run our writer)."""
    session_id = spark.session_id
    if session_id in _checked_servers:
        return
    from ...__version__ import version

    try:
        found = spark.range(1).mapInArrow(_import_probe, "version string").collect()[0][0]
    except Exception as err:  # noqa: BLE001 - what the workers could not import is in the message
        missing = re.search(r"No module named '([^']+)'", str(err))
        what = f"cannot import {missing.group(1)}" if missing else f"fail: {str(err).strip().splitlines()[0]}"
        raise SparkEnvironmentError(
            f"the Spark Connect server's Python workers {what}: install pyarrow and dbt-hudilite (the same "
            "version) in the Python the server's executors run (spark.pyspark.python / PYSPARK_PYTHON)") from None
    if found != version:
        raise SparkEnvironmentError(f"the Spark Connect server's Python workers run dbt-hudilite {found}, this "
                                    f"process {version}: install the same version on both sides")
    _checked_servers.add(session_id)


def _import_probe(batches):
    import pyarrow as pa

    from . import writer  # noqa: F401 - what a write's tasks run
    from ...__version__ import version

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"version": [version]}, schema=pa.schema([("version", pa.string())]))
