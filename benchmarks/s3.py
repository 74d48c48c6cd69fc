"""Tables on a local S3 server against local disk, same rows, same session (`run.py --only s3`).

A moto S3 server (`python -m moto.server`, as the tests start it) on 127.0.0.1; the session
gets S3A and its jars (`object_store_settings.spark_conf`). Rows: a keyed table partitioned 4
ways; then upserts of existing keys and appends of new rows, alternating the two sides every
round. And the base-file question of issue 29: one Parquet file written and read through
obstore (`Storage.open_output` / `open_input`) against pyarrow's `S3FileSystem`, no Spark.

Requests per commit: every request reaches the server through a counting proxy
(`tests/core/s3_proxy.py`; `AWS_ENDPOINT_URL` and S3A's endpoint name the proxy, so the driver's
and the Python tasks' obstore clients and Spark's S3A all pass through it). On a table of its
own, with the table services dbt runs after every model (cleaner, archival) after each commit,
one small upsert and one small append are counted by kind (LIST, GET, HEAD, PUT, POST,
DELETE) after 5 commits and again after 60: what an object store charges for.

A local server has no network latency: these figures show the cost of the protocol (requests,
uploads, listings), not that of a real S3, which adds tens of ms a request. The proxy is a
Python hop on every request, in the speed rows too.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from typing import Callable, List

from measure import Result, Sample, Side, alternate, timed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = "hudilite-bench"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def start_server():
    """A moto S3 server on a free port behind a counting proxy (`proxy()`), the environment
    pointing at the proxy, a bucket; returns (process, endpoint). Call before the Spark session
    starts (its tasks inherit the environment)."""
    global _proxy
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.core.s3_proxy import S3Proxy, start_moto_server
    proc, server = start_moto_server()
    _proxy = S3Proxy(server)
    endpoint = _proxy.url
    os.environ.update(CREDENTIALS, AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true")
    import boto3
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return proc, endpoint


_proxy = None


def proxy():
    """The counting proxy in front of the server `start_server` started."""
    if _proxy is None:
        raise RuntimeError("start_server() first")
    return _proxy


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
    results += requests_per_commit(spark, log, quick, events)
    results += dbt_start_up(work, log, rounds)
    return results


START_UP_MODELS = {
    "events.sql": "{{ config(materialized='table', partition_by='day') }}\n"
                  "select id, cast(id % 3 as string) as day from range(100)",
    "customers.sql": "{{ config(materialized='incremental', unique_key='id') }}\n"
                     "select id, 'c' || id as name from range(50)",
}


def dbt_start_up(work: str, log: Callable[[str], None], rounds: int) -> List[Result]:
    """`dbt run` of a two-model project (a table, a merge) in a fresh process, location_root on
    the local S3 server against local disk, after a first run each (so the merge merges): the
    whole command (JVM, catalog, bucket check, S3A) and the models' own time."""
    import json

    from dbt_runs import dbt

    sides = {}
    for side, root in (("local S3 server", f"s3://{BUCKET}/dbt-{uuid.uuid4().hex[:8]}"),
                       ("local disk", os.path.join(work, "dbt-start-up-lake"))):
        project = os.path.join(work, f"dbt-start-up-{len(sides)}")
        os.makedirs(os.path.join(project, "models"))
        with open(os.path.join(project, "dbt_project.yml"), "w") as f:
            f.write("name: start_up\nversion: '1.0'\nprofile: start_up\nconfig-version: 2\nmodel-paths: [models]\n")
        for name, sql in START_UP_MODELS.items():
            with open(os.path.join(project, "models", name), "w") as f:
                f.write(sql)
        store = f"      s3_endpoint: {proxy().url}\n      s3_region: us-east-1\n" if root.startswith("s3") else ""
        with open(os.path.join(project, "profiles.yml"), "w") as f:
            f.write(f"start_up:\n  target: dev\n  outputs:\n    dev:\n      type: hudilite\n      schema: analytics\n"
                    f"      location_root: {root}\n{store}      threads: 1\n      spark_conf: {{spark.master: 'local[2]'}}\n")
        run = dbt(["run"], project, project, {})
        log(f"s3: first dbt run on {side}")
        run()
        sides[side] = (project, run)
    nodes = {side: Side(side) for side in sides}

    def command(side):
        def prepare(r):
            project, run = sides[side]

            def timed_run():
                run()
                with open(os.path.join(project, "target", "run_results.json")) as f:
                    took = sum(node["execution_time"] for node in json.load(f)["results"])
                if r >= 0:
                    nodes[side].samples.append(Sample(took, None))
            return timed_run
        return prepare

    log("s3: dbt run, fresh process, S3 against local disk")
    measured = alternate(None, {side: command(side) for side in sides}, rounds)
    return [Result("`dbt run` of a table and a merge model, fresh process (JVM start, catalog, bucket check, S3A "
                   "included): local S3 server vs local disk", measured["local S3 server"], measured["local disk"], 1.5),
            Result("the same two models' own time (run_results.json)", nodes["local S3 server"], nodes["local disk"],
                   note="the models alone, without the process's start")]


def requests_per_commit(spark, log: Callable[[str], None], quick: bool, events,
                        points=(5, 60), batch: int = 10) -> List[Result]:
    """Every request of one small upsert and one small append, each followed by the table
    services (cleaner, archival, as dbt runs them after a model), at `points` commits of the
    table's history; the commits between them are small upserts, services after each."""
    from dbt.adapters.hudilite.table import HudiTable
    from tests.core.s3_proxy import KINDS

    rows = 20_000 if quick else 200_000
    counter = proxy()
    table = HudiTable.create(spark, f"s3://{BUCKET}/requests-{uuid.uuid4().hex[:8]}/events", "events",
                             record_key="event_id", partition_by="region")
    table.insert(events(0, rows, "start"))
    table.run_services()
    commits, appended, results = 1, rows, []

    def filler(n):
        df = events((n * 7919) % (rows - batch), batch, f"filler-{n}")
        with table.pinned():  # as dbt runs a model's write and its services
            table.upsert(df)
            table.run_services()

    for point in points:
        log(f"s3: requests per commit: small upserts up to {point} commits of history")
        while commits < point:
            filler(commits)
            commits += 1
        for label, write in ((f"upsert of {batch} existing keys",
                              lambda: table.upsert(events((commits * 104729) % (rows - batch), batch, f"counted-{commits}"))),
                             (f"append of {batch} new rows (keyed)",
                              lambda: table.insert(events(appended, batch, f"counted-{commits}")))):
            with table.pinned():  # as dbt runs a model's write and its services: on one picture
                start = counter.mark()
                sample = timed(spark, write)
                middle = counter.mark()
                table.run_services()
            requests = counter.since(start)  # the write's, then the services'
            commits += 1
            if label.startswith("append"):
                appended += batch

            def kinds(seen):
                return {k: len([r for r in seen if r.kind == k]) for k in KINDS}

            total, services = kinds(requests), kinds(requests[middle - start:])
            by_client = {c: len([r for r in requests if r.client == c]) for c in sorted({r.client for r in requests})}
            timeline = len([n for n in table.context.storage.list_names(".hoodie") if "." in n])
            note = ("; ".join(f"{k} {total[k]}" for k in KINDS)
                    + f"; of which the services: {sum(services.values())}"
                    + f"; by client: {', '.join(f'{c} {n}' for c, n in by_client.items())}"
                    + f"; {timeline} files on the active timeline")
            log(f"  after {commits - 1} commits, {label}: {len(requests)} requests "
                f"({total}; the services' {services}; by client {by_client}; {timeline} timeline files)")
            results.append(Result(f"requests of one {label} and its services, after {commits - 1} commits "
                                  "(local S3 server, every client)", Side("hudilite", [sample]),
                                  unit=" requests", our_value=float(len(requests)), note=note))
    # What a dbt model's `ref()` of the table costs on top: Spark reads the latest snapshot over S3A.
    start = counter.mark()
    sample = timed(spark, lambda: table.read().count())
    read = counter.since(start)
    by_client = {c: len([r for r in read if r.client == c]) for c in sorted({r.client for r in read})}
    note = "; ".join(f"{k} {len([r for r in read if r.kind == k])}" for k in KINDS) + f"; by client: {by_client}"
    log(f"  a Spark read of the latest snapshot (count): {len(read)} requests ({note})")
    results.append(Result(f"requests of a Spark read of the latest snapshot, after {commits} commits "
                          "(local S3 server, every client)", Side("hudilite", [sample]),
                          unit=" requests", our_value=float(len(read)), note=note))
    everything = counter.since(0)
    log("s3: requests through the proxy over the whole run, by client: "
        + ", ".join(f"{c} {len([r for r in everything if r.client == c])}" for c in sorted({r.client for r in everything})))
    return results


def base_files(log: Callable[[str], None], rounds: int, quick: bool) -> List[Result]:
    """One Parquet file up and back: obstore (what the core uses) against pyarrow's S3FileSystem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dbt.adapters.hudilite.table.storage.filesystem import Storage

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
