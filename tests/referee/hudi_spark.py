"""Apache Hudi's own Spark datasource as a referee: a separate Python with pyspark 3.5 and a
Hudi bundle fetched from Maven Central by coordinate (no Hudi bundle targets our pyspark 4),
driven over a pipe by `HudiSpark`. The virtualenv and the jars are cached under
$HUDILITE_REFEREE_HOME (default ~/.cache/hudilite-referee) between runs."""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

HUDI_VERSIONS = ("0.15.0", "1.0.2", "1.1.1")
PYSPARK_VERSION = "3.5.7"
HOME = Path(os.environ.get("HUDILITE_REFEREE_HOME", Path.home() / ".cache" / "hudilite-referee"))
SERVER = Path(__file__).with_name("hudi_spark_server.py")
REPLY = "@@REFEREE "


class RefereeError(AssertionError):
    """Hudi's reader or writer failed on a request (its message says which)."""


def referee_python() -> Path:
    """The referee's Python, made on first use: a virtualenv with pyspark 3.5 and nothing else."""
    return cached_venv(f"pyspark-{PYSPARK_VERSION}", [f"pyspark=={PYSPARK_VERSION}"])


def dbt_spark_python() -> Path:
    """dbt-spark's Python for the benchmark's dbt peer (file_format hudi needs a Spark 3.5 bundle):
    pyspark 3.5 with the dbt-core and dbt-spark versions installed beside hudilite."""
    from importlib.metadata import version

    pins = [f"pyspark=={PYSPARK_VERSION}", f"dbt-core=={version('dbt-core')}", f"dbt-spark=={version('dbt-spark')}"]
    return cached_venv("dbt-spark-" + "-".join(pin.split("==")[1] for pin in pins), pins)


def cached_venv(name: str, requirements: List[str]) -> Path:
    """The Python of a virtualenv under HOME holding `requirements`, made on first use."""
    venv = HOME / name
    python = venv / "bin" / "python"
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs never build it at once
        if not (venv / ".ready").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements], check=True)
            (venv / ".ready").touch()
    return python


class HudiSpark:
    """One Hudi version's Spark session in its own process."""

    def __init__(self, version: str, conf: dict = None, log_name: str = None, wait: bool = True):
        """`conf`: Spark settings beside the referee's own (the benchmark's driver memory);
        `log_name`: the log file under HOME, by default hudi-<version>.log; `wait=False`:
        return as soon as the process is started (`wait_ready` before the first request)."""
        self.version = version
        self.log_path = HOME / (log_name or f"hudi-{version}.log")
        python = referee_python()
        env = {**os.environ, "TZ": "UTC", "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
        env.pop("SPARK_HOME", None)
        env.pop("PYTHONPATH", None)
        self._log = open(self.log_path, "w")
        self._process = subprocess.Popen(
            [str(python), str(SERVER), version, str(HOME / "ivy")] + ([json.dumps(conf)] if conf else []), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)
        self._ready = False
        if wait:
            self.wait_ready()

    def wait_ready(self) -> "HudiSpark":
        """Until its Spark session has started (at once when it had)."""
        if not self._ready:
            ready = self._reply()
            assert ready.get("ready") == self.version, ready
            self._ready = True
        return self

    def _reply(self) -> dict:
        for line in self._process.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY):])
        raise RuntimeError(f"Hudi {self.version}'s Spark exited (code {self._process.wait()}); "
                           f"the end of {self.log_path}:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        self._log.flush()
        return "".join(self.log_path.read_text(errors="replace").splitlines(True)[-40:])

    def request(self, op: str, **fields) -> dict:
        self._process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self._process.stdin.flush()
        reply = self._reply()
        if not reply["ok"]:
            raise RefereeError(f"Hudi {self.version} {op} {fields.get('options', '')}: {reply['error']}\n{reply['trace']}")
        return reply

    def read(self, path: str, **options: str) -> Tuple[List[str], List[dict]]:
        reply = self.request("read", path=path, options=options)
        return reply["columns"], reply["rows"]

    def read_many(self, path: str, options: List[dict]) -> List[Tuple[List[str], List[dict]]]:
        """Several reads of one table side by side; a read that failed is a RefereeError in its place."""
        replies = self.request("reads", path=path, options=options)["replies"]
        return [(r["columns"], r["rows"]) if r["ok"] else RefereeError(f"Hudi {self.version} read {o}: {r['error']}")
                for o, r in zip(options, replies)]

    def snapshot(self, path: str, as_of: str = None):
        return self.read(path, **snapshot_options(as_of))

    def changes(self, path: str, begin: str, end: str):
        return self.read(path, **changes_options(begin, end))

    def sql(self, query: str) -> Tuple[List[str], List[dict]]:
        """Columns and rows of a query through the referee's catalog."""
        reply = self.request("sql", query=query)
        return reply["columns"], reply["rows"]

    def write(self, path: str, rows: List[dict], schema: str, options: dict, mode: str = "append") -> None:
        self.request("write", path=path, rows=rows, schema=schema, options=options, mode=mode)

    def bench(self, rows_module: str, writes: List[dict], shuffle_partitions: int = None) -> List[dict]:
        """Hudi's writer timed in the referee: each of `writes` ({"rows": a generator of
        `rows_module` (benchmarks/peer_rows.py), "args": its arguments, "path", "options", "mode"})
        made there, cached and counted, then saved under the clock. One {"seconds", "jobs",
        "fingerprint"} per write."""
        reply = self.request("bench", rows_module=str(rows_module), writes=writes, shuffle_partitions=shuffle_partitions)
        return [{"seconds": s, "jobs": j, "fingerprint": f}
                for s, j, f in zip(reply["seconds"], reply["jobs"], reply["fingerprints"])]

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._log.close()


# Readers list files through the metadata table (1.x's default; 0.15's when asked).
METADATA_ON = {"hoodie.metadata.enable": "true"}


def snapshot_options(as_of: str = None) -> dict:
    """Hudi's snapshot query, or its time travel to `as_of`."""
    return {**METADATA_ON, "as.of.instant": as_of} if as_of else dict(METADATA_ON)


def changes_options(begin: str, end: str) -> dict:
    """Hudi's incremental query: commits after `begin` up to and including `end`."""
    return {**METADATA_ON, "hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": begin,
            "hoodie.datasource.read.end.instanttime": end}
