"""Verifying approval tokens: the proof a tool server checks before it runs a call (docs/tokens.md).

An approval token is a compact JWS signed with Ed25519 whose claims bind
the tool and a digest of the arguments: SHA-256 over their RFC 8785
canonical form. :func:`verify_approval_token` checks one against a JWK Set
(offline); :meth:`airlock.Client.verify_approval_token` fetches the server's
set from ``/.well-known/jwks.json`` and caches it.

The checks, their order and the refusals are those of the Go verifier
(package ``approvaltoken``), so every language refuses a token for the same
reason: see :class:`ApprovalTokenError`. The Ed25519 signature is checked
with the optional ``cryptography`` package (``pip install
'airlock-sdk[verify]'``, or Debian's ``python3-cryptography``), imported
only here and only when a token is verified: the rest of the SDK needs
nothing but the standard library.
"""

import base64
import binascii
import hashlib
import json
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

if TYPE_CHECKING:
    from .client import Client

JsonObject = Dict[str, Any]

TOKEN_TYPE = "airlock-approval+jwt"
"""The JWS ``typ`` of every approval token; other types are refused."""

DEFAULT_LEEWAY = 30
"""How many seconds clocks may disagree when ``exp`` and ``iat`` are checked."""

MAX_TOKEN_BYTES = 64 << 10
"""The longest token read; a real one is well under 4 KiB even with a quorum of deciders."""

REASONS = ("malformed", "algorithm", "type", "unknown_key", "signature", "expired", "not_yet_valid", "audience",
           "tool", "arguments", "replayed")
"""Every refusal's reason, in the words of every language's verifier and of the server."""

_HEADER_MEMBERS = frozenset(("alg", "kid", "typ"))
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_STRING_CLAIMS = ("iss", "sub", "jti", "aud", "tool", "args_digest", "instance_id", "decision_source")

# The key cache of Client.verify_approval_token, as Go's client keeps it: a
# fetched set is used for five minutes (the server allows caching it that
# long), and a token naming a key the set lacks fetches it again, at most
# every ten seconds, so a forged kid in every call is not a fetch per call.
KEY_CACHE_TTL = 300.0
KEY_REFETCH_EVERY = 10.0
_monotonic = time.monotonic  # the cache's clock; tests move it


class ApprovalTokenError(Exception):
    """A token that does not approve the call; ``reason`` says why, in one of :data:`REASONS`.

    ``malformed`` (not a compact JWS of three parts, a header member other
    than alg, kid and typ, claims of the wrong type, longer than 64 KiB),
    ``algorithm`` (anything but EdDSA: ``none`` and HS256 included),
    ``type`` (not ``airlock-approval+jwt``), ``unknown_key`` (a kid not in
    the key set), ``signature``, ``expired``, ``not_yet_valid`` (issued in
    the future), ``audience``, ``tool``, ``arguments`` (their canonical form
    is not the approved one, or they are not JSON), ``replayed`` (a
    :class:`ReplayCache` saw it before).
    """

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"approval token refused ({reason}): {detail}")


class ReplayCacheFull(RuntimeError):
    """A :class:`ReplayCache` holds its maximum of unexpired token ids; consume tokens at the server instead."""


def _ed25519() -> Tuple[Any, Any]:
    """The cryptography package's Ed25519 public key class and its InvalidSignature, or a clear error."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        raise ImportError("airlock: verifying approval tokens needs the cryptography package: install it with "
                          "pip install 'airlock-sdk[verify]' (or pip install cryptography; on Debian and Ubuntu, "
                          "apt-get install python3-cryptography). The rest of the SDK works without it.") from None
    return Ed25519PublicKey, InvalidSignature


class KeySet:
    """The public keys approval tokens may be signed with, by kid: a JWK Set such as ``/.well-known/jwks.json`` serves.

    Keys that are not public Ed25519 keys (kty OKP, crv Ed25519, a 32-byte
    ``x``) with a kid are skipped; a set with none is a ValueError.
    """

    def __init__(self, jwks: JsonObject) -> None:
        keys = jwks.get("keys") if isinstance(jwks, dict) else None
        if not isinstance(keys, list):
            raise ValueError("airlock: the key set is not a JWK Set: it has no keys list")
        self._keys: Dict[str, bytes] = {}
        for k in keys:
            if not isinstance(k, dict) or k.get("kty") != "OKP" or k.get("crv") != "Ed25519" or "d" in k:
                continue
            kid, x = k.get("kid"), k.get("x")
            if not isinstance(kid, str) or not kid or not isinstance(x, str):
                continue
            try:
                raw = _b64url(x)
            except ValueError:
                continue
            if len(raw) == 32:
                self._keys[kid] = raw
        if not self._keys:
            raise ValueError("airlock: the key set has no Ed25519 key with a kid")
        self._loaded: Dict[str, Any] = {}
        self._mu = threading.Lock()

    def has(self, kid: str) -> bool:
        """Whether the set holds the key id, so a caller can refresh a cached set when a token names a key it has not seen."""
        return kid in self._keys

    def kids(self) -> List[str]:
        """The key ids of the set."""
        return sorted(self._keys)

    def verify(self, token: str, *, tool: str, args: Any, audience: Optional[str] = None,
               now: Optional[float] = None, leeway: float = DEFAULT_LEEWAY,
               replay: Optional["ReplayCache"] = None) -> JsonObject:
        """Checks token for the call (see :func:`verify_approval_token`) and returns its claims."""
        public_key_class, invalid_signature = _ed25519()
        if leeway < 0:
            raise ValueError("airlock: leeway is a number of seconds, 0 or more")
        t = time.time() if now is None else now
        kid, late_malformed = _read_header(token)
        raw = self._keys.get(kid)
        if raw is None:
            raise ApprovalTokenError("unknown_key", f"signed by a key not in the key set (kid {kid!r})")
        if late_malformed:
            raise ApprovalTokenError("malformed", late_malformed)
        head, body, sig = token.split(".")
        try:
            header_bytes, payload, signature = _b64url(head), _b64url(body), _b64url(sig)
        except ValueError as e:
            raise ApprovalTokenError("malformed", str(e)) from None
        # What was signed is the parts' bytes, re-encoded as Go's verifier does.
        signed = (_b64url_encode(header_bytes) + "." + _b64url_encode(payload)).encode("ascii")
        try:
            self._key(kid, raw, public_key_class).verify(signature, signed)
        except (invalid_signature, ValueError):
            raise ApprovalTokenError("signature", "signature does not verify") from None
        claims = _read_claims(payload)
        _check(claims, tool, args, audience, t, leeway)
        if replay is not None:
            replay.use(claims, t)
        return claims

    def _key(self, kid: str, raw: bytes, public_key_class: Any) -> Any:
        with self._mu:
            k = self._loaded.get(kid)
            if k is None:
                k = self._loaded[kid] = public_key_class.from_public_bytes(raw)
            return k


def verify_approval_token(token: str, jwks: Union[JsonObject, KeySet], *, tool: str, args: Any,
                          audience: Optional[str] = None, now: Optional[float] = None,
                          leeway: float = DEFAULT_LEEWAY, replay: Optional["ReplayCache"] = None) -> JsonObject:
    """Checks an approval token for the call about to run, offline, and returns its claims (a dict).

    ``jwks`` is the server's JWK Set (a dict, as ``/.well-known/jwks.json``
    serves it) or a :class:`KeySet`. ``args`` are the call's arguments:
    the JSON text as received (str or bytes), or the parsed value (a dict,
    say); ints and floats that are equal numbers, reordered keys and
    escaped characters are the same arguments (RFC 8785). ``audience``,
    when the tool server has one, must be the token's ``aud``; a token with
    an ``aud`` is refused without it. ``now`` is seconds since the epoch
    (default: the clock); ``leeway`` the seconds clocks may disagree.
    ``replay``, a :class:`ReplayCache`, runs each token at most once in this
    process. Refusals raise :class:`ApprovalTokenError` with the reason;
    without the cryptography package it raises ImportError.
    """
    _ed25519()
    ks = jwks if isinstance(jwks, KeySet) else KeySet(jwks)
    return ks.verify(token, tool=tool, args=args, audience=audience, now=now, leeway=leeway, replay=replay)


def key_id_of(token: str) -> str:
    """The kid a token names, unverified: for choosing or refreshing a key set, never for trusting.

    Raises :class:`ApprovalTokenError` for a token whose header is refused
    before any key is looked at (malformed, algorithm, type).
    """
    return _read_header(token)[0]


def _read_header(token: Any) -> Tuple[str, str]:
    """Checks the protected header before any key is used; returns its kid and, when the header is followed
    by something other than whitespace, the malformation Go's verifier finds only after it looked up the key."""
    if not isinstance(token, str):
        raise ApprovalTokenError("malformed", "the token is not a string")
    if len(token.encode("utf-8", "surrogatepass")) > MAX_TOKEN_BYTES:
        raise ApprovalTokenError("malformed", f"longer than {MAX_TOKEN_BYTES} bytes")
    if token.count(".") != 2:
        raise ApprovalTokenError("malformed", "want three dot-separated parts")
    try:
        text = _b64url(token.split(".", 1)[0]).decode("utf-8")
        h, end = json.JSONDecoder(parse_constant=_no_constant).raw_decode(text, _skip_ws(text, 0))
    except (ValueError, RecursionError) as e:
        raise ApprovalTokenError("malformed", f"header: {e}") from None
    late = "" if _skip_ws(text, end) == len(text) else "header: data after the JSON object"
    if h is None:
        h = {}
    if not isinstance(h, dict):
        raise ApprovalTokenError("malformed", "header: not a JSON object")
    for name, v in h.items():
        if name not in _HEADER_MEMBERS:
            raise ApprovalTokenError("malformed", f"header: member {name!r} is not alg, kid or typ")
        if v is not None and not isinstance(v, str):
            raise ApprovalTokenError("malformed", f"header: {name} is not a string")
    alg, kid, typ = (h.get(n) or "" for n in ("alg", "kid", "typ"))
    if alg != "EdDSA":
        raise ApprovalTokenError("algorithm", f"algorithm is not EdDSA (alg {alg!r})")
    if typ != TOKEN_TYPE:
        raise ApprovalTokenError("type", f"not an approval token (typ {typ!r})")
    return kid, late


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\n\r":
        i += 1
    return i


def _read_claims(payload: bytes) -> JsonObject:
    """The signed claims, held to the types the Go verifier reads them as (strings, 64-bit integer times)."""
    try:
        c = json.loads(payload.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise ApprovalTokenError("malformed", f"claims: {e}") from None
    if c is None:
        c = {}
    if not isinstance(c, dict):
        raise ApprovalTokenError("malformed", "claims: not a JSON object")
    for name in _STRING_CLAIMS:
        if c.get(name) is not None and not isinstance(c[name], str):
            raise ApprovalTokenError("malformed", f"claims: {name} is not a string")
    for name in ("iat", "exp"):
        v = c.get(name)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not _INT64[0] <= v <= _INT64[1]):
            raise ApprovalTokenError("malformed", f"claims: {name} is not an integer number of seconds")
    deciders = c.get("decided_by")
    if deciders is not None:
        if not isinstance(deciders, list):
            raise ApprovalTokenError("malformed", "claims: decided_by is not a list")
        for d in deciders:
            if d is not None and (not isinstance(d, dict) or any(
                    d.get(n) is not None and not isinstance(d[n], str) for n in ("principal", "name"))):
                raise ApprovalTokenError("malformed", "claims: decided_by holds something other than a principal")
    return c


def _check(c: JsonObject, tool: str, args: Any, audience: Optional[str], now: float, leeway: float) -> None:
    """Holds verified claims to the call, in the Go verifier's order."""
    exp, iat = c.get("exp") or 0, c.get("iat") or 0
    if now > exp + leeway:
        raise ApprovalTokenError("expired", f"expired at {_utc(exp)}")
    if now + leeway < iat:
        raise ApprovalTokenError("not_yet_valid", f"issued in the future (iat {iat})")
    got, want = c.get("aud") or "", audience or ""
    if got != want:
        raise ApprovalTokenError("audience", f"audience does not match (token {got!r}, expected {want!r})")
    if (c.get("tool") or "") != tool:
        raise ApprovalTokenError("tool", f"tool does not match (approved {c.get('tool')!r}, called {tool!r})")
    try:
        digest = args_digest(args)
    except ValueError as e:
        raise ApprovalTokenError("arguments", f"arguments do not match the approved ones: {e}") from None
    if digest != c.get("args_digest"):
        raise ApprovalTokenError("arguments", f"arguments do not match the approved ones "
                                              f"(approved {c.get('args_digest')}, called {digest})")


def _utc(t: int) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    except (OverflowError, OSError, ValueError):
        return f"{t} (Unix seconds)"


class ReplayCache:
    """Remembers the ids of tokens one process accepted until they expire, so it runs each approval at most once.

    Thread-safe. It holds at most ``max_size`` unexpired ids; when full it
    refuses new ones (:class:`ReplayCacheFull`) rather than forget one still
    live. Across processes, consume the token at the server instead.
    """

    def __init__(self, max_size: int = 10000) -> None:
        if max_size < 1:
            raise ValueError("airlock: a replay cache holds at least one token id")
        self._seen: Dict[str, int] = {}
        self._max = max_size
        self._mu = threading.Lock()

    def use(self, claims: JsonObject, now: Optional[float] = None) -> None:
        """Records the token's id (``jti``); raises :class:`ApprovalTokenError` ``replayed`` if it was used before."""
        t = time.time() if now is None else now
        jti = claims.get("jti") or ""
        with self._mu:
            if jti in self._seen:
                raise ApprovalTokenError("replayed", f"already used (jti {jti})")
            if len(self._seen) >= self._max:
                for k in [k for k, exp in self._seen.items() if t > exp + DEFAULT_LEEWAY]:
                    del self._seen[k]
                if len(self._seen) >= self._max:
                    raise ReplayCacheFull(f"airlock: replay cache full ({self._max} live tokens): "
                                          "consume tokens at the server instead")
            self._seen[jti] = claims.get("exp") or 0

    def __len__(self) -> int:
        with self._mu:
            return len(self._seen)


class _KeyCache:
    """The server's key set as last fetched, for one Client."""

    def __init__(self) -> None:
        self.mu = threading.Lock()
        self.set: Optional[KeySet] = None
        self.fetched = 0.0


_caches_mu = threading.Lock()


def verify_with_client(client: "Client", token: str, *, tool: str, args: Any, audience: Optional[str] = None,
                       now: Optional[float] = None, leeway: float = DEFAULT_LEEWAY,
                       replay: Optional[ReplayCache] = None) -> JsonObject:
    """Client.verify_approval_token: the kid first, then the cached (or fetched) key set, then the checks."""
    _ed25519()
    kid = key_id_of(token)
    return _key_set(client, kid).verify(token, tool=tool, args=args, audience=audience, now=now, leeway=leeway,
                                        replay=replay)


def _key_set(client: "Client", kid: str) -> KeySet:
    """The client's cached key set, fetched when stale or when it lacks kid (at most every KEY_REFETCH_EVERY)."""
    with _caches_mu:
        k = client.__dict__.get("_approval_keys")
        if k is None:
            k = client.__dict__["_approval_keys"] = _KeyCache()
    with k.mu:
        age = _monotonic() - k.fetched
        if k.set is not None and age < KEY_CACHE_TTL and (k.set.has(kid) or age < KEY_REFETCH_EVERY):
            return k.set
        try:
            got = _keyless(client).jwks()
        except Exception:
            if k.set is not None and age < KEY_CACHE_TTL:
                return k.set  # the server is away: the keys it last served still hold
            raise
        try:
            ks = KeySet(got)
        except ValueError as e:
            from .errors import MalformedAnswerError
            raise MalformedAnswerError("GET", "/.well-known/jwks.json", 200, str(e)) from None
        k.set, k.fetched = ks, _monotonic()
        return ks


def _keyless(client: "Client") -> "Client":
    """The same server, transport and retries without the bearer token: the key set needs none."""
    if not client.token:
        return client
    from .client import Client
    return Client(client.base_url, "", timeout=client.timeout, retry=client.retry, user_agent=client.user_agent,
                  transport=client._send)


def args_digest(args: Any) -> str:
    """``sha256:`` and the unpadded base64url SHA-256 of the arguments' RFC 8785 canonical form.

    ``args`` is JSON text (str or bytes) or a parsed value; ValueError when
    it is not JSON or has no canonical form.
    """
    return "sha256:" + _b64url_encode(hashlib.sha256(canonical(args)).digest())


def canonical(args: Any) -> bytes:
    """The RFC 8785 (JSON Canonicalization Scheme) form of a JSON value, as UTF-8.

    ``args`` is JSON text (str, bytes or bytearray: parsed here, refusing
    duplicate keys, NaN and Infinity, lone surrogates and invalid UTF-8) or
    a value as :func:`json.loads` returns it. Numbers are IEEE doubles, as
    in JavaScript: an int beyond 2**53 is rounded to one, and 1 and 1.0 are
    the same number. Object keys are sorted by their UTF-16 code units.
    """
    if isinstance(args, (bytes, bytearray)):
        try:
            args = bytes(args).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"the arguments are not UTF-8: {e}") from None
    if isinstance(args, str):
        try:
            args = json.loads(args, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except RecursionError:
            raise ValueError("the arguments are nested too deeply") from None
        except ValueError as e:
            raise ValueError(f"the arguments are not JSON: {e}") from None
    out: List[str] = []
    try:
        _write(args, out)
    except RecursionError:
        raise ValueError("the arguments are nested too deeply") from None
    return "".join(out).encode("utf-8")


def _no_duplicates(pairs: List[Tuple[str, Any]]) -> JsonObject:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise ValueError(f"duplicate key {k!r}")
            seen.add(k)
    return d


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _write(v: Any, out: List[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_string(v))
    elif isinstance(v, (int, float)):
        out.append(_number(v))
    elif isinstance(v, dict):
        items = []
        for k, x in v.items():
            if not isinstance(k, str):
                raise ValueError(f"an object key is a {type(k).__name__}, not a string")
            items.append((k.encode("utf-16-be", "surrogatepass"), k, x))
        items.sort(key=lambda i: i[0])  # big-endian UTF-16 bytes sort as the code units do
        out.append("{")
        for n, (_, k, x) in enumerate(items):
            if n:
                out.append(",")
            out.append(_string(k))
            out.append(":")
            _write(x, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for n, x in enumerate(v):
            if n:
                out.append(",")
            _write(x, out)
        out.append("]")
    else:
        raise ValueError(f"a {type(v).__name__} is not a JSON value")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SPECIAL = re.compile(r'["\\\x00-\x1f]')
_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(s: str) -> str:
    """A string as RFC 8785 writes it: only quote, backslash and the controls escaped, the short forms where JSON has them."""
    if _SURROGATE.search(s):
        raise ValueError("a string holds a lone surrogate, which is not Unicode text")
    return '"' + _SPECIAL.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), s) + '"'


def _number(v: Union[int, float]) -> str:
    """A number as ECMAScript's Number.prototype.toString writes the nearest double (RFC 8785 section 3.2.2.3)."""
    try:
        x = float(v)  # an int is read as the nearest double, as JavaScript reads it
    except OverflowError:
        raise ValueError("a number is beyond the range of a double") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("NaN and Infinity are not JSON numbers")
    if x == 0:
        return "0"  # -0 too
    sign = "-" if x < 0 else ""
    # repr gives the shortest decimal that reads back as x (and of those the
    # closest), which is the digits ECMAScript asks for.
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac
    digits = all_digits.lstrip("0")
    lead = len(all_digits) - len(digits)
    digits = digits.rstrip("0")
    k = len(digits)
    n = len(whole) - lead + (int(exp) if exp else 0)  # x = 0.digits × 10^n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exp_text = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + exp_text
    return sign + digits[0] + "." + digits[1:] + "e" + exp_text


def _b64url(s: str) -> bytes:
    """Unpadded base64url, decoded as Go's RawURLEncoding does (line breaks ignored; padding and other characters refused)."""
    s = s.replace("\r", "").replace("\n", "")
    if not _B64URL.fullmatch(s) or len(s) % 4 == 1:
        raise ValueError("not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not unpadded base64url") from None


def _b64url_encode(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")
