"""Partition paths of Hudi's TimestampBasedKeyGenerator and CustomKeyGenerator as hudilite makes
them (no Spark): the expected folder names are those Hudi's writer made of the same values (see
tests/referee/test_hudi_keygens.py, which checks them against Hudi 0.15, 1.0 and 1.1)."""

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from dbt.adapters.hudilite.table.format import properties as props
from dbt.adapters.hudilite.table.errors import ConfigurationError, DataError
from dbt.adapters.hudilite.table.format.keygen import KeyGenerator, TimestampPartition, java_zone, joda_to_strftime

P = "hoodie.keygen.timebased."


def timestamp(field="ts", **settings):
    return TimestampPartition.from_settings({P + k.replace("_", "."): v for k, v in settings.items()}, field, "t")


def names(partition, values, kind=None):
    return partition.folder_names(pa.array(values, kind)).to_pylist()


def test_epoch_milliseconds_in_a_zone():
    tokyo = timestamp(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy/MM/dd", timezone="Asia/Tokyo")
    # 2023-11-14T22:13:20.123Z is the 15th in Tokyo; a null is 1 ms after 1970, as Hudi makes it.
    assert names(tokyo, [1700000000123, 1700090000000, None], pa.int64()) == ["2023/11/15", "2023/11/16", "1970/01/01"]
    assert tokyo.depth == 3


def test_unix_seconds_scalar_units_and_no_zone():
    seconds = timestamp(timestamp_type="UNIX_TIMESTAMP", output_dateformat="yyyy-MM-dd'T'HH", output_timezone="GMT+05:30")
    assert names(seconds, [1700000000, 0], pa.int32()) == ["2023-11-15T03", "1970-01-01T05"]
    scalar = timestamp(timestamp_type="SCALAR", timestamp_scalar_time_unit="MILLISECONDS", output_dateformat="yyyyMMddHH")
    assert names(scalar, [1700000000123, 1700090000000]) == ["2023111422", "2023111523"]  # UTC when no zone is set
    days = timestamp(timestamp_type="SCALAR", timestamp_scalar_time_unit="days", output_dateformat="yyyy-MM-dd")
    assert names(days, [19000]) == ["2022-01-08"]
    micros = timestamp(timestamp_type="EPOCHMICROSECONDS", output_dateformat="yyyy/MM/dd HH:mm:ss")
    assert names(micros, [1_700_000_000_999_999]) == ["2023/11/14 22:13:20"]  # truncated to ms, printed to seconds


def test_date_strings_read_with_input_formats_and_zones():
    plain = timestamp("d", timestamp_type="DATE_STRING", input_dateformat="yyyy-MM-dd HH:mm:ss",
                      output_dateformat="yyyy-MM-dd")
    assert names(plain, ["2024-03-05 10:11:12", "2024-03-06 23:59:59", None]) == ["2024-03-05", "2024-03-06", "1970-01-01"]
    moved = timestamp("d", timestamp_type="DATE_STRING", input_dateformat="yyyy-MM-dd HH:mm:ss,yyyy/MM/dd",
                      input_timezone="UTC", output_timezone="America/New_York", output_dateformat="yyyy/MM/dd")
    assert names(moved, ["2024-03-05 03:00:00", "2024/01/01", "2023-12-31 23:00:00"]) == [
        "2024/03/04", "2023/12/31", "2023/12/31"]
    with pytest.raises(DataError, match=r"'d' has the value 'March 5'.*hoodie\.keygen\.timebased\.input\.dateformat"):
        names(plain, ["March 5"])


def test_joda_patterns():
    assert joda_to_strftime("yyyy/MM/dd", "t", "x") == "%Y/%m/%d"
    assert joda_to_strftime("yy-MM-dd'T'HH'h''%'", "t", "x") == "%y-%m-%dT%Hh'%%"
    for pattern in ["yyyy/MMM/dd", "EEE", "yyyy-MM-dd HH:mm:ss.SSS", "'open"]:
        with pytest.raises(ConfigurationError, match="hoodie.keygen.timebased.output.dateformat"):
            timestamp(timestamp_type="EPOCHMILLISECONDS", output_dateformat=pattern)


def test_java_zone_ids():
    assert java_zone("GMT+8", "t", "x") == "+08:00"
    assert java_zone("UTC-03:30", "t", "x") == "-03:30"
    assert java_zone("GMT", "t", "x") == "UTC"
    assert java_zone("Europe/Paris", "t", "x") == "Europe/Paris"
    assert java_zone("", "t", "x") is None
    with pytest.raises(ConfigurationError, match="hoodie.keygen.timebased.timezone: 'Mars/Olympus'"):
        timestamp(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy", timezone="Mars/Olympus")


@pytest.mark.parametrize("settings, setting", [
    ({"output_dateformat": "yyyy"}, "hoodie.keygen.timebased.timestamp.type"),  # what Hudi 0.15 leaves out
    ({"timestamp_type": "MIXED", "output_dateformat": "yyyy"}, "hoodie.keygen.timebased.timestamp.type"),
    ({"timestamp_type": "UNIX_TIMESTAMP"}, "hoodie.keygen.timebased.output.dateformat"),
    ({"timestamp_type": "DATE_STRING", "output_dateformat": "yyyy"}, "hoodie.keygen.timebased.input.dateformat"),
    ({"timestamp_type": "SCALAR", "timestamp_scalar_time_unit": "FORTNIGHTS", "output_dateformat": "yyyy"},
     "hoodie.keygen.timebased.timestamp.scalar.time.unit"),
])
def test_settings_hudilite_cannot_follow_are_named(settings, setting):
    with pytest.raises(ConfigurationError, match=setting.replace(".", r"\.")):
        timestamp(**settings)
    with pytest.raises(ConfigurationError, match="hoodie.keygen.datetime.parser.class"):
        TimestampPartition.from_settings({"hoodie.keygen.datetime.parser.class": "com.acme.Parser"}, "ts", "t")


def test_column_types_a_timestamp_field_takes():
    millis = timestamp(timestamp_type="EPOCHMILLISECONDS", output_dateformat="yyyy")
    millis.check_type(T.LongType())
    with pytest.raises(ConfigurationError, match="partition column 'ts' is timestamp"):
        millis.check_type(T.TimestampType())
    with pytest.raises(ConfigurationError, match="partition column 'd' is bigint"):
        timestamp("d", timestamp_type="DATE_STRING", input_dateformat="yyyy", output_dateformat="yyyy").check_type(
            T.LongType())


def test_custom_paths_join_simple_and_timestamp_segments():
    day = timestamp("d", timestamp_type="DATE_STRING", input_dateformat="yyyy-MM-dd HH:mm:ss",
                    output_dateformat="yyyy/MM/dd")
    hive = KeyGenerator(("region", "d"), (None, day), True, "t")
    columns = [("region", pa.array(["eu", "", None])), ("d", pa.array(["2024-03-05 10:11:12"] * 3))]
    assert hive.paths(columns).to_pylist() == ["region=eu/d=2024/03/05", "region=__HIVE_DEFAULT_PARTITION__/d=2024/03/05",
                                               "region=__HIVE_DEFAULT_PARTITION__/d=2024/03/05"]
    assert hive.depth == 4 and not hive.plain
    plain = KeyGenerator(("region", "d"), (None, day), False, "t")
    assert plain.paths(columns).to_pylist()[0] == "eu/2024/03/05"
    assert KeyGenerator(("region",), (None,), False, "t").plain


def test_properties_keep_the_key_generator_and_its_settings():
    # Hudi 1.x records the generator's type, not its class; the Avro generators make the same paths.
    base = {"hoodie.table.name": "t", "hoodie.table.partition.fields": "ts", "hoodie.table.recordkey.fields": "id"}
    assert props.TableConfig.from_properties({**base, "hoodie.table.keygenerator.type": "TIMESTAMP"}).keygen_class == \
        props.KEYGEN_TIMESTAMP
    assert props.TableConfig.from_properties({**base, "hoodie.table.keygenerator.type": "CUSTOM"}).keygen_class == \
        props.KEYGEN_CUSTOM
    assert props.TableConfig.from_properties(
        {**base, "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomAvroKeyGenerator"}).keygen_class == \
        props.KEYGEN_CUSTOM
    unknown = props.TableConfig.from_properties({**base, "hoodie.table.keygenerator.type": "USER_PROVIDED"})
    assert unknown.keygen_class == "USER_PROVIDED"  # refused on write, never taken for a simple key
    config = props.TableConfig(name="t", partition_fields=["region", "d"], record_key_fields=["id"],
                               key_generator=props.KEYGEN_CUSTOM, partition_types=["SIMPLE", "TIMESTAMP"],
                               keygen_settings={P + "timestamp.type": "DATE_STRING", P + "output.dateformat": "yyyy"})
    written = config.to_properties()
    assert written["hoodie.table.partition.fields"] == "region,d"  # as Hudi keeps them at version 6
    assert written[props.PARTITION_TYPES_KEY] == "SIMPLE,TIMESTAMP"
    again = props.TableConfig.from_properties(props.loads(props.dumps(written)))
    assert (again.keygen_class, again.partition_types, again.keygen_settings) == (
        props.KEYGEN_CUSTOM, ["SIMPLE", "TIMESTAMP"], config.keygen_settings)
