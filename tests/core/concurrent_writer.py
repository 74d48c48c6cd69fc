"""One of two processes upserting into one table at once (see test_concurrency_processes.py).

    concurrent_writer.py PATH NAME ROUNDS RETRIES

Each round upserts this writer's own keys (its partition) and the shared keys, tagged with
`NAME-round`; a ConcurrentWriteError is retried up to RETRIES times. Prints one JSON line per
round: the instant (or null when it gave up), the tag, the keys, attempts, and the wall-clock
end of the successful attempt."""

import json
import os
import sys
import time

from pyspark.sql import SparkSession

from dbt.adapters.hudilite.object_store_settings import spark_conf
from dbt.adapters.hudilite.table import ConcurrentWriteError, HudiTable

OWN_KEYS = {"p1": range(0, 10), "p2": range(10, 20)}
SHARED_KEYS = range(100, 105)

path, name, rounds, retries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
builder = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
           .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC"))
for key, value in spark_conf(path).items():  # S3A and its jars for an s3:// table, nothing otherwise
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
table = HudiTable.open(spark, path)
for r in range(rounds):
    tag = f"{name}-{r}"
    keys = list(OWN_KEYS[name]) + (list(SHARED_KEYS) if r % 2 == 0 else [])  # shared keys every other round
    rows = [(k, tag, name if k < 100 else "shared") for k in keys]
    instant, attempts = None, 0
    while instant is None and attempts <= retries:
        attempts += 1
        try:
            instant = table.upsert(spark.createDataFrame(rows, "id long, tag string, part string"))
        except ConcurrentWriteError:
            time.sleep(0.05 * attempts)
    print("ROUND " + json.dumps({"instant": instant, "tag": tag, "keys": keys, "attempts": attempts,
                                 "ended": time.time(), "pid": os.getpid()}), flush=True)
