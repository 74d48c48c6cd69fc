from dataclasses import dataclass

from dbt.adapters.spark.relation import SparkRelation


@dataclass(frozen=True, eq=False, repr=False)
class HudiliteRelation(SparkRelation):
    """A Spark relation; hudilite tables are registered in the Spark catalog under their
    schema and name, so they render and resolve like any Spark table."""
