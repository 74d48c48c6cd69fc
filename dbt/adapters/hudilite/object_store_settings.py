"""What a Spark session needs to read and write tables on an object store.

The core writes through `Storage` (obstore) in the driver and in the Spark tasks; Spark itself
reads the base files (snapshots, key checks, the record index) through Hadoop's file systems.
For `s3://` and `s3a://` locations that is S3A: `org.apache.hadoop:hadoop-aws` at the version
of pyspark's own Hadoop (it brings the AWS SDK bundle it was built with), fetched by coordinate
(`spark.jars.packages`), with `s3://` mapped to S3A. `gs://` needs the GCS connector
(`com.google.cloud.bigdataoss:gcs-connector`, hadoop3 flavour) and `abfss://` hadoop-azure at
the same Hadoop version: not set here yet (see docs/object-storage.md).

Credentials are never written into the settings: S3A's default chain reads the environment
(`AWS_ACCESS_KEY_ID`, ...), the profile and instance roles; the Python tasks (obstore) read the
same environment, which `spark.executorEnv.*` passes on for the endpoint and region.

Use: `spark_conf(location_root, endpoint=..., region=..., path_style=...)` gives the entries for
the session builder, nothing when `location_root` is not on an object store; user settings
(`spark_conf` in the profile) should be applied after them so that they win.
`configure_process(location_root, ...)` gives this process's `Storage` the same settings.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Dict, Optional
from urllib.parse import urlparse

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def is_s3(location_root: Optional[str]) -> bool:
    return bool(location_root) and urlparse(location_root).scheme.lower() in ("s3", "s3a")


def pyspark_hadoop_version() -> Optional[str]:
    """The Hadoop version pyspark ships (from its `hadoop-client-api-<v>.jar`), None when it
    cannot be told."""
    try:
        import pyspark
    except ImportError:
        return None
    folders = [os.path.join(os.path.dirname(pyspark.__file__), "jars")]
    if os.environ.get("SPARK_HOME"):
        folders.insert(0, os.path.join(os.environ["SPARK_HOME"], "jars"))
    for folder in folders:
        for jar in sorted(glob.glob(os.path.join(folder, "hadoop-client-api-*.jar"))):
            m = re.search(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar$", jar)
            if m:
                return m[1]
    return None


def s3_packages() -> str:
    """`hadoop-aws` at pyspark's Hadoop version (its POM pulls the matching AWS SDK bundle)."""
    version = pyspark_hadoop_version()
    if version is None:
        raise RuntimeError("cannot tell pyspark's Hadoop version (no jars/hadoop-client-api-*.jar): set "
                           "spark.jars.packages to org.apache.hadoop:hadoop-aws:<that version> in spark_conf")
    return f"org.apache.hadoop:hadoop-aws:{version}"


def _endpoint(endpoint: Optional[str]) -> Optional[str]:
    return endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT")


def hadoop_s3a_settings(endpoint: Optional[str] = None, region: Optional[str] = None,
                        path_style: Optional[bool] = None) -> Dict[str, str]:
    """Hadoop keys (without `spark.hadoop.`) for S3A, `s3://` read as S3A."""
    endpoint = _endpoint(endpoint)
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    conf = {"fs.s3.impl": S3A, "fs.s3a.impl": S3A,
            "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A"}
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.connection.ssl.enabled"] = str(not endpoint.startswith("http://")).lower()
        if path_style is None:
            path_style = True  # S3-compatible servers (MinIO, R2, a local server) want path style
    if path_style is not None:
        conf["fs.s3a.path.style.access"] = str(bool(path_style)).lower()
    if region:
        conf["fs.s3a.endpoint.region"] = region
    return conf


def executor_env(endpoint: Optional[str] = None, region: Optional[str] = None,
                 path_style: Optional[bool] = None) -> Dict[str, str]:
    """Environment for the Python tasks' own store clients: no secrets (each host's chain)."""
    env = {}
    endpoint = _endpoint(endpoint)
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            env["AWS_ALLOW_HTTP"] = "true"
    if region:
        env["AWS_REGION"] = region
    if path_style is not None:
        env["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = str(not path_style).lower()
    return env


def spark_conf(location_root: Optional[str], endpoint: Optional[str] = None, region: Optional[str] = None,
               path_style: Optional[bool] = None, with_packages: bool = True) -> Dict[str, str]:
    """Session-builder entries for tables under `location_root`; empty when it is not `s3://`
    or `s3a://`. A user's own `spark_conf` goes on top."""
    if not is_s3(location_root):
        return {}
    conf = {"spark.hadoop." + k: v for k, v in hadoop_s3a_settings(endpoint, region, path_style).items()}
    conf.update({"spark.executorEnv." + k: v for k, v in executor_env(endpoint, region, path_style).items()})
    if with_packages:
        conf["spark.jars.packages"] = s3_packages()
    return conf


def configure_process(location_root: Optional[str], endpoint: Optional[str] = None, region: Optional[str] = None,
                      path_style: Optional[bool] = None) -> None:
    """This process's `Storage` settings for tables under `location_root` (the driver; the
    executors read `spark.executorEnv`)."""
    if not is_s3(location_root):
        return
    from .table.storage.object_store_client import configure

    endpoint = _endpoint(endpoint)
    settings = {"endpoint": endpoint, "region": region,
                "virtual_hosted_style_request": None if path_style is None else not path_style}
    if endpoint and endpoint.startswith("http://"):
        settings["allow_http"] = True
    bucket = urlparse(location_root)
    configure(f"{bucket.scheme}://{bucket.netloc}", **settings)
