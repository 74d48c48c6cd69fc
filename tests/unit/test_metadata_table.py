"""Dropping Hudi's metadata table (`MetadataTable.drop`) as Hudi's writer does with the
metadata table off: the properties stop listing it first, then its folder goes; a drop killed
between the two leaves a folder no reader looks at, which the next drop removes. A dropped
table keeps none from then on (`hudilite.metadata.enable=false`)."""

import pytest

from dbt.adapters.hudilite.table.metadata.table import ENABLE_KEY, MetadataTable
from dbt.adapters.hudilite.table.format import properties as props
from dbt.adapters.hudilite.table.storage.filesystem import Storage

JAVA_PROPERTIES = """#Updated at 2026-11-26T08:13:03Z
hoodie.table.name=accounts
hoodie.table.type=COPY_ON_WRITE
hoodie.table.version=6
hoodie.table.metadata.partitions=files
hoodie.table.metadata.partitions.inflight=
hoodie.table.checksum=63966298
"""


def java_table(tmp_path):
    hoodie = tmp_path / ".hoodie"
    (hoodie / "metadata" / "files").mkdir(parents=True)
    (hoodie / "metadata" / "files" / "files-0000-0_0-0-0_20261126.hfile").write_bytes(b"x")
    (hoodie / "hoodie.properties").write_text(JAVA_PROPERTIES)
    (hoodie / ".hoodie.properties.crc").write_bytes(b"crc of the old file")
    return Storage(str(tmp_path)), hoodie


def test_a_drop_killed_before_the_folder_went_is_finished_by_the_next(tmp_path, monkeypatch):
    storage, hoodie = java_table(tmp_path)

    def killed(self, rel):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Storage, "delete_dir", killed)
    with pytest.raises(KeyboardInterrupt):
        MetadataTable(storage).drop()
    monkeypatch.undo()
    listed = props.loads((hoodie / "hoodie.properties").read_text())
    assert listed["hoodie.table.metadata.partitions"] == "" and listed["hoodie.table.checksum"] == "63966298"
    assert listed[ENABLE_KEY] == "false" and not MetadataTable(storage).is_kept()
    assert (hoodie / "metadata").is_dir() and not (hoodie / ".hoodie.properties.crc").exists()
    assert props.TableConfig.from_properties(listed).not_writable is None  # writable already

    assert MetadataTable(storage).drop() is True  # the folder left behind goes
    assert not (hoodie / "metadata").exists()
    text = (hoodie / "hoodie.properties").read_text()
    assert not text.startswith(props.SAVED_BY_HUDILITE)  # still read as a table Java made
    assert MetadataTable(storage).drop() is False


def test_a_table_without_a_metadata_table_is_left_as_it_is(tmp_path):
    storage, hoodie = java_table(tmp_path)
    MetadataTable(storage).drop()
    before = (hoodie / "hoodie.properties").read_text()
    assert MetadataTable(storage).drop() is False
    assert (hoodie / "hoodie.properties").read_text() == before
