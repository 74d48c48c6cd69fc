"""The embedded SparkSession: local, in-process, no metastore, no server, and quiet.

The JVM's own output (log4j at WARN, and what the JVM prints itself, such as the incubator-module
warning) goes to `<log_dir>/spark.log`, beside dbt's log, never to the console: dbt's lines
stay dbt's. Errors still reach the caller as exceptions carrying Spark's error class.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from typing import Dict, Optional

from .table.spark.environment import check_java
from .table.errors import SparkEnvironmentError

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # PySpark 4 records a call site on every DataFrame and Column call (a conf read, two JVM
    # calls and a stack walk each) so that errors can say where they came from. For a SQL
    # model that is always this adapter's code, and the recording costs a write tens of
    # milliseconds (`benchmarks/profile_write.py`). A Python model's errors lose the pointer
    # into its code; they keep Spark's message and error class.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
# Settings fixed when a Spark application starts: a Connect client cannot set them.
STATIC_CONF = {"spark.sql.catalogImplementation", "spark.sql.warehouse.dir"}
SPARK_LOG = "spark.log"
_CONNECT_LOCK = threading.Lock()
_CONNECTED: set = set()  # Connect sessions whose server answered and took the settings

# Everything at WARN and above to the JVM's stderr, which `_launch_jvm` sends to the log file.
LOG4J2_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def default_log_dir() -> str:
    """dbt's log path when dbt runs, else `logs/` in the working directory."""
    try:
        from dbt.flags import get_flags

        path = getattr(get_flags(), "LOG_PATH", None)
    except Exception:  # not inside a dbt command
        path = None
    return os.path.abspath(str(path) if path else "logs")


def spark_session(master: Optional[str] = None, conf: Optional[Dict[str, str]] = None, app_name: str = "hudilite",
                  log_dir: Optional[str] = None):
    """Get or create the process's SparkSession. Executors run this interpreter's Python, which
    has pyarrow and hudilite installed (on a cluster, install them on the workers too)."""
    if "SPARK_CONNECT_MODE_ENABLED" in os.environ:
        raise SparkEnvironmentError("this process already uses Spark Connect; pyspark cannot start a classic "
                                    "SparkSession beside it (run `method: session` in a process of its own)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    settings = dict(DEFAULT_CONF)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    master = master or settings.pop("spark.master", "local[*]")
    settings.pop("spark.master", None)
    if SparkContext._gateway is None:  # this call starts the JVM
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "resolves to a loopback address" warning
        _launch_jvm(dict(settings, **{"spark.master": master, "spark.app.name": app_name}), log_dir or default_log_dir())
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if os.environ.get("HUDILITE_SPARK_LOG_LEVEL"):
        session.sparkContext.setLogLevel(os.environ["HUDILITE_SPARK_LOG_LEVEL"])
    return session


def connect_session(url: str, conf: Optional[Dict[str, str]] = None):
    """A Spark Connect session with the server at `url` (sc://host:port): Spark, its catalog and
    its executors are the server's, and no JVM starts here. The core's metadata and the tables'
    files are read and written from here, and the data files from the server's executors, so
    `location_root` must name storage both see, and the server's Python workers need pyarrow
    and dbt-hudilite installed (checked once per session, see `check_python_workers`). Only
    session settings (spark.sql.*) can be set from here: UTC and the snapshot listing threshold
    above are, the server keeps its own shuffle partitions (sized for its cluster)."""
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as err:
        raise SparkEnvironmentError(f"`method: connect` needs Spark Connect's client libraries ({err}): "
                                    "pip install 'dbt-hudilite[connect]'") from None
    settings = {k: DEFAULT_CONF[k] for k in ("spark.sql.session.timeZone",
                                             "spark.sql.sources.parallelPartitionDiscovery.threshold")}
    settings.update({k: str(v) for k, v in (conf or {}).items() if k not in STATIC_CONF})
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        raise SparkEnvironmentError("this process already runs a classic SparkSession; pyspark cannot use Spark "
                                    "Connect beside it (run `method: connect` in a process of its own)")
    with _CONNECT_LOCK:  # dbt's threads share one client
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # pyspark.sql.functions builds Connect columns
        session = ConnectSession.builder.remote(url).getOrCreate()
        if session.session_id in _CONNECTED:
            return session
        # The client's own retries ride out a server restart for 10 minutes; a server that is
        # not there when dbt starts should be one error in seconds instead.
        patient = session.client.get_retry_policies()
        session.client.set_retry_policies([DefaultPolicy(max_retries=4)])
        with warnings.catch_warnings():  # the client's own RETRIES_EXCEEDED warning: the error says it
            warnings.simplefilter("ignore")
            try:
                for key, value in settings.items():
                    session.conf.set(key, value)
            except Exception as err:  # noqa: BLE001 - the first call that reaches the server
                try:
                    session.stop()  # the next attempt makes a new session, not this dead one
                except Exception:  # noqa: BLE001 - it could not reach the server either
                    pass
                raise SparkEnvironmentError(f"cannot use the Spark Connect server at {url}: {_reason(err)}") from None
        session.client.set_retry_policies(patient)
        _CONNECTED.add(session.session_id)
        return session


def session_user(spark) -> str:
    """Who runs Spark's work: the Spark user of a classic session, this OS user over Connect."""
    from .table import is_connect

    if is_connect(spark):
        import getpass

        return getpass.getuser()
    return spark.sparkContext.sparkUser()


def _reason(err: Exception) -> str:
    """A gRPC error's details (`failed to connect to all addresses; ...`), else its first line."""
    text = str(err).strip()
    details = re.search(r'details = "([^"]*)"', text)
    return details.group(1) if details else (text.splitlines()[0] if text else type(err).__name__)


def _launch_jvm(settings: Dict[str, str], log_dir: str) -> None:
    """Start Spark's JVM with its output in `log_dir`; PySpark then uses this gateway."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    os.makedirs(log_dir, exist_ok=True)
    log4j = os.path.join(log_dir, "log4j2-hudilite.properties")
    with open(log4j, "w") as f:
        f.write(LOG4J2_PROPERTIES)
    java_options = settings.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" not in java_options:  # a user's own log set-up wins
        settings["spark.driver.extraJavaOptions"] = f"{java_options} -Dlog4j2.configurationFile=file:{log4j}".strip()
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    with open(os.path.join(log_dir, SPARK_LOG), "ab") as log:
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        except Exception:
            check_java()  # asked only when the JVM did not start (`java -version` costs a process): names a Java problem
            raise
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
