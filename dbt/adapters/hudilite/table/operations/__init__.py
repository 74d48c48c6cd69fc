"""The writes a user asks for, one module each: insert (append and overwrite), upsert, and
update (SQL UPDATE and DELETE)."""
