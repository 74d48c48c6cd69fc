"""dbt Python models: `def model(dbt, session)` runs on the driver with the connection's
SparkSession; the DataFrame it returns is built as a SQL model's rows are (the same core,
materializations and strategies). The work stays on the executors: `dbt.ref()` and
`dbt.source()` return lazy Spark DataFrames over the storage catalog."""

from __future__ import annotations

import sys
import traceback
from typing import Any, Sequence

from dbt_common.exceptions import DbtRuntimeError

from .catalog.storage_catalog import StorageCatalog
from .sql.dml import run_statement
from .table import ConfigurationError


def run_python_model(catalog: StorageCatalog, code: str, name: str, this: Sequence[str]):
    """Run the compiled model (the user's code and dbt's `dbtObj` postfix) and return its
    result as a Spark DataFrame; errors name the model and the line that failed."""
    spark = catalog.spark
    filename = f"<python model {name}>"
    namespace: dict = {"__name__": f"dbt_python_model_{name}", "spark": spark}  # dbt-spark's models use `spark` too
    try:
        exec(compile(code, filename, "exec", dont_inherit=True), namespace)
        if not callable(namespace.get("model")):
            raise DbtRuntimeError(f"model '{name}': a Python model defines `def model(dbt, session)`")
        catalog.resolve([tuple(this)])  # `dbt.this` in session.sql() reads the table's latest commit
        dbt = namespace["dbtObj"](lambda relation: run_statement(catalog, f"select * from {relation}"))
        # what the model did through Spark itself (saveAsTable, session.sql) must leave our entries ours
        try:
            result = namespace["model"](dbt, spark)
        except BaseException:
            _check_entries(catalog, name, failed=True)
            raise
        _check_entries(catalog, name, failed=False)
    except DbtRuntimeError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's code: report where it failed
        lines = [f.lineno for f in traceback.extract_tb(sys.exc_info()[2]) if f.filename == filename and f.lineno]
        where = f" (line {lines[-1]}: {code.splitlines()[lines[-1] - 1].strip()})" if lines else ""
        raise DbtRuntimeError(f"model '{name}': {type(err).__name__}: {err}{where}") from None
    return as_spark_dataframe(spark, result, name)


def _check_entries(catalog: StorageCatalog, name: str, failed: bool) -> None:
    """Fail the model when it changed a hudilite table's catalog entry or files through Spark
    (the entry is registered again first); after a model that failed, only re-register."""
    try:
        catalog.check_entries(files=True)
    except ConfigurationError as err:
        if not failed:
            raise DbtRuntimeError(f"model '{name}': {err}") from None


def as_spark_dataframe(spark, result: Any, name: str):
    """A Spark DataFrame from what a model returned: Spark's own, pandas-on-Spark or pandas."""
    from pyspark.sql import DataFrame

    if isinstance(result, DataFrame):  # classic or Spark Connect: both subclass it
        return result
    if hasattr(result, "to_spark") and type(result).__module__.startswith("pyspark.pandas"):
        return result.to_spark()
    if type(result).__module__.startswith("pandas") and type(result).__name__ == "DataFrame":
        return spark.createDataFrame(result)
    raise DbtRuntimeError(f"model '{name}': model() returned a {type(result).__module__}.{type(result).__name__}; "
                          "return a Spark DataFrame (or a pandas or pandas-on-Spark one)")
