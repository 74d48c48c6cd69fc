import os
import sys

import pytest

pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_configure(config):
    # Spark's Python workers must run this interpreter (it has pyarrow and this package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("TZ", "UTC")


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run. `local[2,2]` lets a failed task run again,
    which the retry tests rely on."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("hudilite-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")  # as the embedded session has it
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="class")
def dbt_profile_target(tmp_path_factory):
    """The hudilite profile of dbt-tests-adapter's `project` fixture: the embedded session,
    tables under a fresh folder per test class."""
    return {
        "type": "hudilite",
        "method": "session",
        "host": "local",
        "threads": 1,
        "location_root": str(tmp_path_factory.mktemp("lakehouse")),
    }


@pytest.fixture(scope="session")
def connect_url():
    """One Spark Connect server (its own JVM) for every test that needs one."""
    from tests.cluster import connect_server

    with connect_server() as url:
        yield url
