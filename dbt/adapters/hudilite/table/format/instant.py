"""Instants: the timestamps, actions and states of timeline entries, and their file names.

Table version 6 names each state of an instant with its own file under `.hoodie/`:
`<T>.commit.requested`, `<T>.inflight`, `<T>.commit` for commits, and
`<T>.replacecommit.requested`, `<T>.replacecommit.inflight`, `<T>.replacecommit`. The table
services' instants (clean, savepoint, restore) are named the same way; they carry Avro
metadata (`avro_metadata`) and are not part of the commit timeline.

Table versions 8 and 9 (timeline layout 2, under `.hoodie/timeline/`) name the pending states
alike, and the completed one `<T>_<C>.<action>`: C is the instant's completion time. A pending
clustering is `<T>.clustering.requested` / `.inflight` and completes as `<T>_<C>.replacecommit`.
An instant is still known by T, its requested time: file names and `_hoodie_commit_time` carry it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import TimelineError

COMMIT = "commit"
REPLACE_COMMIT = "replacecommit"
CLUSTERING = "clustering"  # layout 2's name of a pending clustering replacecommit
ACTIONS = (COMMIT, REPLACE_COMMIT, CLUSTERING)  # the commit timeline: what a snapshot is made of
CLEAN = "clean"
SAVEPOINT = "savepoint"
RESTORE = "restore"
SERVICE_ACTIONS = (CLEAN, SAVEPOINT, RESTORE)

REQUESTED = "REQUESTED"
INFLIGHT = "INFLIGHT"
COMPLETED = "COMPLETED"

INSTANT_FORMAT = "%Y%m%d%H%M%S"  # followed by 3 digits of milliseconds
_TIMESTAMP = re.compile(r"^\d{17}$")
_FILE = re.compile(r"^(\d{17})(?:_(\d{17}))?\.(commit|replacecommit|clustering|clean|savepoint|restore|inflight)"
                   r"(\.requested|\.inflight)?$")


@dataclass(frozen=True, order=True)
class Instant:
    timestamp: str  # the requested time: what the instant is known by
    action: str
    state: str
    # Layout 2's completed instants: when it completed (in its file name). None on layout 1,
    # where an instant's completion time is its requested time.
    completion_time: Optional[str] = field(default=None, compare=False)

    @property
    def is_completed(self) -> bool:
        return self.state == COMPLETED

    @property
    def completed_at(self) -> str:
        """The completion time, as Hudi 1.x orders completions by (layout 1: the instant time)."""
        return self.completion_time or self.timestamp

    @property
    def file_name(self) -> str:
        return instant_file_name(self.timestamp, self.action, self.state, self.completion_time)


def instant_file_name(timestamp: str, action: str, state: str, completion_time: Optional[str] = None) -> str:
    if state == COMPLETED:
        return f"{timestamp}_{completion_time}.{action}" if completion_time else f"{timestamp}.{action}"
    if state == REQUESTED:
        return f"{timestamp}.{action}.requested"
    if action == COMMIT:  # v6 names an inflight commit without its action
        return f"{timestamp}.inflight"
    return f"{timestamp}.{action}.inflight"


def parse_instant_file_name(name: str) -> Optional[Instant]:
    """The instant a timeline file name stands for (either layout), or None for anything else."""
    m = _FILE.match(name)
    if not m:
        return None
    timestamp, completion_time, head, tail = m.groups()
    if completion_time is not None:  # only a completed instant carries one; clustering completes as replacecommit
        return None if tail or head in ("inflight", CLUSTERING) else Instant(timestamp, head, COMPLETED, completion_time)
    if head == "inflight":
        return None if tail else Instant(timestamp, COMMIT, INFLIGHT)
    if head == CLUSTERING and not tail:
        return None
    if tail == ".requested":
        return Instant(timestamp, head, REQUESTED)
    if tail == ".inflight":
        return Instant(timestamp, head, INFLIGHT)
    return Instant(timestamp, head, COMPLETED)


def is_instant_time(value: str) -> bool:
    return bool(_TIMESTAMP.match(value))


def format_instant_time(moment: dt.datetime) -> str:
    moment = moment.astimezone(dt.timezone.utc)
    return moment.strftime(INSTANT_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant_time(value: str) -> dt.datetime:
    if not is_instant_time(value):
        raise TimelineError(f"not an instant time (yyyyMMddHHmmssSSS): {value!r}")
    moment = dt.datetime.strptime(value[:14], INSTANT_FORMAT)
    return moment.replace(microsecond=int(value[14:]) * 1000, tzinfo=dt.timezone.utc)


def next_instant_time(after: Optional[str], now: Optional[dt.datetime] = None) -> str:
    """The current UTC time as an instant, pushed past `after` so instants strictly increase
    even when the clock stalls or steps back."""
    candidate = format_instant_time(now or dt.datetime.now(dt.timezone.utc))
    if after is not None and candidate <= after:
        candidate = format_instant_time(parse_instant_time(after) + dt.timedelta(milliseconds=1))
    return candidate


def to_instant_time(value) -> str:
    """Accept an instant string, or a timestamp (datetime or ISO string, UTC when naive), and
    return the instant time it denotes."""
    if isinstance(value, dt.datetime):
        return format_instant_time(value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc))
    text = str(value).strip()
    if is_instant_time(text):
        return text
    digits = re.sub(r"[^0-9]", "", text)
    if len(digits) == 14 and re.match(r"^\d{4}-?\d{2}-?\d{2}[ T]?\d{2}:?\d{2}:?\d{2}$", text):
        return digits + "999"  # a second-precision timestamp covers the whole second
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise TimelineError(
            f"cannot read {value!r} as an instant (yyyyMMddHHmmssSSS) or a timestamp"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return format_instant_time(moment)
