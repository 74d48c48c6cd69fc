"""Rows as plain JSON values, the same on both sides of the referee: this module runs in our
test process and in the referee's own Python (pyspark 3.5, no other packages), so it uses the
standard library only."""

import base64
import datetime as dt
import math
from decimal import Decimal


def plain(value):
    """A collected Spark value (Row, list, dict, Decimal, date, bytes, ...) as JSON values that
    compare equal exactly when the values do."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value) if math.isnan(value) or math.isinf(value) else round(value, 9)
    if isinstance(value, Decimal):
        return str(value.normalize()) if value else "0"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return "b64:" + base64.b64encode(bytes(value)).decode()
    if hasattr(value, "asDict"):  # a Row (a struct)
        return {k: plain(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        return sorted(([plain(k), plain(v)] for k, v in value.items()), key=repr)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    raise TypeError(f"no plain form for {type(value).__name__}: {value!r}")


def plain_rows(rows, columns):
    """Collected rows as a sorted list of {column: plain value} over `columns`."""
    return sorted(({c: plain(row[c]) for c in columns} for row in rows), key=repr)
