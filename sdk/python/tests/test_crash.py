"""The gate killed with SIGKILL at each crash point, then restarted with the same journal
(docs/reliability.md): the tool never runs twice, and a run a crash interrupted is reported
unknown. The gate is its own python process (gate_helper.py) against the real server."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
from typing import Any, Dict, Tuple

from tests.support import HERE, ModuleServer

srv = ModuleServer()
setUpModule, tearDownModule = srv.start, srv.stop


CASES = [
    # crash point, tool runs before the crash, outcome of running the same call again, started, server's final status
    ("claim-answer", 0, "interrupted", False, "unknown"),
    ("claim-unsynced", 0, "interrupted", False, "unknown"),
    ("after-claim", 0, "interrupted", True, "unknown"),
    ("during-run", 1, "interrupted", True, "unknown"),
    ("after-run", 1, "already_executed", False, "succeeded"),
]


def run_helper(h: Dict[str, Any]) -> Tuple[bool, Dict[str, Any]]:
    """Runs the helper, approving its request when it shows pending; returns (killed, result)."""
    env = dict(os.environ, AIRLOCK_HELPER_URL=srv.url, AIRLOCK_HELPER_TOKEN=srv.agent_token,
               AIRLOCK_HELPER_INSTANCE=h["instance"], AIRLOCK_HELPER_JOURNAL=h["journal"],
               AIRLOCK_HELPER_COUNT=h["count"], AIRLOCK_HELPER_CRASH=h["mode"],
               AIRLOCK_HELPER_RECOVER="1" if h["recover"] else "")
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "gate_helper.py")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    last = ""
    assert p.stdout is not None
    for raw in p.stdout:
        line = raw.decode().strip()
        if line.startswith("pending "):
            srv.reviewer.approve(line[len("pending "):])
            continue
        last = line
    stderr = p.stderr.read().decode() if p.stderr else ""
    code = p.wait()
    p.stdout.close()
    if p.stderr:
        p.stderr.close()
    if code == -signal.SIGKILL:
        return True, {}
    if code != 0:
        raise AssertionError(f"helper {h['mode']} exited {code}: {last}\n{stderr}")
    return False, json.loads(last)


def runs(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return f.read().count("ran\n")


class CrashTest(unittest.TestCase):
    def test_killed_before_the_claim_is_sent(self) -> None:
        """Killed with the "claiming" line written but the claim not sent: it never landed, so the restart runs the call, once."""
        for recover in (False, True):
            with self.subTest(recover=recover):
                inst = srv.agent.register_instance(f"py crash claim-unsent {recover}")
                d = tempfile.mkdtemp(prefix="airlock-py-crash-")
                self.addCleanup(shutil.rmtree, d, True)
                h = {"instance": inst["id"], "journal": os.path.join(d, "journal"), "count": os.path.join(d, "count"),
                     "mode": "claim-unsent", "recover": False}
                killed, _ = run_helper(h)
                self.assertTrue(killed, "the helper was not killed before the claim")
                self.assertEqual(runs(h["count"]), 0)
                h.update(mode="none", recover=recover)
                _, res = run_helper(h)
                if recover:
                    self.assertEqual(res["recover"], [], "nothing to report: the claim never landed")
                self.assertEqual(res["outcome"], "ok", res)
                self.assertEqual(runs(h["count"]), 1)
                self.assertEqual(srv.agent.get_request(res["request_id"])["execution"]["status"], "succeeded")
                _, res = run_helper(h)
                self.assertEqual(runs(h["count"]), 1, "run again after it ran")
                self.assertEqual((res["outcome"], res["here"], res["status"]), ("already_executed", True, "succeeded"))

    def test_crash_points(self) -> None:
        for crash, want_runs, outcome, started, status in CASES:
            for recover in (False, True):
                with self.subTest(crash=crash, recover=recover):
                    inst = srv.agent.register_instance(f"py crash {crash} {recover}")
                    d = tempfile.mkdtemp(prefix="airlock-py-crash-")
                    self.addCleanup(shutil.rmtree, d, True)
                    h = {"instance": inst["id"], "journal": os.path.join(d, "journal"), "count": os.path.join(d, "count"),
                         "mode": crash, "recover": False}
                    killed, res = run_helper(h)
                    self.assertTrue(killed, f"the helper was not killed at {crash}: {res}")
                    self.assertEqual(runs(h["count"]), want_runs, "runs before the crash")

                    h.update(mode="none", recover=recover)
                    _, res = run_helper(h)
                    self.assertEqual(runs(h["count"]), want_runs, "the restart ran the tool again")
                    want = outcome
                    if recover:
                        want = "already_executed"  # recover() settled it; the run finds the outcome recorded
                        self.assertEqual([(r["status"], r["error"]) for r in res["recover"]], [(status, "")])
                    self.assertEqual(res["outcome"], want, res)
                    if want == "interrupted":
                        self.assertEqual(res["started"], started)
                    else:
                        self.assertEqual((res["here"], res["status"]), (True, status))
                    self.assertEqual(srv.agent.get_request(res["request_id"])["execution"]["status"], status)

                    # And again: still never re-run, the same answer.
                    _, res = run_helper(h)
                    self.assertEqual(runs(h["count"]), want_runs)
                    self.assertEqual((res["outcome"], res["here"], res["status"]), ("already_executed", True, status))


if __name__ == "__main__":
    unittest.main()
