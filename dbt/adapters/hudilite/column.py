from dataclasses import dataclass

from dbt.adapters.spark.column import SparkColumn


@dataclass
class HudiliteColumn(SparkColumn):
    """Spark's column type names; the Hudi meta columns are filtered out by the adapter."""
