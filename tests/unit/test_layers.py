"""The layers written down in .importlinter hold (docs/development.md draws them): each room of
the core imports only the rooms below it, the core never imports the adapter, and no import
cycle runs among the core's rooms. No Spark."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "dbt", "adapters", "hudilite")


def lint(package_dir, tmp_path):
    """`lint-imports` over the package at `package_dir`, seen as the top-level package `hudilite`
    (its import graph needs a top-level package, and `dbt` is dbt-core's regular package)."""
    view = tmp_path / "view"
    view.mkdir()
    os.symlink(package_dir, view / "hudilite")
    linter = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    return subprocess.run([linter, "--config", os.path.join(ROOT, ".importlinter"), "--no-cache"], cwd=view,
                          env={**os.environ, "PYTHONPATH": str(view)}, capture_output=True, text=True, timeout=300)


def test_the_layers_hold(tmp_path):
    run = lint(PACKAGE, tmp_path)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "7 kept, 0 broken" in run.stdout


def test_an_import_up_a_layer_fails_naming_the_rule(tmp_path):
    """The check bites: a copy of the package whose format room imports an operation."""
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "table" / "format" / "timeline.py", "a") as f:
        f.write("\nfrom ..operations import upsert  # noqa\n")
    run = lint(str(copy), tmp_path)
    assert run.returncode == 1
    assert "The core's rooms are layered" in run.stdout and "BROKEN" in run.stdout
    assert "hudilite.table.format.timeline -> hudilite.table.operations.upsert" in run.stdout
