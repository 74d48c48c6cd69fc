"""Tables on S3 through the `Storage` seam, against a local S3 server (moto's server mode, which
honours `If-None-Match` and `If-Match` on PutObject), started once for the session on 127.0.0.1.

moto checks a precondition and stores the object in two steps, not atomically across its
threads, so races are tested deterministically: the competing request is injected between the
listing and the conditional put, not left to timing.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import obstore
from dbt.adapters.hudilite.table.storage import object_store, object_store_client
from dbt.adapters.hudilite.table.errors import ConcurrentWriteError
from dbt.adapters.hudilite.table.storage.layout import HOODIE_DIR, LOCK_FILE, writer_path
from dbt.adapters.hudilite.table.storage.lock import TableLock
from dbt.adapters.hudilite.table.storage.object_store import ObjectStorage, ObjectStoreError
from dbt.adapters.hudilite.table.storage.filesystem import Storage
from dbt.adapters.hudilite.table import transaction
from tests.core.process_groups import kill_group, run_in_own_group
from tests.core.s3_proxy import S3Proxy, start_moto_server
from tests.selection import selected_cases

BUCKET = "hudilite-tests"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_server():
    """A moto S3 server on a free port for the whole run; stopped at the end."""
    proc, endpoint = start_moto_server()
    yield endpoint
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def s3(s3_server):
    """The environment a host would have (endpoint, region, credentials), a fresh bucket."""
    env = dict(CREDENTIALS, AWS_ENDPOINT_URL=s3_server, AWS_ALLOW_HTTP="true")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    object_store_client._stores.clear()
    import boto3
    boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield s3_server
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    object_store_client._stores.clear()


@pytest.fixture
def table_uri(s3):
    return f"s3://{BUCKET}/t-{uuid.uuid4().hex[:12]}"


def _boto(endpoint):
    import boto3
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def _object_exists(storage, rel):
    return storage._head(rel) is not None


# ---- the seam ------------------------------------------------------------------------------
def test_object_store_uris_get_object_storage_and_local_paths_do_not(table_uri, tmp_path):
    assert isinstance(Storage(table_uri), ObjectStorage)
    assert isinstance(Storage(table_uri.replace("s3://", "s3a://")), ObjectStorage)
    local = Storage(str(tmp_path))
    assert type(local) is Storage and local.is_local
    import pickle
    again = pickle.loads(pickle.dumps(Storage(table_uri)))  # what a Spark task receives
    assert isinstance(again, ObjectStorage) and again.base_path == table_uri


def test_create_exclusive_refuses_a_second_writer_in_another_process(table_uri):
    storage = Storage(table_uri)
    assert storage.create_exclusive(writer_path("20260101000000001"), b'{"who": "first"}')
    code = ("import sys; from dbt.adapters.hudilite.table.storage.filesystem import Storage; "
            f"sys.exit(0 if Storage({table_uri!r}).create_exclusive({writer_path('20260101000000001')!r}, b'x') else 3)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 3
    assert storage.read_bytes(writer_path("20260101000000001")) == b'{"who": "first"}'


def test_a_claim_made_between_listing_and_put_moves_the_writer_to_the_next_time(table_uri, monkeypatch):
    """Writer A lists, picks T; writer B claims T before A's conditional put reaches the store:
    the store refuses A, A claims the next time, B's claim is untouched. (The timeline's last
    instant lies ahead of the clock, so T is that instant's next millisecond for both.)"""
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage, other = Storage(table_uri), Storage(table_uri)
    storage.write_bytes(".hoodie/20991231000000000.commit", b"{}")
    injected = []
    real_list = ObjectStorage.list_names

    def listing_then_competitor(self, rel):
        names = real_list(self, rel)
        if rel == HOODIE_DIR and not injected:  # A listed the claims, then the timeline: B claims now
            injected.append("20991231000000001")
            assert other.create_exclusive(writer_path("20991231000000001"), b'{"who": "B"}')
        return names

    monkeypatch.setattr(ObjectStorage, "list_names", listing_then_competitor)
    mine = transaction._claim_time(Timeline(storage), {"who": "A"})
    assert injected == ["20991231000000001"]
    assert mine == "20991231000000002"  # refused once, then the next time
    assert storage.read_bytes(writer_path("20991231000000001")) == b'{"who": "B"}'
    assert json.loads(storage.read_bytes(writer_path(mine))) == {"who": "A"}


def test_completed_instant_is_one_create_if_absent_put_never_replaced(table_uri):
    from dbt.adapters.hudilite.table.format.commit import CommitMetadata
    from dbt.adapters.hudilite.table.format.timeline import Timeline

    storage = Storage(table_uri)
    path = ".hoodie/20260101000000001.commit"
    publish = lambda data: storage.publish(path, data, ".hoodie/.hudilite/tmp", lambda: None)  # noqa: E731
    publish(b'{"a": 1}')
    publish(b'{"a": 1}')  # the same bytes again: a retried publish
    with pytest.raises(ObjectStoreError, match="never replaced"):
        publish(b'{"a": 2}')
    assert storage.read_bytes(path) == b'{"a": 1}'
    # the timeline publishes every completed instant so, a commit's and a service's alike
    timeline = Timeline(storage)
    with pytest.raises(ObjectStoreError, match="never replaced"):
        timeline.complete("20260101000000001", "commit", CommitMetadata("insert"))
    assert storage.read_bytes(path) == b'{"a": 1}'
    storage.write_atomic(".hoodie/.hudilite/clean.json", b"1", ".hoodie/.hudilite/tmp")
    storage.write_atomic(".hoodie/.hudilite/clean.json", b"2", ".hoodie/.hudilite/tmp")  # state files are replaced
    assert storage.read_bytes(".hoodie/.hudilite/clean.json") == b"2"
    assert storage.list_files_recursive(".hoodie/.hudilite/tmp") == []  # no temporary objects


def test_heartbeat_never_overwrites_a_tombstone_written_meanwhile(table_uri, monkeypatch):
    storage = Storage(table_uri)
    claim = writer_path("20260101000000001")
    storage.write_bytes(claim, b'{"state": "writing"}')
    real_read = ObjectStorage.read_versioned

    def read_then_rolled_back(self, rel):
        found = real_read(self, rel)
        Storage(table_uri).write_bytes(claim, b'{"state": "rolled_back"}')  # another writer's rollback
        return found

    monkeypatch.setattr(ObjectStorage, "read_versioned", read_then_rolled_back)
    storage.touch(claim)
    monkeypatch.undo()
    assert storage.read_bytes(claim) == b'{"state": "rolled_back"}'
    before = storage.mtime_seconds(claim)
    time.sleep(1.1)
    storage.touch(claim)  # no one in between: the heartbeat lands
    assert storage.mtime_seconds(claim) > before
    assert storage.read_bytes(claim) == b'{"state": "rolled_back"}'


def test_listing_is_paginated_and_deletes_go_in_batches_of_1000(table_uri, monkeypatch):
    storage = Storage(table_uri)
    names = [f"part-{i:05d}.marker" for i in range(2100)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: storage.write_bytes(f".hoodie/.hudilite/markers/T/p/{n}", b""), names))
    storage.write_bytes(".hoodie/.hudilite/markers/T2/other.marker", b"")  # a sibling prefix stays
    assert sorted(storage.list_names(".hoodie/.hudilite/markers/T/p")) == names
    assert sorted(storage.list_files_recursive(".hoodie/.hudilite/markers/T")) == sorted(f"p/{n}" for n in names)
    batches = []
    real_delete = obstore.delete
    monkeypatch.setattr(obstore, "delete", lambda store, paths: (batches.append(len(paths) if isinstance(paths, list) else 1),
                                                                 real_delete(store, paths))[1])
    storage.delete_dir(".hoodie/.hudilite/markers/T")
    assert batches == [1000, 1000, 100]
    assert storage.list_files_recursive(".hoodie/.hudilite/markers/T") == []
    assert storage.list_files_recursive(".hoodie/.hudilite/markers") == ["T2/other.marker"]


def test_a_read_begins_with_the_objects_tail_and_a_small_one_is_one_get(table_uri, monkeypatch):
    """`open_input` asks for an object's last MiB first (its size comes with it): an empty object,
    one smaller than that, one across the boundary and a larger one read back the same, by suffix
    range (S3, GCS) or after a HEAD (Azure takes no suffix range); a small Parquet file is one GET."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from dbt.adapters.hudilite.table.storage import object_store
    storage = Storage(table_uri)
    for n in (0, 5, object_store.TAIL_BYTES + 7, 3 * object_store.TAIL_BYTES):
        data = os.urandom(n)
        storage.write_bytes(f"blob-{n}", data)
        for by_suffix in (True, False):
            reader = object_store._Reader(storage.store, storage.key(f"blob-{n}"), by_suffix=by_suffix)
            assert reader.size() == n and bytes(reader.read()) == data, (n, by_suffix)
            reader.seek(max(0, n - 3))
            assert bytes(reader.read(10)) == data[max(0, n - 3):]
            reader.seek(1)
            assert bytes(reader.read(2 * object_store.TAIL_BYTES)) == data[1:1 + 2 * object_store.TAIL_BYTES]
            with pytest.raises(ValueError):
                reader.seek(-1)
    table = pa.table({"k": pa.array(range(1000))})
    with storage.open_output("small.parquet") as out:
        pq.write_table(table, out)
    calls = []
    for name in ("get", "get_range", "head", "open_reader"):
        real = getattr(obstore, name)
        monkeypatch.setattr(obstore, name, lambda *a, _real=real, _name=name, **k: (calls.append(_name), _real(*a, **k))[1])
    with storage.open_input("small.parquet") as f:
        assert pq.read_table(f).equals(table)
    assert calls == ["get"]
    with pytest.raises(FileNotFoundError):
        storage.open_input("missing.parquet")


def test_folders_are_prefixes_nothing_relies_on_them(table_uri):
    storage = Storage(table_uri)
    storage.make_dirs("region=us")  # no object
    assert not storage.exists("region=us") and storage.list_files_recursive("") == []
    storage.write_bytes("region=us/day=1/f.parquet", b"x")
    assert storage.exists("region=us") and storage.exists("region=us/day=1/f.parquet")
    assert not storage.exists("region=u")  # a prefix of a name is no folder
    assert storage.list_names("") == ["region=us"] and storage.list_names("missing") == []
    with pytest.raises(FileNotFoundError):
        storage.read_bytes("region=us/none")
    storage.delete_file("region=us/none")  # deleting what is gone is no error


def test_a_folder_moves_by_copies_and_is_a_table_only_while_whole(table_uri, monkeypatch):
    """No rename on an object store: `move_dir` copies every object, hoodie.properties last,
    then deletes the source, hoodie.properties first. Cut short after the copies, the target
    holds everything but hoodie.properties (not a table) and the source is whole."""
    from dbt.adapters.hudilite.table.storage import faults
    storage = Storage(table_uri)
    files = {".hoodie/hoodie.properties": b"props", ".hoodie/001.commit": b"commit", "d=1/f.parquet": b"x" * 10}
    files.update({f"d=2/{i:04d}.parquet": b"y" for i in range(40)})  # more than one round of parallel copies
    for rel, data in files.items():
        storage.write_bytes(f"t/{rel}", data)

    class Cut(Exception):
        pass

    def cut(phase):
        if phase == "move":
            raise Cut()
    monkeypatch.setattr(faults, "reach", cut)
    with pytest.raises(Cut):
        storage.move_dir("t", "u", last=".hoodie/hoodie.properties")
    assert sorted(storage.list_files_recursive("u")) == sorted(set(files) - {".hoodie/hoodie.properties"})
    assert sorted(storage.list_files_recursive("t")) == sorted(files)
    monkeypatch.undo()
    storage.move_dir("t", "u", last=".hoodie/hoodie.properties")  # again, from the start
    assert storage.list_files_recursive("t") == []
    assert {rel: storage.read_bytes(f"u/{rel}") for rel in storage.list_files_recursive("u")} == files


def test_large_file_goes_up_in_parts_and_reads_back_by_ranges(table_uri):
    storage = Storage(table_uri)
    table = pa.table({"k": pa.array(range(40_000)), "v": pa.array([os.urandom(1000) for _ in range(40_000)])})
    with storage.open_output("p/big.parquet") as sink:
        pq.write_table(table, sink, compression="none")
    size = storage.size("p/big.parquet")
    assert size > 2 * object_store.UPLOAD_BUFFER_BYTES  # more than one part
    with storage.open_input("p/big.parquet") as source:
        back = pq.ParquetFile(source)
        assert back.metadata.num_rows == 40_000
        last = back.read_row_group(back.num_row_groups - 1)
        assert last.column("k")[-1].as_py() == 39_999 and last.column("v")[-1] == table.column("v")[-1]
    assert _boto(os.environ["AWS_ENDPOINT_URL"]).list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_a_failed_upload_leaves_no_object_and_no_parts(table_uri):
    storage = Storage(table_uri)
    for size in (1000, 3 * object_store.UPLOAD_BUFFER_BYTES):  # one PUT; a multipart upload under way
        path = f"p/failed-{size}.parquet"
        with pytest.raises(RuntimeError, match="task failed"):
            sink = storage.open_output(path)
            try:
                sink.write(os.urandom(size))
                raise RuntimeError("task failed")
            finally:
                sink.close()  # what the writer's cleanup does while the error propagates
        assert not _object_exists(storage, path)
    uploads = _boto(os.environ["AWS_ENDPOINT_URL"]).list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    assert [u for u in uploads if u["Key"].startswith(table_uri.split(BUCKET + "/")[1])] == []


def test_a_killed_upload_leaves_no_visible_object(table_uri):
    code = f"""
import os, signal, sys
from dbt.adapters.hudilite.table.storage.filesystem import Storage
sink = Storage({table_uri!r}).open_output("p/killed.parquet")
sink.write(os.urandom(40 * 1024 * 1024))  # parts are going up
print("written", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL and "written" in proc.stdout
    storage = Storage(table_uri)
    assert not _object_exists(storage, "p/killed.parquet")
    assert storage.list_files_recursive("p") == []


def test_a_store_that_ignores_if_none_match_is_one_clear_error(table_uri, monkeypatch):
    real_put = obstore.put
    monkeypatch.setattr(object_store, "_verified", {})
    monkeypatch.setattr(obstore, "put", lambda store, path, data, mode=None, **kw: real_put(store, path, data, **kw))
    with pytest.raises(ObjectStoreError, match="ignores If-None-Match"):
        Storage(table_uri).create_exclusive(writer_path("20260101000000001"), b"{}")


def test_checking_a_location_names_a_missing_bucket_and_leaves_nothing(s3):
    from dbt.adapters.hudilite.table.storage.object_store import check_location
    with pytest.raises(ObjectStoreError, match="bucket s3://no-such-bucket not found"):
        check_location("s3://no-such-bucket/lake")
    check_location(f"s3://{BUCKET}/lake")  # reachable, writable, conditional puts honoured
    assert Storage(f"s3://{BUCKET}/lake").list_files_recursive("") == []


def test_throttling_answers_are_retried_with_backoff(table_uri, monkeypatch):
    storage = Storage(table_uri)
    storage.write_bytes("f", b"x")
    real_head, calls = obstore.head, []

    def throttled(store, path):
        calls.append(path)
        if len(calls) <= 2:
            raise obstore.exceptions.GenericError("Server returned non-2xx status code: 503 Service Unavailable: SlowDown")
        return real_head(store, path)

    monkeypatch.setattr(obstore, "head", throttled)
    assert storage.size("f") == 1 and len(calls) == 3


def test_an_error_naming_429_in_a_key_is_not_throttling(table_uri, monkeypatch):
    storage = Storage(table_uri)
    calls = []

    def failing(store, path):
        calls.append(path)
        raise obstore.exceptions.GenericError(f"Server returned non-2xx status code: 400 Bad Request: {path}/20261126084290429")

    monkeypatch.setattr(obstore, "head", failing)
    with pytest.raises(OSError):
        storage.size("f")
    assert len(calls) == 1  # not retried


def test_a_location_with_hash_or_question_mark_is_refused_naming_it(s3):
    from dbt.adapters.hudilite.table.errors import ConfigurationError
    for uri in (f"s3://{BUCKET}/tables/a#1", f"s3://{BUCKET}/tables/a?b=1"):
        with pytest.raises(ConfigurationError, match="cannot hold '#' or '\\?'"):
            Storage(uri).exists("x")


def test_tasks_keep_the_drivers_addressing_style(monkeypatch):
    built = {}
    import obstore.store
    monkeypatch.setattr(obstore.store, "S3Store", lambda bucket, config, **kw: built.update(config) or object())
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "true")
    object_store_client._build_store("s3", "b", {})
    assert built["virtual_hosted_style_request"] is True
    monkeypatch.delenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")
    built.clear()
    object_store_client._build_store("s3", "b", {})
    assert built["virtual_hosted_style_request"] is False  # an S3-compatible endpoint: path style


def _commit_puts(proxy, since=0):
    """The PUTs of completed instants (`.commit`) the proxy saw since `since`."""
    return [r for r in proxy.since(since) if r.method == "PUT" and r.path.split("?")[0].endswith(".commit")]


def _slow_down_commits(proxy, times):
    """The proxy answers `503 SlowDown` to the next `times` PUTs of completed instants."""
    left = [times]

    def fault(method, path):
        if method == "PUT" and path.split("?")[0].endswith(".commit") and left[0] > 0:
            left[0] -= 1
            return 503, "SlowDown", "Reduce your request rate."
        return None

    proxy.fault = fault


def test_each_publish_attempt_follows_its_own_lease_check_the_client_never_retries_it(s3, monkeypatch):
    """obstore retries a failed request by itself for up to minutes, far beyond the lease's
    margin: the publishing PUT goes through a client without retries, and each attempt the
    seam makes comes right after a check of the lease."""
    from dbt.adapters.hudilite.table.storage import lock
    proxy = S3Proxy(s3)
    uri = f"s3://{BUCKET}/proxied-{uuid.uuid4().hex[:8]}"
    object_store_client.configure(uri, endpoint=proxy.url, allow_http=True)
    try:
        storage = Storage(uri)
        checks = []

        def check():
            checks.append(len(_commit_puts(proxy)))
            lock.check_lease(storage)

        # Two transient failures: three attempts, each right after its own check.
        _slow_down_commits(proxy, 2)
        storage.publish(".hoodie/20260101000000001.commit", b'{"a": 1}', ".hoodie/.hudilite/tmp", check)
        assert len(_commit_puts(proxy)) == 3 and checks == [0, 1, 2]
        assert storage.read_bytes(".hoodie/20260101000000001.commit") == b'{"a": 1}'

        # The lease is found lost before the second attempt: nothing more is sent, nothing published.
        def lost_after_the_first():
            checks.append(len(_commit_puts(proxy, mark)))
            if len(checks) > 1:
                raise ConcurrentWriteError("the table's lease was taken over")

        checks.clear()
        mark = proxy.mark()
        _slow_down_commits(proxy, 1)
        with pytest.raises(ConcurrentWriteError, match="lease"):
            storage.publish(".hoodie/20260101000000002.commit", b'{"a": 2}', ".hoodie/.hudilite/tmp",
                            lost_after_the_first)
        assert len(_commit_puts(proxy, mark)) == 1 and checks == [0, 1]
        assert not storage.exists(".hoodie/20260101000000002.commit")
    finally:
        object_store_client._settings.pop(uri, None)
        object_store_client._stores.clear()
        proxy.close()


def _refuse_writes(method, path):
    """A principal that may read but not write: S3's answer under a bucket policy denying
    s3:PutObject and s3:DeleteObject (moto's server enforces bucket policies only in part)."""
    if method in ("PUT", "POST", "DELETE"):
        return 403, "AccessDenied", "Access Denied"
    return None


def _keys(endpoint, prefix):
    found = _boto(endpoint).list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in found)


def test_no_permission_to_write_is_one_clear_error_naming_the_location_and_leaves_nothing(s3, spark):
    """Writes refused with 403 AccessDenied: `dbt debug`'s location check, a table create and a
    write to an existing table each stop with one error that names where and why, before any
    object is left on the store."""
    from dbt.adapters.hudilite.table import HudiTable
    from dbt.adapters.hudilite.table.errors import ConfigurationError
    from dbt.adapters.hudilite.table.storage.object_store import check_location
    proxy = S3Proxy(s3)
    prefix = f"denied-{uuid.uuid4().hex[:8]}"
    uri = f"s3://{BUCKET}/{prefix}"
    object_store_client.configure(uri, endpoint=proxy.url, allow_http=True)
    try:
        table = HudiTable.create(spark, f"{uri}/events", "events", record_key="id")  # while writes were allowed
        before = _keys(s3, prefix)
        assert before == [f"{prefix}/events/.hoodie/hoodie.properties"]
        proxy.fault, mark = _refuse_writes, proxy.mark()

        with pytest.raises(ObjectStoreError) as checked:
            check_location(uri)
        message = str(checked.value)
        assert message.startswith(f"{uri}: no permission to write to s3://{BUCKET} with this host's credentials: "
                                  f"the store refused PUT {proxy.url}/{BUCKET}/{prefix}/.hudilite-check/"), message
        assert "(403 Forbidden, AccessDenied)" in message and "bucket's policy" in message and "\n" not in message

        with pytest.raises(ConfigurationError) as created:
            HudiTable.create(spark, f"{uri}/other", "other", record_key="id")
        message = str(created.value)
        assert message.startswith(f"cannot create table other at {uri}/other: no permission: the store refused PUT "
                                  f"{proxy.url}/{BUCKET}/{prefix}/other/"), message
        assert "(403 Forbidden, AccessDenied)" in message and "\n" not in message

        with pytest.raises(PermissionError) as written:
            table.insert(spark.createDataFrame([(1, "a")], "id long, v string"))
        message = str(written.value)
        assert message.startswith(f"no permission: the store refused PUT {proxy.url}/{BUCKET}/{prefix}/events/.hoodie/"), message
        assert "(403 Forbidden, AccessDenied)" in message and "\n" not in message

        refused = [r for r in proxy.since(mark) if r.method in ("PUT", "POST", "DELETE")]
        assert refused and not [r for r in refused if r.method == "PUT" and prefix not in r.path]
        assert _keys(s3, prefix) == before  # nothing left behind
    finally:
        object_store_client._settings.pop(uri, None)
        object_store_client._stores.clear()
        proxy.close()


def _dbt_project(project, name, root, endpoint, models=None):
    """A dbt project at `project` whose profile puts its tables at `root` on the S3 server at
    `endpoint`; returns the environment to run dbt in (no AWS_ENDPOINT_URL: the profile says
    where the store is) and the dbt executable."""
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(f"name: {name}\nprofile: {name}\nversion: '1.0'\n")
    for file, sql in (models or {}).items():
        (project / "models" / file).write_text(sql)
    (project / "profiles.yml").write_text(
        f"{name}:\n  target: dev\n  outputs:\n    dev:\n      type: hudilite\n      schema: analytics\n"
        f"      location_root: {root}\n      s3_endpoint: {endpoint}\n      s3_region: us-east-1\n      threads: 1\n")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, DBT_SEND_ANONYMOUS_USAGE_STATS="false", TZ="UTC")
    env.pop("AWS_ENDPOINT_URL", None)
    return env, os.path.join(os.path.dirname(sys.executable), "dbt")


def test_dbt_debug_names_a_location_it_may_not_write_to(s3, tmp_path):
    """`dbt debug` with a profile whose store refuses this host's writes: one error naming the
    location_root and the refusal, and no probe object left."""
    proxy = S3Proxy(s3)
    proxy.fault = _refuse_writes
    prefix = f"debug-{uuid.uuid4().hex[:8]}"
    project = tmp_path / "denied"
    env, dbt = _dbt_project(project, "denied", f"s3://{BUCKET}/{prefix}", proxy.url)
    try:
        debug = subprocess.run([dbt, "debug", "--project-dir", str(project), "--profiles-dir", str(project)],
                               capture_output=True, text=True, env=env, timeout=600)
    finally:
        proxy.close()
    assert debug.returncode != 0
    expected = (f"location_root: s3://{BUCKET}/{prefix}: no permission to write to s3://{BUCKET} with this host's "
                f"credentials: the store refused PUT {proxy.url}/{BUCKET}/{prefix}/.hudilite-check/")
    assert expected in debug.stdout and "(403 Forbidden, AccessDenied)" in debug.stdout, debug.stdout[-3000:]
    assert [r for r in proxy.since() if r.method == "PUT"]  # the check went through the refusing store
    assert _keys(s3, prefix) == []


def test_the_counting_proxy_relays_multipart_and_chunked_uploads_and_counts_them(s3):
    """The proxy the benchmark counts requests with (tests/core/s3_proxy.py): a 40 MB multipart
    upload and a chunked PUT reach the server whole, and each request is counted by kind."""
    import http.client
    proxy = S3Proxy(s3)
    uri = f"s3://{BUCKET}/counted-{uuid.uuid4().hex[:8]}"
    object_store_client.configure(uri, endpoint=proxy.url, allow_http=True)
    try:
        storage = Storage(uri)
        payload = os.urandom(40 * 1024 * 1024)
        with storage.open_output("big.bin") as sink:
            sink.write(payload)
        parts = -(-len(payload) // object_store.UPLOAD_BUFFER_BYTES)
        assert proxy.counts() == {"LIST": 0, "GET": 0, "HEAD": 0, "PUT": parts, "POST": 2, "DELETE": 0}  # create, parts, complete
        mark = proxy.mark()
        assert storage.size("big.bin") == len(payload) and storage.list_names("") == ["big.bin"]
        with storage.open_input("big.bin") as source:
            source.seek(len(payload) - 1000)
            assert source.read() == payload[-1000:]
        counted = proxy.counts(mark)
        assert counted["HEAD"] >= 1 and counted["LIST"] == 1 and counted["GET"] >= 1 and counted["PUT"] == 0
        mark = proxy.mark()
        storage.delete_file("big.bin")
        assert len(proxy.since(mark)) == 1 and proxy.since(mark)[0].kind in ("DELETE", "POST")  # one request
        conn = http.client.HTTPConnection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]), timeout=30)
        conn.putrequest("PUT", f"/{BUCKET}/{uri.split(BUCKET + '/')[1]}/chunked.bin")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for piece in (b"sent ", b"in ", b"chunks"):
            conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.send(b"0\r\n\r\n")
        assert conn.getresponse().status == 200
        conn.close()
        assert storage.read_bytes("chunked.bin") == b"sent in chunks"
        assert [r.client for r in proxy.since() if r.kind == "PUT"][-1] == "other"
        assert {r.client for r in proxy.since() if r.path.endswith("big.bin")} == {"obstore"}
    finally:
        object_store_client._settings.pop(uri, None)
        object_store_client._stores.clear()
        proxy.close()


# ---- the table lock as a lease ---------------------------------------------------------------
def test_lease_excludes_a_second_holder_while_renewed(table_uri):
    storage = Storage(table_uri)
    with TableLock(storage, lease_s=3.0, renew_s=0.2):
        time.sleep(0.5)
        started = time.monotonic()
        with pytest.raises(ConcurrentWriteError, match="waited"):
            with TableLock(Storage(table_uri), wait_s=4.5):
                pass
        assert time.monotonic() - started >= 4.5  # renewed past its 3 s lease: never taken over
    lease = json.loads(storage.read_bytes(LOCK_FILE))
    assert lease["released"] is True
    started = time.monotonic()
    with TableLock(Storage(table_uri), wait_s=3.0):  # a released lease is taken at once
        assert time.monotonic() - started < 1.5


def test_lease_of_a_killed_holder_is_taken_over_only_after_it_expires(table_uri):
    code = f"""
import os, signal
from dbt.adapters.hudilite.table.storage.lock import TableLock
from dbt.adapters.hudilite.table.storage.filesystem import Storage
TableLock(Storage({table_uri!r}), lease_s=3.0, renew_s=0.3).__enter__()
print("holding", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL and "holding" in proc.stdout
    storage = Storage(table_uri)
    dead = json.loads(storage.read_bytes(LOCK_FILE))
    assert dead["released"] is False
    started = time.monotonic()
    with pytest.raises(ConcurrentWriteError):
        with TableLock(storage, wait_s=1.0):
            pass
    with TableLock(storage, wait_s=20.0) as lock:
        waited = time.monotonic() - started
        assert json.loads(storage.read_bytes(LOCK_FILE))["owner"] == lock.owner
    assert 3.0 <= waited < 15.0  # the dead holder's whole lease, observed unchanged, then taken


def test_a_holder_that_lost_its_lease_publishes_nothing(table_uri):
    storage = Storage(table_uri)
    stalled = TableLock(storage, lease_s=2.0, renew_s=3600)  # its renewals never come: a stalled writer
    stalled.__enter__()
    taken, done, owner = threading.Event(), threading.Event(), []

    def another_writer():  # in its own thread, as another host would be
        with TableLock(Storage(table_uri), wait_s=20.0) as taker:
            owner.append(taker.owner)
            taken.set()
            done.wait(30)

    thread = threading.Thread(target=another_writer)
    thread.start()
    try:
        assert taken.wait(25)
        from dbt.adapters.hudilite.table.format.commit import CommitMetadata
        from dbt.adapters.hudilite.table.format.timeline import Timeline
        with pytest.raises(ConcurrentWriteError, match="lease"):  # the timeline publishes after a check of the lease
            Timeline(storage).complete("20260101000000001", "commit", CommitMetadata("insert"))
        assert not storage.exists(".hoodie/20260101000000001.commit")
        stalled.__exit__(None, None, None)  # its release is refused: the taker's lease stays
        lease = json.loads(storage.read_bytes(LOCK_FILE))
        assert lease["owner"] == owner[0] and lease["released"] is False
    finally:
        done.set()
        thread.join()
        stalled.__exit__(None, None, None)


# ---- the core on S3 (Spark with S3A, in a process of its own) --------------------------------
@pytest.fixture(scope="module")
def core_tables(s3, tmp_path_factory):
    base = f"s3://{BUCKET}/core-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TZ="UTC")
    # Two processes at once, on tables of their own: the crash subset, one process whose six
    # writes are killed in flight (tests/core/s3_crash_writer.py), and the job with every other
    # scenario, whose `crashes` scenario (the next writers) waits until the killed writes were
    # read here. Each spends much of its time starting a JVM or waiting on the store.
    from tests.core.s3_crash_writer import TABLES
    from tests.core.s3_table_job import CRASHES_AFTER
    folder = tmp_path_factory.mktemp("core_tables")
    crashes_after = folder / "crashes_after"
    scenarios = ["keyed", "append", "conflict", "race", "services", "two_writers", "odd_partitions", "rebuilds",
                 "crashes"]
    with open(folder / "job.out", "w") as job_out, open(folder / "job.err", "w") as job_err:
        job = subprocess.Popen([sys.executable, "-m", "tests.core.s3_table_job", base, *scenarios], cwd=ROOT,
                               env=dict(env, **{CRASHES_AFTER: str(crashes_after)}), stdout=job_out, stderr=job_err,
                               start_new_session=True)
    try:
        returncode, out, err = run_in_own_group([sys.executable, "-m", "tests.core.s3_crash_writer", f"{base}/crashes",
                                                 str(tmp_path_factory.mktemp("barrier"))], 900, env=env, cwd=ROOT)
        crashed = {"returncode": returncode, "stdout": out, "stderr": err[-3000:]}
        killed = returncode == -signal.SIGKILL  # else the crash test fails on its own, and only it
        if killed:  # what a reader sees before any next writer
            crashed["hudi_rs"] = {name: _hudi_rs(f"{base}/crashes/{name}", columns=("id", "v", "day")) for name in TABLES}
        (folder / "crashes_after.tmp").write_text("go" if killed else "skip")
        os.replace(folder / "crashes_after.tmp", crashes_after)
        job.wait(timeout=1500)
    finally:
        if job.poll() is None:
            kill_group(job)
    lines = [line for line in (folder / "job.out").read_text().splitlines() if line.startswith("RESULT ")]
    assert job.returncode == 0 and lines, (folder / "job.err").read_text()[-4000:]
    results = json.loads(lines[-1][len("RESULT "):])
    results["crashed"] = crashed
    return base, results


def _hudi_rs_rows(uri, as_of=None):
    """The rows hudi-rs reads from the table at `uri` on the S3 server, as dicts."""
    import hudi
    options = {"aws_endpoint_url": os.environ["AWS_ENDPOINT_URL"], "aws_allow_http": "true",
               "aws_region": "us-east-1", "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    table = hudi.HudiTableBuilder.from_base_uri(uri).with_storage_options(options).build()
    batches = table.read(hudi.HudiReadOptions().with_as_of_timestamp(as_of)) if as_of else table.read()
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def _hudi_rs(uri, as_of=None, columns=("event_id", "region", "amount")):
    return sorted([r[c] for c in columns] for r in _hudi_rs_rows(uri, as_of))


def _events(ids, region=None, amount=None):
    return [[i, region or ("us" if i % 2 == 0 else "eu"), i * 0.5 if amount is None else float(amount)] for i in ids]


def test_keyed_table_on_s3_insert_upsert_delete_overwrite_clean(core_tables):
    base, results = core_tables
    out, uri = results["keyed"], f"{base}/keyed"
    after_insert = _events(range(0, 40))
    after_upsert = sorted(_events(range(0, 30)) + _events(range(30, 50), amount=-1))
    after_delete = [r for r in after_upsert if r[0] >= 5]
    after_overwrite = sorted([r for r in after_delete if r[1] == "us"] + _events(range(100, 103), region="eu"))
    assert out["rows"]["insert"] == sorted(after_insert)
    assert out["rows"]["upsert"] == after_upsert
    assert out["rows"]["delete"] == after_delete
    assert out["rows"]["insert_overwrite"] == after_overwrite
    assert out["rows"]["latest"] == after_overwrite
    assert [a for _, a, s in out["timeline"]] == ["commit", "commit", "commit", "replacecommit"]
    assert {s for _, _, s in out["timeline"]} == {"COMPLETED"}
    assert out["validate"] == []
    # The cleaner deleted what it planned, on the store; the latest slices remain.
    assert out["cleaned"] and not set(out["cleaned"]) & set(out["after_clean"])
    assert out["after_clean"] == out["base_files"]
    # hudi-rs reads the same table from the same endpoint.
    assert _hudi_rs(uri) == after_overwrite
    assert _hudi_rs(uri, as_of=out["instants"]["insert_overwrite"]) == after_overwrite
    # Nothing left behind: no markers, no temporary objects, the lease released.
    storage = Storage(uri)
    private = storage.list_files_recursive(".hoodie/.hudilite")
    assert not [p for p in private if p.startswith(("markers/", "tmp/", "probe/"))]
    # Published writes' claims are gone; the clean's reserved time stays as a tombstone, as on disk.
    claims = {p: json.loads(storage.read_bytes(".hoodie/.hudilite/" + p)) for p in private if p.startswith("writers/")}
    assert [c for c in claims.values() if c.get("state") != "rolled_back"] == [], claims
    if "lock" in private:
        assert json.loads(storage.read_bytes(LOCK_FILE))["released"] is True


def test_auto_keyed_table_on_s3_appends_and_overwrite_read_back_by_hudi_rs_at_every_instant(core_tables):
    base, results = core_tables
    out, uri = results["append"], f"{base}/append"
    expected = {"append_1": _events(range(0, 10)), "append_2": _events(range(0, 15)),
                "overwrite_table": _events(range(20, 23), region="apac")}
    for name, rows in expected.items():
        assert out["rows"][name] == sorted(rows), name
        assert _hudi_rs(uri, as_of=out["instants"][name]) == sorted(rows), name
    assert out["rows"]["latest"] == sorted(expected["overwrite_table"]) == _hudi_rs(uri)
    assert out["validate"] == []


def test_spark_settings_only_for_s3_roots_at_pysparks_hadoop_version():
    import glob
    import pyspark
    from dbt.adapters.hudilite import object_store_settings as settings

    assert settings.spark_conf("/tmp/lake") == {} and settings.spark_conf(None) == {}
    conf = settings.spark_conf("s3://bucket/lake", endpoint="http://127.0.0.1:9000", region="eu-west-1")
    jar = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))[0]
    version = os.path.basename(jar)[len("hadoop-client-api-"):-len(".jar")]
    assert conf["spark.jars.packages"] == f"org.apache.hadoop:hadoop-aws:{version}"
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"  # s3:// read as S3A
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.executorEnv.AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert not [k for k in conf if "secret" in k.lower() or "access.key" in k.lower()]  # credentials: the chains


def test_a_conflicting_writer_on_s3_fails_leaves_nothing_and_succeeds_on_retry(core_tables):
    """Two writers rewrite one file group: the later publisher's conflict check (under the lease)
    sees the other's commit, so no update is lost and nothing of the loser stays on the store."""
    base, results = core_tables
    out = results["conflict"]
    assert out["conflict"] and "conflicts" in out["conflict"] and out["instants"]["theirs"] in out["conflict"]
    assert out["parquet_after_conflict"] == out["committed_after_conflict"]  # the loser's files are gone
    assert out["rows"]["theirs"] == sorted(_events([0, 1, 3, 4, 5]) + _events([2], amount=-2))
    expected = sorted(_events([1, 3, 4, 5]) + _events([2], amount=-2) + _events([0], amount=-1))
    assert out["rows"]["retry"] == out["rows"]["latest"] == expected == _hudi_rs(f"{base}/conflict")
    assert out["validate"] == []


def test_two_writers_racing_on_one_file_group_lose_no_update(core_tables):
    """Two writers update keys of one file group at the same time, each retrying on conflicts:
    every update is in the table, the table is well-formed, hudi-rs reads the same rows."""
    base, results = core_tables
    out = results["race"]
    assert out["errors"] == []
    assert all("conflicts" in c or "rolled back" in c for c in out["conflicts"]), out["conflicts"]
    updated = {0, 2, 4, 10, 12, 14}
    expected = sorted([i, "us", -float(i) if i in updated else i * 0.5] for i in range(0, 20, 2))
    assert out["rows"]["latest"] == expected == _hudi_rs(f"{base}/race")
    assert len([i for i in out["timeline"] if i[2] == "COMPLETED"]) == 1 + len(updated)
    assert out["validate"] == []


def test_crashed_writes_on_s3_leave_the_table_as_before_and_the_next_writer_cleans_up(core_tables):
    """The crash matrix's subset on the store: an insert, an upsert and an insert_overwrite
    killed before publishing and inside a task after writing a data file (one process, six
    writes in flight). No partial commit is visible (ours and hudi-rs read the rows before),
    the next writer succeeds and rolls the dead write back: its data files and markers go."""
    from tests.core.crash_cases import START
    from tests.core.s3_crash_writer import BATCHES, TABLES
    base, results = core_tables
    crashed = results["crashed"]
    assert crashed["returncode"] == -signal.SIGKILL, crashed["stderr"]
    assert "AT before_publish" in crashed["stdout"] and "NOT KILLED" not in crashed["stdout"], crashed["stdout"]
    before = sorted(list(r) for r in START)
    marker = [999, "next", "d0"]
    for name in TABLES:
        found = results["crashes"][name]
        assert crashed["hudi_rs"][name] == before, name
        assert found["before"] == before, name
        assert len(found["pending_before"]) == 1, (name, found["pending_before"])  # the dead write, never completed
        assert found["orphans_before"], name  # its data files were on the store
        assert found["after"] == sorted(before + [marker]), name
        assert found["unique_keys"] and found["validate"] == [], name
        assert found["pending_after"] == [] and found["orphans_after"] == [], name  # rolled back: its files gone
        assert not [p for p in found["private"] if p.startswith(("markers/", "tmp/"))], name
        assert _hudi_rs(f"{base}/crashes/{name}", columns=("id", "v", "day")) == sorted(before + [marker]), name
    assert set(BATCHES) == {name.split("-")[0] for name in TABLES}


def test_cleaner_archival_clustering_savepoint_and_restore_on_s3(core_tables):
    from dbt.adapters.hudilite.table.format.file_group import parse_base_file_name
    base, results = core_tables
    out, uri = results["services"], f"{base}/services"
    savepoint, instants = out["savepoint"], out["instants"]
    at_savepoint = sorted(_events([2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19])
                          + _events([0, 1, 10, 11], amount=-1))
    assert savepoint == instants["upsert_1"] and out["rows"]["upsert_1"] == at_savepoint
    latest = sorted([r for r in at_savepoint if r[0] not in (2, 3, 12)] + _events([2, 3, 12], amount=-2)
                    + _events(range(20, 26)))
    # The cleaner removed its files from the bucket, the savepoint's slices stayed.
    assert out["cleaned"] and not set(out["cleaned"]) & set(out["objects"])
    # Archival moved the oldest instants to .hoodie/archived/, never past the savepoint.
    assert out["archived"] and max(out["archived"]) < savepoint
    assert [o for o in out["objects"] if o.startswith(".hoodie/archived/")]
    active = {i[0] for i in out["timeline_before_restore"]}
    assert not set(out["archived"]) & active
    # Clustering rewrote the small files (fewer of them), rows unchanged.
    assert out["clustered"] and len(out["files_after_cluster"]) < len(out["files_before_cluster"])
    assert out["rows"]["before_cluster"] == out["rows"]["after_cluster"] == latest
    # The restore rolled the clustering and the later writes back, newest first: their files are gone.
    later = [i[0] for i in out["timeline_before_restore"] if i[0] > savepoint and i[1] in ("commit", "replacecommit")]
    assert out["restored"] == list(reversed(later)) and out["clustered"] in out["restored"]
    parquet = [o for o in out["objects"] if o.endswith(".parquet") and not o.startswith(".hoodie")]
    assert parquet and not [p for p in parquet if parse_base_file_name(p.rsplit("/", 1)[-1]).instant > savepoint]
    assert out["rows"]["latest"] == at_savepoint == _hudi_rs(uri) == _hudi_rs(uri, as_of=savepoint)
    assert out["validate"] == []
    assert not [o for o in out["objects"] if o.startswith((".hoodie/.hudilite/markers/", ".hoodie/.hudilite/tmp/"))]


def test_a_rebuild_with_a_new_layout_is_swapped_in_on_s3_and_a_killed_swap_is_finished(core_tables):
    """Object stores cannot rename: the swap deletes the old table (hoodie.properties first),
    copies the rebuild in (hoodie.properties last) and keeps a record until done. Killed with
    the old table gone, or with all but hoodie.properties copied, the name holds no table, and
    the next look waits out the dead swapper's lease and finishes the swap."""
    base, results = core_tables
    out = results["rebuilds"]
    new_rows = sorted(_events(range(10, 14)))
    for cut in ("none", "swap", "move"):
        table = out[f"t_{cut}"]
        assert table["partition_fields"] == [] and table["rows"] == new_rows and table["validate"] == [], (cut, table)
    for cut in ("swap", "move"):
        killed = out[f"t_{cut}_killed"]
        assert killed["returncode"] == -signal.SIGKILL and "NOT KILLED" not in killed["stdout"], killed["stderr"]
        assert not killed["is_table"] and killed["record"], (cut, killed)  # no half table under the name
        assert 2.5 < out[f"t_{cut}_finished_in_s"] < 60, out  # after the dead swapper's 3 s lease
        assert _hudi_rs(f"{base}/rebuilds/a/t_{cut}") == new_rows, cut
    renamed = out["renamed"]
    assert renamed["rows"] == renamed["spark"] == new_rows and not renamed["old_name_is_table"]
    assert _hudi_rs(f"{base}/rebuilds/a/t_renamed") == new_rows
    assert out["left"] == []  # no rebuild, record or object of the old name left


def test_odd_partition_values_on_s3_are_written_and_read_back_as_on_local_disk(core_tables):
    """Glob characters, '%', '=', spaces, non-ASCII, '#', null and empty: the same rows through
    our reader (Spark over S3A) and hudi-rs as on local disk (test_writes.py). A control
    character, which no S3 key can hold, is refused with the error local disk gives, before any
    commit."""
    from tests.core.test_writes import ODD_PARTITION_VALUES
    base, results = core_tables
    out, uri = results["odd_partitions"], f"{base}/odd_partitions"
    rows = [[i, v] for i, v in enumerate(ODD_PARTITION_VALUES)]
    after = sorted([r for r in rows if r[1] not in ("x[1]", None, "")] + [[100, "x[1]"], [101, None]])
    assert out["rows"]["insert"] == sorted(rows)
    assert out["rows"]["overwrite"] == after == _hudi_rs(uri, columns=("id", "p"))
    assert _hudi_rs(uri, as_of=out["instants"]["insert"], columns=("id", "p")) == sorted(rows)
    assert out["refused"] and "partition column 'p' has a value that cannot be a folder name" in out["refused"]
    assert [i[1] for i in out["timeline"]] == ["commit", "replacecommit"]  # the refused write left no instant
    assert not [o for o in out["objects"] if "tab" in o]
    assert out["validate"] == []


S3_ROUNDS = int(os.environ.get("HUDILITE_S3_CONCURRENT_ROUNDS", "6"))  # 10 for the record in docs/object-storage.md


def test_two_processes_upserting_overlapping_keys_on_s3_lose_no_update(core_tables):
    """tests/core/concurrent_writer.py twice, on the store: each process upserts its own keys
    and, every other round, five shared keys, retrying on conflicts."""
    base, results = core_tables
    uri = f"{base}/two_writers"
    assert results["two_writers"] == {"created": True}
    from tests.core.test_concurrency_processes import two_writers

    rounds, done = two_writers(uri, S3_ROUNDS, retries=20, env=dict(os.environ, PYSPARK_PYTHON=sys.executable, TZ="UTC",
                                                            PYTHONPATH=ROOT))
    assert len(done) == 2 * S3_ROUNDS  # with retries every round commits
    expected = {}
    for r in done:  # writes that touched a key never overlapped (they would have conflicted): end order is commit order
        expected.update({k: r["tag"] for k in r["keys"]})
    rows = _hudi_rs(uri, columns=("id", "tag", "_hoodie_record_key"))
    actual = {r[0]: r[1] for r in rows}
    assert len(rows) == len(actual) == 25  # keys unique
    lost = sorted(k for k in expected if actual.get(k) != expected[k])
    assert not lost, f"lost updates on keys {lost}"
    storage = Storage(uri)
    hoodie = storage.list_names(".hoodie")
    assert len([n for n in hoodie if n.endswith(".commit")]) == 1 + 2 * S3_ROUNDS
    completed = {n.split(".")[0] for n in hoodie if n.endswith(".commit")}
    assert not [n for n in hoodie if n.endswith((".inflight", ".requested")) and n.split(".")[0] not in completed]
    assert not [p for p in storage.list_files_recursive(".hoodie/.hudilite") if p.startswith("markers/")]
    print(f"\n2 processes x {S3_ROUNDS} rounds on S3: {len(done)} commits, "
          f"{sum(r['attempts'] - 1 for r in rounds)} conflicts retried")


DBT_MODELS = {
    "events.sql": """{{ config(materialized='incremental', partition_by=['region']) }}
select id, region, amount from values
  ({{ var('day') }} * 10 + 1, 'eu', 1.5), ({{ var('day') }} * 10 + 2, 'us', 2.5) as t(id, region, amount)""",
    "accounts.sql": """{{ config(materialized='incremental', unique_key='id') }}
select id, concat('v', cast({{ var('day') }} as string)) as version from values (1), ({{ var('day') }} + 1) as t(id)""",
    "totals.sql": """{{ config(materialized='table') }}
select region, count(*) as n, sum(amount) as amount from {{ ref('events') }} group by region""",
    # partitioned by region, then by id: built beside the table and swapped in
    "relayout.sql": """{{ config(materialized='table', partition_by=(['id'] if var('day') == 2 else ['region'])) }}
select id, region from {{ ref('events') }}""",
    # the same, but day 2's rebuild fails on a row: the day-1 table stays
    "relayout_fails.sql": """{{ config(materialized='table', partition_by=(['id'] if var('day') == 2 else ['region'])) }}
select id, region{% if var('day') == 2 %}, case when id = 12 then raise_error('boom') else 1 end as bad{% endif %}
from {{ ref('events') }}""",
}


def _dbt_project_runs(project, root, endpoint):
    """The dbt runs of test_a_dbt_project_builds_and_reads_its_tables_on_s3: `dbt build` of day
    1 and of day 2, then `dbt debug` with a profile naming a missing bucket."""
    env, dbt = _dbt_project(project, "s3_project", root, endpoint, DBT_MODELS)
    builds = [subprocess.run([dbt, "build", "--vars", f"{{day: {day}}}", "--project-dir", str(project),
                              "--profiles-dir", str(project)], capture_output=True, text=True, env=env, timeout=900)
              for day in (1, 2)]
    missing = (project / "profiles.yml").read_text().replace(f"s3://{BUCKET}/", "s3://no-such-bucket-hudilite/")
    (project / "profiles.yml").write_text(missing)
    debug = subprocess.run([dbt, "debug", "--project-dir", str(project), "--profiles-dir", str(project)],
                           capture_output=True, text=True, env=env, timeout=600)
    return builds, debug


@pytest.fixture(scope="module", autouse=True)
def dbt_project_on_s3(request, s3, tmp_path_factory):
    """The dbt runs of test_a_dbt_project_builds_and_reads_its_tables_on_s3 (when it is
    selected), started in a thread as the module starts: dbt processes of their own, on tables
    of their own, they run while the tests before theirs do. (The tables' root, the runs' future.)"""
    if not selected_cases(request, "test_a_dbt_project_builds_and_reads_its_tables_on_s3"):
        yield None
        return
    project = tmp_path_factory.mktemp("dbt_on_s3") / "s3_project"
    root = f"s3://{BUCKET}/dbt-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(1) as pool:
        yield root, pool.submit(_dbt_project_runs, project, root, s3)


def test_a_dbt_project_builds_and_reads_its_tables_on_s3(s3, dbt_project_on_s3):
    """`location_root: s3://...` in the profile: dbt builds appends, a merge and a table over
    a ref() on the store, day after day, and hudi-rs reads the same rows from the endpoint."""
    root, runs = dbt_project_on_s3
    (day_1, day_2), debug = runs.result()
    assert day_1.returncode == 0, day_1.stdout[-4000:] + day_1.stderr[-2000:]
    # day 2: every model built but relayout_fails, whose rebuild raised
    assert day_2.returncode != 0 and "PASS=4 WARN=0 ERROR=1" in day_2.stdout and "boom" in day_2.stdout, day_2.stdout[-4000:]
    def rows(name, columns):
        return sorted(tuple(r[c] for c in columns) for r in _hudi_rs_rows(f"{root}/analytics/{name}"))

    assert rows("events", ["id", "region", "amount"]) == [(11, "eu", 1.5), (12, "us", 2.5), (21, "eu", 1.5), (22, "us", 2.5)]
    assert rows("accounts", ["id", "version"]) == [(1, "v2"), (2, "v1"), (3, "v2")]
    assert rows("totals", ["region", "n", "amount"]) == [("eu", 2, 3.0), ("us", 2, 5.0)]
    relayout = [(11, "eu"), (12, "us"), (21, "eu"), (22, "us")]

    def folders(name):
        return sorted({k.split("/")[3] for k in _keys(s3, f"{root.split('/', 3)[3]}/analytics/{name}/")
                       if not k.split("/")[3].startswith(".")})

    assert rows("relayout", ["id", "region"]) == relayout and folders("relayout") == ["id=11", "id=12", "id=21", "id=22"]
    # A rebuild with a new layout that fails leaves the table as it was (built beside it, never swapped in).
    assert rows("relayout_fails", ["id", "region"]) == [(11, "eu"), (12, "us")]
    assert folders("relayout_fails") == ["region=eu", "region=us"]
    assert [k for k in _keys(s3, f"{root.split('/', 3)[3]}/analytics/") if "/.hudilite_rebuilds/" in k] == []
    # dbt debug checks the bucket: a missing one is named.
    assert debug.returncode != 0 and "bucket s3://no-such-bucket-hudilite not found" in debug.stdout, debug.stdout[-3000:]


def test_the_demo_project_builds_on_a_standalone_cluster_with_its_tables_on_s3(s3, spark, tmp_path):
    """integration_projects/web_analytics as a team outgrowing one machine runs it: Spark on a
    standalone cluster (executors in the worker's processes: driver and executors share nothing
    but the store) and `location_root: s3://...` (the endpoint from the environment, as on a
    host). Two days of `dbt build`, every build on the cluster, no JVM noise on the console; the
    tables hold what they hold on local disk, read by hudi-rs from the endpoint."""
    from tests.cluster import standalone_cluster
    from tests.functional.demo_project import assert_two_demo_days, dbt_build
    root = f"s3://{BUCKET}/demo-{uuid.uuid4().hex[:8]}"
    with standalone_cluster() as master:  # its worker inherits the host's environment (endpoint, credentials)
        env = dict(os.environ, HUDILITE_SPARK_MASTER=master, HUDILITE_LOCATION_ROOT=root,
                   PYSPARK_PYTHON=sys.executable, TZ="UTC")
        for run_date in ("2026-11-20", "2026-11-21"):
            build = dbt_build(tmp_path, env, run_date)
            assert build.returncode == 0, build.stdout[-5000:]
            assert "PASS=29 WARN=0 ERROR=0 SKIP=0" in build.stdout
            console = build.stdout + build.stderr  # dbt's lines only: the JVM's go to dbt's log folder
            jvm_lines = [line for line in console.splitlines()
                         if "WARNING: Using incubator" in line or " WARN " in line or "log4j" in line]
            assert jvm_lines == [], jvm_lines
            assert os.path.exists(tmp_path / "logs" / "spark.log")
        assert master.applications() == ["dbt-hudilite"] * 2  # every build ran on the cluster
    assert_two_demo_days(spark, root, rows=lambda name: _hudi_rs_rows(f"{root}/analytics/{name}"))


def test_a_lease_is_judged_by_what_the_waiter_saw_not_by_wall_clocks():
    from dbt.adapters.hudilite.table.storage.lock import _lease_is_free
    skewed = json.dumps({"owner": "a", "expires_at": time.time() - 3600, "lease_s": 30.0, "released": False}).encode()
    assert not _lease_is_free(skewed, unchanged_for_s=1.0)  # a holder whose clock runs an hour behind
    assert _lease_is_free(skewed, unchanged_for_s=30.0)
    assert not _lease_is_free(b"not json", unchanged_for_s=1.0) and _lease_is_free(b"not json", unchanged_for_s=31.0)
    assert _lease_is_free(json.dumps({"owner": "a", "released": True}).encode(), unchanged_for_s=0.0)


def test_a_lease_put_whose_answer_was_lost_is_still_ours(table_uri, monkeypatch):
    storage = Storage(table_uri)
    real_put_if = type(storage).put_if

    def landed_but_refused(self, rel, data, version):
        real_put_if(self, rel, data, version)  # the first attempt lands ...
        return None  # ... and the client's retry is refused: it exists now

    monkeypatch.setattr(type(storage), "put_if", landed_but_refused)
    started = time.monotonic()
    with TableLock(storage, wait_s=5, lease_s=30, renew_s=60):
        assert time.monotonic() - started < 2  # not waiting out a lease of its own
        monkeypatch.undo()
    assert json.loads(storage.read_bytes(LOCK_FILE))["released"] is True
