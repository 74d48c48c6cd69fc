"""The machine's checks: each missing piece is one clear error, found before Spark starts a task."""

import os
import stat
import sys
from types import SimpleNamespace

import pytest

from dbt.adapters.hudilite.table import SparkEnvironmentError
from dbt.adapters.hudilite.table.spark import environment as env


@pytest.mark.parametrize("output, major", [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_392"', 8),
    ("no version here", None),
])
def test_java_major_version(output, major):
    assert env.java_major_version(output) == major


def fake_java(tmp_path, version_line):
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path / "jdk")


def test_no_java_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(SparkEnvironmentError, match=r"Spark needs Java 17 or 21, and none was found on JAVA_HOME="):
        env.check_java()


def test_an_old_java_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, 'java version "1.8.0_392"'))
    with pytest.raises(SparkEnvironmentError, match=r"is Java 8: install Java 17"):
        env.check_java()


def test_a_supported_java_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15'))
    env.check_java()


def session(master, python):
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=python))


def test_workers_without_pyarrow_are_named_once(tmp_path):
    no_pyarrow = tmp_path / "python3"
    no_pyarrow.write_text("#!/bin/sh\nexit 1\n")  # a Python that cannot import pyarrow
    no_pyarrow.chmod(no_pyarrow.stat().st_mode | stat.S_IEXEC)
    broken = session("local[2]", str(no_pyarrow))
    with pytest.raises(SparkEnvironmentError, match=f"workers run '{no_pyarrow}', which cannot import pyarrow: "
                                                    f"set PYSPARK_PYTHON={sys.executable}"):
        env.check_python_workers(broken)
    with pytest.raises(SparkEnvironmentError):  # not remembered as checked
        env.check_python_workers(broken)
    good = session("local[2]", sys.executable)
    env.check_python_workers(good)
    good.sparkContext.pythonExec = str(no_pyarrow)
    env.check_python_workers(good)  # checked once per context: no second subprocess
    env.check_python_workers(session("spark://elsewhere:7077", str(no_pyarrow)))  # a cluster's workers are its own
    assert os.path.exists(sys.executable)
