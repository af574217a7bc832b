"""Approval tokens verified in Python (docs/tokens.md, T34): every vector of
approvaltoken/testdata/vectors.json accepted or refused with exactly its
reason, RFC 8785's own examples for the canonical form, the client's key
cache, the replay cache, the Gate handing the token to its function, and the
SDK working without the optional cryptography package.

Verification needs cryptography: where it is missing these tests skip, and
under CI (the variable CI set) they fail instead.
"""

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Any, Callable, Dict, List, Optional
from unittest import mock

from airlock import (ApprovalTokenError, Call, Client, Gate, KeySet, ReplayCache, ReplayCacheFull, args_digest,
                     verify_approval_token)
from airlock.client import _KeepAlive
from airlock.verify import KEY_CACHE_TTL, KEY_REFETCH_EVERY, REASONS, canonical, key_id_of
from tests.support import PKG, REPO, ModuleServer
from tests.test_snippets import snippet

srv = ModuleServer()
setUpModule, tearDownModule = srv.start, srv.stop

with open(os.path.join(REPO, "approvaltoken", "testdata", "vectors.json"), encoding="utf-8") as _f:
    VECTORS = json.load(_f)


def need_cryptography(test: unittest.TestCase) -> None:
    """Skips without the cryptography package; fails instead under CI, where it must be installed."""
    try:
        import cryptography.hazmat.primitives.asymmetric.ed25519  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            test.fail("CI is set and the cryptography package is missing: apt-get install python3-cryptography "
                      "(or pip install cryptography); verifying approval tokens needs it")
        test.skipTest("the cryptography package is not installed (set CI to fail instead)")


class VectorTest(unittest.TestCase):
    """One test per vector, named after it: accepted ones accepted, refused ones refused with the vector's reason."""

    def setUp(self) -> None:
        need_cryptography(self)

    def test_the_vectors_cover_every_reason_but_replay(self) -> None:
        got = {v.get("reason", "") for v in VECTORS["vectors"]}
        self.assertEqual(got, set(REASONS) - {"replayed"} | {""})


def _vector_test(v: Dict[str, Any]) -> Callable[[VectorTest], None]:
    def test(self: VectorTest) -> None:
        want = v.get("reason", "")
        for form, args in (("as text", v["args"]), ("as bytes", v["args"].encode("utf-8"))):
            with self.subTest(args=form):
                try:
                    claims = verify_approval_token(v["token"], VECTORS["jwks"], tool=v["tool"], args=args,
                                                   audience=v.get("audience"), now=v["now"])
                except ApprovalTokenError as e:
                    self.assertEqual(e.reason, want, f"refused: {e}")
                    continue
                self.assertEqual(want, "", "accepted a token the Go verifier refuses")
                self.assertEqual((claims["tool"], claims["sub"]), (v["tool"], "req_1"))
        if want == "":
            # The same arguments parsed, as a tool server that decoded them holds them.
            claims = verify_approval_token(v["token"], KeySet(VECTORS["jwks"]), tool=v["tool"], args=json.loads(v["args"]),
                                           audience=v.get("audience"), now=v["now"])
            self.assertEqual(claims["tool"], v["tool"])
    return test


for _v in VECTORS["vectors"]:
    _name = "test_vector_" + re.sub(r"[^a-z0-9]+", "_", _v["name"].lower()).strip("_")
    assert not hasattr(VectorTest, _name), f"two vectors are called {_v['name']!r}"
    setattr(VectorTest, _name, _vector_test(_v))


class CanonicalTest(unittest.TestCase):
    """RFC 8785 written here, tested with the RFC's own examples (the same as approvaltoken/canonical_test.go)."""

    def test_rfc8785_3_2_2_values(self) -> None:
        src = ('{\n  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n'
               '  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
               '  "literals": [null, true, false]\n}')
        want = ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
                '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')
        self.assertEqual(canonical(src).decode("utf-8"), want)

    def test_rfc8785_3_2_3_sorting(self) -> None:
        src = ('{\n  "\\u20ac": "Euro Sign",\n  "\\r": "Carriage Return",\n'
               '  "\\ufb33": "Hebrew Letter Dalet With Dagesh",\n  "1": "One",\n'
               '  "\\ud83d\\ude00": "Emoji: Grinning Face",\n  "\\u0080": "Control",\n'
               '  "\\u00f6": "Latin Small Letter O With Diaeresis"\n}')
        want = ('{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",'
                '"\u20ac":"Euro Sign","\U0001F600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}')
        self.assertEqual(canonical(src).decode("utf-8"), want)

    def test_rfc8785_appendix_b_numbers(self) -> None:
        samples = [
            ("0000000000000000", "0"), ("8000000000000000", "0"),
            ("0000000000000001", "5e-324"), ("8000000000000001", "-5e-324"),
            ("7fefffffffffffff", "1.7976931348623157e+308"), ("ffefffffffffffff", "-1.7976931348623157e+308"),
            ("4340000000000000", "9007199254740992"), ("c340000000000000", "-9007199254740992"),
            ("4430000000000000", "295147905179352830000"),
            ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
            ("44b52d02c7e14af7", "1.0000000000000001e+23"),
            ("444b1ae4d6e2ef4e", "999999999999999700000"), ("444b1ae4d6e2ef4f", "999999999999999900000"),
            ("444b1ae4d6e2ef50", "1e+21"),
            ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
            ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
            ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
            ("41b3de4355555557", "333333333.33333343"),
            ("becbf647612f3696", "-0.0000033333333333333333"), ("43143ff3c1cb0959", "1424953923781206.2"),
        ]
        for bits, want in samples:
            with self.subTest(bits=bits):
                x = struct.unpack(">d", bytes.fromhex(bits))[0]
                self.assertEqual(canonical(x).decode(), want, "the double itself")
                self.assertEqual(canonical(repr(x)).decode(), want, "its JSON text")

    def test_numbers_as_javascript_writes_them(self) -> None:
        cases = [
            ("1e21", "1e+21"), ("1e-7", "1e-7"), ("0.000001", "0.000001"), ("1.0", "1"), ("-0", "0"), ("-0.0", "0"),
            ("1", "1"), ("1e0", "1"), ("100", "100"), ("1E2", "100"), ("123e-2", "1.23"), ("1.5e-7", "1.5e-7"),
            ("1e20", "100000000000000000000"), ("12345678901234567890123", "1.2345678901234568e+22"),
            # Integers beyond 2**53 are read as the nearest double, as JavaScript reads them.
            ("9007199254740993", "9007199254740992"), ("18446744073709551616", "18446744073709552000"),
            ("1e-400", "0"),
        ]
        for text, want in cases:
            with self.subTest(text=text):
                self.assertEqual(canonical(text).decode(), want)
        self.assertEqual(canonical(2 ** 53 + 1), b"9007199254740992")
        self.assertEqual(canonical({"n": 1}), canonical({"n": 1.0}))
        self.assertEqual(canonical({"a": True, "b": None}), b'{"a":true,"b":null}')

    def test_equal_arguments_have_one_digest_and_others_another(self) -> None:
        # approvaltoken's TestArgsDigest, and the same values parsed.
        base = '{"path":"/tmp/x","mode":1,"tags":["a","é"]}'
        equal = [
            '{"tags":["a","é"],"mode":1,"path":"/tmp/x"}',
            '{"path":"/tmp/x","mode":1.0,"tags":["a","é"]}',
            '{"path":"\\/tmp\\/x","mode":1,"tags":["a","\\u00e9"]}',
            '{ "path" : "/tmp/x",\n "mode" : 1e0, "tags" : [ "a" , "é" ] }',
        ]
        different = [
            '{"path":"/tmp/y","mode":1,"tags":["a","é"]}',
            '{"path":"/tmp/x","mode":2,"tags":["a","é"]}',
            '{"path":"/tmp/x","mode":1,"tags":["é","a"]}',
            '{"path":"/tmp/x","mode":"1","tags":["a","é"]}',
            '{"path":"/tmp/x","mode":1,"tags":["a","é"],"x":null}',
        ]
        want = args_digest(base)
        self.assertRegex(want, r"^sha256:[A-Za-z0-9_-]{43}$")
        for text in equal:
            self.assertEqual(args_digest(text), want, text)
            self.assertEqual(args_digest(json.loads(text)), want, text)
        self.assertEqual(args_digest({"tags": ("a", "é"), "mode": 1.0, "path": "/tmp/x"}), want)
        for text in different:
            self.assertNotEqual(args_digest(text), want, text)

    def test_what_has_no_canonical_form_is_refused(self) -> None:
        for bad in ["", "{", '{"a":1,"a":2}', '{"a":1}x', '{"a":NaN}', "[Infinity]", '"\\ud800"', '"\\udc00x"',
                    "1e400", b'"\xff"', '{"a":"\x01"}', "[" * 100000 + "]" * 100000]:
            with self.subTest(bad=bad[:20]):
                with self.assertRaises(ValueError):
                    canonical(bad)
        for bad_value in [float("nan"), float("inf"), {1: "a"}, {"a": {1, 2}}, "\ud800", 10 ** 400, b"x".decode() + "\udfff"]:
            with self.subTest(value=repr(bad_value)[:20]):
                with self.assertRaises(ValueError):
                    canonical(bad_value)


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Signer:
    """Tokens signed here with a fresh key, for what the vectors do not spell out."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
        self.key = Ed25519PrivateKey.generate()
        self.kid = "test-key"
        x = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.jwks = {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": _b64(x), "alg": "EdDSA", "use": "sig"}]}

    def claims(self, **over: Any) -> Dict[str, Any]:
        c = {"iss": "https://airlock.example", "sub": "req_1", "jti": "jti_1", "iat": 1800000000, "exp": 1800000300,
             "tool": "t", "args_digest": args_digest({"a": 1}), "instance_id": "ins_1",
             "decided_by": [{"principal": "alice"}], "decision_source": "human"}
        c.update(over)
        return c

    def token(self, header: Any = None, claims: Any = None, raw_header: str = "", raw_claims: str = "") -> str:
        h = raw_header or json.dumps(header if header is not None else {"alg": "EdDSA", "kid": self.kid, "typ": "airlock-approval+jwt"})
        p = raw_claims or json.dumps(claims if claims is not None else self.claims())
        signing = _b64(h.encode()) + "." + _b64(p.encode())
        return signing + "." + _b64(self.key.sign(signing.encode()))


class VerifierTest(unittest.TestCase):
    """The refusals the vectors leave out, in the Go verifier's order."""

    def setUp(self) -> None:
        need_cryptography(self)
        self.s = Signer()

    def reason(self, token: str, **kw: Any) -> str:
        kw.setdefault("tool", "t")
        kw.setdefault("args", {"a": 1})
        kw.setdefault("now", 1800000000)
        try:
            verify_approval_token(token, self.s.jwks, **kw)
        except ApprovalTokenError as e:
            return e.reason
        return ""

    def test_header_and_claims(self) -> None:
        s = self.s
        ok_header = {"alg": "EdDSA", "kid": s.kid, "typ": "airlock-approval+jwt"}
        cases = [
            ("a good token", s.token(), ""),
            ("no alg", s.token({"kid": s.kid, "typ": "airlock-approval+jwt"}), "algorithm"),
            ("alg eddsa in lower case", s.token(dict(ok_header, alg="eddsa")), "algorithm"),
            ("alg not a string", s.token(dict(ok_header, alg=1)), "malformed"),
            ("no typ", s.token({"alg": "EdDSA", "kid": s.kid}), "type"),
            ("header member jku", s.token(dict(ok_header, jku="https://evil.example/jwks")), "malformed"),
            ("header not an object", s.token(raw_header="[1]"), "malformed"),
            ("header followed by more, known key", s.token(raw_header=json.dumps(ok_header) + "x"), "malformed"),
            ("header followed by more, unknown key",
             s.token(raw_header=json.dumps(dict(ok_header, kid="other")) + "x"), "unknown_key"),
            ("no kid", s.token({"alg": "EdDSA", "typ": "airlock-approval+jwt"}), "unknown_key"),
            ("padding on the signature", s.token() + "=", "malformed"),
            ("a character outside base64url", s.token().replace(".", ".+", 1), "malformed"),
            ("claims not an object", s.token(raw_claims="[]"), "malformed"),
            ("claims not JSON: NaN", s.token(raw_claims='{"x": NaN}'), "malformed"),
            ("header not JSON: NaN", s.token(raw_header='{"alg": "EdDSA", "kid": NaN}'), "malformed"),
            ("exp a string", s.token(claims=s.claims(exp="1800000300")), "malformed"),
            ("exp a fraction", s.token(claims=s.claims(exp=1800000300.5)), "malformed"),
            ("aud a list", s.token(claims=s.claims(aud=["x"])), "malformed"),
            ("no exp", s.token(claims={k: v for k, v in s.claims().items() if k != "exp"}), "expired"),
            ("empty signature", s.token().rsplit(".", 1)[0] + ".", "signature"),
        ]
        for name, token, want in cases:
            with self.subTest(name):
                self.assertEqual(self.reason(token), want)

    def test_leeway_and_time(self) -> None:
        t = self.s.token()
        self.assertEqual(self.reason(t, now=1800000300 + 30), "")
        self.assertEqual(self.reason(t, now=1800000300 + 30.5), "expired")
        self.assertEqual(self.reason(t, now=1800000301, leeway=0), "expired")
        self.assertEqual(self.reason(t, now=1800000000 - 30), "")
        self.assertEqual(self.reason(t, now=1800000000 - 31), "not_yet_valid")
        now = int(time.time())
        self.assertEqual(self.reason(t, now=None), "expired" if now > 1800000330 else "not_yet_valid" if now < 1799999970 else "")
        fresh = self.s.token(claims=self.s.claims(iat=now - 10, exp=now + 300))
        self.assertEqual(self.reason(fresh, now=None), "", "the clock is the default")

    def test_a_token_is_too_long_before_anything_else(self) -> None:
        t = self.s.token(claims=self.s.claims(pad="x" * (64 << 10)))
        self.assertEqual(self.reason(t), "malformed")
        self.assertEqual(self.reason(123), "malformed")  # type: ignore[arg-type]

    def test_replay_cache(self) -> None:
        s = self.s
        replay = ReplayCache(2)
        self.assertEqual(self.reason(s.token(), replay=replay), "")
        self.assertEqual(self.reason(s.token(), replay=replay), "replayed")
        self.assertEqual(self.reason(s.token(claims=s.claims(jti="jti_2")), replay=replay), "")
        with self.assertRaises(ReplayCacheFull):
            verify_approval_token(s.token(claims=s.claims(jti="jti_3")), s.jwks, tool="t", args={"a": 1},
                                  now=1800000000, replay=replay)
        self.assertEqual(len(replay), 2)
        # Once the ids it holds have expired (and the leeway passed), there is room again.
        replay.use(s.claims(jti="jti_3"), now=1800000300 + 31)
        self.assertEqual(len(replay), 1)
        self.assertEqual(self.reason(s.token(claims=s.claims(jti="jti_3")), replay=replay), "replayed")

    def test_concurrent_uses_of_one_token_let_one_through(self) -> None:
        replay = ReplayCache()
        token = self.s.token()
        reasons: List[str] = []
        start = threading.Barrier(16)

        def use() -> None:
            start.wait()
            reasons.append(self.reason(token, replay=replay))
        threads = [threading.Thread(target=use) for _ in range(16)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(sorted(reasons), [""] + ["replayed"] * 15)

    def test_key_set(self) -> None:
        s = self.s
        with self.assertRaises(ValueError):
            KeySet({"keys": [{"kty": "RSA", "kid": "r", "n": "x", "e": "AQAB"}]})
        with self.assertRaises(ValueError):
            KeySet({"keys": "no"})
        ks = KeySet({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "short", "x": "AAAA"}] + s.jwks["keys"]})
        self.assertEqual(ks.kids(), [s.kid])
        self.assertEqual(key_id_of(s.token()), s.kid)


class WithoutCryptographyTest(unittest.TestCase):
    def test_the_sdk_works_and_the_verifier_says_what_to_install(self) -> None:
        code = (
            "import sys\n"
            "sys.modules['cryptography'] = None  # as if it were not installed\n"
            "import airlock\n"
            "from airlock.verify import canonical\n"
            "assert canonical({'b': 1.0, 'a': 'x'}) == b'{\"a\":\"x\",\"b\":1}'\n"
            f"c = airlock.Client({srv.url!r}, '')\n"
            "assert c.jwks()['keys']\n"
            "for verify in (lambda: airlock.verify_approval_token('x.y.z', {'keys': []}, tool='t', args={}),\n"
            "               lambda: c.verify_approval_token('x.y.z', tool='t', args={})):\n"
            "    try:\n"
            "        verify()\n"
            "    except ImportError as e:\n"
            "        print(e)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PKG),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(len(lines), 2, out.stdout)
        for line in lines:
            self.assertIn("needs the cryptography package", line)
            self.assertIn("pip install 'airlock-sdk[verify]'", line)


class Counting:
    """A transport that counts the key set fetches."""

    def __init__(self, url: str) -> None:
        self.base = _KeepAlive(url)
        self.jwks = 0
        self.auth: List[str] = []

    def __call__(self, method: str, url: str, headers: Dict[str, str], body: Any, timeout: float) -> Any:
        if url.endswith("/.well-known/jwks.json"):
            self.jwks += 1
            self.auth.append(headers.get("Authorization", ""))
        return self.base(method, url, headers, body, timeout)


class ServerTest(unittest.TestCase):
    """Tokens the real server signs, verified through the client and handed on by the Gate."""

    def setUp(self) -> None:
        need_cryptography(self)

    def gate(self) -> Gate:
        inst = srv.agent.register_instance("py verify")
        d = tempfile.mkdtemp(prefix="airlock-py-verify-")
        self.addCleanup(shutil.rmtree, d, True)
        g = Gate(srv.agent, inst["id"], d + "/journal", poll_wait=5)
        self.addCleanup(g.close)
        return g

    @staticmethod
    def approved(tool: str, arguments: Any, attempt: str) -> Call:
        def on_pending(r: Dict[str, Any]) -> None:
            if r["state"] == "pending":
                srv.reviewer.approve(r["id"], "ok")
        return Call(tool, arguments, attempt_key=attempt, timeout="5m", on_pending=on_pending)

    def claimed_token(self, tool: str, arguments: Any, token_audience: Optional[str] = None) -> str:
        """A token from a real claim, through the REST calls (no Gate)."""
        inst = srv.agent.register_instance("py verify rest", token_audience=token_audience)
        self.assertEqual(inst.get("token_audience"), token_audience)
        r, _ = srv.agent.create_request(inst["id"], f"verify-{time.monotonic_ns()}", tool, arguments, timeout="5m")
        srv.reviewer.approve(r["id"], "ok")
        claimed = srv.agent.claim_execution(r["id"])
        token = claimed["execution"]["approval_token"]
        self.assertIsInstance(token, str)
        self.request_id = r["id"]
        return token

    def test_a_claimed_executions_token_verifies_through_the_client(self) -> None:
        token = self.claimed_token("send_mail", '{"to": "ada@example.com", "n": 1.0}')
        verifier = Client(srv.url, "")
        claims = verifier.verify_approval_token(token, tool="send_mail", args={"n": 1, "to": "ada@example.com"})
        self.assertEqual((claims["tool"], claims["decision_source"]), ("send_mail", "human"))
        self.assertEqual(claims["sub"], self.request_id)
        for tool, args, want in (("send_mail", {"n": 2, "to": "ada@example.com"}, "arguments"),
                                 ("send_mails", {"n": 1, "to": "ada@example.com"}, "tool")):
            with self.assertRaises(ApprovalTokenError) as cm:
                verifier.verify_approval_token(token, tool=tool, args=args)
            self.assertEqual(cm.exception.reason, want)
        with self.assertRaises(ApprovalTokenError) as cm:
            verifier.verify_approval_token(token, tool="send_mail", args={"n": 1, "to": "ada@example.com"}, audience="tools.example")
        self.assertEqual(cm.exception.reason, "audience")

    def test_an_instance_with_a_token_audience_gets_tokens_that_name_it(self) -> None:
        token = self.claimed_token("send_mail", '{"to": "ops"}', token_audience="https://tools.example")
        verifier = Client(srv.url, "")
        claims = verifier.verify_approval_token(token, tool="send_mail", args={"to": "ops"}, audience="https://tools.example")
        self.assertEqual(claims["aud"], "https://tools.example")
        with self.assertRaises(ApprovalTokenError) as cm:
            verifier.verify_approval_token(token, tool="send_mail", args={"to": "ops"})
        self.assertEqual(cm.exception.reason, "audience")

    def test_the_gate_hands_its_function_a_token_for_exactly_its_arguments(self) -> None:
        g = self.gate()
        verifier = Client(srv.url, "")
        replay = ReplayCache()
        for n, arguments in enumerate(({"path": "/srv/db", "force": True, "n": 1},
                                       '{"note": "caf\\u00e9", "n": 1.0, "path": "\\/srv"}')):
            with self.subTest(arguments=arguments):
                got: List[Any] = []

                def tool(token: Any) -> str:
                    got.append(token)
                    claims = verifier.verify_approval_token(token, tool="drop_table", args=arguments, replay=replay)
                    return claims["jti"]
                out = g.run(self.approved("drop_table", arguments, f"a{n}"), tool, pass_token=True)
                self.assertEqual(out.status, "succeeded")
                self.assertIsInstance(got[0], str)
                self.assertNotIn("approval_token", srv.agent.get_request(out.request["id"]).get("execution", {}))
                with self.assertRaises(ApprovalTokenError) as cm:
                    verifier.verify_approval_token(got[0], tool="drop_table", args=arguments, replay=replay)
                self.assertEqual(cm.exception.reason, "replayed")
                other = {"path": "/srv/dc"} if isinstance(arguments, dict) else arguments.replace("caf", "cafe")
                with self.assertRaises(ApprovalTokenError) as cm:
                    verifier.verify_approval_token(got[0], tool="drop_table", args=other)
                self.assertEqual(cm.exception.reason, "arguments")
        # Without pass_token the function is called as before, with nothing.
        runs: List[int] = []
        g.run(self.approved("drop_table", {"n": 3}, "a3"), lambda: runs.append(1))
        self.assertEqual(runs, [1])

    def test_the_key_set_is_cached_and_fetched_again_for_a_new_key(self) -> None:
        clock = [1000.0]
        counting = Counting(srv.url)
        verifier = Client(srv.url, srv.agent_token, transport=counting)
        args = {"k": 1}
        with mock.patch("airlock.verify._monotonic", lambda: clock[0]):
            old = self.claimed_token("rotate_me", args)
            verifier.verify_approval_token(old, tool="rotate_me", args=args)
            verifier.verify_approval_token(old, tool="rotate_me", args=args)
            self.assertEqual(counting.jwks, 1, "the second verification fetched the key set again")
            self.assertEqual(counting.auth, [""], "the key set was fetched with the client's token")

            srv.admin.rotate_signing_key()
            new = self.claimed_token("rotate_me", args)
            self.assertNotEqual(key_id_of(new), key_id_of(old))
            clock[0] += KEY_REFETCH_EVERY - 1
            with self.assertRaises(ApprovalTokenError) as cm:
                verifier.verify_approval_token(new, tool="rotate_me", args=args)
            self.assertEqual((cm.exception.reason, counting.jwks), ("unknown_key", 1),
                             "an unknown kid fetched the set again within ten seconds of the last fetch")
            clock[0] += 1
            verifier.verify_approval_token(new, tool="rotate_me", args=args)
            self.assertEqual(counting.jwks, 2)
            verifier.verify_approval_token(old, tool="rotate_me", args=args)  # the old key stays published
            self.assertEqual(counting.jwks, 2)

            clock[0] += KEY_CACHE_TTL
            verifier.verify_approval_token(new, tool="rotate_me", args=args)
            self.assertEqual(counting.jwks, 3, "a set older than five minutes was used")

            # A refused header is refused before any fetch.
            clock[0] += KEY_CACHE_TTL
            with self.assertRaises(ApprovalTokenError) as cm:
                verifier.verify_approval_token("e30.e30.", tool="rotate_me", args=args)
            self.assertEqual((cm.exception.reason, counting.jwks), ("algorithm", 3))

    def test_the_docs_snippet_runs_as_printed(self) -> None:
        _, _, _, code = snippet("python verify")
        work = tempfile.mkdtemp(prefix="airlock-py-verify-snippet-")
        self.addCleanup(shutil.rmtree, work, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
        env.update(AIRLOCK_URL=srv.url, AIRLOCK_AGENT_TOKEN=srv.agent_token,
                   PYTHONPATH=PKG + os.pathsep + env.get("PYTHONPATH", ""))
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        approved: List[str] = []
        out: List[str] = []
        done = threading.Event()

        def collect() -> None:
            out.extend(proc.communicate())
            done.set()
        threading.Thread(target=collect, daemon=True).start()
        while not done.is_set():
            for r in srv.reviewer.list_requests(state="pending", tool="send_mail")["items"]:
                if r["id"] not in approved:
                    approved.append(r["id"])
                    srv.reviewer.approve(r["id"], "fine")
            done.wait(0.025)
        self.assertEqual(proc.returncode, 0, f"the snippet exited {proc.returncode}:\n{out[0]}\n{out[1]}")
        self.assertRegex(out[0], r"^sent to ada@example\.com, approved by \S+\n$")
        self.assertEqual(len(approved), 1)


if __name__ == "__main__":
    unittest.main()
