"""Storage is the catalog: names to hudilite tables and views under location_root
(`storage_catalog`, with the naming rule in `names`), their entries in Spark's catalog
(`spark_entries`), and rebuilds swapped into a table's place (`swap`)."""
