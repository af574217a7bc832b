"""The REST client against the real server: every endpoint, errors with their stable code,
long-poll, retries with the same Idempotency-Key, and the event stream resuming after a cut connection."""

import json
import os
import re
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import urllib.request

from airlock import AirlockError, Client, NetworkError, Retry, is_code
from tests.support import REPO, CuttingProxy, Server

srv: Server


def setUpModule() -> None:
    global srv
    srv = Server("--webhook-allow-private")


def tearDownModule() -> None:
    srv.stop()


# Each operation of rest/openapi.yaml, and the client method that calls it.
OPERATIONS = {
    "listInstances": "list_instances", "createInstance": "register_instance", "getInstance": "get_instance",
    "deleteInstance": "delete_instance", "createApprovalRequest": "create_request",
    "listApprovalRequests": "list_requests", "getApprovalRequest": "get_request",
    "cancelApprovalRequest": "cancel_request", "decideApprovalRequest": "decide", "claimExecution": "claim_execution",
    "reportExecution": "report_execution", "streamEvents": "events", "getBoard": "board",
    "createColumn": "create_column", "createWorkItem": "create_work_item", "getWorkItem": "get_work_item",
    "updateWorkItem": "update_work_item", "listSessions": "list_sessions", "createToken": "create_token",
    "listTokens": "list_tokens", "revokeToken": "revoke_token", "healthz": "healthz", "readyz": "readyz",
    "metrics": "metrics", "openapi": "openapi",
    "createWebhook": "create_webhook", "listWebhooks": "list_webhooks", "getWebhook": "get_webhook",
    "deleteWebhook": "delete_webhook", "listWebhookDeliveries": "list_webhook_deliveries", "testWebhook": "test_webhook",
}

# Operations that are not the SDK's to call, and why.
NOT_FOR_THE_SDK = {
    "claudeCodeHook": "Claude Code's own HTTP hook calls it, not an agent's code",
}

FAST = Retry(attempts=5, min_backoff=0.001, max_backoff=0.002)


class ClientTest(unittest.TestCase):
    def test_every_operation_has_a_method(self) -> None:
        with open(os.path.join(REPO, "rest", "openapi.yaml"), encoding="utf-8") as f:
            ids = re.findall(r"^\s+operationId:\s*(\S+)\s*$", f.read(), re.M)
        self.assertGreaterEqual(len(ids), 20)
        for op in (i for i in ids if i not in NOT_FOR_THE_SDK):
            self.assertIn(op, OPERATIONS, f"rest/openapi.yaml has operation {op}: add a client method (and its TypeScript twin)")
            self.assertTrue(callable(getattr(Client, OPERATIONS[op], None)), op)

    def test_instances(self) -> None:
        inst = srv.agent.register_instance("py client", {"host": "ci"})
        self.assertTrue(inst["id"].startswith("ins_"))
        self.assertEqual(inst["metadata"], {"host": "ci"})
        srv.agent.create_request(inst["id"], "py-inst-1", "x", {})
        self.assertEqual(srv.agent.get_instance(inst["id"])["pending_count"], 1)
        self.assertIn(inst["id"], [i["id"] for i in srv.agent.list_instances()])
        self.assertEqual(srv.agent.delete_instance(inst["id"]), 1)
        with self.assertRaises(AirlockError) as cm:
            srv.agent.get_instance(inst["id"])
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))

    def test_requests(self) -> None:
        inst = srv.agent.register_instance("py requests")
        raw = '{"z": 1,  "a": "<b>é</b>", "n": 1.50}'
        a, created = srv.agent.create_request(inst["id"], "py-req-1", "send_email", raw, agent_reasoning="because", context={"seen": True})
        self.assertTrue(created)
        b, created = srv.agent.create_request(inst["id"], "py-req-1", "send_email", raw, agent_reasoning="because", context={"seen": True})
        self.assertEqual((created, b["id"]), (False, a["id"]))
        req = urllib.request.Request(f"{srv.url}/v1/approval-requests/{a['id']}", headers={"Authorization": f"Bearer {srv.agent_token}"})
        with urllib.request.urlopen(req) as res:
            self.assertIn(f'"arguments":{raw}', res.read().decode())
        with self.assertRaises(AirlockError) as cm:
            srv.agent.create_request(inst["id"], "py-req-1", "send_email", {"other": True})
        self.assertEqual((cm.exception.code, cm.exception.status), ("idempotency_conflict", 422))
        page = srv.reviewer.list_requests(instance_id=inst["id"], state="pending", limit=10)
        self.assertEqual([r["id"] for r in page["items"]], [a["id"]])
        self.assertEqual([r["id"] for r in srv.agent.all_requests(instance_id=inst["id"], limit=1)], [a["id"]])
        self.assertEqual(srv.agent.cancel_request(a["id"])["state"], "cancelled")
        with self.assertRaises(AirlockError) as cm:
            srv.agent.cancel_request(a["id"])
        self.assertEqual((cm.exception.code, cm.exception.state), ("not_pending", "cancelled"))

    def test_errors_carry_the_code(self) -> None:
        inst = srv.agent.register_instance("py errors")
        r, _ = srv.agent.create_request(inst["id"], "py-err-1", "t", {})
        cases = [
            (lambda: Client(srv.url, "airlock_wrong").list_instances(), "unauthorized", 401, None),
            (lambda: srv.agent.approve(r["id"]), "forbidden", 403, None),
            (lambda: srv.agent.claim_execution(r["id"]), "not_approved", 409, None),
            (lambda: srv.agent.create_request(inst["id"], "py-err-2", "bad tool name", {}), "invalid_request", 400, "tool"),
            (lambda: srv.agent.get_request("apr_nothing"), "not_found", 404, None),
        ]
        for fn, code, status, field in cases:
            with self.subTest(code=code):
                with self.assertRaises(AirlockError) as cm:
                    fn()
                self.assertEqual((cm.exception.code, cm.exception.status), (code, status))
                self.assertTrue(is_code(cm.exception, code))
                if field:
                    self.assertEqual(cm.exception.field, field)

    def test_long_poll(self) -> None:
        inst = srv.agent.register_instance("py long-poll")
        r, _ = srv.agent.create_request(inst["id"], "py-lp-1", "t", {})
        self.assertEqual(srv.agent.long_poll_request(r["id"], 0.05)["state"], "pending")
        got = {}
        t = threading.Thread(target=lambda: got.update(srv.agent.wait_request(r["id"], poll_wait=5)))
        t.start()
        srv.reviewer.decide(r["id"], "approved", note="fine", valid_for="2m")
        t.join(30)
        self.assertEqual((got["state"], got["decision"]["note"]), ("approved", "fine"))
        self.assertGreater(got["decision"]["expires_at"], got["decision"]["decided_at"])

    def test_lost_answer_is_retried_with_the_same_key(self) -> None:
        inst = srv.agent.register_instance("py retries")
        keys = []
        lose = [1]
        base = Client(srv.url, srv.agent_token)._send

        def losing(method, url, headers, body, timeout):
            out = base(method, url, headers, body, timeout)
            if method == "POST" and "/approval-requests" in url:
                keys.append(headers["Idempotency-Key"])
                if lose[0] > 0:
                    lose[0] -= 1
                    raise ConnectionResetError("the answer was lost")  # the server acted; the answer never came
            return out

        c = Client(srv.url, srv.agent_token, transport=losing, retry=FAST)
        r, created = c.create_request(inst["id"], "py-retry-1", "t", {"a": 1})
        self.assertEqual(keys, ["py-retry-1", "py-retry-1"])
        self.assertFalse(created, "the retry got the replay of the request the lost attempt created")
        self.assertEqual([x["id"] for x in srv.agent.list_requests(instance_id=inst["id"])["items"]], [r["id"]])

        claims = []

        def failing(method, url, headers, body, timeout):
            claims.append(url)
            raise ConnectionRefusedError("down")

        with self.assertRaises(NetworkError):
            Client(srv.url, srv.agent_token, transport=failing, retry=FAST).claim_execution(r["id"])
        self.assertEqual(len(claims), 1, "a claim is never retried")

    def test_rate_limited_is_retried_after_retry_after(self) -> None:
        calls = []
        base = Client(srv.url, srv.agent_token)._send

        def limited(method, url, headers, body, timeout):
            calls.append(url)
            if len(calls) == 1:
                problem = {"type": "urn:airlock:problem:rate_limited", "title": "Too Many Requests", "status": 429,
                           "detail": "slow down", "code": "rate_limited"}
                return 429, {"content-type": "application/problem+json", "retry-after": "0"}, json.dumps(problem).encode()
            return base(method, url, headers, body, timeout)

        self.assertIsInstance(Client(srv.url, srv.agent_token, transport=limited).list_instances(), list)
        self.assertEqual(len(calls), 2)

    def test_board_tokens_operations(self) -> None:
        self.assertEqual(srv.reviewer.create_column("todo", "To do")["key"], "todo")
        srv.reviewer.create_column("done", "Done")
        item = srv.reviewer.create_work_item("card", "todo")
        moved = srv.reviewer.update_work_item(item["id"], column_key="done", if_version=item["version"])
        self.assertEqual(moved["column_key"], "done")
        self.assertEqual(srv.agent.get_work_item(item["id"])["version"], item["version"] + 1)
        self.assertEqual([c["key"] for c in srv.agent.board()["columns"]], ["todo", "done"])
        self.assertIsInstance(srv.reviewer.list_sessions(), list)
        tok = srv.admin.create_token("short-lived", "agent")
        self.assertTrue(tok["secret"].startswith("airlock_"))
        self.assertIn(tok["id"], [t["id"] for t in srv.admin.list_tokens()])
        self.assertIn("revoked_at", srv.admin.revoke_token(tok["id"]))
        with self.assertRaises(AirlockError) as cm:
            Client(srv.url, tok["secret"]).list_instances()
        self.assertEqual(cm.exception.code, "unauthorized")
        self.assertEqual(srv.agent.healthz(), {"status": "ok"})
        self.assertEqual(srv.agent.readyz(), {"status": "ok"})
        self.assertIn("# TYPE", srv.agent.metrics())
        self.assertTrue(srv.agent.openapi().startswith("openapi: 3.1"))

    def test_events_resume_after_a_cut_connection(self) -> None:
        inst = srv.agent.register_instance("py events")
        proxy = CuttingProxy(srv.url)
        self.addCleanup(proxy.close)
        c = Client(proxy.url, srv.reviewer_token, retry=FAST)
        ids = [srv.agent.create_request(inst["id"], "py-ev-0", "ev", {"i": 0})[0]["id"]]
        seen, created = [], []
        stop = threading.Event()
        for ev in c.events(0, stop=stop):
            seen.append(ev["event"]["id"])
            if ev["event"]["type"] == "request.created" and ev.get("request", {}).get("instance_id") == inst["id"]:
                created.append(ev["request"]["id"])
                if len(created) == 3:
                    stop.set()
                    continue
                # Break the connection, then make the next event: the client resumes with Last-Event-ID.
                proxy.cut()
                n = len(ids)
                ids.append(srv.agent.create_request(inst["id"], f"py-ev-{n}", "ev", {"i": n})[0]["id"])
        self.assertEqual(created, ids)
        self.assertEqual(seen, sorted(set(seen)), "in order, none repeated")
        self.assertEqual(seen, list(range(seen[0], seen[0] + len(seen))), "none missed")
        self.assertGreaterEqual(proxy.accepted, 3, "it reconnected after each cut")
        first = next(iter(srv.reviewer.events(seen[1])))
        self.assertEqual(first["event"]["id"], seen[2])

    def test_webhooks(self) -> None:
        received = []
        arrived = threading.Event()

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the handler's name is fixed
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append({"id": self.headers["webhook-id"], "signature": self.headers["webhook-signature"], "body": json.loads(body)})
                self.send_response(204)
                self.end_headers()
                arrived.set()

            def log_message(self, *args: object) -> None:
                pass

        receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        threading.Thread(target=receiver.serve_forever, daemon=True).start()
        self.addCleanup(receiver.server_close)
        self.addCleanup(receiver.shutdown)
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        wh = srv.admin.create_webhook(url, events=["approval_request.created"], description="py test")
        self.assertTrue(wh["secret"].startswith("whsec_"))
        self.assertEqual((wh["url"], wh["events"], wh["enabled"]), (url, ["approval_request.created"], True))
        self.assertTrue(any(w["id"] == wh["id"] and "secret" not in w for w in srv.admin.list_webhooks()))
        self.assertEqual(srv.admin.get_webhook(wh["id"])["description"], "py test")
        d = srv.admin.test_webhook(wh["id"])
        self.assertEqual((d["webhook_id"], d["type"]), (wh["id"], "webhook.test"))
        self.assertTrue(arrived.wait(30), "the test delivery never arrived")
        self.assertEqual(received[0]["id"], d["message_id"])
        self.assertTrue(received[0]["signature"].startswith("v1,"))
        self.assertIn(d["id"], [x["id"] for x in srv.admin.list_webhook_deliveries(wh["id"], limit=10)["items"]])
        srv.admin.delete_webhook(wh["id"])
        with self.assertRaises(AirlockError) as cm:
            srv.admin.get_webhook(wh["id"])
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(AirlockError) as cm:
            srv.agent.list_webhooks()
        self.assertEqual(cm.exception.code, "forbidden")


if __name__ == "__main__":
    unittest.main()
