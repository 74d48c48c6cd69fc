"""The embedded SparkSession: local, in-process, no metastore, no server."""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}


def spark_session(master: Optional[str] = None, conf: Optional[Dict[str, str]] = None, app_name: str = "hudilite"):
    """Get or create the process's SparkSession. Executors run this interpreter's Python, which
    has pyarrow and hudilite installed (on a cluster, install them on the workers too)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = dict(DEFAULT_CONF)
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name).master(master or settings.pop("spark.master", "local[*]"))
    settings.pop("spark.master", None)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("HUDILITE_SPARK_LOG_LEVEL", "ERROR"))
    return session
