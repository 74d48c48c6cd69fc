"""One process, six writes on `s3://` tables, killed (SIGKILL) with all of them in flight, for
tests/core/test_object_storage.py: the crash matrix's subset on the store.

    python -m tests.core.s3_crash_writer BASE_URI BARRIER_FOLDER

It creates BASE_URI/<kind>-<phase> for kind in insert, upsert, insert_overwrite and phase in
before_publish, task (`table/storage/faults.py`), each holding crash_cases.START. Then:
1. the three `before_publish` writes start, in threads; each stops in the driver at that phase
   (files written and reconciled, nothing published) and waits;
2. the three `task` writes start one after the other, each once the previous one's task
   waits: their Spark tasks have `HUDILITE_KILL_AT=task`, so each (one per write) that closed
   its base file waits until all three have, and the third kills this process.
One JVM start for six kills: each write is at its phase when the kill comes (a barrier, not a
timing). Prints READY after the set-up and AT before_publish when step 1 is reached.
"""

import os
import sys
import threading
import time

KINDS = ("insert", "upsert", "insert_overwrite")
PHASES = ("before_publish", "task")
TABLES = [f"{kind}-{phase}" for phase in PHASES for kind in KINDS]
BATCHES = {  # one partition each: one writing task per write
    "insert": [(100 + i, "new", "d1") for i in range(5)],
    "upsert": [(1, "merged", "d1"), (4, "merged", "d1")],  # one file group rewritten
    "insert_overwrite": [(200, "over", "d1")],
}


def pending_and_orphans(table):
    """Instants not completed, and parquet objects on the store that no completed commit wrote."""
    pending = [i.timestamp for i in table.timeline() if not i.is_completed]
    committed = {st.path for i in table.timeline() if i.is_completed and i.action in ("commit", "replacecommit")
                 for st in table.commit_metadata(i).write_stats}
    on_store = {p for p in table.context.storage.list_files_recursive("")
                if p.endswith(".parquet") and not p.startswith(".hoodie")}
    return pending, sorted(on_store - committed)


def main(base: str, barrier: str) -> None:
    from dbt.adapters.hudilite.table.storage import faults
    os.environ[faults.KILL_PID] = str(os.getpid())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from dbt.adapters.hudilite.object_store_settings import spark_conf
    from dbt.adapters.hudilite.table import FileSizing, HudiTable
    from tests.core.crash_cases import START

    builder = (SparkSession.builder.master("local[4]").appName("hudilite-s3-crash")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").config("spark.pyspark.python", sys.executable))
    for key, value in spark_conf(base).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    schema = "id long, v string, day string"
    tables = {}

    def create(name):
        keyed = name.startswith("upsert")
        table = HudiTable.create(spark, f"{base}/{name}", "crash", partition_by="day", record_key="id" if keyed else None)
        if name.endswith("-task"):  # its files written by a Spark task, which the kill is armed in (not on the driver)
            table.file_sizing = FileSizing(driver_write_bytes=0)
        table.insert(spark.createDataFrame(START, schema))
        tables[name] = table

    threads = [threading.Thread(target=create, args=(name,)) for name in TABLES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(tables) == sorted(TABLES), "set-up failed"
    print("READY", flush=True)

    def write(name):
        kind, table = name.split("-")[0], tables[name]
        batch = spark.createDataFrame(BATCHES[kind], schema).coalesce(1)  # one writing task
        {"insert": table.insert, "upsert": table.upsert, "insert_overwrite": table.insert_overwrite}[kind](batch)
        print(f"NOT KILLED {name}", flush=True)

    # 1. In the driver: the writes wait at before_publish (a barrier no one completes).
    os.environ[faults.KILL_BARRIER] = f"{barrier}/driver:1000"
    os.environ[faults.KILL_AT] = "before_publish"
    writers = [threading.Thread(target=write, args=(f"{kind}-before_publish",), daemon=True) for kind in KINDS]
    for thread in writers:
        thread.start()
    deadline = time.monotonic() + 600
    while len(os.listdir(f"{barrier}/driver") if os.path.isdir(f"{barrier}/driver") else []) < len(KINDS):
        assert time.monotonic() < deadline, "the writes did not reach before_publish"
        time.sleep(0.1)
    print("AT before_publish", flush=True)
    # 2. In the tasks: new Python workers get this environment (the driver's stays as it is).
    environment = spark.sparkContext.environment
    environment[faults.KILL_AT] = "task"
    environment[faults.KILL_BARRIER] = f"{barrier}/tasks:{len(KINDS)}"
    environment[faults.KILL_PID] = str(os.getpid())
    writers = [threading.Thread(target=write, args=(f"{kind}-task",), daemon=True) for kind in KINDS]
    for n, thread in enumerate(writers[:-1], start=1):  # one after the other: each write's task is there
        thread.start()
        while len(os.listdir(f"{barrier}/tasks") if os.path.isdir(f"{barrier}/tasks") else []) < n:
            assert time.monotonic() < deadline, "the writes' tasks did not reach the task phase"
            time.sleep(0.1)
    writers[-1].start()  # its task completes the barrier: the kill
    writers[-1].join(600)
    print("NOT KILLED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
