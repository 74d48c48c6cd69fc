"""The adapter's small pure pieces: persist_docs storage, Python model results, contract type
names (no Spark session)."""

import pandas as pd
import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.hudilite.catalog.storage_catalog import StorageCatalog
from dbt.adapters.hudilite.column import HudiliteColumn
from dbt.adapters.hudilite.python_model import as_spark_dataframe


def test_docs_are_kept_on_storage_and_forgotten(tmp_path):
    catalog = StorageCatalog(None, str(tmp_path))
    assert catalog.docs("analytics", "orders") == (None, {})
    catalog.set_docs("analytics", "orders", "Orders, one per row", {"id": "The order's id"})
    again = StorageCatalog(None, str(tmp_path))  # a later process
    assert again.docs("analytics", "orders") == ("Orders, one per row", {"id": "The order's id"})
    assert (tmp_path / "analytics" / ".hudilite_docs" / "orders.json").exists()
    again.set_docs("analytics", "orders", None, {})
    assert again.docs("analytics", "orders") == (None, {})
    assert not (tmp_path / "analytics" / ".hudilite_docs" / "orders.json").exists()
    with pytest.raises(Exception, match="name"):
        catalog.set_docs("analytics", "../elsewhere", "x", {})


def test_a_python_model_must_return_a_dataframe():
    class Spark:
        def createDataFrame(self, frame):
            return ("spark", list(frame.columns))

    assert as_spark_dataframe(Spark(), pd.DataFrame({"a": [1]}), "m") == ("spark", ["a"])
    with pytest.raises(DbtRuntimeError, match="model 'm': model\\(\\) returned a builtins.dict; return a Spark DataFrame"):
        as_spark_dataframe(Spark(), {"a": 1}, "m")


@pytest.mark.parametrize("given, spark", [("text", "string"), ("TEXT", "string"), ("integer", "int"), ("bool", "boolean"),
                                          ("decimal(10,2)", "decimal(10,2)"), ("array<int>", "array<int>")])
def test_contract_type_names_are_sparks(given, spark):
    assert HudiliteColumn.translate_type(given) == spark
