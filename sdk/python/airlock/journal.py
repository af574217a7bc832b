"""The Gate's on-disk journal.

It is what a Gate keeps so that a call runs at most once even across
restarts, and so that a run a crash interrupted is reported unknown instead
of being run again. It is a directory with one small append-only file per
call (named by a hash of the call's idempotency key); each line is one step,
written and fsynced before the gate goes on::

    requested <request id> <key>     the request exists (after create)
    claiming  <request id>           about to claim the execution
    claimed   <request id>           the server granted the claim; the call may start
    refused   <request id> <code>    the server refused the claim
    finished  <request id> <status>  the call ended: succeeded, failed or unknown
    reported  <request id> <status>  the server has the outcome

Every line is written before the gate goes on, so it survives the process
being killed. The "claiming" line is also fsynced (with its file's directory
entry) before the claim is sent, so it survives the machine losing power
too: a restart that finds it, and an execution on the server, reports
unknown and never runs the call; the server grants one claim only, so
nothing else decides whether the call can run twice. The other lines only
make the report more precise (started or not, succeeded rather than
unknown); they are fsynced as well with ``sync_every_step``, which costs
about a millisecond per line on a typical disk.

A last line without its newline was torn by a crash and never counted. The
directory is locked (flock) while a gate has it open, so two processes never
share one; the lock dies with its process.
"""

import fcntl
import hashlib
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import List, Optional


@dataclass
class Entry:
    """What the journal knows of one call."""

    key: str = ""
    request_id: str = ""
    claiming: bool = False  # a claim was sent; its answer may be lost
    claimed: bool = False
    refused: bool = False
    finished: Optional[str] = None  # set once the call ended
    reported: bool = False

    def settled(self) -> bool:
        """Whether the server has everything this entry knows."""
        if self.finished:
            return self.reported
        return not self.claimed and not self.claiming


class Journal:
    """An open, locked journal directory."""

    def __init__(self, directory: str, sync_every_step: bool = False) -> None:
        if not directory:
            raise ValueError("airlock gate: a journal directory is required: it is how a call runs at most once across restarts")
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.dir = directory
        self.sync_every_step = sync_every_step
        self._lock_fd = os.open(os.path.join(directory, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise RuntimeError(f"airlock gate: journal {directory} is in use by another gate; "
                               "give each gate process its own journal directory") from None

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def _file(self, key: str) -> str:
        return os.path.join(self.dir, hashlib.sha256(key.encode()).hexdigest()[:32] + ".log")

    def append(self, key: str, kind: str, request_id: str, *more: str) -> None:
        """Writes one line for key; fsynced (the claiming line always) before returning."""
        path = self._file(key)
        new = not os.path.exists(path)
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        line = " ".join([kind, request_id, *more, stamp]) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            if kind == "claiming" or self.sync_every_step:
                os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            _sync_dir(self.dir)  # a new file is durable only once its directory entry is

    def read(self, key: str) -> Entry:
        """The entry of key; an empty one when there is none."""
        path = self._file(key)
        if not os.path.exists(path):
            return Entry(key=key)
        e = _parse(path)
        e.key = e.key or key
        return e

    def entries(self) -> List[Entry]:
        return [_parse(os.path.join(self.dir, f)) for f in sorted(os.listdir(self.dir)) if f.endswith(".log")]


def _parse(path: str) -> Entry:
    with open(path, "rb") as f:
        data = f.read().decode()
    data = data[: data.rfind("\n") + 1]  # a torn last line: its step never counted
    e = Entry()
    for line in data.splitlines():
        f = line.split()
        if len(f) < 2:
            raise ValueError(f"journal {path}: malformed line {line!r}")
        if not e.request_id:
            e.request_id = f[1]
        kind = f[0]
        if kind == "requested":
            if len(f) > 3:
                e.key = f[2]
        elif kind == "claiming":
            e.claiming, e.refused = True, False
        elif kind == "claimed":
            e.claimed = True
        elif kind == "refused":
            e.claiming, e.refused = False, True
        elif kind == "finished":
            e.finished = f[2]
        elif kind == "reported":
            e.reported = True
        else:
            raise ValueError(f"journal {path}: unknown record {kind!r}")
    return e


def _sync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a directory
    finally:
        os.close(fd)
