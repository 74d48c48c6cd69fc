import dataclasses

from dbt.adapters.hudilite.table.format import properties as props


def test_round_trip_with_characters_java_escapes():
    original = {"a.b": "x:y=z", "path": "file:/tmp/some dir", "unicode": "caf\u00e9", "key with space": "v"}
    text = props.dumps(original)
    assert "x\\:y\\=z" in text
    assert props.loads(text) == original


def test_reads_java_written_properties():
    text = "#Updated at 2026\n#comment\nhoodie.table.name=trips\nhoodie.table.type = COPY_ON_WRITE\n" \
           "hoodie.table.partition.fields\\=x:region\nlong=first\\\n    second\n! bang comment\n"
    assert props.loads(text) == {
        "hoodie.table.name": "trips", "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.table.partition.fields=x": "region", "long": "firstsecond",
    }


def test_table_config_properties():
    config = props.TableConfig(name="events", partition_fields=["day"], record_key_fields=[], database="analytics")
    p = config.to_properties()
    assert p["hoodie.table.version"] == "6"
    assert p["hoodie.table.type"] == "COPY_ON_WRITE"
    assert p["hoodie.timeline.layout.version"] == "1"
    assert p["hoodie.table.partition.fields"] == "day"
    assert "hoodie.table.recordkey.fields" not in p  # auto-keyed
    assert p["hoodie.table.timeline.timezone"] == "UTC"
    assert p["hoodie.datasource.write.drop.partition.columns"] == "false"
    assert p["hoodie.table.checksum"] == str(props.table_checksum("analytics", "events"))
    read_back = props.TableConfig.from_properties(props.loads(props.dumps(p)))
    assert read_back == dataclasses.replace(config, key_generator=config.keygen_class)  # declared from now on


def test_key_generator_follows_the_fields():
    assert props.TableConfig("t").keygen_class == props.KEYGEN_NON_PARTITIONED
    assert props.TableConfig("t", ["d"], ["id"]).keygen_class == props.KEYGEN_SIMPLE
    assert props.TableConfig("t", ["d"], ["id", "x"]).keygen_class == props.KEYGEN_COMPLEX
    assert props.TableConfig("t", ["d", "e"], ["id"]).keygen_class == props.KEYGEN_COMPLEX


def test_checksum_is_crc32_of_database_dot_table():
    import binascii
    assert props.table_checksum("db", "t") == binascii.crc32(b"db.t")
