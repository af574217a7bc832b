"""Starts the real ``airlock serve``, built from this checkout, for the tests.

The binary is built once per test run into sdk/python/.airlock-test/ (the
way the Go end-to-end tests build theirs); set AIRLOCK_BIN to use one built
elsewhere. The tests need Go (or AIRLOCK_BIN): without either they fail.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from typing import List, Optional

from airlock import Client

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))
ADMIN = "admin-secret-for-the-python-sdk-tests"

_built: Optional[str] = None
_build_lock = threading.Lock()


def airlock_bin() -> str:
    global _built
    with _build_lock:
        if _built:
            return _built
        if os.environ.get("AIRLOCK_BIN"):
            _built = os.environ["AIRLOCK_BIN"]
            return _built
        out = os.path.join(PKG, ".airlock-test", "airlock")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        try:
            subprocess.run(["go", "build", "-o", out, "./cmd/airlock"], cwd=REPO, check=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except FileNotFoundError:
            raise RuntimeError("the Python SDK tests build airlock from this checkout: install Go, or set AIRLOCK_BIN") from None
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"go build ./cmd/airlock failed:\n{e.stdout.decode()}") from None
        _built = out
        return out


class Server:
    """airlock serve on a fresh SQLite file, with an admin, an agent and a reviewer client."""

    def __init__(self, *extra_args: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="airlock-py-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
        env["HOME"] = self.dir
        self.proc = subprocess.Popen(
            [airlock_bin(), "serve", "--addr", "127.0.0.1:0", "--db", os.path.join(self.dir, "airlock.db"),
             "--admin-token", ADMIN, "--min-timeout", "1ms", "--rate-limit", "1000000",
             # one server: a rotated-in signing key signs at once
             "--key-activation-delay", "1ms", *extra_args],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.logs: List[str] = []
        self.url = ""
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.logs.append(line)
            m = re.search(r"Airlock listening on (http://\S+) ", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            self.proc.kill()
            raise RuntimeError("airlock serve exited before listening:\n" + "".join(self.logs))
        # Keep draining its notices so it never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        self.admin = Client(self.url, ADMIN)
        self.agent_token = self.admin.create_token("py agent", "agent")["secret"]
        self.reviewer_token = self.admin.create_token("py reviewer", "reviewer")["secret"]
        self.agent = Client(self.url, self.agent_token)
        self.reviewer = Client(self.url, self.reviewer_token)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.logs.append(raw.decode(errors="replace"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ModuleServer(Server):
    """The one server of a test module, started before its first test and stopped after its last.
    A module shares it with ``srv = ModuleServer()`` and ``setUpModule, tearDownModule = srv.start, srv.stop``."""

    def __init__(self) -> None:
        """Starts nothing yet: start does, when the module's tests begin."""

    def start(self) -> None:
        super().__init__()


class CuttingProxy:
    """A TCP proxy in front of the server whose connections the test can cut, to break an event stream for real."""

    def __init__(self, target_url: str) -> None:
        host, port = target_url.split("//", 1)[1].split(":")
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.conns: List[socket.socket] = []
        self.accepted = 0
        self.mu = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            with self.mu:
                self.conns += [c, u]
                self.accepted += 1
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Breaks every connection open now."""
        with self.mu:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()
