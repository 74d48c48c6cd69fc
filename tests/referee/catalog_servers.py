"""Real catalog servers for the catalog sync tests, made from Maven Central on first use and cached
under $HUDILITE_REFEREE_HOME (default ~/.cache/hudilite-referee) beside the referee's Hudi jars:

- Apache Hive's standalone metastore 3.1.3 (its jars resolved by Maven) on an embedded Derby
  database, on a loopback port;
- Trino 476 (the server tarball) with its Hudi connector pointed at that metastore; it needs
  Java 24 or later ($HUDILITE_TRINO_JAVA_HOME, else the newest JDK under /usr/lib/jvm).

Neither is a mock: a server that cannot be made or started fails the tests that need it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

from tests.referee.hudi_spark import HOME

HIVE_VERSION = "3.1.3"
HADOOP_VERSION = "3.3.6"
TRINO_VERSION = "476"
TRINO_URL = f"https://repo1.maven.org/maven2/io/trino/trino-server/{TRINO_VERSION}/trino-server-{TRINO_VERSION}.tar.gz"
TRINO_PLUGINS = ("hudi",)  # the rest of the tarball's plugins are deleted after extraction

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>hudilite.tests</groupId><artifactId>hive-metastore</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.hive</groupId><artifactId>hive-standalone-metastore</artifactId><version>{hive}</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-common</artifactId><version>{hadoop}</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-mapreduce-client-core</artifactId><version>{hadoop}</version></dependency>
  </dependencies>
</project>
"""

# The metastore's settings: Derby in `db`, and the two class names of Hive's full distribution
# that the standalone jar names by default replaced by the ones it ships.
_METASTORE_SITE = """<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:derby:;databaseName={db};create=true</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>metastore.schema.verification</name><value>false</value></property>
  <property><name>metastore.warehouse.dir</name><value>file://{warehouse}</value></property>
  <property><name>metastore.thrift.port</name><value>{port}</value></property>
  <property><name>metastore.expression.proxy</name><value>org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy</value></property>
  <property><name>metastore.task.threads.always</name><value>org.apache.hadoop.hive.metastore.events.EventCleanerTask</value></property>
</configuration>
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _cache_lock():
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / ".catalog-servers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs never build a cache entry at once
        yield


def metastore_jars() -> Path:
    """The standalone metastore's jars with their dependencies, resolved by Maven once."""
    home = HOME / f"hive-metastore-{HIVE_VERSION}"
    with _cache_lock():
        if not (home / ".ready").exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            (home / "pom.xml").write_text(_POM.format(hive=HIVE_VERSION, hadoop=HADOOP_VERSION))
            mvn = shutil.which("mvn")
            assert mvn, "the Hive metastore's jars are resolved with Maven (mvn), which is not on PATH"
            done = subprocess.run([mvn, "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=lib",
                                   "-DincludeScope=runtime"], cwd=home, capture_output=True, text=True)
            assert done.returncode == 0, f"mvn could not resolve the Hive metastore's jars:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
            (home / ".ready").touch()
    return home / "lib"


def trino_home() -> Path:
    """Trino's server, downloaded and unpacked once (only its Hudi plugin kept)."""
    home = HOME / f"trino-server-{TRINO_VERSION}"
    with _cache_lock():
        if not (home / ".ready").exists():
            shutil.rmtree(home, ignore_errors=True)
            HOME.mkdir(parents=True, exist_ok=True)
            # The tarball holds hard links between plugins: unpacked whole, then cut down.
            done = subprocess.run(f"curl -sSfL '{TRINO_URL}' | tar -xzf - -C '{HOME}'", shell=True,
                                  capture_output=True, text=True)
            assert done.returncode == 0, f"Trino {TRINO_VERSION} could not be downloaded from {TRINO_URL}: {done.stderr[-2000:]}"
            for plugin in (home / "plugin").iterdir():
                if plugin.name not in TRINO_PLUGINS:
                    shutil.rmtree(plugin)
            (home / ".ready").touch()
    return home


def trino_java_home() -> Path:
    """A Java of version 24 or later, which Trino 476 needs."""
    configured = os.environ.get("HUDILITE_TRINO_JAVA_HOME")
    candidates = [Path(configured)] if configured else sorted(Path("/usr/lib/jvm").glob("*"), reverse=True)
    for home in candidates:
        java = home / "bin" / "java"
        if not java.exists():
            continue
        version = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
        found = re.search(r'version "(\d+)', version)
        if found and int(found.group(1)) >= 24:
            return home
    raise AssertionError("Trino needs Java 24 or later: none under /usr/lib/jvm; set HUDILITE_TRINO_JAVA_HOME")


def _wait(process: subprocess.Popen, ready, log: Path, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited ({process.returncode}):\n{log.read_text()[-4000:]}")
        if ready():
            return
        time.sleep(0.5)
    process.kill()
    raise AssertionError(f"{what} did not start in {seconds:.0f} s:\n{log.read_text()[-4000:]}")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def hive_metastore(folder: Path) -> Iterator[str]:
    """A metastore server on a loopback port, its Derby database in `folder`; yields its URI."""
    lib = metastore_jars()
    port = free_port()
    conf = folder / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "metastore-site.xml").write_text(_METASTORE_SITE.format(db=folder / "metastore_db", port=port,
                                                                    warehouse=folder / "warehouse"))
    log = folder / "metastore.log"
    with open(log, "w") as out:
        process = subprocess.Popen(["java", "-Xmx512m", "-cp", f"{conf}:{lib}/*",
                                    "org.apache.hadoop.hive.metastore.HiveMetaStore"],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=folder)
    try:
        _wait(process, lambda: _listening(port), log, "the Hive metastore", 120)
        yield f"thrift://127.0.0.1:{port}"
    finally:
        _stop(process)


@contextlib.contextmanager
def trino_server(folder: Path, metastore_uri: str) -> Iterator[int]:
    """Trino with one catalog, `hudi` (its Hudi connector over the metastore, local files read
    through Hadoop's file system); yields its HTTP port."""
    home, java = trino_home(), trino_java_home()
    port = free_port()
    etc = folder / "etc"
    (etc / "catalog").mkdir(parents=True, exist_ok=True)
    (etc / "node.properties").write_text(f"node.environment=test\nnode.id=hudilite-tests\nnode.data-dir={folder / 'data'}\n")
    (etc / "jvm.config").write_text("-server\n-Xmx1G\n-XX:+UseG1GC\n-XX:+ExitOnOutOfMemoryError\n"
                                    "-Djdk.attach.allowAttachSelf=true\n")
    (etc / "config.properties").write_text(
        f"coordinator=true\nnode-scheduler.include-coordinator=true\nhttp-server.http.port={port}\n"
        f"discovery.uri=http://127.0.0.1:{port}\nquery.max-memory=512MB\nquery.max-memory-per-node=512MB\n")
    (etc / "catalog" / "hudi.properties").write_text(
        f"connector.name=hudi\nhive.metastore.uri={metastore_uri}\nfs.hadoop.enabled=true\n")
    log = folder / "trino.log"
    env = {**os.environ, "JAVA_HOME": str(java), "PATH": f"{java / 'bin'}:{os.environ['PATH']}"}
    with open(log, "w") as out:
        process = subprocess.Popen([str(home / "bin" / "launcher"), "run", f"--etc-dir={etc}",
                                    f"--data-dir={folder / 'data'}"], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait(process, lambda: "SERVER STARTED" in log.read_text(), log, f"Trino {TRINO_VERSION}", 180)
        yield port
    finally:
        _stop(process)
