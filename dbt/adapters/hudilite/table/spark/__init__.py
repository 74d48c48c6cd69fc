"""What runs on Spark: the executor-side writer and reader, task placement, file sizing, and
the checks of a session's environment."""
