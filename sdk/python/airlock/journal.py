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
being killed. The "claiming" line is written before the claim is sent and
made durable (fsynced, with the journal directory) while the claim is in
flight; the call starts only once both are done, so a call never starts
without a record that survives the machine losing power too. A restart that
finds it, and an execution on the server, reports unknown and never runs
the call; the server grants one claim only, so nothing else decides whether
the call can run twice (docs/sdks.md, "The journal", walks through each
crash point). The other lines only make the report more precise (started or
not, succeeded rather than unknown); ``sync_every_step`` fsyncs each of them
before the gate goes on, which costs about a millisecond per line on a
typical disk.

A call's file stays open while the gate works on that call (:meth:`Journal.release`
closes it), so a call opens its file once, not once per line. The fsyncs
run on a small thread pool (``os.fsync`` releases the GIL), so the claim's
HTTP round trip goes on meanwhile.

A last line without its newline was torn by a crash and never counted. The
directory is locked (flock) while a gate has it open, so two processes never
share one; the lock dies with its process.
"""

import errno
import fcntl
import hashlib
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Dict, List, Optional


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
        self._mu = threading.Lock()
        self._fds: Dict[str, int] = {}  # the open file of each call the gate works on, by path
        self._created = 0  # files this process created
        self._dir_synced = 0  # how many of them the last directory fsync covered
        self._dir_sync: Optional["Future[None]"] = None  # the last directory fsync started
        self._dir_sync_upto = 0  # the files it covers
        self._pool: Optional[ThreadPoolExecutor] = None
        self.fsync: Callable[[int], None] = os.fsync  # what sync() runs; tests replace it
        _sync_dir(directory)  # the files an earlier process left are durable

    def close(self) -> None:
        with self._mu:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        with self._mu:
            for fd in self._fds.values():
                _close_quietly(fd)
            self._fds.clear()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def _file(self, key: str) -> str:
        return os.path.join(self.dir, hashlib.sha256(key.encode()).hexdigest()[:32] + ".log")

    def _submit(self, fn: Callable[..., None], *args: object) -> "Future[None]":
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="airlock-journal")
        return self._pool.submit(fn, *args)

    def prepare(self, key: str) -> "Future[int]":
        """Opens key's file on the thread pool, creating it if needed.

        The gate calls it as it sends the request's creation, so that it
        overlaps the round trip, and waits for it before its first line. An
        empty file is an entry with nothing in it. (The new directory entry
        is fsynced by :meth:`sync`, together with the file: started
        together, the two fsyncs share one journal commit on ext4; a
        directory fsync started earlier makes the file's wait for a second
        one.)
        """
        with self._mu:
            return self._submit(self._open, key)

    def _open(self, key: str) -> int:
        """key's open file, opened (and created) now if it is not."""
        path = self._file(key)
        with self._mu:
            fd = self._fds.get(path)
            if fd is not None:
                return fd
            new = not os.path.exists(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._fds[path] = fd
            if new:
                self._created += 1
            return fd

    def _sync_dir_soon(self) -> "Future[None]":
        """Starts a directory fsync covering every file created so far, unless one in flight does. Holds _mu."""
        if self._dir_synced >= self._created:
            done: "Future[None]" = Future()
            done.set_result(None)
            return done
        if self._dir_sync is not None and not self._dir_sync.done() and self._dir_sync_upto >= self._created:
            return self._dir_sync  # the one in flight covers them all
        upto, before = self._created, self._dir_sync

        def run() -> None:
            if before is not None:
                before.exception()  # wait for it; its failure is retried here
            if self._dir_synced >= upto:
                return
            _sync_dir(self.dir, strict=True)
            with self._mu:
                self._dir_synced = max(self._dir_synced, upto)
        self._dir_sync, self._dir_sync_upto = self._submit(run), upto
        return self._dir_sync

    def append(self, key: str, kind: str, request_id: str, *more: str) -> None:
        """Writes one line for key before returning (it survives the process being killed).

        With ``sync_every_step`` it is fsynced too, with its file's directory
        entry; :meth:`sync` makes it survive a power cut.
        """
        fd = self._open(key)
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        os.write(fd, (" ".join([kind, request_id, *more, stamp]) + "\n").encode())
        if self.sync_every_step:
            os.fsync(fd)
            with self._mu:
                if self._dir_synced < self._created:
                    upto = self._created
                    _sync_dir(self.dir, strict=True)  # a new file is durable only once its directory entry is
                    self._dir_synced = max(self._dir_synced, upto)

    def sync(self, key: str) -> "Future[None]":
        """Makes key's lines durable, in the background: fsyncs its file and, when this process created a file since, the directory.

        The gate sends its claim meanwhile, and waits for the returned
        future before the call starts (and before :meth:`release`).
        """
        out: "Future[None]" = Future()
        if self.sync_every_step:
            out.set_result(None)  # append did it
            return out
        path = self._file(key)
        with self._mu:
            fd = self._fds.get(path)
            if fd is None:
                raise RuntimeError(f"airlock gate: journal: nothing written for {key}")
            file_done = self._submit(self.fsync, fd)
            dir_done = self._sync_dir_soon()

        def both(_: object) -> None:
            if file_done.done() and dir_done.done() and not out.done():
                err = file_done.exception() or dir_done.exception()
                try:
                    if err is not None:
                        out.set_exception(err)
                    else:
                        out.set_result(None)
                except Exception:  # noqa: BLE001 - set by the other callback
                    pass
        file_done.add_done_callback(both)
        dir_done.add_done_callback(both)
        return out

    def release(self, key: str) -> None:
        """Closes key's file: the gate is done with the call for now."""
        with self._mu:
            fd = self._fds.pop(self._file(key), None)
        if fd is not None:
            _close_quietly(fd)

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


def _sync_dir(directory: str, strict: bool = False) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if strict and err.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
        # some filesystems cannot sync a directory
    finally:
        os.close(fd)


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
