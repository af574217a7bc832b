"""The REST client against the real server: every endpoint, errors with their stable code,
long-poll, retries with the same Idempotency-Key, and the event stream resuming after a cut connection."""

import base64
import csv
import hashlib
import hmac
import http.server
import io
import json
import os
import re
import select
import threading
import time
import unittest
import urllib.request
from typing import Any, Dict, List, Mapping

from airlock import AirlockError, Client, NetworkError, Retry, is_code
from tests.support import REPO, CuttingProxy, ModuleServer, Server

srv = ModuleServer()
setUpModule, tearDownModule = srv.start, srv.stop


# Each operation of rest/openapi.yaml, and the client method that calls it.
OPERATIONS = {
    "listInstances": "list_instances", "createInstance": "register_instance", "getInstance": "get_instance",
    "deleteInstance": "delete_instance", "createApprovalRequest": "create_request",
    "listApprovalRequests": "list_requests", "getApprovalRequest": "get_request",
    "cancelApprovalRequest": "cancel_request", "decideApprovalRequest": "decide", "decideApprovalRequests": "decide_batch", "claimExecution": "claim_execution",
    "reportExecution": "report_execution", "streamEvents": "events", "getBoard": "board",
    "createColumn": "create_column", "createWorkItem": "create_work_item", "getWorkItem": "get_work_item",
    "updateWorkItem": "update_work_item", "listSessions": "list_sessions", "createToken": "create_token",
    "listTokens": "list_tokens", "revokeToken": "revoke_token", "healthz": "healthz", "readyz": "readyz",
    "metrics": "metrics", "openapi": "openapi",
    "createWebhook": "create_webhook", "listWebhooks": "list_webhooks", "getWebhook": "get_webhook",
    "deleteWebhook": "delete_webhook", "listWebhookDeliveries": "list_webhook_deliveries", "testWebhook": "test_webhook",
    "createGrant": "create_grant", "listGrants": "list_grants", "getGrant": "get_grant", "revokeGrant": "revoke_grant",
    "enableWebhook": "enable_webhook",
    "listReviewers": "list_reviewers", "linkReviewer": "link_reviewer", "endReviewerSessions": "end_reviewer_sessions",
    "getReviewerStats": "reviewer_stats", "listSuggestions": "suggestions",
    "jwks": "jwks", "listSigningKeys": "list_signing_keys", "rotateSigningKey": "rotate_signing_key",
    "consumeApprovalToken": "consume_approval_token",
    "getAuditCheckpoint": "get_audit_checkpoint", "getAuditKey": "get_audit_key", "listAuditEntries": "list_audit_entries",
    "getAuditInclusionProof": "get_audit_inclusion_proof", "getAuditConsistencyProof": "get_audit_consistency_proof",
    "exportAudit": "export_audit", "getRequestProof": "get_request_proof",
    "getVAPIDPublicKey": "get_vapid_public_key", "createPushSubscription": "create_push_subscription",
    "deletePushSubscription": "delete_push_subscription",
}

# Operations that are not the SDK's to call, each with the reason: a deliberate
# exclusion, not a skip. Each must still exist in rest/openapi.yaml.
NOT_FOR_THE_SDK = {
    "claudeCodeHook": "Claude Code's own HTTP hook calls it, not an agent's code",
    "slackInteractions": "Slack calls it, signed with the app's signing secret",
}

FAST = Retry(attempts=5, min_backoff=0.001, max_backoff=0.002)


def check_inclusion(index: int, size: int, leaf_hash: bytes, proof: List[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2: whether proof puts the leaf hash at index of the tree of size with root."""
    def node(a: bytes, b: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + a + b).digest()
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_signature(secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Verifies a Standard Webhooks delivery as a receiver must: HMAC-SHA256 of
    "webhook-id.webhook-timestamp.body", keyed by the base64 after "whsec_",
    matching one of the space-separated "v1,<base64>" signatures."""
    key = base64.b64decode(secret[len("whsec_"):])
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    want = hmac.new(key, signed, hashlib.sha256).digest()
    for sig in headers.get("webhook-signature", "").split(" "):
        version, _, b64 = sig.partition(",")
        if version == "v1" and hmac.compare_digest(base64.b64decode(b64 or ""), want):
            return True
    return False


class Receiver:
    """A real HTTP receiver on loopback that records each POST and answers 204."""

    def __init__(self) -> None:
        self.got: List[Dict[str, Any]] = []
        self.arrived = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.got.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                self.send_response(204)
                self.end_headers()
                outer.arrived.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/airlock"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ClientTest(unittest.TestCase):
    def test_every_operation_has_a_method(self) -> None:
        with open(os.path.join(REPO, "rest", "openapi.yaml"), encoding="utf-8") as f:
            ids = re.findall(r"^\s+operationId:\s*(\S+)\s*$", f.read(), re.M)
        self.assertGreaterEqual(len(ids), 20)
        for op in (i for i in ids if i not in NOT_FOR_THE_SDK):
            self.assertIn(op, OPERATIONS, f"rest/openapi.yaml has operation {op}: add a client method (and its TypeScript twin)")
            self.assertTrue(callable(getattr(Client, OPERATIONS[op], None)), op)
        # Both lists stay true: no stale or renamed operation, none both wrapped and excluded.
        for op in OPERATIONS:
            self.assertIn(op, ids, f"{op} is listed but rest/openapi.yaml has no such operation")
        for op in NOT_FOR_THE_SDK:
            self.assertIn(op, ids, f"{op} is excluded but rest/openapi.yaml has no such operation: drop it from NOT_FOR_THE_SDK")
            self.assertNotIn(op, OPERATIONS, f"{op} is both wrapped and excluded")

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

    def test_decide_batch(self) -> None:
        inst = srv.agent.register_instance("py batch")
        a, _ = srv.agent.create_request(inst["id"], "py-batch-1", "t", {"n": 1})
        b, _ = srv.agent.create_request(inst["id"], "py-batch-2", "t", {"n": 2})
        srv.reviewer.deny(b["id"], "no")
        got = srv.reviewer.decide_batch([a["id"], b["id"]], "approved", note="both", valid_for="1m")
        self.assertEqual([(r["id"], r["status"]) for r in got], [(a["id"], 200), (b["id"], 409)])
        self.assertEqual(got[0]["request"]["state"], "approved")
        self.assertEqual((got[1]["problem"]["code"], got[1]["problem"]["state"], "request" in got[1]), ("not_pending", "denied", False))
        with self.assertRaises(AirlockError) as cm:
            srv.reviewer.decide_batch([a["id"], a["id"]], "denied")
        self.assertEqual((cm.exception.code, cm.exception.field), ("invalid_request", "ids"))
        with self.assertRaises(AirlockError) as cm:
            srv.agent.decide_batch([a["id"]], "denied")
        self.assertEqual(cm.exception.code, "forbidden")

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
        # Names for people to read: the instance, the agent token that asked, the reviewer token that decided.
        self.assertEqual((got["instance_name"], got["created_by_name"], got["decision"]["decided_by_name"]),
                         ("py long-poll", "py agent", "py reviewer"))

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

    def test_keeps_the_connection_alive(self) -> None:
        """Calls reuse one connection; one the server closed while idle is replaced, without a retry (none is allowed here)."""
        proxy = CuttingProxy(srv.url)
        self.addCleanup(proxy.close)
        c = Client(proxy.url, srv.agent_token, retry=Retry(attempts=1))
        inst = c.register_instance("py keep-alive")
        for i in range(5):
            c.create_request(inst["id"], f"py-ka-{i}", "ka", {"i": i})
        c.get_instance(inst["id"])
        self.assertEqual(proxy.accepted, 1, "one connection for seven calls")
        proxy.cut()  # as the server does with an idle connection
        select.select([c._send._local.held.conn.sock], [], [], 10)  # the FIN has reached the client's socket
        c.register_instance("py keep-alive 2")  # not retried: it must not meet the dead connection
        self.assertEqual(proxy.accepted, 2)
        # Each thread has its own connection.
        t = threading.Thread(target=lambda: c.get_instance(inst["id"]))
        t.start()
        t.join()
        self.assertEqual(proxy.accepted, 3)

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
        # An OIDC principal that never signed in: nothing to end, and no error.
        self.assertEqual(srv.admin.end_reviewer_sessions("oidc:https://idp.example#nobody"),
                         {"principal": "oidc:https://idp.example#nobody", "ended": 0})
        # A decider with no decision in the window answers zeros; an OIDC principal is percent-encoded.
        st = srv.admin.reviewer_stats("oidc:https://idp.example#nobody", since="7d")
        self.assertEqual([st["decided_by"], st["kind"], st["window_seconds"], st["decisions"], st["fast_approvals"]],
                         ["oidc:https://idp.example#nobody", "person", 7 * 86400, 0, 0])
        self.assertIsInstance(srv.admin.suggestions(min=2, since="30d"), list)
        with self.assertRaises(AirlockError) as cm:
            srv.reviewer.suggestions()
        self.assertEqual(cm.exception.code, "forbidden")
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

    def test_signing_keys(self) -> None:
        before = [k["kid"] for k in srv.agent.jwks()["keys"]]
        self.assertEqual(len(before), 1)
        new = srv.admin.rotate_signing_key()
        # Published at once, signing from activates_at (this server's
        # --key-activation-delay is 1ms).
        self.assertGreaterEqual(new["activates_at"], new["created_at"])
        self.assertNotIn("seed", new)
        self.assertEqual([k["kid"] for k in srv.agent.jwks()["keys"]][:2], [new["id"], before[0]])
        self.assertEqual([k["id"] for k in srv.admin.list_signing_keys()][:2], [new["id"], before[0]])
        with self.assertRaises(AirlockError) as cm:
            srv.agent.rotate_signing_key()
        self.assertEqual(cm.exception.code, "forbidden")

    def test_consume_approval_token(self) -> None:
        inst = srv.agent.register_instance("py consume")
        r = srv.agent.create_request(inst["id"], "py-consume-1", "send_mail", {"to": "ada", "n": 1})[0]
        srv.reviewer.decide(r["id"], "approved")
        token = srv.agent.claim_execution(r["id"])["execution"]["approval_token"]
        verifier = Client(srv.url, srv.admin.create_token("py tool server", "verifier")["secret"])
        use = verifier.consume_approval_token(token, tool="send_mail", arguments={"n": 1.0, "to": "ada"})
        self.assertEqual(use["request_id"], r["id"])
        self.assertTrue(use["jti"] and use["consumed_at"])
        with self.assertRaises(AirlockError) as cm:
            verifier.consume_approval_token(token)
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.consumed_at),
                         ("already_used", 409, use["consumed_at"]))
        with self.assertRaises(AirlockError) as cm:
            verifier.consume_approval_token(token[:-4] + "AAAA")
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.reason), ("invalid_token", 400, "signature"))
        with self.assertRaises(AirlockError) as cm:
            verifier.list_instances()
        self.assertEqual(cm.exception.code, "forbidden")

    def test_audit_log(self) -> None:
        audit = Server("--checkpoint-interval", "1s")
        self.addCleanup(audit.stop)
        auditor = Client(audit.url, audit.admin.create_token("py auditor", "auditor")["secret"])
        inst = audit.agent.register_instance("py audit")
        r = audit.agent.create_request(inst["id"], "py-audit-1", "send_mail", {"cell": "=1+1"})[0]
        audit.reviewer.decide(r["id"], "approved")
        # Checkpoints follow the tree every second: wait for one that covers the request.
        deadline = time.monotonic() + 30
        while True:
            try:
                proof = auditor.get_request_proof(r["id"])
                if len(proof["entries"]) >= 2:
                    break
            except AirlockError as e:
                if e.code != "not_found":  # no checkpoint yet
                    raise
            self.assertLess(time.monotonic(), deadline, "no checkpoint covered the request within 30 s")
            time.sleep(0.05)
        note = auditor.get_audit_checkpoint()
        body = note.split("\n\n")[0].split("\n")
        size, root = int(body[1]), base64.b64decode(body[2])
        key = auditor.get_audit_key()
        self.assertTrue(key.startswith(body[0] + "+"), (key, body[0]))

        # Every inclusion proof checks by RFC 9162's algorithm, written here with hashlib alone.
        entries = auditor.list_audit_entries(limit=size)
        self.assertEqual([e["index"] for e in entries], list(range(size)))
        for e in entries:
            p = auditor.get_audit_inclusion_proof(e["index"], size)
            leaf_hash = hashlib.sha256(b"\x00" + e["leaf"].encode()).digest()
            self.assertTrue(check_inclusion(e["index"], size, leaf_hash, [base64.b64decode(h) for h in p["hashes"]], root), e)
            self.assertFalse(check_inclusion(e["index"], size, hashlib.sha256(b"\x00{}").digest(),
                                             [base64.b64decode(h) for h in p["hashes"]], root))
        self.assertEqual(auditor.get_audit_consistency_proof(1, size)["tree_size"], size)
        with self.assertRaises(AirlockError) as cm:
            auditor.get_audit_consistency_proof(size + 1, size + 1000)
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.field), ("invalid_request", 400, "to"))

        rows = list(csv.reader(io.StringIO(auditor.export_audit(format="csv"))))
        self.assertEqual(rows[0][:3], ["index", "time", "type"])
        self.assertFalse([c for row in rows for c in row if c[:1] in ("=", "+", "-", "@", "\t", "\r")])
        ocsf = [json.loads(line) for line in auditor.export_audit(format="ocsf", since="2000-01-01T00:00:00Z").splitlines()]
        self.assertTrue(len(ocsf) >= size and all(o["class_uid"] == 6003 for o in ocsf))
        with self.assertRaises(AirlockError) as cm:
            auditor.list_instances()
        self.assertEqual((cm.exception.code, cm.exception.status), ("forbidden", 403))
        with self.assertRaises(AirlockError) as cm:
            audit.reviewer.get_audit_checkpoint()
        self.assertEqual(cm.exception.code, "forbidden")

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

    def test_grants(self) -> None:
        inst = srv.agent.register_instance("py grants")
        a, _ = srv.agent.create_request(inst["id"], "py-grant-1", "py_grant_tool", {"n": 1})
        d = srv.reviewer.decide(a["id"], "approved", grant={"uses": 1, "expires_in": "1h"})
        g = d["grant"]
        self.assertRegex(g["id"], r"^grt_")
        self.assertEqual((g["uses_left"], g["request_id"], g["state"]), (1, a["id"], "live"))
        b, _ = srv.agent.create_request(inst["id"], "py-grant-2", "py_grant_tool", {"n": 1})
        self.assertEqual((b["state"], b["decision"]["decided_by"]), ("approved", "grant:" + g["id"]))
        self.assertEqual(srv.reviewer.get_grant(g["id"])["state"], "used_up")
        made = srv.reviewer.create_grant("py_grant_tool", "10m", arguments={"n": 2}, instance_id=inst["id"])
        self.assertIn(made["id"], [x["id"] for x in srv.reviewer.list_grants(state="live", tool="py_grant_tool")])
        self.assertEqual(srv.reviewer.revoke_grant(made["id"])["state"], "revoked")
        c, _ = srv.agent.create_request(inst["id"], "py-grant-3", "py_grant_tool", {"n": 2})
        self.assertEqual(c["state"], "pending")

    def test_push_subscriptions(self) -> None:
        key = srv.reviewer.get_vapid_public_key()["public_key"]
        raw = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
        self.assertEqual((len(raw), raw[0]), (65, 4))
        self.assertEqual(srv.admin.get_vapid_public_key()["public_key"], key)
        # A browser's keys: an uncompressed P-256 point and a 16-byte secret.
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives import serialization
        point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        sub = srv.reviewer.create_push_subscription("https://push.example.com/py", b64(point), b64(os.urandom(16)))
        self.assertTrue(sub["id"].startswith("psh_"))
        self.assertEqual(set(sub), {"id", "endpoint", "created_at"})
        with self.assertRaises(AirlockError) as cm:
            srv.agent.get_vapid_public_key()
        self.assertEqual(cm.exception.code, "forbidden")
        with self.assertRaises(AirlockError) as cm:
            srv.admin.delete_push_subscription(sub["id"])
        self.assertEqual(cm.exception.code, "not_found")
        srv.reviewer.delete_push_subscription(sub["id"])
        with self.assertRaises(AirlockError) as cm:
            srv.reviewer.create_push_subscription("https://push.example.com/py", b64(point), "AAAA")
        self.assertEqual(cm.exception.code, "invalid_request")

    def test_webhooks(self) -> None:
        # Without --outbound-allow-private a loopback receiver is refused at creation.
        with self.assertRaises(AirlockError) as cm:
            srv.admin.create_webhook("http://127.0.0.1:9/hook")
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.field), ("invalid_request", 400, "url"))

        ws = Server("--outbound-allow-private")
        self.addCleanup(ws.stop)
        rc = Receiver()
        self.addCleanup(rc.close)
        wh = ws.admin.create_webhook(rc.url, events=["approval_request.created"], description="py sdk test")
        self.assertRegex(wh["id"], r"^whk_")
        self.assertRegex(wh["secret"], r"^whsec_[A-Za-z0-9+/=]+$")
        self.assertEqual((wh["url"], wh["events"], wh["description"], wh["enabled"]),
                         (rc.url, ["approval_request.created"], "py sdk test", True))

        # The secret is shown once: neither the list nor a read carries it.
        listed = ws.admin.list_webhooks()
        self.assertEqual([w["id"] for w in listed], [wh["id"]])
        self.assertNotIn("secret", listed[0])
        read = ws.admin.get_webhook(wh["id"])
        self.assertEqual(read, {k: v for k, v in wh.items() if k != "secret"})
        with self.assertRaises(AirlockError) as cm:
            ws.reviewer.list_webhooks()
        self.assertEqual((cm.exception.code, cm.exception.status), ("forbidden", 403))
        # Enabling an enabled endpoint changes nothing (the server's tests
        # disable one first).
        self.assertEqual(ws.admin.enable_webhook(wh["id"]), read)
        with self.assertRaises(AirlockError) as cm:
            ws.reviewer.enable_webhook(wh["id"])
        self.assertEqual((cm.exception.code, cm.exception.status), ("forbidden", 403))

        queued = ws.admin.test_webhook(wh["id"])
        self.assertRegex(queued["id"], r"^dlv_")
        self.assertRegex(queued["message_id"], r"^msg_")
        self.assertEqual((queued["webhook_id"], queued["type"]), (wh["id"], "webhook.test"))

        self.assertTrue(rc.arrived.wait(30), "no webhook arrived at the receiver")
        got = rc.got[0]
        self.assertEqual(got["path"], "/hooks/airlock")
        self.assertEqual(got["headers"]["webhook-id"], queued["message_id"])
        self.assertLess(abs(int(got["headers"]["webhook-timestamp"]) - time.time()), 300, "timestamp within the 5-minute tolerance")
        self.assertTrue(verify_signature(wh["secret"], got["headers"], got["body"]), got["headers"]["webhook-signature"])
        # The check can fail: a changed body or another secret does not verify.
        self.assertFalse(verify_signature(wh["secret"], got["headers"], got["body"] + b" "))
        self.assertFalse(verify_signature("whsec_" + base64.b64encode(b"another key").decode(), got["headers"], got["body"]))
        payload = json.loads(got["body"])
        self.assertEqual((payload["type"], payload["data"]["webhook_id"]), ("webhook.test", wh["id"]))

        # The delivery is listed with the attempt the receiver answered
        # (polling the server: its record lands just after the answer).
        deadline = time.monotonic() + 30
        while True:
            page = ws.admin.list_webhook_deliveries(wh["id"], limit=10)
            d = next((x for x in page["items"] if x["id"] == queued["id"]), None)
            if d is not None and d["state"] == "delivered":
                break
            self.assertLess(time.monotonic(), deadline, f"the test delivery is not listed as delivered: {d}")
            time.sleep(0.02)
        self.assertEqual(d["message_id"], queued["message_id"])
        self.assertGreaterEqual(len(d["attempts"]), 1)
        self.assertEqual(d["attempts"][-1]["status"], 204)
        self.assertGreaterEqual(d["attempts"][-1]["latency_ms"], 0)

        ws.admin.delete_webhook(wh["id"])
        for fn in (lambda: ws.admin.get_webhook(wh["id"]), lambda: ws.admin.list_webhook_deliveries(wh["id"]),
                   lambda: ws.admin.delete_webhook(wh["id"])):
            with self.assertRaises(AirlockError) as cm:
                fn()
            self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))
        self.assertEqual(ws.admin.list_webhooks(), [])

    def test_instance_named_registers_once_and_two_at_once_settle_on_one(self) -> None:
        got: List[str] = []
        ts = [threading.Thread(target=lambda: got.append(srv.agent.instance_named("py named twice")["id"])) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(set(got)), 1, got)
        self.assertEqual(srv.agent.instance_named("py named twice")["id"], got[0])
        self.assertEqual([i["id"] for i in srv.agent.list_instances() if i["name"] == "py named twice"], got[:1])

    def test_from_env_reads_the_agent_token_and_the_old_name_with_a_warning(self) -> None:
        c = Client.from_env({"AIRLOCK_URL": srv.url, "AIRLOCK_AGENT_TOKEN": srv.agent_token, "AIRLOCK_TOKEN": "wrong"})
        self.assertEqual(c.base_url, srv.url)
        self.assertIsInstance(c.list_instances(), list)
        with self.assertWarnsRegex(DeprecationWarning, "set AIRLOCK_AGENT_TOKEN"):
            old = Client.from_env({"AIRLOCK_URL": srv.url, "AIRLOCK_TOKEN": srv.agent_token})
        self.assertIsInstance(old.list_instances(), list)
        self.assertEqual(Client.from_env({"AIRLOCK_AGENT_TOKEN": "x"}).base_url, "http://127.0.0.1:8080")
        with self.assertRaisesRegex(ValueError, "set AIRLOCK_AGENT_TOKEN"):
            Client.from_env({})


if __name__ == "__main__":
    unittest.main()
