"""A rebuild's swap on an object store, killed (SIGKILL) half-way, without Spark, for the
rebuilds scenario of tests/core/s3_table_job.py:

    HUDILITE_KILL_AT=swap|move python -m tests.core.swap_killer ROOT SCHEMA NAME INSTANT

`swap`: the old table deleted, the rebuild not moved in; `move`: every object of the rebuild
copied but its hoodie.properties. Its leases last 3 s (30 s by default), so the next look at
the name waits out a short one before it finishes the swap.
"""

import sys


def main(root: str, schema: str, name: str, instant: str) -> None:
    from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
    from dbt.adapters.hudilite.table.storage import lock

    lock.TableLock.__init__.__defaults__ = (lock.WAIT_S, 3.0, 0.3)  # wait_s, lease_s, renew_s
    catalog = StorageCatalog(None, root)
    catalog.swaps.swap_in(schema, name, instant, drop_entry=lambda: None)  # no Spark here: no entry to drop
    print("NOT KILLED", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
