"""The client and the gate believe only what they can check.

A fake server (http.server, speaking the real API's shapes) approves a call
and then answers the claim with an empty 2xx, HTML, a truncated body,
another request's id or state. The tool must never run.
"""

import json
import shutil
import tempfile
import threading
import unittest
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple

from airlock import Call, Client, Gate, InterruptedRunError, MalformedAnswerError, Retry

ID = "apr_fake0001"
INSTANCE = "ins_fake0001"


def _ts(delta: float = 0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def request(**over: Any) -> Dict[str, Any]:
    r = {"id": ID, "instance_id": INSTANCE, "state": "approved", "kind": "tool_call", "tool": "refund",
         "arguments": {"order": "A-17"}, "created_at": _ts(), "deadline_at": _ts(600),
         "decision": {"status": "approved", "decided_at": _ts(), "expires_at": _ts(600)}}
    r.update(over)
    return r


def claimed(**over: Any) -> Dict[str, Any]:
    return request(execution={"claimed_at": _ts(), "status": "claimed"}, **over)


# Each hostile answer to the claim: (what it is, status, content type, body).
ANSWERS: List[Tuple[str, int, str, bytes]] = [
    ("an empty 200", 200, "application/json", b""),
    ("an empty 204", 204, "", b""),
    ("an empty 201", 201, "application/json", b""),
    ("an HTML page", 200, "text/html", b"<html><body>OK</body></html>"),
    ("a truncated body", 200, "application/json", json.dumps(claimed()).encode()[:40]),
    ("JSON null", 200, "application/json", b"null"),
    ("a JSON array", 200, "application/json", json.dumps([claimed()]).encode()),
    ("another request's id", 200, "application/json", json.dumps(claimed(id="apr_other0001")).encode()),
    ("the request still pending", 200, "application/json", json.dumps(claimed(state="pending")).encode()),
    ("the request denied", 200, "application/json", json.dumps(claimed(state="denied")).encode()),
    ("no execution", 200, "application/json", json.dumps(request()).encode()),
    ("the execution already succeeded", 200, "application/json",
     json.dumps(request(execution={"claimed_at": _ts(), "status": "succeeded"})).encode()),
]


class Fake:
    """A fake Airlock: creates answer an approved request; the claim gets ``claim``; reads show ``read_back``."""

    def __init__(self) -> None:
        self.claim = ANSWERS[0]
        self.read_back: Dict[str, Any] = request()
        self.reports: List[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, v: Any) -> None:
                b = json.dumps(v).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

            def _route(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                path = self.path.split("?")[0]
                if self.command == "POST" and path == f"/v1/instances/{INSTANCE}/approval-requests":
                    return self._json(201, request())
                if self.command == "GET" and path == f"/v1/approval-requests/{ID}":
                    return self._json(200, fake.read_back)
                if self.command == "POST" and path == f"/v1/approval-requests/{ID}/execution":
                    _, status, typ, text = fake.claim
                    self.send_response(status)
                    if typ:
                        self.send_header("Content-Type", typ)
                    if status != 204:
                        self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    self.wfile.write(text)
                    return None
                if self.command == "PUT" and path == f"/v1/approval-requests/{ID}/execution":
                    st = json.loads(body)["status"]
                    fake.reports.append(st)
                    return self._json(200, request(execution={"claimed_at": _ts(), "status": st}))
                return self._json(404, {"code": "not_found", "detail": f"no {self.command} {path} in this fake"})

            do_GET = do_POST = do_PUT = _route

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join()


class HostileServerTest(unittest.TestCase):
    fake: Fake

    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = Fake()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.fake.close()

    def client(self) -> Client:
        c = Client(self.fake.url, "agent", retry=Retry(attempts=2, min_backoff=0.001, max_backoff=0.002))
        return c

    def gate(self) -> Gate:
        d = tempfile.mkdtemp(prefix="airlock-py-hostile-")
        self.addCleanup(shutil.rmtree, d, True)
        g = Gate(self.client(), INSTANCE, d + "/journal")
        self.addCleanup(g.close)
        return g

    def test_claim_answers_that_cannot_be_trusted_never_run_the_tool(self) -> None:
        for answer in ANSWERS:
            with self.subTest(answer[0]):
                self.fake.claim = answer
                self.fake.read_back = request()
                with self.assertRaises(MalformedAnswerError):
                    self.client().claim_execution(ID)
                runs: List[int] = []
                with self.assertRaisesRegex(Exception, "cannot be trusted"):
                    self.gate().run(Call("refund", {"order": "A-17"}), lambda: runs.append(1))
                self.assertEqual(runs, [], "the tool ran")

    def test_a_claim_that_landed_with_an_answer_to_distrust_is_reported_unknown(self) -> None:
        self.fake.claim = ANSWERS[3]  # HTML
        self.fake.read_back = claimed()  # the read-back shows the claim landed
        self.fake.reports = []
        runs: List[int] = []
        with self.assertRaises(InterruptedRunError) as cm:
            self.gate().run(Call("refund", {"order": "A-17"}), lambda: runs.append(1))
        self.assertFalse(cm.exception.started)
        self.assertEqual(runs, [])
        self.assertEqual(self.fake.reports, ["unknown"])

    def test_another_request_or_html_where_a_request_is_expected(self) -> None:
        def answering(body: bytes, typ: str = "application/json") -> Client:
            return Client(self.fake.url, "agent", retry=Retry(attempts=1),
                          transport=lambda *a: (201, {"content-type": typ}, body))
        with self.assertRaisesRegex(MalformedAnswerError, "tool 'rm', not 'refund'"):
            answering(json.dumps(request(tool="rm")).encode()).create_request(INSTANCE, "k1", "refund")
        with self.assertRaises(MalformedAnswerError):
            answering(json.dumps(request(instance_id="ins_other")).encode()).create_request(INSTANCE, "k1", "refund")
        with self.assertRaises(MalformedAnswerError):
            answering(b"<html></html>", "text/html").create_request(INSTANCE, "k1", "refund")
        self.fake.read_back = request(id="apr_other0001")
        with self.assertRaisesRegex(MalformedAnswerError, "'apr_other0001', not 'apr_fake0001'"):
            self.client().get_request(ID)


if __name__ == "__main__":
    unittest.main()
