"""`method: connect`: every materialization through a real Spark Connect server (its own JVM,
started from the installed pyspark), with no JVM in the dbt process. A Connect client and a
classic session cannot share a process (pyspark switches its functions module process-wide),
so dbt runs in subprocesses here and the test reads the tables from storage."""

import os
import subprocess
import sys


from dbt.adapters.hudilite.table import HudiTable
from tests.core.hudi_rs import assert_hudi_rs_agrees
from tests.functional.demo_project import assert_two_demo_days, dbt_build

DBT = os.path.join(os.path.dirname(sys.executable), "dbt")



def test_the_demo_project_builds_over_spark_connect(spark, tmp_path, connect_url):
    lakehouse = tmp_path / "lakehouse"
    env = dict(os.environ, HUDILITE_CONNECT_URL=connect_url, HUDILITE_LOCATION_ROOT=str(lakehouse))
    for run_date in ("2026-11-20", "2026-11-21"):
        # the data tests run in the project below (suite time: they cost 15 s a day here)
        build = dbt_build(tmp_path, env, run_date, "--target", "connect", "--exclude-resource-type", "test")
        assert build.returncode == 0, build.stdout[-5000:]
        assert "PASS=14 WARN=0 ERROR=0 SKIP=0" in build.stdout
    assert not os.path.exists(tmp_path / "logs" / "spark.log")  # no JVM started on this side
    assert_two_demo_days(spark, lakehouse)


PROFILE = """
connect_check:
  target: connect
  outputs:
    connect:
      type: hudilite
      method: connect
      host: "{url}"
      schema: shop
      threads: 1
      location_root: "{root}"
"""
MACROS = """
{% macro write_orders() %}
  {% do run_query("insert into shop.orders_py (id, amount, doubled) values (4, 40, 80)") %}
  {% do run_query("update shop.orders_py set amount = amount + 1 where id = 1") %}
  {% do run_query("delete from shop.orders_py where id = 2") %}
  {% do run_query("create table shop.big_orders as select id, amount from shop.orders_py where amount > 20") %}
{% endmacro %}

{% macro merge_orders() %}
  {% do run_query("merge into shop.orders_py t using (select 1 as id) s on t.id = s.id when matched then delete") %}
{% endmacro %}
"""


def test_python_models_and_sql_writes_over_spark_connect(spark, tmp_path, connect_url):
    project, root = tmp_path / "project", tmp_path / "lakehouse"
    for folder in ("models", "seeds", "macros"):
        (project / folder).mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: connect_check\nversion: '1.0'\nprofile: connect_check\n")
    (project / "profiles.yml").write_text(PROFILE.format(url=connect_url, root=root))
    (project / "seeds" / "orders.csv").write_text(
        "id,amount,ordered_at\n1,10,2026-11-23 09:00:00\n2,20,2026-11-23 12:00:00\n3,30,2026-11-24 08:00:00\n")
    (project / "models" / "large_orders.sql").write_text(
        "{{ config(materialized='ephemeral') }} select id, amount from {{ ref('orders') }} where amount >= 20")
    (project / "models" / "large_order_ids.sql").write_text(
        "{{ config(materialized='table') }} select id from {{ ref('large_orders') }}")
    (project / "models" / "orders_by_day.sql").write_text(
        "{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ordered_at', "
        "begin='2026-11-23', batch_size='day', partition_by='order_date') }}\n"
        "select id, amount, ordered_at, cast(ordered_at as date) as order_date from {{ ref('orders') }}")
    (project / "models" / "orders_py.py").write_text(
        "def model(dbt, session):\n"
        "    dbt.config(materialized='table')\n"
        "    orders = dbt.ref('orders')\n"
        "    return orders.withColumn('doubled', orders.amount * 2)\n")
    (project / "models" / "schema.yml").write_text(
        "models:\n  - name: orders_py\n    columns:\n      - name: id\n        data_tests: [unique, not_null]\n"
        "seeds:\n  - name: orders\n    config:\n      event_time: ordered_at\n")
    (project / "macros" / "writes.sql").write_text(MACROS)

    def dbt(*args):
        return subprocess.run([DBT, *args, "--project-dir", str(project), "--profiles-dir", str(project)],
                              capture_output=True, text=True, timeout=600, cwd=project)

    build = dbt("build", "--event-time-start", "2026-11-23", "--event-time-end", "2026-11-25")
    assert build.returncode == 0, build.stdout[-4000:]
    assert "PASS=6 WARN=0 ERROR=0 SKIP=0" in build.stdout  # seed, Python model and its 2 tests, table, microbatch
    writes = dbt("run-operation", "write_orders")
    assert writes.returncode == 0, writes.stdout[-4000:]
    orders = HudiTable.open(spark, str(root / "shop" / "orders_py"))
    before = [i.timestamp for i in orders.timeline()]
    merge = dbt("run-operation", "merge_orders")
    assert merge.returncode != 0 and "shop.orders_py is a hudilite table: MERGE INTO is not supported" in merge.stdout

    assert sorted((r.id, r.amount, r.doubled) for r in orders.read().collect()) == [(1, 11, 20), (3, 30, 60),
                                                                                    (4, 40, 80)]
    assert [i.action for i in orders.timeline()] == ["commit"] * 4  # built, INSERT, UPDATE, DELETE
    assert [i.timestamp for i in orders.timeline()] == before  # the refused MERGE wrote nothing
    large = HudiTable.open(spark, str(root / "shop" / "large_order_ids"))  # through an ephemeral model
    assert sorted(r.id for r in large.read().collect()) == [2, 3]
    by_day = HudiTable.open(spark, str(root / "shop" / "orders_by_day"))  # one batch a day, each its partition
    assert sorted((r.id, str(r.order_date)) for r in by_day.read().collect()) == [
        (1, "2026-11-23"), (2, "2026-11-23"), (3, "2026-11-24")]
    assert len(by_day.timeline()) == 2
    big = HudiTable.open(spark, str(root / "shop" / "big_orders"))
    assert sorted((r.id, r.amount) for r in big.read().collect()) == [(3, 30), (4, 40)]
    for table in (orders, big, large, by_day):
        assert table.validate() == []
        assert_hudi_rs_agrees(table)
    assert not [f for f in os.listdir(root / "shop" / "orders_py") if f.startswith("part-")]  # no Spark writer


def test_a_server_that_is_not_there_is_one_clear_error(tmp_path):
    from tests.cluster import _free_port

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: connect_check\nversion: '1.0'\nprofile: connect_check\n")
    url = f"sc://127.0.0.1:{_free_port()}"
    (project / "profiles.yml").write_text(PROFILE.format(url=url, root=tmp_path / "lakehouse"))
    (project / "models" / "one.sql").write_text("select 1 as id")
    run = subprocess.run([DBT, "run", "--project-dir", str(project), "--profiles-dir", str(project)],
                         capture_output=True, text=True, timeout=300, cwd=project)
    assert run.returncode != 0
    assert f"cannot use the Spark Connect server at {url}: failed to connect to all addresses" in run.stdout
