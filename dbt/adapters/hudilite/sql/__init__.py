"""SQL statements aimed at hudilite tables: what a statement is (`statement`), read by Spark's
parser (`plan_reader`) or from its text over Spark Connect (`text_reader`), the reading of
names and EXECUTE IMMEDIATE that both share (`reader`), and the router that carries out a write
through the core or refuses it (`dml`)."""
