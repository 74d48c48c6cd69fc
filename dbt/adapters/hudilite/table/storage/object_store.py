"""`Storage` on an object store (S3 and S3-compatible stores; GCS and Azure through the same
library), built on obstore, the Python bindings of Rust's `object_store`.

What differs from a file system, and how each method keeps the `Storage` contract:
- No rename. `write_atomic` is one PUT: an object store shows a PUT whole or not at all, so
  no temporary file is needed. A completed timeline instant is written create-if-absent
  (S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`, Azure `If-None-Match: *`).
- No exclusive create. `create_exclusive` is a create-if-absent PUT: the store refuses the
  second writer, whatever the timing. Before its first one, a process checks once per store
  that the store really refuses (a store that silently overwrites is one clear error).
- No mtime update. `touch` (the writers' heartbeats) rewrites the object only if its ETag is
  the one just read, so a heartbeat never overwrites a tombstone written meanwhile.
- No folders, no rename. `make_dirs` does nothing; `exists` of a folder is "some key under it";
  listings are paginated and scoped to the prefix; `delete_dir` deletes in batches of 1,000
  keys (S3 DeleteObjects); `move_dir` copies then deletes, in an order that keeps a table
  from looking whole before it is.
- Uploads. `open_output` streams a multipart upload once the data passes the buffer size;
  the object appears only when the stream is closed after a success. A stream closed while
  an exception propagates, or aborted, or left by a killed process, leaves no object (a
  killed process leaves unfinished parts, which a bucket lifecycle rule removes).
- Transient errors. The library retries 5xx and connection errors with exponential backoff;
  a throttling answer (503 SlowDown, 429) that still comes through is retried here too. The
  PUT that publishes a completed instant is the exception: a client without retries sends
  each attempt once, right after the seam checked the table's lease (`publish`).
- Settings. Nothing but the URI travels with a `Storage`: each process (the driver, every
  Spark executor) builds its own client from `configure()`d settings or the environment
  (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ALLOW_HTTP`, ...), and credentials from the
  standard chains (environment, web identity, container and instance roles; an AWS profile
  through boto3 when `AWS_PROFILE` or ~/.aws is there; GCP application default credentials;
  Azure environment).
"""

from __future__ import annotations

import os
import posixpath
import random
import sys
import time
import uuid
from typing import Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import urlparse

import pyarrow as pa

from ..errors import ConcurrentWriteError, HudiliteError
from .filesystem import Storage, _state_key
from .layout import is_completed_instant_path
from .object_store_client import (AZURE_SCHEMES, GCS_SCHEMES, S3_SCHEMES, first_line, is_object_store_uri, not_found,
                                  refused, retrying, seam_error, settings_for, split_uri, store_for)

DELETE_BATCH = 1000  # S3 DeleteObjects takes at most 1,000 keys
COPY_THREADS = 16  # server-side copies in flight when a folder moves
UPLOAD_BUFFER_BYTES = 16 * 1024 * 1024  # one PUT below it; parts of this size above it
TAIL_BYTES = 1024 * 1024  # a read's first GET: the object's end, whole when it is no larger
PUBLISH_ATTEMPTS = 6  # a publishing PUT: each attempt sent by the seam, after its own lease check

_verified: Dict[Tuple, bool] = {}


class PublishInDoubt(ConcurrentWriteError, OSError):
    """The lease was found lost after an earlier publishing attempt whose answer never came:
    that attempt may still land. An OSError, so that the transaction looks for the completed
    instant for as long as a request may take (`_published_after_all`) before it calls the write
    failed and rolls it back."""


class ObjectStoreError(HudiliteError, RuntimeError):
    """The object store cannot hold a table safely (no conditional puts), or refused us."""


class _Upload:
    """A write-only file over one object: buffered, then multipart above the buffer size. The
    object is there only after `close()` at the end of a successful write; `abort()`, or a
    close while an exception propagates (a failing task's cleanup), leaves none."""

    def __init__(self, store, key: str):
        import obstore
        self._writer = obstore.open_writer(store, key, buffer_size=UPLOAD_BUFFER_BYTES)
        self._position = 0
        self.closed = False

    def write(self, data) -> int:
        view = data if isinstance(data, bytes) else memoryview(data).cast("B")  # pyarrow hands signed chars
        self._writer.write(view)
        self._position += len(view)
        return len(view)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass  # parts go up when the buffer fills; nothing is visible before close anyway

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            with self._writer:  # leaving the block with an exception aborts the upload
                raise _Abort()
        except _Abort:
            pass

    def close(self) -> None:
        if self.closed:
            return
        if sys.exc_info()[0] is not None:
            self.abort()
            return
        self.closed = True
        retrying(self._writer.close)

    def __del__(self):
        if not self.closed:  # dropped unfinished: never publish a half-written object
            try:
                self.abort()
            except Exception:
                pass


class _Abort(Exception):
    pass


class _Reader:
    """A random-access read-only file over one object, for pyarrow. The first request fetches
    the object's last TAIL_BYTES (`by_suffix`: a suffix range, which also tells the size; Azure
    takes none, so a HEAD first there): a small object (an index file, staged rows, a small base
    file) is then read whole from that one GET, and a Parquet file's footer always is. Below the
    tail, ranged GETs through a buffered reader, opened at the first such read."""

    def __init__(self, store, key: str, by_suffix: bool = True):
        import obstore
        self._store, self._key = store, key
        tail = self._suffix() if by_suffix else None
        if tail is None:
            size = retrying(lambda: obstore.head(store, key))["size"]
            start = max(0, size - TAIL_BYTES)
            tail = (start, retrying(lambda: obstore.get_range(store, key, start=start, end=size)) if size else b"", size)
        self._tail_start, self._tail, self._size = tail[0], memoryview(tail[1]), tail[2]
        self._below = None  # obstore's buffered reader, for what lies before the tail
        self._position = 0
        self.closed = False

    def _suffix(self) -> Optional[Tuple[int, bytes, int]]:
        """(start, bytes, object size) of the object's tail; None for an empty object, which
        has no range to answer with (a store sends it whole, or refuses the range)."""
        import obstore
        try:
            got = retrying(lambda: obstore.get(self._store, self._key, options={"range": {"suffix": TAIL_BYTES}}))
        except OSError as err:
            text = str(err).lower()
            if not isinstance(err, (FileNotFoundError, PermissionError)) and any(
                    sign in text for sign in ("non-partial", "not satisfiable", "invalidrange", "416")):
                return None
            raise
        return got.range[0], got.bytes(), got.meta["size"]

    def read(self, size: int = -1):
        end = self._size if size is None or size < 0 else min(self._size, self._position + size)
        start, self._position = self._position, max(self._position, end)
        if start >= self._tail_start:
            return self._tail[start - self._tail_start:end - self._tail_start]
        if self._below is None:
            import obstore
            self._below = obstore.open_reader(self._store, self._key, buffer_size=1024 * 1024)
        self._below.seek(start)
        return memoryview(self._below.read(end - start))

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence not in (0, 1, 2):
            raise ValueError(f"invalid whence ({whence}): 0, 1 or 2")
        position = (0, self._position, self._size)[whence] + offset
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def tell(self) -> int:
        return self._position

    def size(self) -> int:
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._below is not None:
                self._below.close()


class ObjectStorage(Storage):
    """`Storage` for `s3://`, `s3a://`, `gs://`, `az://`, `abfss://` base paths."""

    supports_conditional_update = True

    def __init__(self, base_path: str):
        self.base_path = base_path.rstrip("/")
        self.scheme, self.bucket, self.root = split_uri(self.base_path)
        self.is_local = False
        self._store = None
        self._publish_store = None
        self._pyarrow_fs = None

    def __reduce__(self):
        return (Storage, (self.base_path,))

    @property
    def store(self):
        if self._store is None:
            self._store = store_for(self.base_path)
        return self._store

    @property
    def publish_store(self):
        """The client without automatic retries: a publish's attempts are the seam's own."""
        if self._publish_store is None:
            self._publish_store = store_for(self.base_path, retries=False)
        return self._publish_store

    def key(self, rel: str) -> str:
        rel = rel.strip("/")
        return posixpath.join(self.root, rel) if self.root and rel else (self.root or rel)

    def full_path(self, rel: str) -> str:
        """`bucket/key`: a path for `filesystem` (pyarrow's filesystem of this store)."""
        return posixpath.join(self.bucket, self.key(rel)) if self.key(rel) else self.bucket

    # ---- reads -------------------------------------------------------------------------
    def _head(self, rel: str):
        import obstore
        try:
            return retrying(lambda: obstore.head(self.store, self.key(rel)))
        except Exception as err:
            if not_found(err):
                return None
            raise

    def _is_prefix(self, rel: str) -> bool:
        """Whether some object lies under `rel/` (a "folder" exists when something is in it)."""
        import obstore

        def first_page():
            for chunk in obstore.list(self.store, self.key(rel) + "/", chunk_size=1):
                return len(chunk) > 0
            return False
        return retrying(first_page)

    def exists(self, rel: str) -> bool:
        return self._head(rel) is not None or self._is_prefix(rel)

    def is_file(self, rel: str) -> bool:
        return self._head(rel) is not None

    def _meta(self, rel: str):
        meta = self._head(rel)
        if meta is None:
            raise FileNotFoundError(self.uri(rel))
        return meta

    def size(self, rel: str) -> int:
        return self._meta(rel)["size"]

    def mtime_seconds(self, rel: str) -> float:
        return self._meta(rel)["last_modified"].timestamp()

    def read_versioned(self, rel: str) -> Optional[Tuple[bytes, dict]]:
        """(content, version) of `rel`, None when it does not exist; the version is what a
        conditional `put_if` compares with."""
        import obstore
        try:
            result = retrying(lambda: obstore.get(self.store, self.key(rel)))
            data = bytes(result.bytes())
        except Exception as err:
            if not_found(err):
                return None
            raise
        meta = result.meta
        return data, {"e_tag": meta.get("e_tag"), "version": meta.get("version")}

    def read_bytes(self, rel: str) -> bytes:
        found = self.read_versioned(rel)
        if found is None:
            raise FileNotFoundError(self.uri(rel))
        return found[0]

    # ---- writes ------------------------------------------------------------------------
    def _put(self, rel: str, data, mode=None):
        import obstore
        payload = data if isinstance(data, bytes) else memoryview(data).cast("B")  # Arrow buffers: signed chars
        return retrying(lambda: obstore.put(self.store, self.key(rel), payload, mode=mode,
                                             use_multipart=False if mode not in (None, "overwrite") else None))

    def write_bytes(self, rel: str, data: bytes) -> None:
        self._put(rel, data)

    def write_atomic(self, rel: str, data, tmp_dir: str) -> None:
        """One PUT: readers see all of it or nothing (no temporary object, no copy). Never of a
        completed instant: a plain PUT would replace it, and without a lease check."""
        if is_completed_instant_path(rel):
            raise ObjectStoreError(f"{self.uri(rel)} is a completed instant: it is written only by Storage.publish "
                                   "(create-if-absent, after a lease check)")
        self.forget(_state_key(rel))  # the pinned copy is replaced
        self._put(rel, data)

    def publish(self, rel: str, data, tmp_dir: str, check_lease: Callable[[], None]) -> None:
        """A completed instant: a create-if-absent PUT, never a replacement, each attempt right
        after `check_lease()` says the lease is still ours, sent once by a client without automatic
        retries. A client that retried by itself could deliver the PUT up to its retry timeout
        (minutes) after the check, beyond the lease's margin. A transient failure is retried
        here, with a new check first; an attempt refused because the object exists is either an
        earlier attempt of ours that landed (the same bytes) or an error."""
        import obstore
        from obstore.exceptions import GenericError

        data = bytes(data) if not isinstance(data, bytes) else data
        self.verify_conditional_puts()
        pause = 0.2
        sent = False  # an attempt went out and no answer says it was not applied
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                check_lease()  # publishing under a lease that may have passed to another writer: refuse
            except ConcurrentWriteError as err:
                if sent:
                    raise PublishInDoubt(f"{err}; an earlier attempt to publish {self.uri(rel)} may still land") from err
                raise
            try:
                obstore.put(self.publish_store, self.key(rel), data, mode="create", use_multipart=False)
                return
            except Exception as err:
                if refused(err):
                    if self.read_bytes(rel) != data:
                        raise ObjectStoreError(f"{self.uri(rel)} exists with other content; it is never replaced") from None
                    return
                sent = True
                if not isinstance(err, GenericError) or attempt + 1 == PUBLISH_ATTEMPTS:
                    mapped = seam_error(err)  # the store's error as the seam's (OSError, ...)
                    if mapped is err:
                        raise
                    raise mapped from err
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 5.0)

    def put_if(self, rel: str, data: bytes, version: Optional[dict]) -> Optional[dict]:
        """Write `rel` only if it is absent (`version` None) or still at `version`; its new
        version, or None when the store refused (another writer got there first)."""
        mode = "create" if version is None else {k: v for k, v in version.items() if v is not None}
        if version is None:
            self.verify_conditional_puts()
        try:
            result = self._put(rel, data, mode=mode)
        except Exception as err:
            if refused(err):
                return None
            raise
        return {"e_tag": result.get("e_tag"), "version": result.get("version")}

    def create_exclusive(self, rel: str, data: bytes = b"") -> bool:
        return self.put_if(rel, data, None) is not None

    def verify_conditional_puts(self, probe_dir: str = ".hoodie/.hudilite/probe", force: bool = False) -> None:
        """Once per process and bucket: does the store refuse a second create-if-absent PUT?
        A store that silently overwrites would let two writers claim one instant."""
        key = (self.scheme, self.bucket, tuple(sorted(settings_for(self.base_path).items())))
        if _verified.get(key) and not force:
            return
        import obstore
        probe = self.key(posixpath.join(probe_dir, uuid.uuid4().hex))
        try:
            retrying(lambda: obstore.put(self.store, probe, b"1", mode="create"))
            try:
                retrying(lambda: obstore.put(self.store, probe, b"2", mode="create"))
            except Exception as err:
                if refused(err):
                    _verified[key] = True
                    return
                raise
            raise ObjectStoreError(
                f"{self.scheme}://{self.bucket}: the store accepted a second create-if-absent PUT of one key "
                "(it ignores If-None-Match), so two writers could claim one instant; hudilite writes tables only "
                "to stores with conditional puts (AWS S3, GCS, Azure, MinIO, R2, moto >= 5.0.15)")
        except Exception as err:
            from obstore.exceptions import NotSupportedError
            if isinstance(err, NotSupportedError):
                raise ObjectStoreError(f"{self.scheme}://{self.bucket}: conditional puts are not supported: {err}") from None
            raise
        finally:
            try:
                obstore.delete(self.store, probe)
            except Exception:
                pass

    def touch(self, rel: str) -> None:
        """Renew `rel`'s modification time by rewriting it, only if nobody changed it since we
        read it (a heartbeat must not overwrite a tombstone written meanwhile)."""
        found = self.read_versioned(rel)
        if found is None:
            raise FileNotFoundError(self.uri(rel))
        self.put_if(rel, found[0], found[1])

    def make_dirs(self, rel: str) -> None:
        pass  # an object store has no folders

    # ---- listings ----------------------------------------------------------------------
    def list_names(self, rel: str) -> List[str]:
        import obstore
        prefix = self.key(rel)
        result = retrying(lambda: obstore.list_with_delimiter(self.store, prefix or None))
        names = [posixpath.basename(p.rstrip("/")) for p in result["common_prefixes"]]
        return names + [posixpath.basename(o["path"]) for o in result["objects"]]

    def _objects(self, rel: str) -> Iterable[dict]:
        import obstore
        prefix = self.key(rel)
        def pages():
            return [chunk for chunk in obstore.list(self.store, prefix or None, chunk_size=1000)]
        for chunk in retrying(pages):
            yield from chunk

    def _relative(self, rel: str, path: str) -> str:
        return posixpath.relpath(path, self.key(rel)) if self.key(rel) else path

    def list_files_recursive(self, rel: str) -> List[str]:
        return [self._relative(rel, o["path"]) for o in self._objects(rel)]

    def list_files_with_mtimes(self, rel: str) -> List[Tuple[str, int]]:
        return [(self._relative(rel, o["path"]), int(o["last_modified"].timestamp() * 1_000_000) * 1000)
                for o in self._objects(rel)]

    def list_files_with_sizes(self, rel: str) -> List[Tuple[str, int]]:
        return [(self._relative(rel, o["path"]), o["size"]) for o in self._objects(rel)]

    # ---- deletes -----------------------------------------------------------------------
    def delete_file(self, rel: str) -> None:
        import obstore
        try:
            retrying(lambda: obstore.delete(self.store, self.key(rel)))
        except Exception as err:
            if not not_found(err):
                raise

    def delete_keys(self, keys: List[str]) -> None:
        import obstore
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start:start + DELETE_BATCH]
            retrying(lambda: obstore.delete(self.store, batch))

    def delete_dir(self, rel: str) -> None:
        """Every object under `rel` (there is no folder to remove), 1,000 keys a request."""
        self.delete_keys([o["path"] for o in self._objects(rel)])

    def delete_files(self, paths: Iterable[str]) -> None:
        self.delete_keys([self.key(p) for p in paths])

    def delete_listed(self, rel: str, listed: Iterable[str], files: Iterable[str] = ()) -> None:
        self.delete_files([posixpath.join(rel, p) for p in listed] + list(files))

    # ---- moves -------------------------------------------------------------------------
    def move_dir(self, src: str, dst: str, last: str = "") -> None:
        """Copy every object under `src` to the same place under `dst` (server-side copies,
        `COPY_THREADS` at a time), `last` after all the others; then delete `src`'s objects,
        `last` first. Not atomic: `dst` holds `last` only once it is whole, and `src` stops
        holding it before it is partial, so with `last` the table's hoodie.properties, each
        side is a table only while whole. A caller that must survive a kill in between keeps a
        record of the move and does it again (the catalog's swap)."""
        import obstore
        from concurrent.futures import ThreadPoolExecutor

        from . import faults
        src_prefix, dst_prefix = self.key(src) + "/", self.key(dst) + "/"
        keys = [o["path"] for o in self._objects(src)]
        last_key = src_prefix + last if last else None
        rest = [k for k in keys if k != last_key]

        def copy(key: str) -> None:
            retrying(lambda: obstore.copy(self.store, key, dst_prefix + key[len(src_prefix):]))
        with ThreadPoolExecutor(COPY_THREADS) as pool:
            list(pool.map(copy, rest))
        faults.reach("move")
        if last_key in keys:
            copy(last_key)
            self.delete_keys([last_key])
        self.delete_keys(rest)

    # ---- streams -----------------------------------------------------------------------
    def open_input(self, rel: str):
        try:
            return pa.PythonFile(_Reader(self.store, self.key(rel), by_suffix=self.scheme not in AZURE_SCHEMES), mode="r")
        except Exception as err:
            if not_found(err):
                raise FileNotFoundError(self.uri(rel)) from None
            raise

    def open_output(self, rel: str):
        return pa.PythonFile(_Upload(self.store, self.key(rel)), mode="w")

    @property
    def filesystem(self):
        """pyarrow's filesystem of the same store (for callers that want one; it cannot rename
        folders)."""
        if self._pyarrow_fs is None:
            import pyarrow.fs as pafs
            if self.scheme not in S3_SCHEMES:
                self._pyarrow_fs = pafs.FileSystem.from_uri(self.base_path.replace(self.scheme + "://", "gs://", 1)
                                                            if self.scheme in GCS_SCHEMES else self.base_path)[0]
            else:
                settings = settings_for(self.base_path)
                endpoint = (settings.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
                            or os.environ.get("AWS_ENDPOINT"))
                kwargs = {}
                if endpoint:
                    parsed = urlparse(str(endpoint))
                    kwargs["endpoint_override"] = parsed.netloc or str(endpoint)
                    kwargs["scheme"] = parsed.scheme or "https"
                    kwargs["force_virtual_addressing"] = False
                region = settings.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                kwargs["region"] = str(region or "us-east-1")
                self._pyarrow_fs = pafs.S3FileSystem(**kwargs)
        return self._pyarrow_fs


def check_location(uri: str) -> None:
    """What `dbt debug` should run for an object-store `location_root`: the bucket exists, this
    host may write, read and delete there, and the store honours conditional puts. One
    `ObjectStoreError` naming the cause otherwise; the probe objects are removed."""
    storage = Storage(uri)
    if not isinstance(storage, ObjectStorage):
        return
    probe = posixpath.join(".hudilite-check", uuid.uuid4().hex)
    where = f"{storage.scheme}://{storage.bucket}"
    try:
        storage.write_bytes(probe, b"hudilite")
        if storage.read_bytes(probe) != b"hudilite":
            raise ObjectStoreError(f"{uri}: an object written there read back different")
        storage.verify_conditional_puts(probe_dir=".hudilite-check", force=True)
    except FileNotFoundError as err:
        raise ObjectStoreError(f"{uri}: bucket {where} not found ({first_line(err)})") from None
    except PermissionError as err:
        detail = (str(err).strip().splitlines() or [type(err).__name__])[0].replace("no permission: ", "", 1)
        raise ObjectStoreError(f"{uri}: no permission to write to {where} with this host's credentials: "
                               f"{detail}") from None
    except OSError as err:
        raise ObjectStoreError(f"{uri}: cannot reach {where} ({first_line(err)})") from None
    finally:
        try:
            storage.delete_file(probe)
        except Exception:
            pass


Storage.register(lambda uri: "://" in uri and is_object_store_uri(uri), ObjectStorage)
