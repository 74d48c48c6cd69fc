"""The storage seam: a table's files on a local or pyarrow file system (`filesystem`) or an
object store (`object_store`), where each one lives (`layout`), the table lock and its lease
(`lock`), and fault injection for tests (`faults`)."""

from . import object_store  # noqa: F401 - registers the object-store URIs with `Storage`
