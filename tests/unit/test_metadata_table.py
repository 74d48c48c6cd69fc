"""Dropping Hudi's metadata table (`metadata_table.drop`) as Hudi's writer does with the
metadata table off: the properties stop listing it first, then its folder goes; a drop killed
between the two leaves a folder no reader looks at, which the next drop removes."""

import pytest

from dbt.adapters.hudilite.table.format import metadata_table
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
        metadata_table.drop(storage)
    monkeypatch.undo()
    listed = props.loads((hoodie / "hoodie.properties").read_text())
    assert listed["hoodie.table.metadata.partitions"] == "" and listed["hoodie.table.checksum"] == "63966298"
    assert (hoodie / "metadata").is_dir() and not (hoodie / ".hoodie.properties.crc").exists()
    assert props.TableConfig.from_properties(listed).not_writable is None  # writable already

    assert metadata_table.drop(storage) is True  # the folder left behind goes
    assert not (hoodie / "metadata").exists()
    text = (hoodie / "hoodie.properties").read_text()
    assert not text.startswith(props.SAVED_BY_HUDILITE)  # still read as a table Java made
    assert metadata_table.drop(storage) is False


def test_a_table_without_a_metadata_table_is_left_as_it_is(tmp_path):
    storage, hoodie = java_table(tmp_path)
    metadata_table.drop(storage)
    before = (hoodie / "hoodie.properties").read_text()
    assert metadata_table.drop(storage) is False
    assert (hoodie / "hoodie.properties").read_text() == before
