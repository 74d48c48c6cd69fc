"""What kind of Spark session the core was given: a classic one (a JVM beside this process)
or a Spark Connect client (Spark runs in a server; only DataFrame plans cross)."""

from __future__ import annotations


def is_connect(spark) -> bool:
    """A Spark Connect session: Spark runs in a server, and no JVM is on this side."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
