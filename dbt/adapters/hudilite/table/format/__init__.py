"""What Hudi puts on storage and how it is read and written: instants and the timeline, commit
metadata, table properties, Avro metadata and the log format, bloom filters, schemas, key
generators, row layouts and file groups, the metadata table."""
