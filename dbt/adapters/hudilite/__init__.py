"""dbt-hudilite: a dbt adapter whose tables are Apache Hudi Copy-On-Write tables."""
