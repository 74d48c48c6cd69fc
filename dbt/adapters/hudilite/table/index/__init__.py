"""Indexes from record keys to file groups: the `TableIndex` interface (`table_index`), the
record index (`record_index`), the key-range index (`key_ranges`) and their files (`files`)."""
