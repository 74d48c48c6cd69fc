from dbt.adapters.hudilite.table.format.commit import CommitMetadata, WriteStat
from dbt.adapters.hudilite.table.format.instant import COMMIT, COMPLETED, INFLIGHT, REPLACE_COMMIT, Instant
from dbt.adapters.hudilite.table.services.validation import check_table

PROPS = {"hoodie.table.name": "t", "hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "6",
         "hoodie.timeline.layout.version": "1"}
T1, T2 = "20260101000000000", "20260102000000000"
F1 = f"p=a/f1-0_0-1-0_{T1}.parquet"
F2 = f"p=a/f2-0_0-1-0_{T2}.parquet"


def stat(path, file_id, size=10):
    return WriteStat(fileId=file_id, path=path, partitionPath="p=a", numWrites=1, fileSizeInBytes=size)


def commits(replaced=None):
    return [(Instant(T1, COMMIT, COMPLETED), CommitMetadata("INSERT", [stat(F1, "f1-0")])),
            (Instant(T2, REPLACE_COMMIT, COMPLETED), CommitMetadata("INSERT_OVERWRITE", [stat(F2, "f2-0")],
                                                                   replaced or {"p=a": ["f1-0"]}))]


DISK = {F1: 10, F2: 10, "p=a/.hoodie_partition_metadata": 40}


def test_a_well_formed_table_has_no_problems():
    assert check_table(PROPS, commits(), [], DISK, {F1, F2}) == []


def test_each_rule():
    problems = check_table(
        {k: v for k, v in PROPS.items() if k != "hoodie.table.name"},
        commits(replaced={"p=a": ["ghost-0"]}),
        [Instant("20260103000000000", COMMIT, INFLIGHT)],
        {F2: 11, "p=a/stray.parquet": 3, "p=b/" + F2.split("/")[1]: 10, "p=a/f9-0_0-1-0_20260103000000000.parquet": 5},
        {F1, F2},
    )
    assert problems == [
        "hoodie.properties lacks hoodie.table.name",
        "instant 20260103000000000 (commit) is inflight: a write did not finish; the next write rolls it back",
        "instant 20260102000000000 replaces unknown file group p=a/ghost-0",
        f"committed file {F1} (instant {T1}) is missing from storage",
        f"committed file {F2} is 11 bytes, its commit says 10",
        "stray file p=a/stray.parquet: no completed instant wrote it (Hudi readers may fail on it)",
        f"stray file p=b/{F2.split('/')[1]}: no completed instant wrote it (Hudi readers may fail on it)",
        "partition 'p=a' has no .hoodie_partition_metadata",
        "partition 'p=b' has no .hoodie_partition_metadata",
    ]


def test_cleaned_files_are_not_missing():
    assert check_table(PROPS, commits(), [], {F2: 10, "p=a/.hoodie_partition_metadata": 1}, {F2}) == []
