"""A writer that will be killed: task 0 writes its file, task 1 hangs until the kill."""

import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable


def hang_in_task_1(task, value):
    if task == 1:
        time.sleep(600)
    return value


spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
table = HudiTable.open(spark, sys.argv[1])
hang = F.udf(hang_in_task_1, "long")
rows = spark.range(0, 2000, numPartitions=2).select(hang(F.spark_partition_id(), F.col("id")).alias("id"))
table.insert(rows)
