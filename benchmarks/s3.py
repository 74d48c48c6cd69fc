"""Tables on a local S3 server against local disk, same rows, same session (`run.py --only s3`).

A moto S3 server (`python -m moto.server`, as the tests start it) on 127.0.0.1; the session
gets S3A and its jars (`object_store_settings.spark_conf`). Rows: a keyed table partitioned 4
ways; then upserts of existing keys and appends of new rows, alternating the two sides every
round. And the base-file question of issue 29: one Parquet file written and read through
obstore (`Storage.open_output` / `open_input`) against pyarrow's `S3FileSystem`, no Spark.

A local server has no network latency: these figures show the cost of the protocol (requests,
uploads, listings), not that of a real S3, which adds tens of ms a request
(docs/object-storage.md has the requests per commit).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Callable, List

from measure import Result, alternate, timed

BUCKET = "hudilite-bench"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def start_server():
    """A moto S3 server on a free port, the environment pointing at it, a bucket; returns
    (process, endpoint). Call before the Spark session starts (its tasks inherit the environment)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto_server did not start on {endpoint}")
            time.sleep(0.2)
    os.environ.update(CREDENTIALS, AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true")
    import boto3
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return proc, endpoint


def spark_conf(endpoint: str) -> dict:
    from dbt.adapters.hudilite.object_store_settings import spark_conf as settings
    return settings(f"s3://{BUCKET}/lake", endpoint=endpoint, region="us-east-1")


def run(spark, work: str, log: Callable[[str], None], quick: bool = False, rounds: int = 3) -> List[Result]:
    from pyspark.sql import functions as F

    from dbt.adapters.hudilite.table import HudiTable

    rows, batch = (20_000, 200) if quick else (200_000, 1_000)
    roots = {"local S3 server": f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}", "local disk": os.path.join(work, "s3-peer")}

    def events(start, n, tag):
        return (spark.range(start, start + n, numPartitions=2)
                .select(F.col("id").alias("event_id"), (F.col("id") % 4).cast("string").alias("region"),
                        (F.col("id") * 0.5).alias("amount"), F.lit(tag).alias("tag"),
                        F.sha2(F.col("id").cast("string"), 256).alias("payload")))

    tables, results = {}, []
    for side, root in roots.items():
        log(f"s3: first insert of {rows:,} rows on {side}")
        table = HudiTable.create(spark, f"{root}/events", "events", record_key="event_id", partition_by="region")
        sample = timed(spark, lambda: table.insert(events(0, rows, "start")))
        log(f"  {side}: {sample.seconds:.2f} s")
        tables[side] = table
    counter = {"append": rows}

    def upsert(side):
        def prepare(r):
            df = events((r + 3) * 7919 % (rows - batch), batch, f"upsert-{r}")
            return lambda: tables[side].upsert(df)
        return prepare

    def append(side):
        def prepare(r):
            start = counter["append"] + (r + 10) * batch * 2 + (0 if side == "local S3 server" else batch)
            df = events(start, batch, f"append-{r}")
            return lambda: tables[side].insert(df)
        return prepare

    for label, make in ((f"upsert of {batch:,} existing keys into {rows:,} rows, 4 partitions", upsert),
                        (f"append of {batch:,} new rows (keyed table of {rows:,})", append)):
        log(f"s3: {label}")
        sides = alternate(spark, {side: make(side) for side in roots}, rounds)
        results.append(Result(f"{label}: local S3 server vs local disk", sides["local S3 server"],
                              sides["local disk"], note="peer: the same write on local disk"))
    results += base_files(log, rounds, quick)
    shutil.rmtree(roots["local disk"], ignore_errors=True)
    return results


def base_files(log: Callable[[str], None], rounds: int, quick: bool) -> List[Result]:
    """One Parquet file up and back: obstore (what the core uses) against pyarrow's S3FileSystem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dbt.adapters.hudilite.table.storage import Storage

    n = 150_000 if quick else 1_500_000
    table = pa.table({"k": pa.array(range(n)), "v": pa.array([f"value-{i % 9973}-{i}" for i in range(n)]),
                      "x": pa.array([i * 0.5 for i in range(n)])})
    storage = Storage(f"s3://{BUCKET}/files-{uuid.uuid4().hex[:8]}")
    fs = storage.filesystem

    def write_obstore(r):
        return lambda: _write(storage.open_output(f"obstore-{r}.parquet"), table)

    def write_pyarrow(r):
        return lambda: _write(fs.open_output_stream(storage.full_path(f"pyarrow-{r}.parquet")), table)

    def read_obstore(r):
        return lambda: pq.read_table(storage.open_input(f"obstore-{max(r, 0)}.parquet"))

    def read_pyarrow(r):
        return lambda: pq.read_table(fs.open_input_file(storage.full_path(f"pyarrow-{max(r, 0)}.parquet")))

    log(f"s3: a Parquet file of {n:,} rows, obstore against pyarrow's S3FileSystem")
    written = alternate(None, {"obstore": write_obstore, "pyarrow S3FileSystem": write_pyarrow}, rounds)
    size = storage.size("obstore-0.parquet") / 1e6
    read = alternate(None, {"obstore": read_obstore, "pyarrow S3FileSystem": read_pyarrow}, rounds)
    return [Result(f"write a base file ({size:.0f} MB, {n:,} rows) to the local S3 server: obstore vs pyarrow",
                   written["obstore"], written["pyarrow S3FileSystem"], note="peer: pyarrow's S3FileSystem"),
            Result("read it back: obstore vs pyarrow", read["obstore"], read["pyarrow S3FileSystem"],
                   note="peer: pyarrow's S3FileSystem")]


def _write(sink, table) -> None:
    import pyarrow.parquet as pq
    with sink:
        pq.write_table(table, sink)
