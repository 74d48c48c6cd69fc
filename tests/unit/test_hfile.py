"""HFile (version 3) as Hudi's metadata table keeps it: what Hudi 0.15 and 1.1 wrote reads back
cell for cell, and what we write reads back, block lookups included."""

import json
import struct
from pathlib import Path

import pytest

from dbt.adapters.hudilite.table.format import hfile, metadata_record

FIXTURES = Path(__file__).with_name("fixtures")


def test_a_files_block_hudi_0_15_wrote_reads_as_its_partitions_and_files():
    reader = hfile.HFileReader.of_bytes((FIXTURES / "hudi-0.15-files-block.hfile").read_bytes())
    schema = (FIXTURES / "hudi-0.15-files-block.schema.json").read_text()
    records = {row.decode(): metadata_record.decode(value, schema) for row, value in reader.scan()}
    assert list(records) == ["__all_partitions__", "region=ap", "region=eu", "region=us"]
    assert metadata_record.listed(records["__all_partitions__"]) == {"region=ap": 0, "region=eu": 0, "region=us": 0}
    assert [r["type"] for r in records.values()] == [1, 2, 2, 2]
    files = metadata_record.listed(records["region=eu"])
    assert len(files) == 1 and next(iter(files)).endswith("_20261128074836263.parquet") and next(iter(files.values())) > 400_000
    assert reader.trailer.codec == hfile.GZ and len(reader) == 4
    assert reader.get([b"region=us", b"region=zz", b"a"]).keys() == {b"region=us"}


def test_a_record_index_file_hudi_1_1_wrote_reads_as_keys_and_locations():
    reader = hfile.HFileReader.of_bytes((FIXTURES / "hudi-1.1.1-record-index-0000.hfile").read_bytes())
    schema = reader.file_info[b"schema"].decode()
    assert "SecondaryIndexMetadata" in schema  # 1.1's schema, newer than ours: read with the writer's
    found = {row.decode(): metadata_record.location_of(metadata_record.decode(value, schema))
             for row, value in reader.scan()}
    assert found == {
        "13": metadata_record.Location("region=us", "32e9b125-51c5-49db-b46d-331a4c668360-0"),
        "2": metadata_record.Location("region=ap", "a5dc84df-bd16-427d-8a31-57141bf8abff-0"),
        "22": metadata_record.Location("region=us", "32e9b125-51c5-49db-b46d-331a4c668360-0")}
    # Hudi maps a key to its record_index file group by Java's String.hashCode: all three in group 0 of 10
    assert {metadata_record.shard_of(key, 10) for key in found} == {0}


@pytest.mark.parametrize("codec", [hfile.GZ, hfile.NO_COMPRESSION])
def test_what_we_write_reads_back_across_many_blocks(codec):
    cells = [(f"key-{i:06d}".encode(), f"value {i}".encode() * (i % 7)) for i in range(5000)]
    data = hfile.write(cells, {b"schema": b"{}"}, block_size=4096, codec=codec)
    reader = hfile.HFileReader.of_bytes(data)
    assert list(reader.scan()) == cells
    assert reader.trailer.data_index_count > 10 and len(reader) == 5000
    assert reader.file_info[b"schema"] == b"{}" and reader.file_info[b"hfile.LASTKEY"] == hfile.cell_key(b"key-004999")
    wanted = [b"key-000000", b"key-002500", b"key-004999", b"key-0025", b"zzz"]
    assert reader.get(wanted) == {k: v for k, v in cells if k in wanted}
    # Only the blocks that may hold a wanted key are read
    reads = []
    counted = hfile.HFileReader(lambda offset, length: reads.append(length) or data[offset:offset + length], len(data))
    reads.clear()
    counted.get([b"key-002500"])
    assert len(reads) == 1 and reads[0] < len(data) // 10


def test_blocks_carry_hbase_headers_and_crc32_checksums():
    data = hfile.write([(b"a", b"1")], codec=hfile.NO_COMPRESSION)
    magic, on_disk, uncompressed, previous, checksum_type, per_chunk, with_header = hfile.HEADER.unpack_from(data)
    assert (magic, previous, checksum_type, per_chunk) == (b"DATABLK*", -1, 1, 16384)
    import zlib
    assert struct.unpack_from(">I", data, with_header)[0] == zlib.crc32(data[:with_header])
    assert on_disk == with_header - hfile.HEADER.size + 4
    assert struct.unpack(">i", data[-4:])[0] == 3 | 3 << 24 and data[-hfile.TRAILER_SIZE:].startswith(b'TRABLK"$')


def test_rows_out_of_order_or_repeated_are_refused():
    with pytest.raises(hfile.HFileError, match="ascend"):
        hfile.write([(b"b", b""), (b"a", b"")])
    with pytest.raises(hfile.HFileError, match="ascend"):
        hfile.write([(b"a", b""), (b"a", b"")])


def test_an_empty_file_and_a_truncated_one():
    empty = hfile.HFileReader.of_bytes(hfile.write([]))
    assert list(empty.scan()) == [] and empty.get([b"x"]) == {}
    with pytest.raises(hfile.HFileError):
        hfile.HFileReader.of_bytes(hfile.write([(b"a", b"1")])[:-10])


def test_metadata_records_keep_hudis_encodings():
    assert metadata_record.java_string_hash("hello") == 99162322
    assert metadata_record.java_string_hash("polygenelubricants") == -2**31  # Integer.MIN_VALUE
    assert metadata_record.shard_of("polygenelubricants", 10) == 2**31 % 10
    assert metadata_record.instant_millis("20261128074934596") == 1795852174596
    info = metadata_record.location("region=ap", "4c56b53e-3fec-4ce6-b8a8-f248838913c8-0", "20261128074934596")
    assert (info["fileIdHighBits"], info["fileIdLowBits"], info["fileIndex"], info["fileIdEncoding"]) == (
        5500783273844690150, -5140592581385055288, 0, 0)  # as Hudi 0.15 stored this fileId
    raw = metadata_record.record_index("", "not-a-uuid", "20261128074934596")
    assert metadata_record.location_of(raw) == metadata_record.Location("", "not-a-uuid")
    round_trip = metadata_record.decode(metadata_record.encode(metadata_record.record_index("p", "4c56b53e-3fec-4ce6-b8a8-f248838913c8-3", "20261128074934596")))
    assert metadata_record.location_of(round_trip) == metadata_record.Location("p", "4c56b53e-3fec-4ce6-b8a8-f248838913c8-3")


def test_files_records_fold_newest_over_oldest():
    base = metadata_record.file_list({"a": 10, "b": 20})
    log = metadata_record.file_list({"c": 5, "a": 12}, deleted=["b"])
    folded = metadata_record.fold_files(metadata_record.fold_files(None, base), log)
    assert metadata_record.listed(folded) == {"a": 12, "c": 5}
    assert json.dumps(metadata_record.SCHEMA)  # the schema is plain JSON


def test_shards_of_many_keys_equal_javas_hash_key_by_key():
    import random
    import string

    import numpy as np
    import pyarrow as pa

    rng = random.Random(7)
    keys = ["".join(rng.choice(string.printable) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    keys += ["polygenelubricants", "héllo", "日本語", "𝄞x", ""]
    array = pa.array(keys)
    assert list(metadata_record.shards_of(array, 10)) == [metadata_record.shard_of(k, 10) for k in keys]
    assert list(metadata_record.shards_of(array.slice(5, 50), 7)) == [metadata_record.shard_of(k, 7) for k in keys[5:55]]
    assert metadata_record.shards_of(pa.array([], pa.string()), 3).tolist() == []
    assert isinstance(metadata_record.shards_of(pa.array(["a"], pa.large_string()), 2), np.ndarray)
