"""The core's writes on an `s3://` table, in a Spark session of its own with S3A on its class
path (`object_store_settings.spark_conf`), for tests/core/test_object_storage.py: the shared
`spark` fixture has no hadoop-aws, and a JVM cannot gain it once started.

    python -m tests.core.s3_table_job BASE_URI SCENARIO [SCENARIO ...]   (tables at BASE_URI/SCENARIO)

The endpoint and credentials come from the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
...), as on a real host. Prints one JSON line: what the test compares with its own expectation
and with hudi-rs.

With `CRASHES_AFTER` (an environment variable naming a file) the `crashes` scenario starts only
once that file exists: "go" once tests/core/s3_crash_writer.py was killed and the test has read
what its writes left, "skip" when it was not killed. So the other scenarios run while the crash
writer does.
"""

import json
import os
import sys
import time

CRASHES_AFTER = "HUDILITE_S3_CRASHES_AFTER"


def _rows(df):
    return sorted([r["event_id"], r["region"], r["amount"]] for r in df.select("event_id", "region", "amount").collect())


def main(base: str, scenarios) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession, functions as F

    from dbt.adapters.hudilite.object_store_settings import spark_conf
    from dbt.adapters.hudilite.table import HudiTable

    builder = (SparkSession.builder.master("local[2,2]").appName("hudilite-s3")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").config("spark.sql.catalogImplementation", "in-memory")
               .config("spark.pyspark.python", sys.executable))
    for key, value in spark_conf(base).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def events(ids, region=None, amount=None):
        df = spark.createDataFrame([(i,) for i in ids], "event_id long")
        region_col = F.lit(region) if region else F.when(F.col("event_id") % 2 == 0, "us").otherwise("eu")
        amount_col = F.lit(float(amount)) if amount is not None else F.col("event_id") * 0.5
        return df.select("event_id", region_col.alias("region"), amount_col.alias("amount"))

    results = {scenario: run(spark, events, HudiTable, f"{base}/{scenario}", scenario) for scenario in scenarios}
    spark.stop()
    return results


def run(spark, events, HudiTable, base: str, scenario: str) -> dict:
    out = {"instants": {}, "rows": {}}
    if scenario == "keyed":
        table = HudiTable.create(spark, base, "events", record_key="event_id", partition_by="region")
        out["instants"]["insert"] = table.insert(events(range(0, 40)))
        out["instants"]["upsert"] = table.upsert(events(range(30, 50), amount=-1))
        out["instants"]["delete"] = table.delete(spark.createDataFrame([(i,) for i in range(0, 5)], "event_id long"))
        out["instants"]["insert_overwrite"] = table.insert_overwrite(events(range(100, 103), region="eu"))
    elif scenario == "append":
        table = HudiTable.create(spark, base, "appends", partition_by="region")
        out["instants"]["append_1"] = table.insert(events(range(0, 10)))
        out["instants"]["append_2"] = table.insert(events(range(10, 15)))
        out["instants"]["overwrite_table"] = table.insert_overwrite_table(events(range(20, 23), region="apac"))
    elif scenario == "conflict":
        # Writer A's upsert is between its files and its publish when writer B (another handle)
        # rewrites the same file group and publishes: A must fail, leave nothing, and succeed on retry.
        from dbt.adapters.hudilite.table import ConcurrentWriteError
        table = HudiTable.create(spark, base, "events", record_key="event_id", partition_by="region")
        out["instants"]["insert"] = table.insert(events(range(0, 6)))
        other = HudiTable.open(spark, base)
        ctx, theirs = table.context, []
        publish = ctx.commit

        def commit_after_the_other(txn, *args, **kwargs):
            ctx.commit = publish
            theirs.append(other.upsert(events([2], amount=-2)))
            return publish(txn, *args, **kwargs)

        ctx.commit = commit_after_the_other
        try:
            table.upsert(events([0], amount=-1))
            out["conflict"] = None
        except ConcurrentWriteError as err:
            out["conflict"] = str(err)
        out["instants"]["theirs"] = theirs[0]
        out["parquet_after_conflict"] = sorted(p for p in table.context.storage.list_files_recursive("")
                                               if p.endswith(".parquet") and not p.startswith(".hoodie"))
        out["committed_after_conflict"] = sorted(st.path for i in table.timeline() if i.is_completed
                                                 for st in table.commit_metadata(i).write_stats)
        out["instants"]["retry"] = table.upsert(events([0], amount=-1))
    elif scenario == "race":
        # Two writers (threads with their own handles: every step between them goes through the
        # store) update keys of one file group at the same time, retrying on conflicts.
        import threading
        from dbt.adapters.hudilite.table import ConcurrentWriteError
        table = HudiTable.create(spark, base, "events", record_key="event_id", partition_by="region")
        out["instants"]["insert"] = table.insert(events(range(0, 20, 2)))  # one partition, one file group
        conflicts, errors = [], []

        def writer(keys):
            mine = HudiTable.open(spark, base)
            for key in keys:
                for _ in range(20):
                    try:
                        mine.upsert(events([key], amount=-key))
                        break
                    except ConcurrentWriteError as err:
                        conflicts.append(str(err)[:200])
                else:
                    errors.append(f"key {key}: gave up")

        threads = [threading.Thread(target=writer, args=(keys,)) for keys in ([0, 2, 4], [10, 12, 14])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        out["conflicts"], out["errors"] = conflicts, errors
    elif scenario == "services":
        # Cleaner, archival, clustering, savepoint and restore on the store.
        from dbt.adapters.hudilite.table import FileSizing
        table = HudiTable.create(spark, base, "events", record_key="event_id", partition_by="region")
        table.file_sizing = FileSizing(small_file_limit=0)  # each insert new file groups: small files to cluster
        out["instants"]["insert_1"] = table.insert(events(range(0, 10)))
        out["instants"]["insert_2"] = table.insert(events(range(10, 20)))
        out["instants"]["upsert_1"] = table.upsert(events([0, 1, 10, 11], amount=-1))
        out["savepoint"] = table.savepoint()
        out["instants"]["upsert_2"] = table.upsert(events([2, 3, 12], amount=-2))
        out["instants"]["insert_3"] = table.insert(events(range(20, 26)))
        plan = table.clean(retain_commits=1)
        out["cleaned"] = sorted(f.path for f in plan.files_to_delete)
        out["archived"] = table.archive(keep_min_commits=2, keep_max_commits=3)
        table.file_sizing = FileSizing()
        out["files_before_cluster"] = sorted(f.path for f in table.latest_base_files())
        out["rows"]["before_cluster"] = _rows(table.read())
        out["clustered"] = table.cluster()
        out["files_after_cluster"] = sorted(f.path for f in table.latest_base_files())
        out["rows"]["after_cluster"] = _rows(table.read())
        out["timeline_before_restore"] = [[i.timestamp, i.action, i.state] for i in table.timeline()]
        out["restored"] = table.restore(out["savepoint"])
        out["all_instants"] = out["instants"]
        out["instants"] = {"upsert_1": out["savepoint"]}  # the others: archived, cleaned or rolled back
    elif scenario == "odd_partitions":
        # Partition values S3 keys or Hadoop globs treat specially: written and read back as on
        # local disk (tests/core/test_writes.py); a control character refused as there.
        from tests.core.test_writes import ODD_PARTITION_VALUES
        table = HudiTable.create(spark, base, "t", partition_by="p")
        rows = [(i, v) for i, v in enumerate(ODD_PARTITION_VALUES)]
        out["instants"]["insert"] = table.insert(spark.createDataFrame(rows, "id long, p string"))
        out["instants"]["overwrite"] = table.insert_overwrite(
            spark.createDataFrame([(100, "x[1]"), (101, None)], "id long, p string"))
        try:
            table.insert(spark.createDataFrame([(200, "tab\there")], "id long, p string"))
            out["refused"] = None
        except Exception as err:
            out["refused"] = str(err)[:2000]
        out["rows"] = {name: sorted([r.id, r.p] for r in table.read(as_of=instant).collect())
                       for name, instant in out["instants"].items()}
        out["timeline"] = [[i.timestamp, i.action, i.state] for i in table.timeline()]
        out["validate"] = table.validate()
        out["objects"] = sorted(table.context.storage.list_files_recursive(""))
        return out
    elif scenario == "crashes":
        return crashes(spark, HudiTable, base) if _crashes_go() else {"skipped": True}
    elif scenario == "rebuilds":
        return rebuilds(spark, events, HudiTable, base)
    elif scenario == "two_writers":
        # The start of the two processes' table (tests/core/concurrent_writer.py, run by the test).
        table = HudiTable.create(spark, base, "t", record_key="id", partition_by="part")
        rows = [(k, "start", "p1" if k < 10 else "p2" if k < 20 else "shared") for k in list(range(20)) + list(range(100, 105))]
        table.upsert(spark.createDataFrame(rows, "id long, tag string, part string"))
        return {"created": True}
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    for name, instant in out["instants"].items():
        out["rows"][name] = _rows(table.read(as_of=instant))
    if scenario == "keyed":  # after the time-travel reads: the cleaner takes the old snapshots away
        plan = table.clean(retain_commits=1)
        out["cleaned"] = sorted(f.path for f in plan.files_to_delete)
        out["after_clean"] = sorted(p for p in table.context.storage.list_files_recursive("") if p.endswith(".parquet")
                                    and not p.startswith(".hoodie"))
    out["rows"]["latest"] = _rows(table.read())
    out["timeline"] = [[i.timestamp, i.action, i.state] for i in table.timeline()]
    out["base_files"] = sorted(f.path for f in table.latest_base_files())
    out["validate"] = table.validate()
    storage = table.context.storage
    out["objects"] = sorted(storage.list_files_recursive(""))
    return out


def rebuilds(spark, events, HudiTable, root: str) -> dict:
    """Rebuilds with a new layout (partitioned by region, then not) swapped in on the store by
    `StorageCatalog.swap_in`: one whole, two killed half-way in a process of their own
    (tests/core/swap_killer.py) and finished by the next look at the name; then a rename."""
    import subprocess
    import time

    from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
    from dbt.adapters.hudilite.table import Storage
    out = {}
    catalog = StorageCatalog(spark, root)
    for cut in ("none", "swap", "move"):
        name = f"t_{cut}"
        old = HudiTable.create(spark, catalog.table_path("a", name), name, partition_by="region", record_key="event_id")
        old.insert(events(range(0, 6)))
        new = HudiTable.create(spark, catalog.swaps.rebuild_path("a", name), name, record_key="event_id")
        instant = new.insert(events(range(10, 14)))
        if cut == "none":
            catalog.swap_in("a", name, instant)
        else:
            killed = subprocess.run([sys.executable, "-m", "tests.core.swap_killer", root, "a", name, instant],
                                    env=dict(os.environ, HUDILITE_KILL_AT=cut), capture_output=True, text=True,
                                    timeout=300)
            out[f"{name}_killed"] = {"returncode": killed.returncode, "stdout": killed.stdout,
                                     "stderr": killed.stderr[-3000:],
                                     "is_table": HudiTable.exists(catalog.table_path("a", name)),
                                     "record": Storage(root).exists(f"a/.hudilite_swaps/{name}/swap.json")}
            started = time.monotonic()
            StorageCatalog(spark, root).open("a", name)  # a new process's first look
            out[f"{name}_finished_in_s"] = time.monotonic() - started
        table = HudiTable.open(spark, catalog.table_path("a", name))
        out[name] = {"partition_fields": table.config.partition_fields, "rows": _rows(table.read()),
                     "validate": [str(p) for p in table.validate()]}
    catalog.rename_table("a", "t_none", "a", "t_renamed")
    renamed = HudiTable.open(spark, catalog.table_path("a", "t_renamed"))
    out["renamed"] = {"rows": _rows(renamed.read()), "old_name_is_table": HudiTable.exists(catalog.table_path("a", "t_none")),
                      "spark": _rows(spark.table("a.t_renamed"))}
    out["left"] = [p for p in Storage(root).list_files_recursive("a")
                   if p.startswith((".hudilite_rebuilds/", "t_none/")) or p.endswith("swap.json")]
    return out


def _crashes_go() -> bool:
    """True once the killed writes may be followed (see CRASHES_AFTER), False when there are none."""
    path = os.environ.get(CRASHES_AFTER)
    deadline = time.monotonic() + 1200
    while path and not (os.path.exists(path) and open(path).read() in ("go", "skip")):
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never said go or skip")
        time.sleep(0.2)
    return not path or open(path).read() == "go"


def crashes(spark, HudiTable, base: str) -> dict:
    """The tables tests/core/s3_crash_writer.py killed a write on: read as before the write,
    then a next writer that succeeds and rolls the dead one back (tests/core/test_crashes.py's
    checks, on the store)."""
    from tests.core.s3_crash_writer import TABLES, pending_and_orphans
    out = {}
    for name in TABLES:
        table = HudiTable.open(spark, f"{base}/{name}")
        found = {"before": sorted(list(r) for r in table.read().select("id", "v", "day").collect())}
        found["pending_before"], found["orphans_before"] = pending_and_orphans(table)
        marker = spark.createDataFrame([(999, "next", "d0")], "id long, v string, day string")
        found["next"] = (table.upsert if name.startswith("upsert") else table.insert)(marker)
        found["after"] = sorted(list(r) for r in table.read().select("id", "v", "day").collect())
        keys = [r[0] for r in table.read().select("_hoodie_record_key").collect()]
        found["unique_keys"] = len(keys) == len(set(keys))
        found["pending_after"], found["orphans_after"] = pending_and_orphans(table)
        found["validate"] = table.validate()
        found["private"] = sorted(table.context.storage.list_files_recursive(".hoodie/.hudilite"))
        found["timeline"] = [[i.timestamp, i.action, i.state] for i in table.timeline()]
        out[name] = found
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1], sys.argv[2:])), flush=True)
