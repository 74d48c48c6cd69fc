"""Where one write's time goes: a driver profile (pyinstrument) and the Spark jobs it ran, each
with its wall time, from Spark's status store.

    .venv/bin/python benchmarks/profile_write.py upsert|upsert-random [--rows 4000000] [--batch 10000]
    .venv/bin/python benchmarks/profile_write.py append|overwrite [--rows N]

The table is built first (not profiled), one warm-up operation runs, then the profiled one.
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyspark.sql import functions as F  # noqa: E402

from dbt.adapters.hudilite.session import spark_session  # noqa: E402
from dbt.adapters.hudilite.table import HudiTable  # noqa: E402
from workloads import batch_frame, batch_ids, keyed_table_rows, narrow_rows, update_ids  # noqa: E402


def spark_jobs(spark, group):
    """(job id, description, seconds, tasks, stages) of the jobs of a job group, from the status
    store; stages: (stage id, tasks, summed task run time, wall time) of those that ran. A
    summed time near the wall time with several tasks means they ran one after another."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    out = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobGroup().isDefined() and job.jobGroup().get() == group:
            start, end = job.submissionTime(), job.completionTime()
            seconds = (end.get().getTime() - start.get().getTime()) / 1000 if start.isDefined() and end.isDefined() else None
            out.append((job.jobId(), job.name()[:90], seconds, job.numTasks(), stages_of(store, job)))
    return sorted(out)


def stages_of(store, job):
    out = []
    ids = job.stageIds()
    for k in range(ids.size()):
        stage = store.lastStageAttempt(ids.apply(k))
        if str(stage.status()) == "COMPLETE" and stage.submissionTime().isDefined():
            wall = stage.completionTime().get().getTime() - stage.submissionTime().get().getTime()
            out.append(f"stage {stage.stageId()}: {stage.numTasks()} tasks, {stage.executorRunTime() / 1000:.2f} s "
                       f"summed, {wall / 1000:.2f} s wall")
    return "; ".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("operation", choices=["upsert", "upsert-random", "append", "overwrite"])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    args = parser.parse_args()
    from pyinstrument import Profiler

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = spark_session(conf={"spark.master": "local[2]", "spark.driver.memory": "8g"})
    work = tempfile.mkdtemp(prefix="hudilite-profile-")
    n, days = args.rows, 50
    if args.operation.startswith("upsert"):  # updates of recent days and new keys, or random updates
        table = HudiTable.create(spark, f"{work}/t", "t", record_key="id", partition_by="day")
        table.insert(keyed_table_rows(spark, n, days))
        table.build_index()
        ids = (lambda s: update_ids(n, args.batch, s)) if args.operation == "upsert-random" else (
            lambda s: batch_ids(n, args.batch, s, 2, days))
        batches = [batch_frame(spark, ids(s), n, days, s + 2) for s in (1, 2)]
        operations = [lambda b=b: table.upsert(b) for b in batches]
    elif args.operation == "append":
        df = narrow_rows(spark, n)
        tables = [HudiTable.create(spark, f"{work}/a{i}", "a") for i in range(2)]
        operations = [lambda t=t: t.insert(df) for t in tables]
    else:
        table = HudiTable.create(spark, f"{work}/o", "o", partition_by="day")
        rows = lambda lo, hi: spark.range(lo, hi).select(  # noqa: E731
            "id", F.date_add(F.lit("2020-01-01").cast("date"), (F.col("id") * 100 / n).cast("int")).alias("day"))
        table.insert(rows(0, n))
        operations = [lambda d=d: table.insert_overwrite(rows(d * n // 100, (d + 1) * n // 100)) for d in (10, 11)]
    operations[0]()  # warm-up
    spark.sparkContext.setJobGroup("profiled", "profiled")
    profiler = Profiler(interval=0.002)
    profiler.start()
    operations[1]()
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False, show_all=False))
    print("| job | what | seconds | tasks | stages that ran |\n|---|---|---|---|---|")
    for job_id, name, seconds, tasks, stages in spark_jobs(spark, "profiled"):
        print(f"| {job_id} | {name} | {seconds} | {tasks} | {stages} |")


if __name__ == "__main__":
    main()
