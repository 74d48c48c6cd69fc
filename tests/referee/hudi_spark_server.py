"""The referee's side: Apache Hudi's own Spark datasource (pyspark 3.5 with a Hudi bundle), run
in its own Python by `hudi_spark.HudiSpark`. It reads requests as JSON lines on stdin and
answers each with one line on stdout that starts with REPLY; everything else Spark prints is
left alone.

Usage: python hudi_spark_server.py <hudi version> <ivy cache folder> [<JSON object of extra Spark settings>]
"""

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from values import plain_rows  # noqa: E402  (the referee's Python has no tests package)

REPLY = "@@REFEREE "


def session(version: str, ivy: str, extra: dict = None):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"hudi-{version}-referee")
        .config("spark.jars.packages", f"org.apache.hudi:hudi-spark3.5-bundle_2.12:{version}")
        .config("spark.jars.ivy", ivy)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
    )
    for key, value in (extra or {}).items():  # the benchmark's: its driver memory, its shuffle partitions
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read(spark, request):
    reader = spark.read.format("hudi")
    for key, value in request.get("options", {}).items():
        reader = reader.option(key, value)
    df = reader.load(request["path"])
    return {"columns": df.columns, "rows": plain_rows(df.collect(), df.columns)}


def reads(spark, request):
    """Several reads of one table at once, on threads (Spark runs their jobs side by side);
    each answered like `read`, or with its error."""
    from concurrent.futures import ThreadPoolExecutor

    def one(options):
        try:
            return {"ok": True, **read(spark, {"path": request["path"], "options": options})}
        except Exception as err:
            return {"ok": False, "error": f"{type(err).__name__}: {err}"[:4000]}
    with ThreadPoolExecutor(4) as pool:
        return {"replies": list(pool.map(one, request["options"]))}


def sql(spark, request):
    """A query by name through the session's catalog (a Hive metastore when so configured)."""
    df = spark.sql(request["query"])
    return {"columns": df.columns, "rows": plain_rows(df.collect(), df.columns)}


def write(spark, request):
    """Hudi's writer: `rows` (JSON objects) in the DDL `schema`, with the datasource `options`."""
    lines = spark.sparkContext.parallelize([json.dumps(r) for r in request["rows"]], 1)
    df = spark.read.schema(request["schema"]).json(lines)
    writer = df.write.format("hudi").mode(request.get("mode", "append"))
    for key, value in request["options"].items():
        writer = writer.option(key, value)
    writer.save(request["path"])
    return {}


_PROBES = iter(range(1 << 62))  # a catalog name per table `archived_commits` looks at


def archived_commits(spark, request):
    """Hudi's own view of a table's archived timeline: its `show_archived_commits` procedure
    (what Hudi's CLI `commits showarchived` prints), over a catalog table at `path`."""
    name = f"archived_probe_{next(_PROBES)}"
    spark.sql(f"create table {name} (id bigint, v string, ts bigint, region string) using hudi partitioned by "
              f"(region) location '{request['path']}' tblproperties (primaryKey = 'id', preCombineField = 'ts')")
    rows = spark.sql(f"call show_archived_commits(table => '{name}', limit => 1000, "
                     "start_ts => '00000000000000000', end_ts => '99999999999999999')").collect()
    return {"rows": [{k: str(v) if v is not None and not isinstance(v, (int, float, str)) else v
                      for k, v in r.asDict().items()} for r in rows]}


_ROW_MODULES = {}
_BENCH_GROUPS = iter(range(1 << 62))  # a job group per timed write


def _row_module(path: str):
    """The benchmark's row generators (benchmarks/peer_rows.py), loaded once from their path."""
    if path not in _ROW_MODULES:
        import importlib.util

        spec = importlib.util.spec_from_file_location("peer_rows", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _ROW_MODULES[path] = module
    return _ROW_MODULES[path]


def bench(spark, request):
    """The benchmark's peer: Hudi's writer timed here on rows made here. Each of `writes` names a
    generator of the `rows_module` and its arguments, the table `path`, the datasource `options`
    and `mode`. Its rows are made, cached and counted first; then only `save` is timed. Answers the
    seconds, Spark job count and row fingerprint of each write, in order."""
    import time

    rows = _row_module(request["rows_module"])
    if request.get("shuffle_partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(request["shuffle_partitions"]))
    tracker = spark.sparkContext.statusTracker()
    seconds, jobs, fingerprints = [], [], []
    for item in request["writes"]:
        df, fingerprint = rows.cached(spark, item["rows"], item.get("args", {}))
        writer = df.write.format("hudi").mode(item.get("mode", "append"))
        for key, value in item["options"].items():
            writer = writer.option(key, value)
        group = f"bench-{next(_BENCH_GROUPS)}"
        spark.sparkContext.setJobGroup(group, group)
        started = time.perf_counter()
        writer.save(item["path"])
        seconds.append(time.perf_counter() - started)
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        jobs.append(len(tracker.getJobIdsForGroup(group)))
        fingerprints.append(fingerprint)
        df.unpersist()
    return {"seconds": seconds, "jobs": jobs, "fingerprints": fingerprints}


def main() -> None:
    version, ivy = sys.argv[1], sys.argv[2]
    spark = session(version, ivy, json.loads(sys.argv[3]) if len(sys.argv) > 3 else None)
    handlers = {"read": read, "reads": reads, "sql": sql, "write": write, "bench": bench, "archived_commits": archived_commits,
                "version": lambda s, r: {"spark": s.version}}
    print(REPLY + json.dumps({"ok": True, "ready": version}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"ok": True, **handlers[request["op"]](spark, request)}
        except Exception as err:  # the client turns it into an assertion naming the request
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"[:4000], "trace": traceback.format_exc()[-4000:]}
        print(REPLY + json.dumps(reply), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
