"""Which file groups clustering rewrites together: pure, no Spark."""

from dbt.adapters.hudilite.table.services import clustering
from dbt.adapters.hudilite.table.services.clustering import ClusteringGroup, plan_clustering
from dbt.adapters.hudilite.table.format.file_group import BaseFile, FileGroup
from dbt.adapters.hudilite.table.spark.file_sizing import FileSizing


def group(partition, file_id, size):
    return FileGroup(partition, file_id, [BaseFile(partition, file_id, "1", f"{partition}/{file_id}.parquet", 1, size)])


def test_two_or_more_small_groups_of_a_partition_are_rewritten_together(monkeypatch):
    sizing = FileSizing(small_file_limit=100, max_file_size=120)
    groups = [group("a", "f2", 50), group("a", "f1", 10), group("a", "big", 100), group("b", "alone", 5),
              group("c", "g1", 1), group("c", "g2", 2)]
    assert plan_clustering(groups, sizing, record_bytes=10) == [
        ClusteringGroup("a", ["f1", "f2"], rows_per_file=12), ClusteringGroup("c", ["g1", "g2"], rows_per_file=12)]
    assert plan_clustering(groups, FileSizing(small_file_limit=0), 10) == []
    # A partition's small groups beyond one task's share go to further tasks; a lone leftover stays.
    monkeypatch.setattr(clustering, "MAX_BYTES_PER_GROUP", 60)
    many = [group("a", f"f{i}", 20) for i in range(7)]
    assert [c.file_ids for c in plan_clustering(many, sizing, 10)] == [["f0", "f1", "f2"], ["f3", "f4", "f5"]]
