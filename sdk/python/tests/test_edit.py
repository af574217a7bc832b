"""Edits (docs/protocol.md, "Edits"): a call a reviewer approved with changed arguments runs only
with accept_edits, then with the reviewer's arguments, once, on the replacement; without it,
DeniedError names the replacement and nothing runs. The adapter's claims go with the request."""

import shutil
import tempfile
import unittest
from typing import Any, Dict, List

from airlock import AirlockError, Call, DeniedError, Gate
from tests.support import ModuleServer

srv = ModuleServer()
setUpModule, tearDownModule = srv.start, srv.stop

EDITED = {"to": "team@example.com", "body": "hi"}


class EditTest(unittest.TestCase):
    def gate(self, **kw: Any) -> Gate:
        inst = srv.agent.register_instance("py edit")
        d = tempfile.mkdtemp(prefix="airlock-py-edit-")
        self.addCleanup(shutil.rmtree, d, True)
        g = Gate(srv.agent, inst["id"], d + "/journal", poll_wait=5, **kw)
        self.addCleanup(g.close)
        return g

    @staticmethod
    def edited_by(attempt: str, **kw: Any) -> Call:
        done: List[bool] = []

        def on_pending(r: Dict[str, Any]) -> None:
            if not done:
                done.append(True)
                srv.reviewer.edit(r["id"], EDITED, note="only the team")
        return Call("send_email", {"to": "all@example.com", "body": "hi"}, attempt_key=attempt, timeout="5m",
                    on_pending=on_pending, **kw)

    def test_without_accept_edits_nothing_runs(self) -> None:
        runs: List[int] = []
        with self.assertRaises(DeniedError) as cm:
            self.gate().run(self.edited_by("no-edits"), lambda: runs.append(1))
        err = cm.exception
        self.assertTrue(err.replaced_by.startswith("apr_"))
        self.assertIn("accept_edits", str(err))
        self.assertEqual(runs, [])
        rep = srv.agent.get_request(err.replaced_by)
        self.assertEqual((rep["state"], rep.get("execution"), rep["derived_from"]), ("approved", None, err.request["id"]))

    def test_with_accept_edits_the_edited_call_runs_once(self) -> None:
        seen: List[Any] = []
        call = self.edited_by("edits", preview={"type": "text", "content": "mails everyone"}, reversibility="irreversible")
        out = self.gate(accept_edits=True).run(call, lambda arguments: seen.append(arguments) or "sent")
        self.assertEqual(seen, [EDITED])
        orig = srv.agent.get_request(out.request["derived_from"])
        self.assertEqual((orig["state"], orig["decision"]["replaced_by"], orig.get("execution")),
                         ("denied", out.request["id"], None))
        self.assertEqual((orig["preview"], orig["reversibility"]), ({"type": "text", "content": "mails everyone"}, "irreversible"))

    def test_agents_never_edit(self) -> None:
        inst = srv.agent.register_instance("py agent edit")
        r, _ = srv.agent.create_request(inst["id"], "py-agent-edit", "send_email", {"to": "x@example.com"})
        with self.assertRaises(AirlockError) as cm:
            srv.agent.edit(r["id"], {"to": "y@example.com"})
        self.assertEqual(cm.exception.code, "forbidden")


if __name__ == "__main__":
    unittest.main()
