"""The file-system seam: every byte the core reads or writes goes through `Storage`.

Built on pyarrow.fs for a local folder (and other file systems pyarrow knows); an object-store
URI (`s3://`, `gs://`, `az://`, `abfss://`) gives an `ObjectStorage` (`object_store`), which
keeps the same contract with conditional puts instead of renames. A `Storage` is rebuilt from
its URI on each executor (it pickles as the URI), so nothing here assumes the driver and the
executors share a process.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import threading
import uuid
from typing import Any, Callable, Hashable, Iterable, List, Optional, Tuple

import pyarrow.fs as pafs


def normalize_base_path(path: str) -> str:
    """An absolute local path, or the URI as given when it names a scheme."""
    if "://" in path:
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def _state_key(rel: str) -> tuple:
    """A state file's pinned value (`Storage.read_state`)."""
    return ("file", rel)


class Storage:
    supports_conditional_update = False  # put_if / read_versioned (object stores)
    _kinds: List[Tuple[Callable[[str], bool], type]] = []  # (takes this URI, its Storage): see `register`

    @staticmethod
    def register(takes: Callable[[str], bool], kind: type) -> None:
        """`Storage(uri)` gives a `kind` for each URI `takes` accepts (the object stores register
        themselves: the package imports them)."""
        Storage._kinds.append((takes, kind))

    def __new__(cls, base_path: str, *args, **kwargs):
        if cls is Storage:
            kind = next((k for takes, k in Storage._kinds if takes(base_path)), cls)
            return super().__new__(kind)
        return super().__new__(cls)

    def __init__(self, base_path: str):
        self.base_path = normalize_base_path(base_path)
        if "://" in self.base_path:
            self._fs, self._root = pafs.FileSystem.from_uri(self.base_path)
        else:
            self._fs, self._root = pafs.LocalFileSystem(), self.base_path
        self.is_local = isinstance(self._fs, pafs.LocalFileSystem)

    def __reduce__(self):
        return (Storage, (self.base_path,))

    # ---- a pinned picture of the table's small state --------------------------------------
    @property
    def _picture(self) -> threading.local:
        # Per thread; made on first use (an object store's storage has an `__init__` of its own).
        return self.__dict__.get("_picture_local") or self.__dict__.setdefault("_picture_local", threading.local())

    @contextlib.contextmanager
    def pinned(self):
        """Within it, this thread reads the table's small state once, not at every question:
        the timeline's listing and archived view (`Timeline`), `hoodie.properties`, an index's
        state file. One picture, for a write's planning or a service's steps; whoever needs
        what other writers did since calls `refresh()` (every commit does, under its lock). An
        atomic write of a state file through this object replaces that file in the picture."""
        pin = self._picture
        depth = getattr(pin, "depth", 0)
        pin.depth = depth + 1
        try:
            yield self
        finally:
            pin.depth = depth
            if not depth:
                self.refresh()

    def refresh(self) -> None:
        """Forget the pinned picture: the next question reads storage again."""
        self._picture.values = {}

    def forget(self, *keys: Hashable) -> None:
        """Forget these pinned values: they are read again when next asked for."""
        values = getattr(self._picture, "values", None)
        for key in keys if values else ():
            values.pop(key, None)

    def pinned_value(self, key: Hashable, read: Callable[[], Any]) -> Any:
        """`read()` once per picture while pinned; at every call when not."""
        pin = self._picture
        if not getattr(pin, "depth", 0):
            return read()
        values = getattr(pin, "values", None)
        if values is None:
            values = pin.values = {}
        if key not in values:
            values[key] = read()
        return values[key]

    def is_pinned(self, key: Hashable) -> bool:
        """Whether the pinned picture holds `key` (asking for it would not read storage)."""
        return bool(getattr(self._picture, "depth", 0)) and key in (getattr(self._picture, "values", None) or {})

    def pinned_update(self, key: Hashable, change: Callable[[Any], Any]) -> None:
        """What this thread changed itself, taken into the pinned value of `key` (if read)."""
        values = getattr(self._picture, "values", None)
        if getattr(self._picture, "depth", 0) and values and key in values:
            values[key] = change(values[key])

    def read_state(self, rel: str) -> str:
        """A small file of the table's state (its properties, an index's state): one request,
        read once per pinned picture (its absence too: FileNotFoundError)."""
        def read() -> Optional[str]:
            try:
                return self.read_text(rel)
            except FileNotFoundError:
                return None
        text = self.pinned_value(_state_key(rel), read)
        if text is None:
            raise FileNotFoundError(self.uri(rel))
        return text

    # Paths are relative to the table's base path, '/'-separated.
    def full_path(self, rel: str) -> str:
        return posixpath.join(self._root, rel) if rel else self._root

    def uri(self, rel: str) -> str:
        """The path Spark should read: the scheme-bearing URI, or the absolute local path."""
        return posixpath.join(self.base_path, rel) if rel else self.base_path

    def exists(self, rel: str) -> bool:
        return self._fs.get_file_info(self.full_path(rel)).type != pafs.FileType.NotFound

    def is_file(self, rel: str) -> bool:
        """Whether `rel` is a file (one request on an object store, where `exists` may take two)."""
        return self._fs.get_file_info(self.full_path(rel)).type == pafs.FileType.File

    def size(self, rel: str) -> int:
        return self._fs.get_file_info(self.full_path(rel)).size

    def mtime_seconds(self, rel: str) -> float:
        info = self._fs.get_file_info(self.full_path(rel))
        return info.mtime.timestamp() if info.mtime else 0.0

    def read_bytes(self, rel: str) -> bytes:
        with self._fs.open_input_stream(self.full_path(rel)) as f:
            return f.read()

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def write_bytes(self, rel: str, data: bytes) -> None:
        self.make_dirs(posixpath.dirname(rel))
        with self._fs.open_output_stream(self.full_path(rel)) as f:
            f.write(data)

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))

    def write_atomic(self, rel: str, data, tmp_dir: str) -> None:
        """Write `data` (bytes, or an Arrow buffer) to a temporary file in `tmp_dir`, then
        rename it into place: readers see the whole file or nothing. Rename is atomic on local and HDFS-like file systems. Locally
        the bytes are synced before the rename and the folder after it, so a crash of the
        machine cannot leave a renamed but empty file (a published, unreadable instant)."""
        self.forget(_state_key(rel))  # the pinned copy is replaced
        tmp = posixpath.join(tmp_dir, f"{posixpath.basename(rel)}.{uuid.uuid4().hex}.tmp")
        self.make_dirs(posixpath.dirname(rel))
        if not self.is_local:
            self.write_bytes(tmp, data)
            self._fs.move(self.full_path(tmp), self.full_path(rel))
            return
        self.make_dirs(tmp_dir)
        with open(self.full_path(tmp), "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(self.full_path(tmp), self.full_path(rel))
        folder = os.open(posixpath.dirname(self.full_path(rel)), os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    def publish(self, rel: str, data, tmp_dir: str, check_lease: Callable[[], None]) -> None:
        """Write a completed instant (from then on it is committed): here by atomic rename under
        the table's file lock, which holds as long as the process does, so `check_lease` (an
        object store's lease may pass to another writer) has nothing to check."""
        self.write_atomic(rel, data, tmp_dir)

    def create_exclusive(self, rel: str, data: bytes = b"") -> bool:
        """Create `rel` only if it does not exist; False when another writer got there first."""
        self.make_dirs(posixpath.dirname(rel))
        if self.is_local:
            try:
                fd = os.open(self.full_path(rel), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return True
        # Object stores without conditional puts: best effort check-then-write.
        if self.exists(rel):
            return False
        self.write_bytes(rel, data)
        return True

    def touch(self, rel: str) -> None:
        if self.is_local:
            os.utime(self.full_path(rel))
        else:
            self.write_bytes(rel, self.read_bytes(rel))

    def make_dirs(self, rel: str) -> None:
        self._fs.create_dir(self.full_path(rel), recursive=True)

    def list_names(self, rel: str) -> List[str]:
        """Names directly under `rel` (files and folders); empty when it does not exist."""
        selector = pafs.FileSelector(self.full_path(rel), allow_not_found=True)
        return [posixpath.basename(i.path) for i in self._fs.get_file_info(selector)]

    def _files(self, rel: str) -> List[Tuple[str, pafs.FileInfo]]:
        """(path relative to `rel`, its info) of every file under `rel`; empty when it does not exist."""
        root = self.full_path(rel)
        selector = pafs.FileSelector(root, allow_not_found=True, recursive=True)
        return [(posixpath.relpath(i.path, root), i) for i in self._fs.get_file_info(selector)
                if i.type == pafs.FileType.File]

    def list_files_recursive(self, rel: str) -> List[str]:
        """Paths of all files under `rel`, relative to `rel`."""
        return [path for path, _ in self._files(rel)]

    def list_files_with_mtimes(self, rel: str) -> List[Tuple[str, int]]:
        """(path relative to `rel`, modification time in ns since the epoch) of the files under `rel`."""
        return [(path, info.mtime_ns) for path, info in self._files(rel)]

    def list_files_with_sizes(self, rel: str) -> List[Tuple[str, int]]:
        return [(path, info.size) for path, info in self._files(rel)]

    def delete_file(self, rel: str) -> None:
        try:
            self._fs.delete_file(self.full_path(rel))
        except FileNotFoundError:
            pass

    def delete_dir(self, rel: str) -> None:
        try:
            self._fs.delete_dir(self.full_path(rel))
        except FileNotFoundError:
            pass

    def delete_files(self, paths: Iterable[str]) -> None:
        """Delete these files (one request per 1,000 on an object store); a missing one is no error."""
        for path in paths:
            self.delete_file(path)

    def delete_listed(self, rel: str, listed: Iterable[str], files: Iterable[str] = ()) -> None:
        """Delete the folder `rel`, whose files (`listed`, relative to it) the caller knows, and
        the `files`. A file system removes the folder; an object store deletes those keys
        without listing again, so a file added since stays (for whoever looks next)."""
        self.delete_dir(rel)
        self.delete_files(files)

    def move_dir(self, src: str, dst: str, last: str = "") -> None:
        """Move the folder `src` to `dst`, which must not exist: one rename, all or nothing.
        (An object store has no rename and copies: `last`, a path inside the folder, is what
        makes it count there, see `ObjectStorage.move_dir`.)"""
        self.make_dirs(posixpath.dirname(dst))
        self._fs.move(self.full_path(src), self.full_path(dst))

    def open_input(self, rel: str):
        """A random-access file (parquet footers and row groups are read by offset)."""
        return self._fs.open_input_file(self.full_path(rel))

    def open_output(self, rel: str):
        self.make_dirs(posixpath.dirname(rel))
        return self._fs.open_output_stream(self.full_path(rel))

    @property
    def filesystem(self) -> pafs.FileSystem:
        return self._fs
