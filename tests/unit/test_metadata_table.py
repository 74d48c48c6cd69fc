"""Dropping Hudi's metadata table (`MetadataTable.drop`) as Hudi's writer does with the
metadata table off: the properties stop listing it first, then its folder goes; a drop killed
between the two leaves a folder no reader looks at, which the next drop removes. A dropped
table keeps none from then on (`hudilite.metadata.enable=false`)."""

import json

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


def _deltacommit(storage, instant, logs, whole=True, action="deltacommit", base="00000000000000010"):
    """A completed metadata-table instant whose `files` stat names `logs` after `base`."""
    from dbt.adapters.hudilite.table.metadata.writer import FILES_GROUP, WHOLE_FILES_SLICE
    stat = {"fileId": FILES_GROUP, "baseFile": f"{FILES_GROUP}_0-0-0_{base}.hfile", "prevCommit": base, "logFiles": logs}
    body = {"partitionToWriteStats": {"files": [stat]}, "extraMetadata": {WHOLE_FILES_SLICE: "true"} if whole else {}}
    storage.write_bytes(f".hoodie/metadata/.hoodie/{instant}.{action}", json.dumps(body).encode())


def test_the_files_slice_is_taken_from_the_newest_deltacommit_only_when_it_names_every_log_since_its_base(tmp_path):
    from dbt.adapters.hudilite.table.metadata.timeline import TIMELINE_DIR
    from dbt.adapters.hudilite.table.metadata.writer import MetadataTableWriter

    storage = Storage(str(tmp_path))
    writer = MetadataTableWriter(storage)
    log = lambda v: f".files-0000-0_00000000000000010.log.{v}_0-0-0"  # noqa: E731
    _deltacommit(storage, "00000000000000010", [])
    _deltacommit(storage, "20261129000000100", [log(1)])
    _deltacommit(storage, "20261129000000200", [log(1), log(2)])
    _deltacommit(storage, "20261129000000200011", [])  # record_index's initialization: no files log
    slice_ = writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="")
    assert slice_ is None  # the newest, the initialization, names none of the two logs since the base
    _deltacommit(storage, "20261129000000300", [log(1), log(2), log(3)])
    slice_ = writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="")
    assert slice_ is not None and slice_.logs == [log(1), log(2), log(3)]
    assert slice_.base_instant == "00000000000000010"
    # The instant being written, pending, is left out; another pending one means: list.
    storage.write_bytes(".hoodie/metadata/.hoodie/20261129000000500.deltacommit.requested", b"")
    assert writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="20261129000000500") is not None
    assert writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="") is None
    storage.delete_file(".hoodie/metadata/.hoodie/20261129000000500.deltacommit.requested")
    # Published out of instant order: the newest by time misses the log of one published after it.
    _deltacommit(storage, "20261129000000250", [log(1), log(2), log(3), log(4)])
    assert writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="") is None
    storage.delete_file(".hoodie/metadata/.hoodie/20261129000000250.deltacommit")
    # Hudi's writer's deltacommit (no flag), or a compaction after the base: list.
    _deltacommit(storage, "20261129000000400", [log(1), log(2), log(3), log(4)], whole=False)
    assert writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="") is None
    storage.delete_file(".hoodie/metadata/.hoodie/20261129000000400.deltacommit")
    _deltacommit(storage, "20261129000000150001", [], action="commit")
    assert writer.recorded_files_slice(storage.list_names(TIMELINE_DIR), writing="") is None
