"""The `hudilite` CLI a table owner uses: tables under a root, show, validate, --json."""

import json
import os

from dbt.adapters.hudilite import cli
from dbt.adapters.hudilite.table import HudiTable


def test_tables_lists_every_table_with_rows_files_size_and_last_commit(spark, tmp_path, capsys):
    root = tmp_path / "lakehouse"
    keyed = HudiTable.create(spark, str(root / "analytics" / "customers"), "customers", record_key="id",
                             partition_by=["region"])
    keyed.upsert(spark.createDataFrame([(1, "a", "us"), (2, "b", "eu")], "id long, name string, region string"))
    last = keyed.upsert(spark.createDataFrame([(1, "c", "us")], "id long, name string, region string"))
    events = HudiTable.create(spark, str(root / "raw" / "events"), "events")
    events.insert(spark.createDataFrame([(n,) for n in range(5)], "n int"))
    os.makedirs(root / "raw" / "not_a_table")

    assert cli.main(["tables", str(root), "--json"]) == 0
    listed = {t["table"]: t for t in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"analytics.customers", "raw.events"}
    customers = listed["analytics.customers"]
    files = keyed.latest_base_files()
    assert (customers["rows"], customers["files"], customers["bytes"]) == (2, len(files), sum(f.size for f in files))
    assert (customers["last_commit"], customers["last_operation"]) == (last, "UPSERT")
    assert (customers["record_key"], customers["partition_by"]) == (["id"], ["region"])
    assert listed["raw.events"]["rows"] == 5 and listed["raw.events"]["record_key"] is None

    assert cli.main(["tables", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["table", "rows", "files", "bytes"]
    assert out[1].split()[:2] == ["analytics.customers", "2"] and last in out[1] and "id / region" in out[1]


def test_show_and_validate_as_json(spark, tmp_path, capsys):
    table = HudiTable.create(spark, str(tmp_path / "t"), "t", record_key="id")
    table.upsert(spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string"))
    assert cli.main(["show", table.path, "--json", "--rows", "2"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["rows"] == 3 and len(shown["first_rows"]) == 2
    assert {r["id"]: r["name"] for r in shown["first_rows"]}.items() <= {1: "a", 2: "b", 3: "c"}.items()
    assert cli.main(["validate", table.path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"table": "t", "well_formed": True, "problems": []}

    os.remove(os.path.join(table.path, table.latest_base_files()[0].path))  # a file the snapshot needs is gone
    assert cli.main(["validate", table.path, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["well_formed"] is False and any("missing" in p or "not found" in p for p in report["problems"])
