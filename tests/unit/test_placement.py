"""Packing file groups into rewrite tasks (no Spark; the hash is checked against Spark in
tests/core/test_placement.py)."""

from dbt.adapters.hudilite.table.spark.placement import pack, routing_values, spark_hash_int


def test_pack_gives_each_file_group_its_own_task_when_tasks_allow():
    assert sorted(pack({"a": 5, "b": 3, "c": 9}, 8).values()) == [0, 1, 2]


def test_pack_balances_bytes_over_at_most_max_tasks():
    sizes = {f"fg{i}": size for i, size in enumerate([90, 10, 10, 10, 40, 40, 30, 30, 20, 20])}
    placed = pack(sizes, 3)
    load = [sum(sizes[f] for f, t in placed.items() if t == task) for task in range(3)]
    assert set(placed) == set(sizes) and set(placed.values()) == {0, 1, 2}
    assert max(load) - min(load) <= 10 and sum(load) == 300


def test_pack_makes_no_more_tasks_than_one_per_min_task_bytes_of_work():
    sizes = {"a": 5, "b": 3, "c": 9, "d": 1}
    assert pack(sizes, 8, min_task_bytes=7) == {"c": 0, "a": 1, "b": 1, "d": 1}  # 18 bytes: two tasks
    assert set(pack(sizes, 8, min_task_bytes=100).values()) == {0}  # less than one task's worth: still one task
    assert set(pack(sizes, 3, min_task_bytes=1).values()) == {0, 1, 2}  # max_tasks still caps it


def test_pack_is_the_same_for_the_same_sizes():
    sizes = {f"fg{i}": 7 for i in range(20)}
    assert pack(sizes, 4) == pack(dict(reversed(list(sizes.items()))), 4)


def test_routing_values_cover_every_partition_once():
    for n in (1, 2, 3, 8, 200):
        values = routing_values(n)
        assert [spark_hash_int(v) % n for v in values] == list(range(n))


def test_spark_hash_int_of_known_values():
    # Spark: SELECT hash(0), hash(1), hash(-1), hash(2147483647)
    assert [spark_hash_int(v) for v in (0, 1, -1, 2147483647)] == [933211791, -559580957, -1604776387, 133916647]
