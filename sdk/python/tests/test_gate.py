"""The Gate against the real server: each outcome told apart (ran, denied with its note, expired,
cancelled, lapsed, already executed, tool failed), at most once when the same approval arrives
twice or two gates race."""

import os
import shutil
import tempfile
import threading
import time
import unittest
from typing import Any, Callable, Dict, List

from airlock import (AlreadyExecutedError, Call, CancelledError, Client, DeniedError, ExpiredError, Gate, LapsedError,
                     OutcomeUnknown, Retry, ToolError, describe_outcome)
from tests.support import ModuleServer

srv = ModuleServer()
setUpModule, tearDownModule = srv.start, srv.stop


class GateTest(unittest.TestCase):
    def gate(self, **kw: Any) -> Gate:
        inst = srv.agent.register_instance("py gate")
        d = tempfile.mkdtemp(prefix="airlock-py-gate-")
        self.addCleanup(shutil.rmtree, d, True)
        g = Gate(srv.agent, inst["id"], d + "/journal", poll_wait=5, **kw)
        self.addCleanup(g.close)
        return g

    @staticmethod
    def decided_by(decide: Callable[[Dict[str, Any]], Any], tool: str = "send_email", **kw: Any) -> Call:
        """A call whose reviewer acts as soon as it is pending (once)."""
        done: List[bool] = []

        def on_pending(r: Dict[str, Any]) -> None:
            if not done:
                done.append(True)
                decide(r)
        return Call(tool, {"to": "a@example.com", "body": "hi"}, timeout="5m", on_pending=on_pending, **kw)

    def test_approved_runs_once(self) -> None:
        g = self.gate()
        runs = []
        call = self.decided_by(lambda r: srv.reviewer.approve(r["id"], "ok"))
        out = g.run(call, lambda: runs.append(1) or 42)
        self.assertEqual((out.value, out.status, out.request["execution"]["status"], len(runs)), (42, "succeeded", "succeeded", 1))
        with self.assertRaises(AlreadyExecutedError) as cm:
            g.run(call, lambda: runs.append(1))
        self.assertEqual((cm.exception.here, cm.exception.status, len(runs)), (True, "succeeded", 1))
        self.assertEqual(g.outstanding(), 0)

    def test_denied_carries_the_note(self) -> None:
        g = self.gate()
        runs = []
        with self.assertRaises(DeniedError) as cm:
            g.run(self.decided_by(lambda r: srv.reviewer.deny(r["id"], "not to customers")), lambda: runs.append(1))
        self.assertEqual((cm.exception.note, runs), ("not to customers", []))
        v = describe_outcome(cm.exception)
        self.assertEqual((v["outcome"], v["ran"], v["note"]), ("denied", False, "not to customers"))

    def test_expired(self) -> None:
        g = self.gate()
        runs = []
        with self.assertRaises(ExpiredError) as cm:
            g.run(Call("slow", {}, timeout="100ms"), lambda: runs.append(1))
        self.assertEqual((cm.exception.request["state"], runs), ("expired", []))

    def test_cancelled_elsewhere_and_abandoned(self) -> None:
        g = self.gate()
        runs = []
        with self.assertRaises(CancelledError) as cm:
            g.run(self.decided_by(lambda r: srv.agent.cancel_request(r["id"]), tool="c1"), lambda: runs.append(1))
        self.assertFalse(cm.exception.abandoned)
        give_up = threading.Event()
        with self.assertRaises(CancelledError) as cm:
            g.run(Call("wait_forever", {}, timeout="5m", on_pending=lambda r: give_up.set()), lambda: runs.append(1), cancel=give_up)
        self.assertTrue(cm.exception.abandoned)
        self.assertEqual(srv.agent.get_request(cm.exception.request["id"])["state"], "cancelled")
        self.assertEqual(runs, [])

    def test_cancel_set_while_the_create_is_answered_withdraws_the_request(self) -> None:
        # The create is not given the cancel event: it runs to its answer
        # (retried with the same key when the answer is lost), and the wait
        # then sees the event and withdraws the request. So the request is
        # always known, unlike in the Go and TypeScript gates, whose create
        # the caller's context or signal can cut short.
        for lose in (False, True):
            with self.subTest(answer_lost=lose):
                give_up = threading.Event()
                base = Client(srv.url, srv.agent_token)._send
                creates: List[int] = []

                def cancel_after_create(method: str, url: str, headers: Dict[str, str], body: Any, timeout: float) -> Any:
                    if method != "POST" or not url.endswith("/approval-requests"):
                        return base(method, url, headers, body, timeout)
                    creates.append(1)
                    out = base(method, url, headers, body, timeout)
                    if len(creates) == 1:
                        give_up.set()
                        if lose:
                            raise ConnectionResetError("the answer was lost")
                    return out

                inst = srv.agent.register_instance("py gate")
                d = tempfile.mkdtemp(prefix="airlock-py-gate-")
                self.addCleanup(shutil.rmtree, d, True)
                client = Client(srv.url, srv.agent_token, transport=cancel_after_create, retry=Retry(min_backoff=0.001, max_backoff=0.002))
                with Gate(client, inst["id"], d, poll_wait=5) as g:
                    with self.assertRaises(CancelledError) as cm:
                        g.run(Call("delete_repo", {"repo": "s"}, timeout="5m"), lambda: None, cancel=give_up)
                self.assertTrue(cm.exception.abandoned)
                self.assertIsNone(cm.exception.cancel_error)
                self.assertEqual(len(creates), 2 if lose else 1)
                self.assertEqual(srv.agent.get_request(cm.exception.request["id"])["state"], "cancelled")

    def test_lapsed(self) -> None:
        skew = [0.0]
        g = self.gate(now=lambda: time.time() + skew[0])
        runs = []
        skew[0] = 600
        with self.assertRaises(LapsedError) as cm:
            g.run(self.decided_by(lambda r: srv.reviewer.decide(r["id"], "approved", valid_for="1m"), tool="lapse1"), lambda: runs.append(1))
        self.assertFalse(cm.exception.claimed)
        self.assertNotIn("execution", srv.agent.get_request(cm.exception.request["id"]))

        reads = [0]

        def clock() -> float:
            reads[0] += 1
            return time.time() + (0 if reads[0] == 1 else 600)
        g2 = self.gate(now=clock)
        with self.assertRaises(LapsedError) as cm:
            g2.run(self.decided_by(lambda r: srv.reviewer.decide(r["id"], "approved", valid_for="1m"), tool="lapse2"), lambda: runs.append(1))
        self.assertTrue(cm.exception.claimed)
        self.assertEqual(cm.exception.request["execution"]["status"], "failed")
        self.assertEqual(runs, [])

    def test_tool_errors(self) -> None:
        g = self.gate()

        def boom() -> None:
            raise OSError("disk full")
        with self.assertRaises(ToolError) as cm:
            g.run(self.decided_by(lambda r: srv.reviewer.approve(r["id"]), tool="fails"), boom)
        self.assertEqual(cm.exception.status, "failed")
        self.assertEqual(cm.exception.request["execution"]["status"], "failed")
        self.assertEqual(cm.exception.request["execution"]["detail"], "disk full")

        def unknown() -> None:
            raise OutcomeUnknown("connection reset mid-call")
        with self.assertRaises(ToolError) as cm:
            g.run(self.decided_by(lambda r: srv.reviewer.approve(r["id"]), tool="unknown"), unknown)
        self.assertEqual((cm.exception.status, cm.exception.request["execution"]["status"]), ("unknown", "unknown"))

    def test_two_gates_race_one_runs(self) -> None:
        inst = srv.agent.register_instance("py race")
        gates = []
        for _ in range(2):
            d = tempfile.mkdtemp(prefix="airlock-py-race-")
            self.addCleanup(shutil.rmtree, d, True)
            gates.append(Gate(srv.agent, inst["id"], d))
            self.addCleanup(gates[-1].close)
        r, _ = srv.agent.create_request(inst["id"], "py-race-1", "race", {"n": 1}, timeout="5m")
        srv.reviewer.approve(r["id"])
        call = Call("race", {"n": 1}, idempotency_key="py-race-1", timeout="5m")
        runs, errors = [], []
        barrier = threading.Barrier(2)

        def go(g: Gate) -> None:
            barrier.wait()
            try:
                g.run(call, lambda: runs.append(1))
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        ts = [threading.Thread(target=go, args=(g,)) for g in gates]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        self.assertEqual(len(runs), 1)
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0], AlreadyExecutedError)
        self.assertFalse(errors[0].here)

    def test_journal_is_locked(self) -> None:
        d = tempfile.mkdtemp(prefix="airlock-py-lock-")
        self.addCleanup(shutil.rmtree, d, True)
        inst = srv.agent.register_instance("py lock")
        g1 = Gate(srv.agent, inst["id"], d)
        with self.assertRaisesRegex(RuntimeError, "in use"):
            Gate(srv.agent, inst["id"], d)
        g1.close()
        Gate(srv.agent, inst["id"], d).close()

    def test_keys(self) -> None:
        g = self.gate()
        k = g.key(Call("t", {"a": 1, "b": [1, {"y": 2, "x": 1}]}))
        self.assertEqual(g.key(Call("t", '{"b":[1,{"x":1,"y":2}],"a":1}')), k)
        self.assertNotEqual(g.key(Call("t", {"a": 2, "b": [1, {"y": 2, "x": 1}]})), k)
        self.assertNotEqual(g.key(Call("t", {"a": 1, "b": [1, {"y": 2, "x": 1}]}, attempt_key="call_2")), k)
        self.assertRegex(k, r"^gate-[0-9a-f]{40}$")

    def test_power_cut_journal_converges(self) -> None:
        """A journal that lost its last lines to a power cut converges on what the server holds."""
        inst = srv.agent.register_instance("py power cut")
        d = tempfile.mkdtemp(prefix="airlock-py-cut-")
        self.addCleanup(shutil.rmtree, d, True)
        runs = []
        call = self.decided_by(lambda r: srv.reviewer.approve(r["id"]), tool="cut")
        with Gate(srv.agent, inst["id"], d, poll_wait=5) as g1:
            out = g1.run(call, lambda: runs.append(1))
        # Only the lines up to "claimed" reached the disk.
        path = os.path.join(d, next(f for f in os.listdir(d) if f.endswith(".log")))
        with open(path) as f:
            lines = f.read().splitlines()
        keep = next(i for i, line in enumerate(lines) if line.startswith("claimed "))
        with open(path, "w") as f:
            f.write("\n".join(lines[: keep + 1]) + "\n")
        with Gate(srv.agent, inst["id"], d, poll_wait=5) as g2:
            self.assertEqual(g2.outstanding(), 1)
            recs = g2.recover()
            self.assertEqual([(r.request_id, r.error) for r in recs], [(out.request["id"], None)])
            self.assertEqual(g2.outstanding(), 0)
            self.assertEqual(srv.agent.get_request(out.request["id"])["execution"]["status"], "succeeded")
            with self.assertRaises(AlreadyExecutedError):
                g2.run(call, lambda: runs.append(1))
        self.assertEqual(len(runs), 1)

    def test_ask_then_run(self) -> None:
        """ask() finds the same request every time; run() then uses that request's decision."""
        g = self.gate()
        call = Call("ask_first", {"n": 1}, timeout="5m")
        first = g.ask(call)
        self.assertEqual(first["state"], "pending")
        self.assertEqual(g.ask(call)["id"], first["id"])
        srv.reviewer.approve(first["id"])
        runs = []
        out = g.run(call, lambda: runs.append(1) or "ran")
        self.assertEqual((out.request["id"], out.value, len(runs)), (first["id"], "ran", 1))

    def test_claim_overlaps_the_fsync_and_the_call_waits_for_it(self) -> None:
        """The claim is sent while the claiming line is fsynced; the call starts only once both are done."""
        g = self.gate()
        release = threading.Event()
        real = g._journal.fsync
        calls: List[int] = []

        def held_fsync(fd: int) -> None:
            calls.append(fd)
            release.wait(30)
            real(fd)
        g._journal.fsync = held_fsync
        ids: List[str] = []
        runs: List[int] = []
        call = self.decided_by(lambda r: (ids.append(r["id"]), srv.reviewer.approve(r["id"])), tool="overlap")
        result: Dict[str, Any] = {}
        t = threading.Thread(target=lambda: result.update(out=g.run(call, lambda: runs.append(1) or "ran")))
        t.start()
        try:
            deadline = time.monotonic() + 10
            while not (ids and srv.agent.get_request(ids[0]).get("execution")):
                self.assertLess(time.monotonic(), deadline, "the claim was not sent while the journal was being fsynced")
                time.sleep(0.01)
            self.assertEqual(runs, [], "the call started before its claiming line was durable")
            self.assertEqual(len(calls), 1)
        finally:
            release.set()
            t.join(30)
        out = result["out"]
        self.assertEqual((out.value, len(runs), out.request["execution"]["status"]), ("ran", 1, "succeeded"))

    def test_claiming_line_not_fsynced_never_starts(self) -> None:
        """A claiming line that cannot be fsynced: the call never starts, and the claim is reported failed."""
        g = self.gate()

        def eio(fd: int) -> None:
            raise OSError(5, "Input/output error")
        g._journal.fsync = eio
        runs: List[int] = []
        call = self.decided_by(lambda r: srv.reviewer.approve(r["id"]), tool="eio")
        with self.assertRaisesRegex(RuntimeError, "not started: .*Input/output error"):
            g.run(call, lambda: runs.append(1))
        self.assertEqual(runs, [])
        r = srv.agent.get_request(g._journal.read(g.key(call)).request_id)
        self.assertEqual((r["execution"]["status"], r["execution"]["detail"]),
                         ("failed", "not started: the gate could not write its journal"))

    def test_power_cut_lost_the_claiming_line(self) -> None:
        """A power cut took the claiming line after the claim landed: the restart does not run the call.

        The window the overlap opens: the claim was granted, its line not
        yet durable, the machine lost power. The call had not started (it
        waits for the fsync); the journal says only "requested".
        """
        inst = srv.agent.register_instance("py lost claiming")
        d = tempfile.mkdtemp(prefix="airlock-py-lost-")
        self.addCleanup(shutil.rmtree, d, True)
        call = Call("lost_claiming", {"n": 1}, timeout="5m")
        with Gate(srv.agent, inst["id"], d, poll_wait=5) as g1:
            asked = g1.ask(call)
        srv.reviewer.approve(asked["id"])
        srv.agent.claim_execution(asked["id"])  # the claim that landed
        runs: List[int] = []
        with Gate(srv.agent, inst["id"], d, poll_wait=5) as g2:
            self.assertEqual(g2.outstanding(), 0)
            self.assertEqual(g2.recover(), [])
            with self.assertRaises(AlreadyExecutedError) as cm:
                g2.run(call, lambda: runs.append(1))
            self.assertFalse(cm.exception.here)
        self.assertEqual(runs, [])

    def test_sync_every_step_fsyncs_as_it_writes(self) -> None:
        """With sync_every_step every line is fsynced as it is written, not in the background."""
        g = self.gate(sync_every_step=True)
        background: List[int] = []
        g._journal.fsync = background.append
        call = self.decided_by(lambda r: srv.reviewer.approve(r["id"]), tool="every_step")
        self.assertEqual(g.run(call, lambda: "ok").request["execution"]["status"], "succeeded")
        self.assertEqual(background, [])


if __name__ == "__main__":
    unittest.main()
