"""A new user's first steps: `dbt init` with the adapter's profile_template.yml writes a profile
that `dbt debug` accepts, and `dbt debug` shows where tables and Spark's log go."""

import os
import subprocess
import sys

import yaml

from dbt.adapters.hudilite.credentials import HudiliteCredentials

BIN = os.path.dirname(sys.executable)

# `dbt init` offers the adapters installed into dbt's own folder; an editable install
# (`pip install -e .`) is not there, so the test offers hudilite the way a regular install does.
DBT_INIT = """
import sys
import dbt.task.init as init
init._get_adapter_plugin_names = lambda: iter(["hudilite"])
from dbt.cli.main import cli
sys.exit(cli())
"""


def test_debug_shows_the_resolved_location_root_and_the_spark_log(tmp_path, monkeypatch):
    """No Spark: the connection info `dbt debug` prints."""
    # the project folder dbt's flags name (another test's dbt command may have set them)
    monkeypatch.setattr("dbt.adapters.hudilite.credentials._project_dir", lambda: str(tmp_path))

    def shown(**profile):
        return dict(HudiliteCredentials.from_dict(dict(profile, schema="analytics")).connection_info())

    info = shown()
    assert info["location_root"].startswith(str(tmp_path / "lakehouse"))
    assert "default" in info["location_root"]
    assert os.path.isabs(info["spark_log"]) and info["spark_log"].endswith("spark.log")  # in dbt's log path
    assert "host" not in info  # meaningless for the embedded session
    info = shown(location_root="/data/lh")
    assert info["location_root"] == "/data/lh"
    remote = shown(method="connect", host="sc://h:15002", location_root="/shared/lh")
    assert remote["host"] == "sc://h:15002" and "server" in remote["spark_log"]


def test_dbt_init_writes_a_profile_dbt_debug_accepts(tmp_path):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    profiles = tmp_path / "profiles"
    # project name, adapter [1], then every prompt of profile_template.yml at its default
    init = subprocess.run([sys.executable, "-c", DBT_INIT, "init", "--profiles-dir", str(profiles)],
                          input="newbie\n1\n\n\n\n", text=True, capture_output=True, cwd=tmp_path, env=env,
                          timeout=300)
    assert init.returncode == 0, init.stdout + init.stderr
    for prompt in ("schema (", "location_root (", "threads ("):
        assert prompt in init.stdout, init.stdout
    profile = yaml.safe_load((profiles / "profiles.yml").read_text())["newbie"]["outputs"]["dev"]
    assert profile == {"type": "hudilite", "method": "session", "schema": "analytics",
                       "location_root": "lakehouse", "threads": 1}

    project = tmp_path / "newbie"
    debug = subprocess.run([os.path.join(BIN, "dbt"), "debug", "--profiles-dir", str(profiles)],
                           text=True, capture_output=True, cwd=project, env=env, timeout=600)
    assert debug.returncode == 0, debug.stdout + debug.stderr
    assert "All checks passed!" in debug.stdout
    assert f"location_root: {project / 'lakehouse'}" in debug.stdout
    assert f"spark_log: {project / 'logs' / 'spark.log'}" in debug.stdout
