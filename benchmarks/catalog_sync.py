"""Catalog sync's cost against table size (`run.py --only catalog`): a table of many partitions
synced to a real Hive metastore (the standalone server the tests start,
`tests/referee/catalog_servers.py`, on Derby), then small commits, each synced incrementally
(the partitions its commits touched) against a full comparison of the same table (every
partition of the catalog against every partition of the table, as Hudi's sync does without its
sync point), in alternating rounds. The metastore calls of one incremental sync are counted."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable, List

from measure import Result, Side, alternate, timed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Counted:
    """A catalog whose calls are counted; `full=True` forgets the sync point it reads, so that
    every sync compares all partitions."""

    def __init__(self, catalog, full: bool = False):
        self._catalog, self._full, self.calls = catalog, full, Counter()

    def __getattr__(self, name):
        method = getattr(self._catalog, name)
        if not callable(method):
            return method

        def call(*args, **kwargs):
            self.calls[name] += 1
            found = method(*args, **kwargs)
            if name == "get_table" and found is not None and self._full:
                from dbt.adapters.hudilite.catalog_sync.entry import LAST_SYNCED
                found.parameters.pop(LAST_SYNCED, None)
            return found
        return call


def run(spark, work: str, log: Callable[[str], None], quick: bool = False, rounds: int = 5) -> List[Result]:
    import sys

    sys.path.insert(0, ROOT)
    from tests.referee.catalog_servers import hive_metastore
    from dbt.adapters.hudilite.catalog_sync import CatalogSettings, connect, sync_table
    from dbt.adapters.hudilite.table import HudiTable

    partitions = 1_000 if quick else 10_000
    path = os.path.join(work, "catalog_sync")
    log(f"catalog: a table of {partitions:,} partitions")
    table = HudiTable.create(spark, path, "catalog_sync", partition_by="p")
    table.insert(spark.range(partitions).selectExpr("id", "cast(id as string) as p"))
    with hive_metastore(Path(tempfile.mkdtemp(prefix="metastore-", dir=work))) as uri:
        catalog = connect(CatalogSettings("hive", uri))
        ours, full = Counted(catalog), Counted(catalog, full=True)
        first = timed(None, lambda: sync_table(catalog, table, "bench", "t"))
        log(f"catalog: first sync of {partitions:,} partitions: {first.seconds:.1f} s")
        batch = iter(range(10**9))

        def commit_then(side, name):
            def prepare(r):
                n = next(batch)  # one new partition and one existing one, outside the timing
                table.insert(spark.createDataFrame([(partitions + n, f"new-{n}"), (n, str(n % partitions))], "id long, p string"))
                return lambda: sync_table(side, table, "bench", name)
            return prepare

        # one entry: each side syncs it after its own commit, the full side as if it had no sync point
        sides = alternate(None, {"incremental": commit_then(ours, "t"), "full": commit_then(full, "t")}, rounds)
        ours.calls.clear()
        commit_then(ours, "t")(0)()
        calls = sum(ours.calls.values())
        live = table.context.timeline.view().live_file_ids()
        assert len(catalog.partitions(_entry(table, "t"))) == len(live), "the entry does not hold the table's partitions"
        catalog.close()
    return [Result(f"catalog sync after a small commit (2 partitions) into a {partitions:,}-partition table, Hive "
                   f"metastore 3.1.3 (Derby): the partitions the commits touched ({calls} metastore calls), against "
                   "a full comparison", sides["incremental"], sides["full"], goal=0.5, absolute_goal=True,
                   note="peer: every partition compared, as without a sync point"),
            Result(f"first sync of a {partitions:,}-partition table", Side("first", [first]))]


def _entry(table, name):
    from dbt.adapters.hudilite.catalog_sync.entry import table_entry
    return table_entry("bench", name, "", table.schema(), table.config.partition_fields)
