"""hudilite's table-format core: Apache Hudi v6 Copy-On-Write tables written from PySpark.

Usable without dbt:

    from dbt.adapters.hudilite.table import HudiTable
    table = HudiTable.create(spark, "/data/events", "events", partition_by="day")
    table.insert(df)
    table.read().show()
"""

from .services.cleaner import CleanPlan
from .format.commit import CommitMetadata, WriteStat
from .errors import (ConcurrentWriteError, ConfigurationError, CorruptTableError, DataError, HudiliteError,
                     SchemaError, SparkEnvironmentError, TableReplacedError, TimelineError)
from .spark.file_sizing import FileSizing
from .format.instant import Instant
from .services.maintenance import TableServices
from .format.schema import META_COLUMNS, quote
from .storage.filesystem import Storage
from .table import HudiTable
from .spark.sessions import is_connect

__all__ = [
    "CleanPlan", "CommitMetadata", "ConcurrentWriteError", "ConfigurationError", "CorruptTableError", "DataError",
    "FileSizing", "HudiTable", "HudiliteError", "Instant", "META_COLUMNS", "SchemaError", "SparkEnvironmentError", "Storage", "TableReplacedError", "TableServices",
    "TimelineError",
    "WriteStat",
    "is_connect", "quote",
]
