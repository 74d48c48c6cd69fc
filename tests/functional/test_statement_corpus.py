"""The generated statement corpus (tests/functional/statement_corpus.py): every DML and DDL
form aimed at a hudilite table, in every spelling of its name, plain and under EXPLAIN, on a
one-file and a several-file table; in a classic session and over Spark Connect."""

import json
import os
import subprocess
import sys

from tests.functional.statement_corpus import FORMS, SPELLINGS, WRITER_FORMS, generate

CONNECT_SAMPLE = 4  # spellings per form over Connect (and one EXPLAIN): see test_the_corpus_over_spark_connect


def _run_corpus(url: str, folder, sample: int) -> dict:
    """The corpus in a process of its own (`statement_corpus.main`): a fresh session whatever
    earlier tests left in the suite's, and a Connect client apart from the classic session."""
    run = subprocess.run([sys.executable, "-m", "tests.functional.statement_corpus", url, str(folder), str(sample)],
                         capture_output=True, text=True, timeout=1800,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert run.returncode == 0, run.stderr[-5000:]
    return json.loads((folder / "report.json").read_text())


def test_the_whole_corpus_in_a_classic_session(tmp_path):
    assert len(generate()) == len(FORMS) * len(SPELLINGS) * 2
    report = _run_corpus("local", tmp_path, 0)
    print(f"classic: {report['statements']} statements, {report['commits']} commits, {report['seconds']} s, "
          f"outcomes {report['outcomes']}")
    assert report["statements"] == 2 * (len(generate()) + len(WRITER_FORMS))  # on each table
    assert not report["failures"], "\n".join(report["failures"])


def test_the_corpus_over_spark_connect(tmp_path, connect_url):
    """Against the suite's Connect server (a rotating sample of spellings: see CONNECT_SAMPLE)."""
    cases = generate(CONNECT_SAMPLE)
    covered = {c.spelling.name for c in cases if not c.explain}
    assert covered == {s.name for s in SPELLINGS}  # every spelling, across the forms
    report = _run_corpus(connect_url, tmp_path, CONNECT_SAMPLE)
    print(f"connect: {report['statements']} statements, {report['commits']} commits, {report['seconds']} s, "
          f"outcomes {report['outcomes']}")
    assert report["statements"] == 2 * (len(cases) + len(WRITER_FORMS))
    assert not report["failures"], "\n".join(report["failures"])
