"""The generated statement corpus (tests/functional/statement_corpus.py): every DML and DDL
form aimed at a hudilite table, in every spelling of its name, plain and under EXPLAIN, on a
one-file and a several-file table; in a classic session and over Spark Connect."""

import json
import os
import subprocess
import sys

from tests.functional.statement_corpus import FORMS, SPELLINGS, Corpus, generate

CONNECT_SAMPLE = 4  # spellings per form over Connect (and one EXPLAIN): see test_the_corpus_over_spark_connect


def test_the_whole_corpus_in_a_classic_session(spark, tmp_path):
    cases = generate()
    assert len(cases) == len(FORMS) * len(SPELLINGS) * 2
    report = Corpus(spark, str(tmp_path), "classic").run(cases)
    if os.environ.get("HUDILITE_CORPUS_REPORT"):  # the whole report, for a look at every failure
        with open(os.environ["HUDILITE_CORPUS_REPORT"], "w") as f:
            f.write(report.to_json())
    print(f"classic: {report.statements} statements, {report.commits} commits, {report.seconds} s, "
          f"outcomes {dict(report.outcomes)}")
    assert report.statements == 2 * len(cases)  # on each table
    assert not report.failures, "\n".join(report.failures)


def test_the_corpus_over_spark_connect(tmp_path, connect_url):
    """A Connect client cannot share this process with the classic session: the corpus runs in a
    process of its own against the suite's Connect server."""
    cases = generate(CONNECT_SAMPLE)
    covered = {c.spelling.name for c in cases if not c.explain}
    assert covered == {s.name for s in SPELLINGS}  # every spelling, across the forms
    run = subprocess.run([sys.executable, "-m", "tests.functional.statement_corpus", connect_url, str(tmp_path),
                          str(CONNECT_SAMPLE)], capture_output=True, text=True, timeout=1200,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert run.returncode == 0, run.stderr[-5000:]
    report = json.loads((tmp_path / "report.json").read_text())
    print(f"connect: {report['statements']} statements, {report['commits']} commits, {report['seconds']} s, "
          f"outcomes {report['outcomes']}")
    assert report["statements"] == 2 * len(cases)
    assert not report["failures"], "\n".join(report["failures"])
