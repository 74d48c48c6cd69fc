"""The core's errors: one base, and a class per kind of cause, so that callers (the dbt
adapter, the CLI) react to the kind and never to a message or a builtin exception type.

- `ConfigurationError`: the request cannot work with this table (a setting, a column the
  rows lack, an instant that does not exist). Nothing was written.
- `SchemaError`: the new rows' columns do not fit the table schema (a `ConfigurationError`).
- `TimelineError`: an instant asked for is not on the timeline or was cleaned.
- `DataError`: the rows themselves break the table's rules (a duplicate or null record key).
- `ConcurrentWriteError`: another writer holds the table.
- `CorruptTableError`: what is on storage contradicts the timeline.
- `SparkEnvironmentError`: the machine cannot run Spark or its Python workers (no Java, an
  unsupported Java, workers that cannot import pyarrow). Nothing was started or written.
"""


class HudiliteError(Exception):
    """Base of every error the table-format core raises on purpose."""


class ConfigurationError(HudiliteError, ValueError):
    pass


class SchemaError(ConfigurationError):
    pass


class TimelineError(ConfigurationError):
    pass


class DataError(HudiliteError, ValueError):
    pass


class ConcurrentWriteError(HudiliteError, RuntimeError):
    pass


class TableReplacedError(HudiliteError, RuntimeError):
    """The table at a path is no longer the one a handle opened (dropped, or a rebuild swapped
    in): nothing was published, and retrying with that handle would not help."""


class CorruptTableError(HudiliteError, RuntimeError):
    pass


class SparkEnvironmentError(HudiliteError, RuntimeError):
    pass
