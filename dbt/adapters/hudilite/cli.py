"""`hudilite`: look at and look after hudilite tables from the shell.

    hudilite timeline PATH [--json]   instants, operations, rows and files written; the archived range
    hudilite stats PATH [--json]      files per partition, file sizes, active/archived instants, index size
    hudilite show PATH [--as-of T]    row count and the first rows of a snapshot (--json)
    hudilite clean PATH [--retain N]  delete file slices the cleaner policy no longer retains (--policy, --sweep)
    hudilite savepoint PATH [INSTANT] keep a snapshot from the cleaner and archival (--list, --delete)
    hudilite restore PATH INSTANT     take the table back to a savepoint or a readable instant
    hudilite archive PATH             move old instants to .hoodie/archived/ (--keep-min, --keep-max)
    hudilite cluster PATH [--by C,..] rewrite each partition's small file groups into few sorted files
    hudilite tables ROOT [--json]     every table under a location_root: rows, files, size, last commit
    hudilite validate PATH [--json]   check the table is well-formed; exit 1 with a report if not
    hudilite sync ROOT --catalog hive --metastore-uri thrift://H:P   (or --catalog glue [--glue-region R])
                                      every table under a location_root into a Hive metastore or AWS Glue

Every command but show and validate reads storage alone (no Spark, no JVM).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional


def format_timeline(history: List[dict]) -> str:
    header = f"{'instant':<19}{'action':<15}{'state':<11}{'operation':<24}{'rows':>10}{'files':>7}{'replaced':>10}"
    lines = [header]
    for h in history:
        lines.append(
            f"{h['instant']:<19}{h['action']:<15}{h['state']:<11}{h.get('operation', ''):<24}"
            f"{h.get('rows_written', ''):>10}{h.get('files_written', h.get('files_deleted', '')):>7}{h.get('file_groups_replaced', ''):>10}"
        )
    return "\n".join(lines)


def table_summary(schema: str, name: str, table) -> dict:
    """One table of a location_root as `hudilite tables` lists it (from storage alone)."""
    stats = table.stats()
    completed = table.context.timeline.completed()
    last = completed[-1] if completed else None
    return {"table": f"{schema}.{name}", "rows": stats["rows"], "files": stats["files"], "bytes": stats["bytes"],
            "last_commit": last.timestamp if last else None,
            "last_operation": table.commit_metadata(last).operation if last else None,
            "record_key": table.config.record_key_fields or None, "partition_by": table.config.partition_fields,
            "active_instants": stats["active_instants"], "index_bytes": stats["index_bytes"]}


def format_tables(tables: List[dict]) -> str:
    width = max([len(t["table"]) for t in tables] + [5]) + 2
    lines = [f"{'table':<{width}}{'rows':>9}{'files':>7}{'bytes':>11}  {'last commit':<19}{'operation':<24}"
             "record key / partitioned by"]
    for t in tables:
        lines.append(f"{t['table']:<{width}}{t['rows']:>9}{t['files']:>7}{t['bytes']:>11}  {t['last_commit'] or '-':<19}"
                     f"{t['last_operation'] or '-':<24}{', '.join(t['record_key'] or ['auto'])} / "
                     f"{', '.join(t['partition_by']) or '-'}")
    return "\n".join(lines)


def format_stats(stats: dict) -> str:
    lines = [f"{stats['table']}: {stats['rows']} rows in {stats['files']} files, {stats['bytes']} bytes",
             f"timeline: {stats['active_instants']} active instants ({stats['pending_instants']} pending), "
             f"{stats['archived_instants']} archived" + (f" up to {stats['archived_through']}" if stats['archived_through'] else "")
             + f"; earliest readable instant: {stats['earliest_readable_instant'] or 'the first'}"
             + f"; savepoints: {', '.join(stats['savepoints']) or 'none'}",
             f"record index: {stats['index_bytes']} bytes",
             "file sizes: " + ", ".join(f"{k}: {v}" for k, v in stats["file_sizes"].items()),
             f"{'partition':<40}{'files':>7}{'rows':>12}{'bytes':>14}"]
    for partition, p in stats["partitions"].items():
        lines.append(f"{partition or '<table root>':<40}{p['files']:>7}{p['rows']:>12}{p['bytes']:>14}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    from .table.services.archival import DEFAULT_KEEP_MAX_COMMITS, DEFAULT_KEEP_MIN_COMMITS
    from .table.services.cleaner import (DEFAULT_RETAIN_COMMITS, DEFAULT_RETAIN_FILE_VERSIONS, DEFAULT_RETAIN_HOURS,
                                         KEEP_LATEST_COMMITS, POLICIES)

    parser = argparse.ArgumentParser(prog="hudilite", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("timeline", help="show a table's timeline")
    p.add_argument("path")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("stats", help="files, sizes, timeline length and index size of a table")
    p.add_argument("path")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("archive", help="move old instants off the active timeline")
    p.add_argument("path")
    p.add_argument("--keep-min", type=int, default=DEFAULT_KEEP_MIN_COMMITS)
    p.add_argument("--keep-max", type=int, default=DEFAULT_KEEP_MAX_COMMITS)
    p = sub.add_parser("cluster", help="rewrite each partition's small file groups into files near max_file_size")
    p.add_argument("path")
    p.add_argument("--by", default="", help="comma-separated columns to sort each partition's rows by")
    p = sub.add_parser("show", help="show a snapshot")
    p.add_argument("path")
    p.add_argument("--as-of", default=None)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--json", action="store_true", help="the row count and rows as JSON")
    p = sub.add_parser("clean", help="delete file slices the cleaner policy no longer retains")
    p.add_argument("path")
    p.add_argument("--policy", default=KEEP_LATEST_COMMITS, choices=POLICIES)
    p.add_argument("--retain", type=int, default=DEFAULT_RETAIN_COMMITS, help="KEEP_LATEST_COMMITS: instants")
    p.add_argument("--retain-hours", type=int, default=DEFAULT_RETAIN_HOURS, help="KEEP_LATEST_BY_HOURS")
    p.add_argument("--retain-file-versions", type=int, default=DEFAULT_RETAIN_FILE_VERSIONS,
                   help="KEEP_LATEST_FILE_VERSIONS: slices per file group")
    p.add_argument("--sweep", action="store_true",
                   help="look for files no commit wrote in the whole table, not only where writes left markers")
    p = sub.add_parser("savepoint", help="savepoint an instant (default: the latest), list or delete savepoints")
    p.add_argument("path")
    p.add_argument("instant", nargs="?", default=None, help="an instant or a timestamp")
    p.add_argument("--comment", default="")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true")
    group.add_argument("--delete", action="store_true")
    p = sub.add_parser("restore", help="take the table back to a savepoint or a still readable instant")
    p.add_argument("path")
    p.add_argument("instant", help="an instant or a timestamp")
    p = sub.add_parser("upgrade", help="upgrade a table to Hudi table version 8 (Hudi 1.0) or 9 (Hudi 1.1)")
    p.add_argument("path")
    p.add_argument("--to", type=int, required=True, choices=(8, 9), help="the table version")
    p = sub.add_parser("validate", help="check that a table is well-formed")
    p.add_argument("path")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("sync", help="sync every table under a location_root to a Hive metastore or AWS Glue")
    p.add_argument("root")
    p.add_argument("--catalog", required=True, choices=("hive", "glue"))
    p.add_argument("--metastore-uri", help="hive: thrift://host:port")
    p.add_argument("--glue-region")
    p.add_argument("--glue-endpoint", help="glue: a compatible service's URL")
    p.add_argument("--database", default="{schema}", help="the catalog database of a schema ({schema} stands for it)")
    p.add_argument("--schema", action="append", help="only this schema (repeatable)")
    p.add_argument("--no-meta-columns", action="store_true", help="leave Hudi's meta columns out of the entries")
    p = sub.add_parser("tables", help="every table under a location_root: rows, files, size, last commit")
    p.add_argument("root")
    p.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from .table.errors import HudiliteError

    try:
        return _run(parser, args)
    except HudiliteError as err:  # a refusal or a bad table: said in one line, the table as it was
        print(f"hudilite {args.command}: {err}", file=sys.stderr)
        return 2


def _run(parser: argparse.ArgumentParser, args) -> int:
    from .session import spark_session
    from .table import HudiTable

    if args.command in ("show", "validate", "restore", "cluster"):  # the others read storage alone
        spark = spark_session(conf={"spark.master": "local[2]"})
    else:
        spark = None
    if args.command == "sync":
        return _sync(args)
    if args.command == "tables":
        from .catalog.storage_catalog import StorageCatalog

        catalog = StorageCatalog(spark, args.root)
        tables = [table_summary(schema, name, catalog.open(schema, name))
                  for schema in catalog.schemas() for name in catalog.tables(schema)]
        print(json.dumps(tables, indent=1) if args.json else format_tables(tables))
        return 0
    table = HudiTable.open(spark, args.path)
    if args.command == "timeline":
        print(json.dumps(table.history(), indent=1) if args.json else format_timeline(table.history()))
    elif args.command == "stats":
        print(json.dumps(table.stats(), indent=1) if args.json else format_stats(table.stats()))
    elif args.command == "archive":
        archived = table.archive(args.keep_min, args.keep_max)
        print(f"archived {_count(archived, 'instant')}" + (f" ({archived[0]} to {archived[-1]})" if archived else "")
              + f"; {len(table.timeline())} active")
    elif args.command == "cluster":
        instant = table.cluster([c.strip() for c in args.by.split(",") if c.strip()])
        print(f"clustered at {instant}" if instant else "nothing to cluster: no partition has two small file groups")
    elif args.command == "show":
        df = table.read(as_of=args.as_of)
        if args.json:
            rows = [row.asDict(recursive=True) for row in df.limit(args.rows).collect()]
            print(json.dumps({"table": table.name, "rows": df.count(), "first_rows": rows}, indent=1, default=str))
            return 0
        print(f"{table.name}: {df.count()} rows")
        df.show(args.rows, truncate=False)
    elif args.command == "validate":
        problems = table.validate()
        if args.json:
            print(json.dumps({"table": table.name, "well_formed": not problems, "problems": problems}, indent=1))
            return 1 if problems else 0
        for problem in problems:
            print(f"PROBLEM: {problem}")
        print(f"{table.name}: {'well-formed' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    elif args.command == "clean":
        plan = table.clean(args.retain, args.policy, args.retain_hours, args.retain_file_versions, args.sweep)
        print(f"deleted {_count(plan.files_to_delete, 'file')}; earliest readable instant: {plan.earliest_retained or 'the first'}")
    elif args.command == "savepoint":
        if args.delete:
            if args.instant is None:
                parser.error("savepoint --delete needs the savepointed INSTANT")
            table.delete_savepoint(args.instant)
            print(f"deleted the savepoint at {args.instant}")
        elif not args.list:
            print(f"savepointed {table.savepoint(args.instant, args.comment)}")
        print("savepoints: " + (", ".join(table.savepoints()) or "none"))
    elif args.command == "upgrade":
        before = table.config.table_version
        if table.upgrade(args.to):
            print(f"upgraded {table.config.name} from table version {before} to {args.to}")
        else:
            print(f"{table.config.name} is at table version {args.to} already")
    elif args.command == "restore":
        rolled_back = table.restore(args.instant)
        latest = table.timeline()[-1].timestamp if table.timeline() else "none"
        print(f"rolled back {_count(rolled_back, 'instant')}" + (f" ({rolled_back[-1]} to {rolled_back[0]})" if rolled_back else "")
              + f"; the latest instant is {latest}")
    return 0



def _sync(args) -> int:
    """Every table of the root (or of the --schema ones) synced; exit 1 if any sync failed."""
    from .catalog.storage_catalog import StorageCatalog
    from .catalog_sync import CatalogSettings, CatalogSyncError, connect, sync_table, synced_as

    try:
        settings = CatalogSettings(args.catalog, args.metastore_uri, args.glue_region, args.glue_endpoint, args.database,
                                   not args.no_meta_columns)
        catalog = connect(settings)
    except CatalogSyncError as err:
        print(f"hudilite sync: {err}", file=sys.stderr)
        return 2
    storage = StorageCatalog(None, args.root)
    failed = 0
    try:
        for schema in args.schema or storage.schemas():
            for name in storage.tables(schema):
                try:
                    table = storage.open(schema, name)
                    record = synced_as(table)  # a model with its own catalog_database keeps it
                    if record is not None and record[0] == "none":
                        print(f"{schema}.{name}: kept out of catalogs (catalog_sync=false)")
                        continue
                    database, entry = record[1:3] if record and record[0] == settings.kind else \
                        (settings.database_of(schema), name.lower())
                    print(sync_table(catalog, table, database, entry, settings.meta_columns))
                except Exception as err:  # noqa: BLE001 - one table's failure does not stop the others
                    failed += 1
                    print(f"hudilite sync: {schema}.{name}: {err}", file=sys.stderr)
    finally:
        catalog.close()
    return 1 if failed else 0


def _count(items, noun: str) -> str:
    return f"{len(items)} {noun}" + ("" if len(items) == 1 else "s")


if __name__ == "__main__":
    sys.exit(main())
