from dataclasses import dataclass
from typing import ClassVar, Dict

from dbt.adapters.spark.column import SparkColumn


@dataclass
class HudiliteColumn(SparkColumn):
    """Spark's column type names; the Hudi meta columns are filtered out by the adapter."""

    # Portable type names in a contract's data_type, as Spark calls them.
    TYPE_LABELS: ClassVar[Dict[str, str]] = {"TEXT": "string", "VARCHAR": "string", "INTEGER": "int", "BOOL": "boolean"}

    @classmethod
    def translate_type(cls, dtype: str) -> str:
        return cls.TYPE_LABELS.get(dtype.strip().upper(), dtype)
