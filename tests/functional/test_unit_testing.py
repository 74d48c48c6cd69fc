"""dbt unit tests (`unit_tests:` in yml) on hudilite: dbt-tests-adapter's suites with Spark's
literals and type names."""

import pytest

from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing import test_quoted_reserved_word_column_names as quoted
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes


class TestUnitTestingTypes(BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self):
        # sql value, the same value in a yml fixture
        return [
            ["1", "1"],
            ["2.0", "2.0"],
            ["'12345'", "12345"],
            ["'string'", "string"],
            ["true", "true"],
            ["date '2011-11-11'", "2011-11-11"],
            ["timestamp '2013-11-03 00:00:00'", "2013-11-03 00:00:00"],
            ["cast(1.5 as decimal(10,2))", "1.5"],
        ]


class TestUnitTestCaseInsensitivity(BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInput(BaseUnitTestInvalidInput):
    pass


class TestUnitTestQuotedReservedWordColumnNames(quoted.BaseUnitTestQuotedReservedWordColumnNames):
    @pytest.fixture(scope="class")
    def models(self):
        return {"my_model.sql": quoted.my_model_sql,
                "my_upstream_model.sql": "select 1 as `GROUP`",  # Spark quotes with backticks
                "unit_tests.yml": quoted.test_my_model_csv_fixtures_yml}
