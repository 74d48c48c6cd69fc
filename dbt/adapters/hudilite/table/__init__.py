"""hudilite's table-format core: Apache Hudi v6 Copy-On-Write tables written from PySpark.

Usable without dbt:

    from dbt.adapters.hudilite.table import HudiTable
    table = HudiTable.create(spark, "/data/events", "events", partition_by="day")
    table.insert(df)
    table.read().show()
"""

from .cleaner import CleanPlan
from .commit import CommitMetadata, WriteStat
from .instant import Instant
from .schema import SchemaError
from .table import HudiTable, HudiTableError
from .timeline import TimelineError
from .transaction import ConcurrentWriteError

__all__ = [
    "CleanPlan", "CommitMetadata", "ConcurrentWriteError", "HudiTable", "HudiTableError", "Instant",
    "SchemaError", "TimelineError", "WriteStat",
]
