"""The writes a user asks for, one module each: insert (append and overwrite), upsert (with
the Arrow merge of a stored slice and incoming rows in `merge`), and update (SQL UPDATE and
DELETE)."""
