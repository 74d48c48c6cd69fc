import os
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from tests.referee.hudi_spark import HUDI_VERSIONS, HudiSpark, referee_python
from tests.referee.table_states import STATES, created_at

# (state, hudi version) -> [checks passed, checks run]; printed as a matrix after the run.
MATRIX = defaultdict(lambda: [0, 0])


def pytest_collection_finish(session):
    """When referee tests were selected, the referee's Python (a virtualenv with pyspark 3.5 under
    $HUDILITE_REFEREE_HOME, made once: a pip install of minutes when the cache is empty) is made
    in a thread as the run starts, while the tests before them run; `HudiSpark` waits for it (the
    cache's lock) and fails as before if it could not be made."""
    here = Path(__file__).parent
    if any(here in Path(str(item.path)).parents for item in session.items):
        threading.Thread(target=_make_referee_python, name="referee-python", daemon=True).start()


def _make_referee_python():
    try:
        referee_python()
    except Exception:  # noqa: BLE001 - the first referee test makes it again and reports why not
        pass


@pytest.fixture(scope="session")
def referees(request):
    """`referees(version)`: the referee of `version`, and the next selected version's started in
    the background, so that its JVM starts while this version's tests run."""
    selected = [v for v in HUDI_VERSIONS if any(item.callspec.params.get("hudi_spark") == v
                                                for item in request.session.items if hasattr(item, "callspec"))]
    started = {}

    def referee(version):
        if version not in started:
            started[version] = HudiSpark(version, wait=False)
        later = selected[selected.index(version) + 1:] if version in selected else []
        if later and later[0] not in started:
            started[later[0]] = HudiSpark(later[0], wait=False)
        return started[version]
    yield referee
    for process in started.values():  # the ones whose tests did not run
        process.close()


@pytest.fixture(scope="session", params=HUDI_VERSIONS, ids=lambda v: f"hudi-{v}")
def hudi_spark(request, referees):
    """Hudi's own Spark datasource, one version at a time. A referee that cannot start fails
    the tests that need it: it is never a skip."""
    referee = referees(request.param)
    yield referee.wait_ready()
    referee.close()


@pytest.fixture(scope="session")
def written(spark, tmp_path_factory):
    """`written(state)`: the table `table_states.STATES[state]` builds, built once per run."""
    root = tmp_path_factory.mktemp("referee")
    tables = {}

    def build(state, version=6):
        """The table of `state`, built at Hudi table `version`."""
        key = state if version == 6 else f"{state}@v{version}"
        if key not in tables:
            with created_at(version):
                tables[key] = STATES[state](spark, os.path.join(str(root), key))
        return tables[key]
    return build


def pytest_terminal_summary(terminalreporter):
    if not MATRIX:
        return
    versions = sorted({v for _, v in MATRIX})
    states = sorted({s for s, _ in MATRIX})
    width = max(len(s) for s in states)
    write = terminalreporter.write_line
    terminalreporter.section("what Hudi's own Spark reader reads of our tables (checks passed / run)")
    write(f"{'table state':<{width}}  " + "  ".join(f"{'hudi ' + v:>11}" for v in versions))
    for state in states:
        cells = []
        for v in versions:
            cell = MATRIX.get((state, v), (0, 0))
            if isinstance(cell, str):  # a table version that Hudi release refuses
                cells.append(f"{cell:>11}")
                continue
            passed, run = cell
            cells.append(f"{('ok ' if passed == run else 'FAIL ') + f'{passed}/{run}':>11}" if run else f"{'-':>11}")
        write(f"{state:<{width}}  " + "  ".join(cells))
