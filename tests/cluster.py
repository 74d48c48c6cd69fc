"""A real Spark standalone cluster (one master, one worker) from the installed pyspark package.

Executors run in the worker's own processes, so nothing a test writes through it can lean
on objects shared with the driver.
"""

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time

import pyspark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(log_path: str, needle: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited early; log:\n{open(log_path).read()[-3000:]}")
        with open(log_path) as f:
            if needle in f.read():
                return
        time.sleep(0.5)
    raise TimeoutError(f"'{needle}' did not appear in {log_path}:\n{open(log_path).read()[-3000:]}")


class Cluster(str):
    """The master URL (spark://127.0.0.1:<port>), which can also tell what ran on it."""

    master_log: str

    def applications(self) -> list:
        with open(self.master_log) as f:
            return [line.split("Registered app ", 1)[1].split(" with ID")[0] for line in f if "Registered app " in line]


@contextlib.contextmanager
def standalone_cluster():
    """Yields a `Cluster`: the master URL."""
    spark_home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    env = dict(os.environ, SPARK_HOME=spark_home, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = tempfile.mkdtemp(prefix="hudilite-cluster-")
    procs = []
    try:
        master_log = os.path.join(logs, "master.log")
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())],
            env=env, stdout=open(master_log, "w"), stderr=subprocess.STDOUT,
        )
        procs.append(master)
        _wait_for(master_log, "I have been elected leader", master)
        worker_log = os.path.join(logs, "worker.log")
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", "2", "--memory", "2g",
             "--webui-port", str(_free_port()), "--work-dir", os.path.join(logs, "work")],
            env=env, stdout=open(worker_log, "w"), stderr=subprocess.STDOUT,
        )
        procs.append(worker)
        _wait_for(worker_log, "Successfully registered with master", worker)
        cluster = Cluster(url)
        cluster.master_log = master_log
        yield cluster
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextlib.contextmanager
def connect_server(master: str = "local[2,2]"):
    """A Spark Connect server (its own JVM, driver and executors) from the installed pyspark
    package; yields its URL, sc://127.0.0.1:<port>. Its Python workers run this interpreter."""
    spark_home = os.path.dirname(pyspark.__file__)
    env = dict(os.environ, SPARK_HOME=spark_home, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    port = _free_port()
    logs = tempfile.mkdtemp(prefix="hudilite-connect-")
    log_path = os.path.join(logs, "server.log")
    server = subprocess.Popen(
        [os.path.join(spark_home, "bin", "spark-submit"), "--class",
         "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", master,
         "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.catalogImplementation=in-memory", "--conf", "spark.sql.shuffle.partitions=4"],
        env=env, cwd=logs, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(log_path, "Spark Connect server started", server)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
