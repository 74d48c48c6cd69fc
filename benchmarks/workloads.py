"""The benchmark's workloads: data, the operation on each side, and its results.

Every workload builds its tables outside the timing, then times hudilite and its peer on the
same rows in the same Spark session (the same settings on both sides), the order reversed
every round (`measure.alternate`).
"""

from __future__ import annotations

import glob
import os
import random
import shutil
from dataclasses import dataclass
from typing import Dict, List, Tuple

import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dbt.adapters.hudilite.table import HudiTable

from measure import Result, Side, alternate, timed

DAY0 = "2020-01-01"


@dataclass
class Scale:
    wide_rows: int = 2_000_000
    narrow_rows: int = 4_000_000
    merge_rows: int = 4_000_000  # the delta-rs comparisons
    scaling_rows: Tuple[int, ...] = (1_000_000, 4_000_000, 10_000_000)  # upsert and lookup against table size
    overwrite_rows: int = 10_000_000
    batch: int = 10_000
    lookup_keys: int = 100_000
    rounds: int = 3
    upsert_rounds: int = 22  # past the 21st index delta, so an index compaction is in the figures
    # The scaling ratio compares two sub-second figures of our own: three rounds a side moved it
    # between 2.1x and 3.5x over three runs.
    scaling_rounds: int = 7
    # Sub-second and few-second figures that moved by a third between runs at three rounds.
    append_rounds: int = 5
    overwrite_rounds: int = 11
    startup_tables: int = 300  # 0: no start-up run
    dbt_demo: bool = True


QUICK = Scale(wide_rows=100_000, narrow_rows=200_000, merge_rows=200_000, scaling_rows=(100_000, 400_000),
              overwrite_rows=400_000, batch=2_000, lookup_keys=10_000, rounds=2, upsert_rounds=3, scaling_rounds=2,
              append_rounds=2, overwrite_rounds=2, startup_tables=0, dbt_demo=False)  # no dbt: each dbt command starts its own JVM


# ---- rows -------------------------------------------------------------------------------------

def wide_events(spark, n: int) -> DataFrame:
    """14 columns as web events have them: ids, a timestamp, URLs, a user agent, small codes."""
    agents = F.element_at(F.array(*[F.lit(a) for a in (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
        "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")]), (F.col("id") % 4 + 1).cast("int"))
    return spark.range(0, n, numPartitions=max(2, n // 500_000)).select(
        F.col("id").alias("event_id"),
        F.timestamp_seconds(F.lit(1_732_000_000) + F.col("id") * 7 % 86_400).alias("event_time"),
        (F.hash("id") % 200_000).alias("user_id"),
        F.md5(F.col("id").cast("string")).alias("session_id"),
        F.concat(F.lit("https://shop.example.com/products/"), (F.col("id") % 5_000).cast("string"),
                 F.lit("?utm_source=newsletter&utm_campaign=autumn")).alias("url"),
        F.concat(F.lit("https://www.search.example/?q=item+"), (F.col("id") % 977).cast("string")).alias("referrer"),
        agents.alias("user_agent"),
        F.element_at(F.array(*[F.lit(c) for c in ("US", "DE", "FR", "GB", "JP", "BR", "IN")]),
                     (F.col("id") % 7 + 1).cast("int")).alias("country"),
        F.element_at(F.array(F.lit("desktop"), F.lit("mobile"), F.lit("tablet")), (F.col("id") % 3 + 1).cast("int")).alias("device"),
        F.element_at(F.array(F.lit("view"), F.lit("click"), F.lit("cart"), F.lit("buy")),
                     (F.col("id") % 4 + 1).cast("int")).alias("event_type"),
        (F.col("id") % 10_000 / 100).alias("amount"),
        (F.col("id") % 5).cast("int").alias("quantity"),
        (F.col("id") % 50 == 0).alias("is_bot"),
        F.lit("2026-11-20").cast("date").alias("event_date"),
    )


def narrow_rows(spark, n: int) -> DataFrame:
    return spark.range(0, n, numPartitions=max(2, n // 1_000_000)).select(
        F.col("id").alias("event_id"), (F.col("id") % 1000).alias("user_id"), (F.col("id") * 0.25).alias("amount"),
        F.concat(F.lit("page-"), (F.col("id") % 97).cast("string")).alias("page"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"))


def key_of(ids):
    """A UUID-shaped key made from a number: the same on every side and in every batch."""
    h = F.md5(ids.cast("string"))
    return F.concat_ws("-", *[F.substring(h, start, length) for start, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))])


def keyed_rows(ids: DataFrame, n: int, days: int, version: int = 1) -> DataFrame:
    """Rows keyed by a UUID, `days` day partitions over the `n` ids of the table; ids from n on
    (new keys) fall on the day after the last: today's partition."""
    return ids.select(key_of(F.col("id")).alias("id"),
                      F.date_add(F.lit(DAY0).cast("date"), F.least(F.lit(days), (F.col("id") * days / n).cast("int"))).alias("day"),
                      (F.col("id") * 0.5 + version).alias("amount"), F.lit(version).alias("version"),
                      F.concat(F.lit("note "), (F.col("id") % 31).cast("string")).alias("note"))


def keyed_table_rows(spark, n: int, days: int) -> DataFrame:
    return keyed_rows(spark.range(0, n, numPartitions=max(2, n // 500_000)), n, days)


def batch_ids(n: int, size: int, seed: int, recent_days: int, days: int) -> List[int]:
    """Half updates (random ids of the last `recent_days` days, or of the whole table when
    recent_days is 0) and half new ids; every batch of a run differs (seed)."""
    rng = random.Random(seed)
    low = 0 if not recent_days else n * (days - recent_days) // days
    updates = rng.sample(range(low, n), size // 2)
    return updates + list(range(n + seed * size, n + seed * size + (size - size // 2)))


def delta_merge(path: str, source) -> None:
    """delta-rs's upsert of `source` (Arrow) into the keyed rows' table at `path`."""
    from deltalake import DeltaTable

    (DeltaTable(path).merge(source=source, predicate="t.id = s.id AND t.day = s.day", source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())


def update_ids(n: int, size: int, seed: int) -> List[int]:
    return random.Random(seed).sample(range(n), size)


def batch_frame(spark, ids: List[int], n: int, days: int, version: int) -> DataFrame:
    df = keyed_rows(spark.createDataFrame([(i,) for i in ids], "id long").repartition(2), n, days, version).cache()
    df.count()
    return df


# ---- workloads --------------------------------------------------------------------------------

class Workloads:
    def __init__(self, spark, work: str, scale: Scale, log):
        self.spark, self.work, self.scale, self.log = spark, work, scale, log
        self.tables: Dict[str, HudiTable] = {}
        self.results: List[Result] = []
        self.curves: Dict[str, Dict[int, float]] = {}  # for the charts: name -> {table rows: seconds}

    def path(self, name: str) -> str:
        return os.path.join(self.work, name)

    def add(self, result: Result) -> None:
        self.results.append(result)
        ratio = f" ratio {result.ratio:.2f}x" if result.ratio is not None else ""
        self.log(f"  {result.operation}: ours {result.ours_figure:.3f} {result.unit}"
                 + (f", peer {result.peer_figure:.3f}" if result.peer_figure is not None else "") + ratio)

    # appends ----------------------------------------------------------------------------------
    def appends(self) -> None:
        for label, rows, goal, n in (("append with auto keys, 14-column event rows", wide_events, 1.10, self.scale.wide_rows),
                                     ("append with auto keys, 5-column rows", narrow_rows, 1.5, self.scale.narrow_rows)):
            self.log(f"{label}, {n:,} rows")
            df = rows(self.spark, n)

            def ours(r, df=df, label=label):
                path = self.path(f"append-{len(self.results)}-{r}")
                shutil.rmtree(path, ignore_errors=True)
                table = HudiTable.create(self.spark, path, "events")
                self.tables[label] = table
                return lambda: table.insert(df)

            def peer(r, df=df):
                path = self.path(f"parquet-{len(self.results)}-{r}")
                shutil.rmtree(path, ignore_errors=True)
                return lambda: df.write.parquet(path)

            sides = alternate(self.spark, {"hudilite": ours, "df.write.parquet": peer}, self.scale.append_rounds)
            self.add(Result(f"{label}, {n:,} rows", sides["hudilite"], sides["df.write.parquet"], goal))
        self.auto_key_bytes()

    def auto_key_bytes(self) -> None:
        table = self.tables["append with auto keys, 5-column rows"]
        files = [os.path.join(table.path, f.path) for f in table.latest_base_files()]
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        ours = column_bytes(files, "_hoodie_record_key") / rows
        peer_path = self.path("spark-keys")
        table.read().select("_hoodie_record_key").write.parquet(peer_path)
        peer = column_bytes(glob.glob(f"{peer_path}/*.parquet"), "_hoodie_record_key") / rows
        self.add(Result(f"on-disk bytes per auto key ({rows:,} keys)", Side("hudilite"),
                        Side("Spark's parquet writer, same keys"), goal=0.15, unit="B", our_value=ours, peer_value=peer,
                        absolute_goal=True))

    # merges -----------------------------------------------------------------------------------
    def keyed_table(self, n: int, days: int = 50, workload: str = "merges") -> HudiTable:
        """A keyed table of `n` rows, built once per workload: no workload times its upserts
        on a table another one has changed."""
        name = f"keyed-{workload}-{n}"
        if name not in self.tables:
            self.log(f"building a keyed table of {n:,} rows")
            table = HudiTable.create(self.spark, self.path(name), "keyed", record_key="id", partition_by="day")
            table.insert(keyed_table_rows(self.spark, n, days))
            table.build_index()
            self.tables[name] = table
        return self.tables[name]

    def delta_table(self, n: int, days: int = 50, workload: str = "merges") -> str:
        """The path of a delta-rs table of the keyed rows of `n` (built once per workload)."""
        from deltalake import write_deltalake

        path = self.path(f"delta-{workload}-{n}")
        if not os.path.exists(path):
            self.log(f"building a delta-rs table of {n:,} rows")
            write_deltalake(path, keyed_table_rows(self.spark, n, days).toArrow(), partition_by=["day"])
        return path

    def merges(self) -> None:
        n, size, days = self.scale.merge_rows, self.scale.batch, 50
        table = self.keyed_table(n)
        delta_path = self.delta_table(n, days)
        parquet_paths = [self.path("parquet-merge-a"), self.path("parquet-merge-b")]
        keyed_table_rows(self.spark, n, days).write.partitionBy("day").parquet(parquet_paths[0])
        batches: Dict[Tuple[str, int], Tuple[DataFrame, object]] = {}

        def batch(kind: str, r: int):
            if (kind, r) not in batches:
                seed = 1_000 + r if kind == "random" else r + 2
                ids = update_ids(n, size, seed) if kind == "random" else batch_ids(n, size, seed, 2, days)
                df = batch_frame(self.spark, ids, n, days, version=r + 10)
                for earlier, _ in batches.values():  # only the current round's batch stays cached
                    earlier.unpersist()
                batches.clear()
                batches[(kind, r)] = (df, df.toArrow())
            return batches[(kind, r)]

        def ours(kind):
            return lambda r: (lambda df=batch(kind, r)[0]: table.upsert(df))

        def delta(kind):
            return lambda r: (lambda source=batch(kind, r)[1]: delta_merge(delta_path, source))

        def full_rewrite(r):
            df = batch("random", r)[0]
            source, target = parquet_paths
            parquet_paths.reverse()

            def rewrite():
                current = self.spark.read.parquet(source)
                merged = current.join(df.select("id"), "id", "left_anti").unionByName(df.select(*current.columns))
                merged.write.mode("overwrite").partitionBy("day").parquet(target)
            return rewrite

        self.log(f"upsert of {size:,} rows (half updates of the last 2 of {days} days, half new keys) into {n:,} rows, "
                 f"{self.scale.upsert_rounds} rounds")
        sides = alternate(self.spark, {"hudilite": ours("recent"), "delta-rs MERGE": delta("recent")}, self.scale.upsert_rounds)
        self.add(Result(f"upsert {size:,} rows (half updates in the last 2 of {days} day partitions, half new keys) "
                        f"into {n:,} rows", sides["hudilite"], sides["delta-rs MERGE"], 1.0,
                        note=f"median of {self.scale.upsert_rounds}, mean {sides['hudilite'].mean:.2f} s vs "
                             f"{sides['delta-rs MERGE'].mean:.2f} s"))
        self.log(f"upsert of {size:,} random updates over every partition into {n:,} rows")
        sides = alternate(self.spark, {"hudilite": ours("random"), "delta-rs MERGE": delta("random"),
                                       "Spark full-rewrite merge (parquet)": full_rewrite}, self.scale.rounds)
        operation = f"upsert {size:,} random updates spread over every partition into {n:,} rows"
        self.add(Result(operation, sides["hudilite"], sides["delta-rs MERGE"], 1.0))
        self.add(Result(operation, sides["hudilite"], sides["Spark full-rewrite merge (parquet)"], 0.5))
        self.index_rebuild(table, n)

    def index_rebuild(self, table: HudiTable, n: int) -> None:
        """hudilite's index (a cache of the metadata table's record_index) built again from
        record_index, against built from the snapshot's keys (what a table without record_index
        does). The same entries either way: the table's rows do not change."""
        from dbt.adapters.hudilite.table.index.record_index import RecordIndex

        shards = table.index.num_shards

        def from_record_index(r):
            return lambda: table.build_index(num_shards=shards)

        def from_snapshot(r):
            def build():
                original = RecordIndex.record_index_entries
                RecordIndex.record_index_entries = lambda self, live_ids: None  # as without record_index
                try:
                    table.build_index(num_shards=shards)
                finally:
                    RecordIndex.record_index_entries = original
            return build

        self.log(f"the record index's cache built again from record_index and from the snapshot ({n:,} keys)")
        sides = alternate(self.spark, {"record_index": from_record_index, "snapshot": from_snapshot}, self.scale.rounds)
        assert table.index.state()["built_from"] in ("record_index", "snapshot")
        table.build_index(num_shards=shards)
        assert table.index.state()["built_from"] == "record_index", "the table lists no record_index"
        self.add(Result(f"record index cache rebuilt from the metadata table's record_index ({n:,} keys), "
                        "against from the snapshot's keys", sides["record_index"], sides["snapshot"], 1.5))

    def scaling(self) -> None:
        size, days = self.scale.batch, 50
        upsert_s, delta_s, lookup_s, scan_s = {}, {}, {}, {}
        for n in self.scale.scaling_rows:
            table, delta_path = self.keyed_table(n, days, "scaling"), self.delta_table(n, days, "scaling")
            self.log(f"upsert {size:,} rows into {n:,} rows (and delta-rs MERGE); look up {self.scale.lookup_keys:,} keys")

            def batch(r, n=n):
                return batch_frame(self.spark, batch_ids(n, size, 500 + r, 2, days), n, days, version=r + 100)

            def ours(r, table=table):
                return lambda df=batch(r): table.upsert(df)

            def delta(r, path=delta_path):
                df = batch(r)
                source = df.toArrow()
                df.unpersist()
                return lambda: delta_merge(path, source)

            sides = alternate(self.spark, {"hudilite": ours, "delta-rs MERGE": delta}, self.scale.scaling_rounds)
            upsert_s[n], delta_s[n] = sides["hudilite"], sides["delta-rs MERGE"]
            keys = self.spark.createDataFrame([(i,) for i in update_ids(n, self.scale.lookup_keys, 7)], "id long")
            keys = keys.select(key_of(F.col("id")).alias("id")).repartition(2).cache()
            keys.count()
            index = table.index

            def lookup(r, table=table, index=index, keys=keys):
                completed, view = table.context.timeline.completed(), table.context.timeline.view()
                return lambda: index.lookup(completed, view, keys).count()

            def scan(r, table=table, keys=keys):
                return lambda: table.read().join(keys, "id", "left_semi").count()

            sides = alternate(self.spark, {"hudilite index lookup": lookup, "semi-join scan of the table": scan},
                              self.scale.rounds)
            lookup_s[n], scan_s[n] = sides["hudilite index lookup"], sides["semi-join scan of the table"]
            entries = table.read().count()
            index_bytes = sum(os.path.getsize(f) for f in glob.glob(
                os.path.join(table.path, ".hoodie/.hudilite/record_index/shard=*/*.parquet")))
            if n == max(self.scale.scaling_rows):
                self.add(Result(f"record index bytes per entry, UUID keys ({entries:,} entries)", Side("hudilite"),
                                unit="B", our_value=index_bytes / entries, published="Hudi RFC-8 / blog: ~48-55 B"))
                metadata_bytes = sum(os.path.getsize(f) for f in glob.glob(
                    os.path.join(table.path, ".hoodie/metadata/record_index/*record-index-*")))
                self.add(Result(f"metadata table record_index bytes per entry, UUID keys ({entries:,} entries; "
                                "HFile base and logs as Hudi's readers take them)", Side("hudilite"),
                                unit="B", our_value=metadata_bytes / entries, published="Hudi RFC-8 / blog: ~48-55 B"))
                self.add(Result(f"look up {self.scale.lookup_keys:,} keys in a {entries:,}-entry index",
                                lookup_s[n], scan_s[n]))
        small, large = min(upsert_s), max(upsert_s)
        peer_growth = (f"delta-rs MERGE of the same batches: {delta_s[large].median:.2f} s vs {delta_s[small].median:.2f} s, "
                       f"{delta_s[large].median / delta_s[small].median:.2f}x")
        self.add(Result(f"upsert {size:,} rows into {large:,} rows vs into {small:,} rows", upsert_s[large],
                        Side(f"hudilite into {small:,} rows", upsert_s[small].samples), 1.5, note=peer_growth))
        # For reference, without a goal: the two side by side at the largest size.
        self.add(Result(f"upsert {size:,} rows (half updates in the last 2 of {days} day partitions, half new keys) "
                        f"into {large:,} rows (reference)", upsert_s[large], delta_s[large]))
        self.curves = {"hudilite upsert": {n: s.median for n, s in upsert_s.items()},
                       "delta-rs MERGE": {n: s.median for n, s in delta_s.items()},
                       "index lookup": {n: s.median for n, s in lookup_s.items()},
                       "semi-join scan": {n: s.median for n, s in scan_s.items()}}

    def auto_key_index(self) -> None:
        table = self.tables["append with auto keys, 5-column rows"]
        sample = timed(self.spark, table.build_index)
        files = glob.glob(os.path.join(table.path, ".hoodie/.hudilite/key_ranges/*.parquet"))
        rows = table.read().count()
        self.add(Result(f"record index bytes per entry, auto keys ({rows:,} keys, runs of keys)", Side("hudilite", [sample]),
                        unit="B", our_value=sum(os.path.getsize(f) for f in files) / rows))

    # insert_overwrite -------------------------------------------------------------------------
    def overwrite(self) -> None:
        n, days = self.scale.overwrite_rows, 100
        self.log(f"insert_overwrite of 1 of {days} partitions of {n:,} rows")
        rows = lambda ids, n: ids.select(  # noqa: E731
            F.col("id").alias("event_id"), F.date_add(F.lit(DAY0).cast("date"), (F.col("id") * days / n).cast("int")).alias("day"),
            (F.col("id") * 0.25).alias("amount"), F.concat(F.lit("page-"), (F.col("id") % 97).cast("string")).alias("page"))
        table = HudiTable.create(self.spark, self.path("overwrite"), "overwrite", partition_by="day")
        table.insert(rows(self.spark.range(0, n, numPartitions=max(2, n // 500_000)), n))
        parquet = self.path("overwrite-parquet")
        rows(self.spark.range(0, n, numPartitions=max(2, n // 500_000)), n).write.partitionBy("day").parquet(parquet)

        def one_day(r):
            day = 10 + r
            return rows(self.spark.range(day * n // days, (day + 1) * n // days, numPartitions=2), n)

        def ours(r):
            df = one_day(r)
            return lambda: table.insert_overwrite(df)

        def peer(r):
            df = one_day(r)
            return lambda: df.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("day").parquet(parquet)

        sides = alternate(self.spark, {"hudilite": ours, "Spark dynamic partition overwrite (parquet)": peer},
                          self.scale.overwrite_rounds)
        self.add(Result(f"insert_overwrite of 1 of {days} partitions of {n:,} rows", sides["hudilite"],
                        sides["Spark dynamic partition overwrite (parquet)"], 1.15))


def column_bytes(files: List[str], column: str) -> int:
    total = 0
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                if meta.row_group(g).column(c).path_in_schema == column:
                    total += meta.row_group(g).column(c).total_compressed_size
    return total
