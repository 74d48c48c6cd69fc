"""Hudi's metadata table (`.hoodie/metadata`, RFC-15/RFC-8): hudilite does not keep it in step
with its commits, so it takes a table only without one. `drop` removes it the way Hudi's own
writer does when it runs with `hoodie.metadata.enable=false`: the table's properties stop
listing its partitions (from then on every reader lists storage instead), then its folder goes.
A drop killed between the two leaves a folder no reader looks at, which the next drop removes.
"""

from __future__ import annotations

import logging
import posixpath

from . import properties as props
from ..storage.layout import METADATA_TABLE_DIR, PROPERTIES_FILE, TMP_DIR
from ..storage.lock import TableLock
from ..storage.filesystem import Storage

logger = logging.getLogger("hudilite")

HADOOP_CHECKSUM = posixpath.join(posixpath.dirname(PROPERTIES_FILE), "." + posixpath.basename(PROPERTIES_FILE) + ".crc")
DROPPED_HEADER = "#Updated by hudilite: Hudi's metadata table dropped (as hoodie.metadata.enable=false does)"


def drop(storage: Storage) -> bool:
    """Remove the metadata table under the table lock; True when there was one to remove."""
    with TableLock(storage):
        text = storage.read_text(PROPERTIES_FILE)
        listed = props.loads(text)
        listing = any(listed.get(key) for key in props.METADATA_PARTITIONS)
        if listing:
            cleared = {k: v for k, v in listed.items() if k not in props.METADATA_PARTITIONS}
            cleared.update({key: "" for key in props.METADATA_PARTITIONS if key in listed})
            header = props.SAVED_BY_HUDILITE if text.startswith(props.SAVED_BY_HUDILITE) else DROPPED_HEADER
            # Hadoop's local file system keeps a checksum beside each file Java wrote and refuses
            # to read a file that no longer matches it; without one it reads the file unchecked.
            if storage.exists(HADOOP_CHECKSUM):
                storage.delete_file(HADOOP_CHECKSUM)
            storage.write_atomic(PROPERTIES_FILE, props.dumps(cleared, header).encode(), TMP_DIR)
        folder = storage.exists(METADATA_TABLE_DIR)
        if folder:
            storage.delete_dir(METADATA_TABLE_DIR)
    if listing or folder:
        logger.info("table at %s: Hudi's metadata table dropped", storage.base_path)
    return listing or folder
