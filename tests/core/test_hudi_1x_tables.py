"""Tables Hudi 1.x's own Spark writer made at table versions 8 (Hudi 1.0) and 9 (Hudi 1.1):
timeline layout 2, Avro commit metadata, completion times in the file names, and (v9) the
metadata table with its indexes. What we read equals what hudi-rs reads; writing them is
refused, naming why, and leaves them as they were. The tables come from hudi-rs's test data
(`tests/fixtures/hudi-1x-tables/`, each with the SQL that made it)."""

import json
import os
import zipfile

import pytest

from dbt.adapters.hudilite.table import ConfigurationError, HudiTable, META_COLUMNS
from tests.core.hudi_rs import assert_hudi_rs_agrees

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hudi-1x-tables")
WRITTEN = {  # table: (version, rows in its latest snapshot)
    "v8_simplekeygen_nonhivestyle": (8, 4),
    "v8_complexkeygen_hivestyle": (8, 4),
    "v8_nonpartitioned": (8, 4),
    "v9_txns_simple_meta": (9, 12),
    "v9_txns_simple_nometa": (9, None),
    "v9_txns_nonpart_nometa": (9, None),
    "v9_txns_simple_overwrite": (9, 3),
}


def fixture_table(spark, tmp_path, name) -> HudiTable:
    """A fresh copy of a fixture (the checked-in one is never written)."""
    with zipfile.ZipFile(os.path.join(FIXTURES, name + ".zip")) as archive:
        archive.extractall(tmp_path, [m for m in archive.namelist() if not m.startswith("__MACOSX")])
    return HudiTable.open(spark, str(tmp_path / name))


def _files(path):
    return sorted((os.path.relpath(os.path.join(d, n), path), os.path.getsize(os.path.join(d, n)))
                  for d, _, names in os.walk(path) for n in names)


def assert_metadata_table_in_step(table, instants, version):
    """The table's metadata table is at its version, in Hudi 1.x's layout, with a completed
    deltacommit (`<T>_<C>.deltacommit`) for each of `instants`; `validate()` then compares what
    its `files` partition lists with storage."""
    from dbt.adapters.hudilite.table.format.properties import loads

    metadata = os.path.join(table.path, ".hoodie", "metadata", ".hoodie")
    assert loads(open(os.path.join(metadata, "hoodie.properties")).read())["hoodie.table.version"] == str(version)
    names = os.listdir(os.path.join(metadata, "timeline"))
    for instant in instants:
        assert [n for n in names if n.startswith(instant + "_") and n.endswith(".deltacommit")], instant
    listed = loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())
    assert "files" in listed["hoodie.table.metadata.partitions"].split(",")


def test_the_fixtures_are_here():
    assert sorted(f[:-4] for f in os.listdir(FIXTURES) if f.endswith(".zip")) == sorted(
        list(WRITTEN) + ["v8_empty", "v8_archived_history"])


def test_a_table_hudi_1x_archived_reads_as_hudi_wrote_it_through_its_lsm_history(spark, tmp_path):
    """Hudi 1.0.2 archived 10 of its commits into `.hoodie/timeline/history/`
    (`make_archived_v8.py`): the snapshot is what Hudi read, and a changes read from the start
    reaches the archived commits by their completion times."""
    table = fixture_table(spark, tmp_path, "v8_archived_history")
    with open(os.path.join(FIXTURES, "v8_archived_history.expected.json")) as f:
        expected = json.load(f)
    archived = [a for a in expected["archived"] if a["action"] == "commit"]
    view = table.context.timeline.archived()
    assert (view.first, view.through, view.count) == (archived[0]["instant"], archived[-1]["instant"], len(archived))
    assert table.context.timeline.archived_completions() == {a["instant"]: a["completion"] for a in archived}
    snapshot = sorted((r["id"], r["part"], r["ts"], r["v"]) for r in expected["snapshot"])
    assert sorted(tuple(r) for r in table.read().select("id", "part", "ts", "v").collect()) == snapshot
    everything = table.read_changes(None)
    assert sorted(tuple(r) for r in everything.select("id", "part", "ts", "v").collect()) == snapshot
    assert_hudi_rs_agrees(table)
    assert table.validate() == []


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_a_hudi_1x_table_reads_as_hudi_rs_reads_it_at_every_instant(spark, tmp_path, name):
    table = fixture_table(spark, tmp_path, name)
    version, rows = WRITTEN[name]
    assert table.config.table_version == version and table.config.timeline_folder == "timeline"
    instants = [i for i in table.timeline() if i.is_completed]
    assert instants and all(i.completion_time and i.completion_time > i.timestamp for i in instants)
    if rows is not None:
        assert table.read().count() == rows
    assert_hudi_rs_agrees(table)
    assert table.validate() == []


def test_a_hudi_1x_table_without_a_commit_has_its_schema(spark, tmp_path):
    table = fixture_table(spark, tmp_path, "v8_empty")
    assert table.read().count() == 0
    assert "id" in table.schema().fieldNames()


def test_the_cli_shows_validates_and_lists_the_timeline_of_a_hudi_1x_table(spark, tmp_path, capsys):
    from dbt.adapters.hudilite import cli

    table = fixture_table(spark, tmp_path, "v9_txns_simple_overwrite")
    assert cli.main(["show", table.path, "--json", "--rows", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 3
    assert cli.main(["validate", table.path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["well_formed"] is True
    assert cli.main(["timeline", table.path, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(e["instant"], e["completed"], e.get("operation")) for e in shown] == [
        ("20260403183955124", "20260403183958943", "INSERT"), ("20260403183959838", "20260403184000568", "INSERT"),
        ("20260403184001282", "20260403184002260", "INSERT_OVERWRITE_TABLE")]
    assert cli.main(["savepoint", table.path]) == 0  # a service instant at layout 2: `<T>_<C>.savepoint`
    (savepoint,) = [n for n in os.listdir(os.path.join(table.path, ".hoodie", "timeline")) if n.endswith(".savepoint")]
    requested, completed = savepoint[:-len(".savepoint")].split("_")
    assert requested == "20260403184001282" and completed > "20260403184002260"  # after every completion before it
    assert HudiTable.open(spark, table.path).savepoints() == [requested]


@pytest.mark.parametrize("name", ["v8_simplekeygen_nonhivestyle", "v9_txns_simple_meta"])
def test_our_writes_continue_a_hudi_1x_table_at_its_version(spark, tmp_path, name):
    """Upsert, insert, delete and insert_overwrite on a table Hudi 1.x made: each completes as
    `<T>_<C>.<action>` with Avro metadata, reads as hudi-rs reads it, and validates."""
    from pyspark.sql import functions as F

    table = fixture_table(spark, tmp_path, name)
    key, partition, ordering = table.config.record_key_fields[0], table.config.partition_fields[0], \
        table.config.precombine_field
    version = table.config.table_version
    rows = table.read().drop(*META_COLUMNS)
    first = rows.orderBy(key).limit(1)
    before = {r[key] for r in rows.collect()}
    table.upsert(first.withColumn(ordering, F.col(ordering) + 1))
    table.insert(first.withColumn(key, F.concat(F.col(key).cast("string"), F.lit("0")).cast(rows.schema[key].dataType)))
    table.delete(rows.orderBy(F.col(key).desc()).limit(1).select(key))
    done = [i for i in table.timeline() if i.is_completed][-3:]
    assert all(i.completion_time and i.completion_time > i.timestamp for i in done)
    assert sorted(i.completion_time for i in done) == [i.completion_time for i in done]
    names = os.listdir(os.path.join(table.path, ".hoodie", "timeline"))
    for instant in done:
        path = os.path.join(table.path, ".hoodie", "timeline", instant.file_name)
        assert open(path, "rb").read(4) == b"Obj\x01" and instant.file_name in names
    assert not [n for n in os.listdir(os.path.join(table.path, ".hoodie")) if n[:17].isdigit()]  # nothing at v6 names
    assert table.config.table_version == version and HudiTable.open(spark, table.path).config.table_version == version
    after = {r[key] for r in table.read().collect()}
    assert len(after) == len(before) and table.read().count() == len(after)
    table.insert_overwrite(table.read().drop(*META_COLUMNS).where(F.col(partition) == first.first()[partition]))
    overwrite = [i for i in table.timeline() if i.is_completed][-1]
    assert overwrite.action == "replacecommit" and overwrite.completion_time
    assert_metadata_table_in_step(table, [i.timestamp for i in done + [overwrite]], version)
    assert_hudi_rs_agrees(table)
    assert table.validate() == []


@pytest.mark.parametrize("version, fixture", [(8, "v8_simplekeygen_nonhivestyle"), (9, "v9_txns_simple_nometa")])
def test_a_table_we_create_at_version_8_or_9_has_hudis_properties_and_reads_as_hudi_rs_reads_it(
        spark, tmp_path, version, fixture):
    from dbt.adapters.hudilite.table.format.properties import loads

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by=["region"], record_key="id",
                             precombine="ts", table_version=version)
    assert os.path.isdir(os.path.join(table.path, ".hoodie", "timeline", "history"))
    ours = loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())
    theirs = loads(open(fixture_table(spark, tmp_path, fixture).path + "/.hoodie/hoodie.properties").read())
    ours_only = {"hoodie.populate.meta.fields", "hoodie.table.base.file.format", "hoodie.table.timeline.timezone",
                 "hudilite.parquet.encoding", "hudilite.keygen.timestamp.keys"}  # Hudi's defaults, and ours
    assert set(ours) - ours_only == set(theirs) - {"hoodie.table.create.schema", "hoodie.table.precombine.field"} | (
        {"hoodie.table.precombine.field"} if version == 8 else set())
    assert (ours["hoodie.table.version"], ours["hoodie.table.initial.version"], ours["hoodie.timeline.layout.version"]) \
        == (str(version), str(version), "2")
    schema = "id long, region string, ts long, v string"
    table.upsert(spark.createDataFrame([(1, "eu", 1, "a"), (2, "us", 1, "b")], schema))
    table.upsert(spark.createDataFrame([(1, "eu", 2, "a2"), (3, "us", 1, "c")], schema))
    table.delete(spark.createDataFrame([(2,)], "id long"))
    reopened = HudiTable.open(spark, table.path)
    assert reopened.config.table_version == version and reopened.config.precombine_field == "ts"
    assert sorted((r.id, r.v) for r in reopened.read().collect()) == [(1, "a2"), (3, "c")]
    assert all(i.completion_time for i in reopened.timeline())
    assert_metadata_table_in_step(reopened, [i.timestamp for i in reopened.timeline()], version)
    assert "record_index" in loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())[
        "hoodie.table.metadata.partitions"]
    assert_hudi_rs_agrees(reopened)
    assert reopened.validate() == []


def test_archival_at_version_9_writes_the_lsm_history_hudi_reads(spark, tmp_path):
    """Our archival of a version 9 table writes its instants (commits, a clustering, cleans) into
    `.hoodie/timeline/history/`: they leave the active timeline with every file of theirs (a
    clustering's `clustering.*` too), the history holds them with their completion times, and
    the reads stay what they were (ours and hudi-rs's)."""
    from dbt.adapters.hudilite.table.format import lsm_history
    from dbt.adapters.hudilite.table.spark.file_sizing import FileSizing

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by=["region"], record_key="id",
                             precombine="ts", table_version=9)
    schema = "id long, region string, ts long, v string"
    table.file_sizing = FileSizing(small_file_limit=0)
    for n in range(4):
        table.upsert(spark.createDataFrame([(n, "eu", n, f"v{n}"), (10 + n, "us", n, f"w{n}")], schema))
    table.file_sizing = FileSizing()
    clustered = table.cluster()
    table.clean(retain_commits=1)  # the slices the clustering replaced
    for n in range(4, 8):
        table.upsert(spark.createDataFrame([(n % 3, "eu", n, f"v{n}")], schema))
    table.clean(retain_commits=1)  # archival goes no further than the cleaner's earliest retained instant
    before = sorted(tuple(r) for r in table.read().drop(*META_COLUMNS).collect())
    completed = {i.timestamp: i.completion_time for i in table.timeline() if i.is_completed}
    archived = table.archive(keep_min_commits=2, keep_max_commits=3)
    assert clustered in archived and len(archived) >= 5
    names = os.listdir(os.path.join(table.path, ".hoodie", "timeline"))
    assert not [n for n in names if n[:17] in archived], "an archived instant left a file on the active timeline"
    history = {e.instant: e for e in lsm_history.read_history(table.context.storage, table.context.timeline.history_dir)}
    assert {t: history[t].completion for t in archived} == {t: completed[t] for t in archived}
    assert history[clustered].action == "replacecommit" and history[clustered].plan  # the clustering plan rides along
    assert any(e.action == "clean" for e in history.values())
    reopened = HudiTable.open(spark, table.path)
    assert reopened.context.timeline.archived().through == max(archived)
    compactions = [n for n in os.listdir(os.path.join(table.path, ".hoodie", "metadata", ".hoodie", "timeline"))
                   if n.endswith(".commit")]
    assert compactions, "archival compacts the metadata table first (as Hudi's archiver waits for it)"
    assert sorted(tuple(r) for r in reopened.read().drop(*META_COLUMNS).collect()) == before
    assert reopened.validate() == []
    assert_hudi_rs_agrees(reopened)
    reopened.upsert(spark.createDataFrame([(1, "eu", 99, "after")], schema))  # and writes go on
    assert reopened.read().where("id = 1").first().v == "after"


def test_hudilite_upgrade_takes_a_version_6_table_to_8_then_9_as_hudi_does_and_never_back(spark, tmp_path, capsys):
    from dbt.adapters.hudilite import cli
    from dbt.adapters.hudilite.table.format import lsm_history
    from dbt.adapters.hudilite.table.format.properties import loads

    table = HudiTable.create(spark, str(tmp_path / "t"), "t", partition_by=["region"], record_key="id", precombine="ts")
    schema = "id long, region string, ts long, v string"
    for n in range(6):
        table.upsert(spark.createDataFrame([(n % 4, ["eu", "us"][n % 2], n, f"v{n}")], schema))
    table.clean(retain_commits=2)
    archived = table.archive(keep_min_commits=2, keep_max_commits=3)
    assert archived
    table.insert_overwrite(spark.createDataFrame([(9, "us", 9, "over")], schema))
    active = [i.timestamp for i in table.timeline() if i.is_completed]
    before = {t: sorted(tuple(r) for r in table.read(as_of=t).drop(*META_COLUMNS).collect()) for t in active}
    checkpoint = active[-2]  # where a downstream model's changes read ended

    assert cli.main(["upgrade", table.path, "--to", "8"]) == 0
    assert "from table version 6 to 8" in capsys.readouterr().out
    table = HudiTable.open(spark, table.path)
    properties = loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())
    assert (properties["hoodie.table.version"], properties["hoodie.timeline.layout.version"],
            properties["hoodie.table.initial.version"], properties["hoodie.record.merge.mode"]) == (
        "8", "2", "6", "EVENT_TIME_ORDERING")
    assert not [n for n in os.listdir(os.path.join(table.path, ".hoodie")) if n[:17].isdigit()]
    assert not os.path.exists(os.path.join(table.path, ".hoodie", "metadata"))
    timeline = os.listdir(os.path.join(table.path, ".hoodie", "timeline"))
    for t in active:  # completed at their instant time: the order the table had
        done = [n for n in timeline if n.startswith(f"{t}_{t}.")]
        assert done and open(os.path.join(table.path, ".hoodie", "timeline", done[0]), "rb").read(4) == b"Obj\x01"
    history = lsm_history.read_history(table.context.storage, table.context.timeline.history_dir)
    assert [e.instant for e in history if e.action == "commit"] == archived
    assert {t: sorted(tuple(r) for r in table.read(as_of=t).drop(*META_COLUMNS).collect()) for t in active} == before
    assert table.context.timeline.has_completion(checkpoint)  # a checkpoint from before still names an instant
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
    table.upsert(spark.createDataFrame([(1, "us", 50, "after")], schema))
    assert table.read().where("id = 1").first().v == "after"

    assert table.upgrade(9) is True and table.config.table_version == 9
    properties = loads(open(os.path.join(table.path, ".hoodie", "hoodie.properties")).read())
    assert properties["hoodie.table.ordering.fields"] == "ts" and "hoodie.table.precombine.field" not in properties
    assert properties["hoodie.table.initial.version"] == "6" and properties["hoodie.table.format"] == "native"
    assert table.upgrade(9) is False
    with pytest.raises(ConfigurationError, match="never downgrades"):
        table.upgrade(8)
    assert table.validate() == []
    assert_hudi_rs_agrees(table)
