"""The dbt workloads: the demo project's daily builds next to dbt-spark writing parquet, and a
one-model `dbt run` in a fresh process as the number of tables under `location_root` grows.

Each dbt command is its own process, as a user runs it: its wall time includes Spark's start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Sequence

from dbt.adapters.hudilite.table import HudiTable

from measure import Result, Sample, Side, alternate

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEMO = os.path.join(ROOT, "integration_projects", "web_analytics")
DBT = os.path.join(os.path.dirname(sys.executable), "dbt")
HUDI_ONLY = ["--exclude", "path:models/hudi", "customer_history"]  # what dbt-spark with parquet cannot build
DAYS = ("2026-11-19", "2026-11-20", "2026-11-21")


PEERS = {  # dbt-spark's side of the demo builds: its target in the demo's profiles.yml
    "parquet": "spark_parquet",
    "hudi": "spark_hudi",  # Hudi 1.0.2's bundle, in a pyspark 3.5 virtualenv of its own
}


def dbt(args: Sequence[str], project: str, work: str, env: Dict[str, str], executable: str = DBT) -> Callable[[], None]:
    command = [executable, *args, "--project-dir", project, "--profiles-dir", project,
               "--target-path", os.path.join(work, "target"), "--log-path", os.path.join(work, "logs")]
    environment = dict(os.environ, PYSPARK_PYTHON=os.path.join(os.path.dirname(executable), "python"), **env)

    def run() -> None:
        done = subprocess.run(command, cwd=work, env=environment, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"`dbt {' '.join(args)}` failed in {work}:\n{done.stdout[-4000:]}")
    return run


def demo_builds(work: str, log, peer: str = "parquet") -> List[Result]:
    """Day by day, hudilite and dbt-spark writing `peer` (parquet or hudi) from nothing, the order
    of the two reversed every day. A `dbt parse` of each side first warms the disk cache and the
    Python imports."""
    peer_name = f"dbt-spark, file_format {peer}"
    executables = {"hudilite": DBT, peer_name: DBT}
    env = {}
    if peer == "hudi":
        from tests.referee.hudi_spark import HOME, dbt_spark_python

        executables[peer_name] = os.path.join(os.path.dirname(dbt_spark_python()), "dbt")
        env["HUDILITE_REFEREE_IVY"] = str(HOME / "ivy")  # the referee's jar cache
    sides = {}
    for name, target in (("hudilite", "dev"), (peer_name, PEERS[peer])):
        folder = tempfile.mkdtemp(prefix=f"bench-{target}-", dir=work)
        folders = {"HUDILITE_LOCATION_ROOT": os.path.join(folder, "lakehouse"),
                   "DBT_SPARK_WAREHOUSE": os.path.join(folder, "spark-warehouse")}
        dbt(["parse", "--target", target], DEMO, folder, {**env, **folders}, executables[name])()
        sides[name] = (target, folder, {**env, **folders})
    results = []
    for day, run_date in enumerate(DAYS):
        log(f"demo dbt build against {peer_name}, day {day + 1}")

        def build(name, run_date=run_date):
            target, folder, env = sides[name]
            args = ["build", "--target", target, "--vars", f"{{run_date: '{run_date}'}}", *HUDI_ONLY]
            return lambda r: dbt(args, DEMO, folder, env, executables[name])

        order = list(sides) if day % 2 == 0 else list(sides)[::-1]
        measured = alternate(None, {name: build(name) for name in order}, 1, warmups=0)
        results.append(Result(f"demo `dbt build` day {day + 1} ({'create' if day == 0 else 'incremental'}), "
                              "the 20 nodes both adapters build", measured["hudilite"],
                              measured[peer_name], 1.0, note=f"{order[0]} first"))
    return results


PROJECT_YML = "name: startup\nversion: '1.0'\nprofile: startup\nconfig-version: 2\nmodel-paths: [models]\n"
PROFILES_YML = """startup:
  target: dev
  outputs:
    dev:
      type: hudilite
      schema: analytics
      threads: 1
      location_root: "{{ env_var('HUDILITE_LOCATION_ROOT') }}"
      spark_conf: {spark.master: "local[2]"}
"""


def startup(spark, work: str, many: int, log, rounds: int) -> List[Result]:
    """`dbt run --select one_model` in a fresh process over `many` tables, next to the same
    command over 3 tables: what the catalog costs before the first model runs."""
    few = 3
    projects = {}
    for count in (few, many):
        project = os.path.join(work, f"startup-{count}")
        os.makedirs(os.path.join(project, "models"))
        with open(os.path.join(project, "dbt_project.yml"), "w") as f:
            f.write(PROJECT_YML)
        with open(os.path.join(project, "profiles.yml"), "w") as f:
            f.write(PROFILES_YML)
        with open(os.path.join(project, "models", "one_model.sql"), "w") as f:
            f.write("{{ config(materialized='table') }}\nselect count(*) as n from analytics.t_0000")
        root = os.path.join(project, "lakehouse")
        log(f"creating {count} tables for the start-up run")
        for i in range(count):
            table = HudiTable.create(spark, os.path.join(root, "analytics", f"t_{i:04d}"), f"t_{i:04d}")
            table.insert(spark.range(1).selectExpr("id", "'x' as label"))
        env = {"HUDILITE_LOCATION_ROOT": root}
        dbt(["parse"], project, project, env)()
        projects[count] = lambda r, project=project, env=env: dbt(["run", "--select", "one_model"], project, project, env)
    log(f"dbt run --select one_model over {many} and {few} tables, {rounds} rounds")
    measured = alternate(None, {f"{many}": projects[many], f"{few}": projects[few]}, rounds)
    growth = measured[f"{many}"].median - measured[f"{few}"].median
    return [Result(f"`dbt run --select one_model`, fresh process, {many} tables under location_root",
                   measured[f"{many}"], Side(f"the same over {few} tables", measured[f"{few}"].samples), 1.10),
            Result(f"catalog start-up at {many} tables (the difference of the two runs above)", Side("hudilite"),
                   goal=2.0, our_value=max(growth, 0.0), absolute_goal=True)]


SMALL_MERGE = "customer_accounts"  # the demo's merge model (unique_key, precombine, partitioned)


def small_merge_runs(work: str, log, rounds: int) -> List[Result]:
    """`dbt run --select customer_accounts` on the demo built for its first day, again with
    nothing new: its SELECT returns no rows. The node's own time (run_results.json: the
    materialization, its SELECT's Spark jobs and the write path) is the adapter's; the whole
    command adds the JVM's start and dbt's."""
    folder = tempfile.mkdtemp(prefix="bench-small-merge-", dir=work)
    env = {"HUDILITE_LOCATION_ROOT": os.path.join(folder, "lakehouse")}
    day = ["--vars", f"{{run_date: '{DAYS[0]}'}}"]
    log(f"demo built for {DAYS[0]} up to {SMALL_MERGE}")
    dbt(["build", "--select", f"+{SMALL_MERGE}", *day], DEMO, folder, env)()
    nodes, commands = Side("hudilite"), Side("hudilite")
    for r in range(rounds + 1):  # a warm-up first
        started = time.perf_counter()
        dbt(["run", "--select", SMALL_MERGE, *day], DEMO, folder, env)()
        seconds = time.perf_counter() - started
        with open(os.path.join(folder, "target", "run_results.json")) as f:
            (node,) = json.load(f)["results"]
        if "NOOP" not in str(node.get("adapter_response", {}).get("code", "")):
            raise SystemExit(f"{SMALL_MERGE} changed rows in a run with nothing new: {node.get('adapter_response')}")
        if r > 0:
            nodes.samples.append(Sample(node["execution_time"], None))
            commands.samples.append(Sample(seconds, None))
    log(f"{SMALL_MERGE} with nothing new: node {nodes.median:.2f} s, command {commands.median:.2f} s")
    return [Result(f"`dbt run` of the demo's merge model ({SMALL_MERGE}) with nothing to change: the node's "
                   f"time (run_results.json; the whole command, JVM start included: {commands.median:.1f} s)",
                   nodes, goal=3.0, absolute_goal=True)]
