"""The generated statement corpus (tests/functional/statement_corpus.py): every DML and DDL
form aimed at a hudilite table, in every spelling of its name, plain and under EXPLAIN, on a
one-file and a several-file table; in a classic session and over Spark Connect."""

import json
import os
import subprocess
import sys

import pytest

from tests.core.process_groups import kill_group
from tests.functional.statement_corpus import FORMS, SPELLINGS, WRITER_FORMS, generate
from tests.selection import selected_cases

CONNECT_SAMPLE = 4  # spellings per form over Connect (and one EXPLAIN): see test_the_corpus_over_spark_connect
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 1800


def _start_corpus(url: str, folder, sample: int) -> subprocess.Popen:
    """The corpus in a process of its own (`statement_corpus.main`): a fresh session whatever
    earlier tests left in the suite's, and a Connect client apart from the classic session."""
    with open(folder / "stdout.txt", "w") as out, open(folder / "stderr.txt", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.functional.statement_corpus", url, str(folder), str(sample)],
                                stdout=out, stderr=err, cwd=ROOT, start_new_session=True)


def _report(run: subprocess.Popen, folder) -> dict:
    try:
        run.wait(timeout=TIMEOUT_S)
    finally:
        kill_group(run)  # its JVM and Python workers, if it timed out
    assert run.returncode == 0, (folder / "stderr.txt").read_text()[-5000:]
    return json.loads((folder / "report.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def classic_corpus(request, tmp_path_factory):
    """The whole corpus in a classic session, started as the module starts (when its test is
    selected): it runs while the Connect corpus does, each in a process and a JVM of its own."""
    if not selected_cases(request, "test_the_whole_corpus_in_a_classic_session"):
        yield None
        return
    folder = tmp_path_factory.mktemp("classic_corpus")
    run = _start_corpus("local", folder, 0)
    yield run, folder
    kill_group(run)


def test_the_corpus_over_spark_connect(tmp_path, connect_url):
    """Against the suite's Connect server (a rotating sample of spellings: see CONNECT_SAMPLE)."""
    cases = generate(CONNECT_SAMPLE)
    covered = {c.spelling.name for c in cases if not c.explain}
    assert covered == {s.name for s in SPELLINGS}  # every spelling, across the forms
    report = _report(_start_corpus(connect_url, tmp_path, CONNECT_SAMPLE), tmp_path)
    print(f"connect: {report['statements']} statements, {report['commits']} commits, {report['seconds']} s, "
          f"outcomes {report['outcomes']}")
    assert report["statements"] == 2 * (len(cases) + len(WRITER_FORMS))
    assert not report["failures"], "\n".join(report["failures"])


def test_the_whole_corpus_in_a_classic_session(classic_corpus):
    assert len(generate()) == len(FORMS) * len(SPELLINGS) * 2
    report = _report(*classic_corpus)
    print(f"classic: {report['statements']} statements, {report['commits']} commits, {report['seconds']} s, "
          f"outcomes {report['outcomes']}")
    assert report["statements"] == 2 * (len(generate()) + len(WRITER_FORMS))  # on each table
    assert not report["failures"], "\n".join(report["failures"])
