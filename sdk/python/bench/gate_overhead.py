"""How much the Gate adds over the raw HTTP calls it makes (docs/sdks.md, "Overhead").

For each sample an approved request is prepared untimed; then either the
Gate runs it (create replay, claim, report, and its journal lines), or bare
http.client makes the same three calls on one kept-alive connection (as the
SDK's client does since it keeps connections alive; before, both opened one
per call through urllib). The two kinds alternate, so drift hits
both alike. Prints p50 and p90 of each and the p50 difference; it asserts
nothing (timings are figures, not tests). It runs with the journal on disk
(the Gate's fsyncs in the figure) and, where /dev/shm exists, in memory,
which leaves the SDK's own code.

The server's database is in the temporary folder too, so on one disk the
Gate's fsyncs queue behind the server's own. JOURNAL_DISK puts the on-disk
journal elsewhere: with TMPDIR=/dev/shm the server runs in memory and only
the Gate syncs to the disk, as when the agent and Airlock run on different
machines.

    cd sdk/python && python3 bench/gate_overhead.py        # SAMPLES=500 for more
    TMPDIR=/dev/shm JOURNAL_DISK=/var/tmp python3 bench/gate_overhead.py
"""

import http.client
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from airlock import Call, Gate  # noqa: E402
from tests.support import Server  # noqa: E402

SAMPLES = int(os.environ.get("SAMPLES", "300"))


def measure(srv: Server, journal_dir: str, label: str) -> None:
    inst = srv.agent.register_instance("bench")
    gate = Gate(srv.agent, inst["id"], journal_dir)
    u = urllib.parse.urlsplit(srv.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    auth = {"Authorization": f"Bearer {srv.agent_token}"}
    n = [0]

    def prepare():
        n[0] += 1
        key = f"bench-{label}-{n[0]}"
        args = {"n": n[0]}
        r, _ = srv.agent.create_request(inst["id"], key, "bench", args, timeout="5m")
        srv.reviewer.approve(r["id"])
        return key, args, r["id"]

    def call(method, path, body=None, headers=None):
        h = dict(auth, **(headers or {}))
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=h)
        res = conn.getresponse()
        out = res.read()
        if res.status >= 300:
            raise RuntimeError(f"{method} {path}: {res.status} {out!r}")
        return json.loads(out)

    def raw(p):
        key, args, rid = p
        call("POST", f"/v1/instances/{inst['id']}/approval-requests", {"tool": "bench", "arguments": args, "timeout": "5m"},
             {"Idempotency-Key": key})
        call("POST", f"/v1/approval-requests/{rid}/execution")
        call("PUT", f"/v1/approval-requests/{rid}/execution", {"status": "succeeded"})

    def gated(p):
        key, args, _ = p
        gate.run(Call("bench", args, idempotency_key=key, timeout="5m"), lambda: "ok")

    times = {"raw": [], "gate": []}
    warmup = 20
    for i in range(SAMPLES + warmup):
        order = [("raw", raw), ("gate", gated)] if i % 2 else [("gate", gated), ("raw", raw)]
        for name, fn in order:
            p = prepare()
            t0 = time.perf_counter()
            fn(p)
            ms = (time.perf_counter() - t0) * 1000
            if i >= warmup:
                times[name].append(ms)
    gate.close()
    conn.close()

    def q(xs, f):
        return sorted(xs)[int(f * (len(xs) - 1))]
    print(f"Python SDK, journal {label}: {SAMPLES} samples each (create replay + claim + report; ms)")
    print(f"  raw HTTP (kept)    p50 {q(times['raw'], .5):7.2f}  p90 {q(times['raw'], .9):7.2f}")
    print(f"  Gate.run           p50 {q(times['gate'], .5):7.2f}  p90 {q(times['gate'], .9):7.2f}")
    print(f"  overhead at p50        {q(times['gate'], .5) - q(times['raw'], .5):7.2f}  (target: at most 2 ms)")


def main() -> None:
    srv = Server()
    d = tempfile.mkdtemp(prefix="airlock-py-bench-", dir=os.environ.get("JOURNAL_DISK") or None)
    try:
        measure(srv, os.path.join(d, "journal"), "on-disk")
        if os.path.isdir("/dev/shm"):
            shm = tempfile.mkdtemp(prefix="airlock-py-bench-", dir="/dev/shm")
            try:
                measure(srv, shm, "in-memory")
            finally:
                shutil.rmtree(shm, ignore_errors=True)
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
