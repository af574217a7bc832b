"""A gate in its own process, for the crash tests (test_crash.py).

One gate, one call, killed with SIGKILL at the crash point
AIRLOCK_HELPER_CRASH names. Its "tool" appends a line to a file, which
counts executions across processes. It prints "pending <id>" while waiting
for a decision and, unless killed, one JSON line with how the call ended.
"""

import json
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from airlock import AlreadyExecutedError, Call, Client, Gate, InterruptedRunError  # noqa: E402


def env(k: str) -> str:
    return os.environ.get("AIRLOCK_HELPER_" + k, "")


crash = env("CRASH")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


base = Client(env("URL"), env("TOKEN"))._send
claim_answered = threading.Event()


def kill_transport(method, url, headers, body, timeout):
    """Kills the process at the HTTP-level crash points.

    When the claim is about to be sent (its "claiming" line written), when
    the claim's answer arrives, and when the report is about to be sent.
    """
    execution = url.endswith("/execution")
    if crash == "after-run" and execution and method == "PUT":
        die()
    if crash == "claim-unsent" and execution and method == "POST":
        die()
    out = base(method, url, headers, body, timeout)
    if execution and method == "POST" and out[0] == 200:
        if crash == "claim-answer":
            die()
        claim_answered.set()
    return out


def fsync_until_claimed(fd: int) -> None:
    """claim-unsynced: the claim landed and its answer arrived while the "claiming" line's fsync was in flight; killed before it completes."""
    claim_answered.wait(60)
    die()


def tool() -> str:
    if crash == "after-claim":
        die()
    fd = os.open(env("COUNT"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, b"ran\n")
    os.fsync(fd)
    os.close(fd)
    if crash == "during-run":
        die()
    return "done"


def main() -> None:
    client = Client(env("URL"), env("TOKEN"), transport=kill_transport)
    res = {}
    with Gate(client, env("INSTANCE"), env("JOURNAL"), poll_wait=1) as gate:
        if crash == "claim-unsynced":
            gate._journal.fsync = fsync_until_claimed
        if env("RECOVER"):
            res["recover"] = [{"request_id": r.request_id, "status": r.status or "", "error": str(r.error or "")} for r in gate.recover()]
        call = Call("append_line", {"file": "count", "line": "ran"}, attempt_key="t07", timeout="5m",
                    on_pending=lambda r: print("pending", r["id"], flush=True))
        try:
            out = gate.run(call, tool)
            res.update(outcome="ok", request_id=out.request["id"], status=out.status)
        except InterruptedRunError as e:
            res.update(outcome="interrupted", started=e.started, request_id=e.request["id"])
        except AlreadyExecutedError as e:
            res.update(outcome="already_executed", here=e.here, status=e.status, request_id=e.request["id"])
        except Exception as e:  # noqa: BLE001
            res.update(outcome=type(e).__name__, error=str(e))
    print(json.dumps(res), flush=True)


main()
