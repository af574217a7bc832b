"""A client for every endpoint of Airlock's REST API (rest/openapi.yaml).

Resources are returned as the server sends them: dicts with the API's
snake_case keys (rest/openapi.yaml gives their shapes). Errors the server
answers are :class:`AirlockError` with the stable ``code``; calls that got
no answer are :class:`NetworkError`. Calls that are safe to repeat (reads,
creates with an Idempotency-Key, reports, cancels) are retried on network
errors and unavailable answers with the same key; a rate-limited call is
retried after the server's Retry-After.
"""

import http.client
import json
import os
import random
import re
import select
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from .errors import AirlockError, MalformedAnswerError, NetworkError

if TYPE_CHECKING:
    from .verify import ReplayCache

JsonObject = Dict[str, Any]

_KEY = re.compile(r"^[!-~]{1,200}$")


@dataclass
class Retry:
    """How the client repeats a call that failed on the network, or was rate-limited.

    ``attempts`` is how many times a call is sent at most, the first included
    (1 turns retries off); the pause before the first retry is
    ``min_backoff`` seconds, doubling with jitter up to ``max_backoff``.
    """

    attempts: int = 5
    min_backoff: float = 0.1
    max_backoff: float = 5.0

    def backoff(self, n: int) -> float:
        """The pause before retry n (0-based): exponential with "equal jitter"."""
        d = min(self.min_backoff * (2 ** min(n, 20)), max(self.max_backoff, self.min_backoff))
        return d / 2 + random.random() * d / 2


# A transport sends one HTTP request and returns (status, headers, body).
# It raises OSError (or urllib.error.URLError) when no answer came. Tests
# inject failing ones.
Transport = Callable[[str, str, Dict[str, str], Optional[bytes], float], Tuple[int, Dict[str, str], bytes]]


def _urllib_transport(opener: urllib.request.OpenerDirector) -> Transport:
    def send(method: str, url: str, headers: Dict[str, str], body: Optional[bytes], timeout: float) -> Tuple[int, Dict[str, str], bytes]:
        req = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with opener.open(req, timeout=timeout) as res:
                return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    return send


class _KeepAlive:
    """A transport that keeps one HTTP/1.1 connection per thread open to the server and reuses it.

    urllib opens a new TCP connection (and TLS session) for every call; a
    Gate's call makes three or more. A connection the server closed while
    it sat idle (after 2 minutes by default) is noticed before it is reused
    (it reads as ready: the server's FIN), and a new one is opened.
    """

    def __init__(self, base_url: str) -> None:
        u = urllib.parse.urlsplit(base_url)
        self._origin = f"{u.scheme}://{u.netloc}"
        self._https = u.scheme == "https"
        self._host = u.hostname or ""
        self._port = u.port
        self._local = threading.local()

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        held: Optional[_Held] = getattr(self._local, "held", None)
        if held is None:
            if self._https:
                c: http.client.HTTPConnection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=ssl.create_default_context())
            else:
                c = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            held = self._local.held = _Held(c)
        c = held.conn
        if c.sock is not None and _dropped(c.sock):
            c.close()  # the server closed it while idle: the request below reconnects
        c.timeout = timeout
        if c.sock is not None:
            c.sock.settimeout(timeout)
        return c

    def __call__(self, method: str, url: str, headers: Dict[str, str], body: Optional[bytes],
                 timeout: float) -> Tuple[int, Dict[str, str], bytes]:
        if not url.startswith(self._origin):
            raise ValueError(f"airlock client: {url} is not on {self._origin}")
        target = url[len(self._origin):] or "/"
        c = self._conn(timeout)
        try:
            c.request(method, target, body=body, headers=headers)
            res = c.getresponse()
            data = res.read()
        except http.client.HTTPException as e:
            c.close()
            raise ConnectionError(f"{method} {target}: {e!r}") from e
        except BaseException:
            c.close()
            raise
        return res.status, {k.lower(): v for k, v in res.getheaders()}, data


class _Held:
    """One thread's connection; closed when the thread ends or the client goes away."""

    __slots__ = ("conn",)

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn

    def __del__(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - at interpreter exit, say
            pass


def _dropped(sock: Any) -> bool:
    """Whether an idle connection was closed by the server: it reads as ready (EOF) when it should have nothing to say."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


class Client:
    """A client for one Airlock server and one bearer token; safe to share between threads.

    ``base_url`` is the server, such as ``http://127.0.0.1:8080``. ``timeout``
    bounds each attempt of an ordinary call in seconds (long polls get their
    wait on top); ``poll_wait`` is how long one long-poll of
    :meth:`wait_request` asks the server to hold (it caps it, 60 s by default).
    Proxies from the environment are not used unless ``use_env_proxies``.
    Calls reuse one keep-alive connection per thread (except through a
    proxy, and the event stream, which has its own).
    """

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0, poll_wait: float = 30.0,
                 retry: Optional[Retry] = None, user_agent: str = "airlock-python-sdk",
                 transport: Optional[Transport] = None, use_env_proxies: bool = False) -> None:
        u = urllib.parse.urlsplit(base_url.strip())
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"airlock client: base URL {base_url!r} is not an http(s) URL such as http://127.0.0.1:8080")
        if u.username or u.password or u.query or u.fragment:
            raise ValueError(f"airlock client: base URL {base_url!r} must not carry credentials, a query or a fragment; pass the token separately")
        self.base_url = f"{u.scheme}://{u.netloc}{u.path.rstrip('/')}"
        self.token = token
        self.timeout = timeout
        self.poll_wait = poll_wait
        self.retry = retry or Retry()
        self.user_agent = user_agent
        handlers: List[Any] = [] if use_env_proxies else [urllib.request.ProxyHandler({})]
        self._opener = urllib.request.build_opener(*handlers)
        self._send = transport or (_urllib_transport(self._opener) if use_env_proxies else _KeepAlive(self.base_url))

    @classmethod
    def from_env(cls, env: Optional[Dict[str, str]] = None, **kw: Any) -> "Client":
        """A client for an agent, configured as Airlock's own adapters are.

        ``AIRLOCK_URL`` (default http://127.0.0.1:8080) and the agent token in
        ``AIRLOCK_AGENT_TOKEN``. ``AIRLOCK_TOKEN``, its older name, still
        works, with a DeprecationWarning: for the CLI it names a reviewer's or
        admin's token, and one variable with two meanings is how the wrong
        one gets used. Keyword arguments go to :class:`Client`.
        """
        env = os.environ if env is None else env
        token = env.get("AIRLOCK_AGENT_TOKEN")
        if not token and env.get("AIRLOCK_TOKEN"):
            token = env["AIRLOCK_TOKEN"]
            warnings.warn("AIRLOCK_TOKEN is deprecated for the agent token: set AIRLOCK_AGENT_TOKEN", DeprecationWarning, stacklevel=2)
        if not token:
            raise ValueError("airlock client: set AIRLOCK_AGENT_TOKEN to an agent token (airlock tokens create --role agent)")
        return cls(env.get("AIRLOCK_URL") or "http://127.0.0.1:8080", token, **kw)

    # Instances.

    def register_instance(self, name: str, metadata: Optional[JsonObject] = None, *,
                          token_audience: Optional[str] = None) -> JsonObject:
        """Registers this adapter as an instance (agent tokens). Not retried: a lost answer could leave a second one.

        token_audience names the tool server its approval tokens are for:
        they carry it as aud (docs/tokens.md).
        """
        body: JsonObject = {"name": name}
        if metadata is not None:
            body["metadata"] = metadata
        aud = token_audience or None
        if aud is not None:
            body["token_audience"] = aud

        def check(b: JsonObject) -> Optional[str]:
            if b.get("name") != name:
                return f"it names instance {b.get('name')!r}, not {name!r}"
            if b.get("token_audience") != aud:
                return f"its token_audience is {b.get('token_audience')!r}, not {aud!r}"
            return None
        return self._do("POST", "/v1/instances", body=body, want=(201,), check=lambda b: _id_is(b) or check(b))

    def instance_named(self, name: str, metadata: Optional[JsonObject] = None) -> JsonObject:
        """This agent's instance called name, registered only when there is none.

        A restarted agent keeps its instance, and with it the gate's
        idempotency keys: a call asked before the restart finds its request
        instead of asking again. Two processes that register at once settle
        on the oldest instance of that name; the other deletes its own, still
        empty, one. Hooks find their session's instance the same way.
        """
        found = _oldest_named(self.list_instances(), name)
        if found is not None:
            return found
        mine = self.register_instance(name, metadata)
        first = _oldest_named(self.list_instances(), name)
        if first is not None and first["id"] != mine["id"]:
            self.delete_instance(mine["id"])
            return first
        return mine

    def list_instances(self) -> List[JsonObject]:
        """The instances the caller may see, newest first, with their pending counts."""
        return self._do("GET", "/v1/instances", retry=True, check=_items_are)["items"]

    def get_instance(self, instance_id: str) -> JsonObject:
        return self._do("GET", f"/v1/instances/{_q(instance_id)}", retry=True, check=lambda b: _id_is(b, instance_id))

    def delete_instance(self, instance_id: str) -> int:
        """Deletes an instance, cancelling all its pending requests in one step; returns how many."""
        return self._do("DELETE", f"/v1/instances/{_q(instance_id)}", retry=True)["cancelled"]

    # Approval requests.

    def create_request(self, instance_id: str, idempotency_key: str, tool: str,
                       arguments: Union[JsonObject, str, None] = None, *, timeout: Optional[str] = None,
                       agent_reasoning: Optional[str] = None,
                       context: Union[JsonObject, str, None] = None, preview: Optional[JsonObject] = None,
                       reversibility: Optional[str] = None) -> Tuple[JsonObject, bool]:
        """Asks whether one tool call may run, under an idempotency key (one per intended call).

        ``arguments`` (and ``context``) may be a dict or the JSON text as
        intercepted, which is sent byte for byte. A network failure is
        retried with the same key, so the server creates the request at most
        once. Returns (request, created): created is False for a replay.
        ``preview`` ({"type": "diff"|"text", "content": ...}) and
        ``reversibility`` are the adapter's claims, shown as such.
        """
        check_idempotency_key(idempotency_key)
        status: List[int] = []
        r = self._do("POST", f"/v1/instances/{_q(instance_id)}/approval-requests",
                     raw=_create_body(tool, arguments, timeout, agent_reasoning, context, preview, reversibility),
                     headers={"Idempotency-Key": idempotency_key}, retry=True, want=(201, 200), on_status=status.append,
                     check=lambda b: _request_is(b) or (
                         f"it belongs to instance {b.get('instance_id')!r}, not {instance_id!r}" if b.get("instance_id") != instance_id else
                         f"it asks about tool {b.get('tool')!r}, not {tool!r}" if b.get("tool") != tool else None))
        return r, status[-1] == 201

    def get_request(self, request_id: str) -> JsonObject:
        """Reads a request as it is now."""
        return self.long_poll_request(request_id, 0)

    def long_poll_request(self, request_id: str, wait: float) -> JsonObject:
        """Reads a request, holding the answer until it is terminal or ``wait`` seconds have passed (0 reads at once)."""
        query = {"wait": f"{int(wait * 1000)}ms"} if wait > 0 else None
        return self._do("GET", f"/v1/approval-requests/{_q(request_id)}", query=query, retry=True, extra=max(wait, 0),
                        check=lambda b: _request_is(b, request_id))

    def wait_request(self, request_id: str, *, poll_wait: Optional[float] = None,
                     on_pending: Optional[Callable[[JsonObject], None]] = None,
                     cancel: Optional[threading.Event] = None) -> JsonObject:
        """Long-polls until the request is terminal and returns it.

        It rides out network failures and rate limits; it stops at once on an
        answer that polling again cannot change (not found, a refused token).
        When ``cancel`` is set it gives up (after the poll in flight) with
        :class:`WaitCancelled`.
        """
        wait = self.poll_wait if poll_wait is None else poll_wait
        failures = 0
        while True:
            if cancel is not None and cancel.is_set():
                raise WaitCancelled(request_id)
            try:
                r = self.long_poll_request(request_id, wait)
            except Exception as err:
                if not transient(err):
                    raise
                _sleep(self.retry.backoff(failures + self.retry.attempts), cancel)
                failures += 1
                continue
            failures = 0
            if r["state"] != "pending":
                return r
            if on_pending is not None:
                on_pending(r)

    def list_requests(self, *, state: Optional[str] = None, instance_id: Optional[str] = None, tool: Optional[str] = None,
                      kind: Optional[str] = None, cursor: Optional[str] = None, limit: Optional[int] = None) -> JsonObject:
        """One page of requests, newest first (reviewers all, agents their own): {items, next_cursor?}."""
        q = {"state": state, "instance_id": instance_id, "tool": tool, "kind": kind, "cursor": cursor,
             "limit": None if limit is None else str(limit)}
        return self._do("GET", "/v1/approval-requests", query=q, retry=True, check=_items_are)

    def all_requests(self, **filters: Any) -> Iterator[JsonObject]:
        """Iterates over every request the filter selects, page by page, newest first."""
        while True:
            page = self.list_requests(**filters)
            yield from page["items"]
            if not page.get("next_cursor"):
                return
            filters["cursor"] = page["next_cursor"]

    def cancel_request(self, request_id: str) -> JsonObject:
        """Withdraws a pending request of the caller's."""
        return self._do("POST", f"/v1/approval-requests/{_q(request_id)}/cancel", retry=True,
                        check=lambda b: _request_is(b, request_id))

    def decide(self, request_id: str, status: str, *, note: Optional[str] = None, answer: Optional[str] = None,
               valid_for: Optional[str] = None, grant: Optional[JsonObject] = None,
               arguments: Optional[JsonObject] = None, review: Optional[JsonObject] = None) -> JsonObject:
        """Records a reviewer's decision (approved or denied). Not retried: read the request to learn what holds.

        ``grant`` (approvals of tool calls only), e.g. ``{"uses": 10, "expires_in": "1h"}``,
        also makes a grant for the same call; it is in the answer's ``grant``.
        ``arguments`` (approvals of tool calls only) approves changed
        arguments instead (an edit, docs/protocol.md): the request ends
        denied, and the answer's ``replacement`` is approved in its place.
        ``review``, e.g. ``{"seen_fraction": 1, "seconds_open": 12}``, is what your client showed
        the reviewer of the arguments, recorded with the decision as its claim (docs/protocol.md).
        """
        body = {k: v for k, v in {"status": status, "note": note, "answer": answer, "valid_for": valid_for,
                                  "grant": grant, "arguments": arguments, "review": review}.items() if v is not None}
        return self._do("POST", f"/v1/approval-requests/{_q(request_id)}/decision", body=body,
                        check=lambda b: _request_is(b, request_id))

    def decide_batch(self, ids: List[str], status: str, *, note: Optional[str] = None,
                     valid_for: Optional[str] = None) -> List[JsonObject]:
        """Decides several requests at once (docs/protocol.md, "Batch decisions"). Not retried.

        Returns a result per id, in the order of ``ids``: ``{"id", "status": 200, "request"}``
        for each decided (or voted on), ``{"id", "status", "problem"}`` for each refused, as it
        would have been alone. Raises :class:`AirlockError` only for the batch as a whole (not a
        reviewer, no ids or more than 100, an id twice).
        """
        body = {k: v for k, v in {"ids": list(ids), "status": status, "note": note,
                                  "valid_for": valid_for}.items() if v is not None}
        got = self._do("POST", "/v1/approval-requests/decisions", body=body,
                       check=lambda b: _batch_answers(b, list(ids)))
        return list(got["results"])

    def edit(self, request_id: str, arguments: JsonObject, note: Optional[str] = None,
             valid_for: Optional[str] = None) -> JsonObject:
        """Approves a tool call with changed arguments (an edit): see :meth:`decide`."""
        return self.decide(request_id, "approved", note=note, valid_for=valid_for, arguments=arguments)

    def approve(self, request_id: str, note: Optional[str] = None) -> JsonObject:
        return self.decide(request_id, "approved", note=note)

    def deny(self, request_id: str, note: Optional[str] = None) -> JsonObject:
        return self.decide(request_id, "denied", note=note)

    def claim_execution(self, request_id: str) -> JsonObject:
        """Claims the one execution attempt of an approved request.

        Refused at or after expires_at (approval_expired), a second time
        (already_executed) and unless approved (not_approved). Never retried:
        only one claim can succeed, so a retry could not tell a win from a
        loss. The Gate handles that case. A success whose body is not this
        request, approved, with its execution claimed is a
        :class:`MalformedAnswerError`: nothing may run on it.
        """
        return self._do("POST", f"/v1/approval-requests/{_q(request_id)}/execution",
                        check=lambda b: claimed_is(b, request_id))

    def report_execution(self, request_id: str, status: str, detail: Optional[str] = None) -> JsonObject:
        """Records the claimed execution's outcome: succeeded, failed or unknown. Repeating it is harmless."""
        body: JsonObject = {"status": status}
        if detail:
            body["detail"] = detail
        return self._do("PUT", f"/v1/approval-requests/{_q(request_id)}/execution", body=body, retry=True,
                        check=lambda b: _request_is(b, request_id) or (
                            None if isinstance(b.get("execution"), dict) else "it shows no execution"))

    # Events.

    def events(self, after: int = 0, *, stop: Optional[threading.Event] = None, idle_timeout: float = 60.0) -> Iterator[JsonObject]:
        """Streams audit events after the event with ID ``after`` (reviewers, admins).

        When the connection drops or the server restarts, it reconnects with
        backoff and resumes with Last-Event-ID, so no event is missed or
        repeated. It ends when ``stop`` is set (checked as events and
        heartbeats arrive) or when the consumer stops iterating; it raises an
        error that reconnecting cannot fix (a refused token). A connection
        silent for ``idle_timeout`` seconds (heartbeats come every 15 s) is
        dropped and resumed.
        """
        failures = 0
        last = [after]
        while stop is None or not stop.is_set():
            got = False
            try:
                for ev in self._stream(last, stop, idle_timeout):
                    got = True
                    yield ev
                    if stop is not None and stop.is_set():
                        return
            except NetworkError:
                pass
            except AirlockError as err:
                if not transient(err):
                    raise
            if stop is not None and stop.is_set():
                return
            if got:
                failures = 0
            _sleep(self.retry.backoff(failures), stop)
            failures += 1

    def _stream(self, last: List[int], stop: Optional[threading.Event], idle_timeout: float) -> Iterator[JsonObject]:
        path = "/v1/events"
        headers = {"Accept": "text/event-stream", "User-Agent": self.user_agent, "Authorization": f"Bearer {self.token}"}
        if last[0] > 0:
            headers["Last-Event-ID"] = str(last[0])
        req = urllib.request.Request(self.base_url + path, headers=headers, method="GET")
        try:
            res = self._opener.open(req, timeout=idle_timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise _decode_error("GET", path, e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())
        except (OSError, urllib.error.URLError) as e:
            raise NetworkError("GET", path, e)
        with res:
            data: List[str] = []
            ev_id = typ = ""
            while True:
                try:
                    raw = res.readline()
                except OSError as e:
                    raise NetworkError("GET", path, e)
                if not raw:
                    raise NetworkError("GET", path, EOFError("stream ended"))
                if stop is not None and stop.is_set():
                    return
                line = raw.decode("utf-8").rstrip("\n").rstrip("\r")
                if line:
                    field, _, value = line.partition(":")
                    if value.startswith(" "):
                        value = value[1:]
                    if field == "id":
                        ev_id = value
                    elif field == "event":
                        typ = value
                    elif field == "data":
                        data.append(value)
                    continue  # a "" field is a comment (heartbeat)
                if not data:
                    ev_id = typ = ""
                    continue
                try:
                    ev = json.loads("\n".join(data))
                except ValueError as e:
                    raise ValueError(f"event stream: event {ev_id} ({typ}) is not valid JSON: {e}") from e
                data, ev_id, typ = [], "", ""
                last[0] = ev["event"]["id"]
                yield ev

    # Board, work items, sessions.

    def board(self) -> JsonObject:
        return self._do("GET", "/v1/board", retry=True)

    def create_column(self, key: str, name: str) -> JsonObject:
        return self._do("POST", "/v1/board/columns", body={"key": key, "name": name}, want=(201,))

    def create_work_item(self, title: str, column_key: str) -> JsonObject:
        return self._do("POST", "/v1/work-items", body={"title": title, "column_key": column_key}, want=(201,))

    def get_work_item(self, item_id: str) -> JsonObject:
        return self._do("GET", f"/v1/work-items/{_q(item_id)}", retry=True)

    def update_work_item(self, item_id: str, *, title: Optional[str] = None, column_key: Optional[str] = None,
                         if_version: Optional[int] = None) -> JsonObject:
        """Renames or moves a work item; with if_version only at that version. Not retried."""
        body = {k: v for k, v in {"title": title, "column_key": column_key, "if_version": if_version}.items() if v is not None}
        return self._do("PATCH", f"/v1/work-items/{_q(item_id)}", body=body)

    def list_sessions(self) -> List[JsonObject]:
        return self._do("GET", "/v1/sessions", retry=True, check=_items_are)["items"]

    # Tokens.

    def create_token(self, name: str, role: str, *, scopes: Optional[List[str]] = None, principal: Optional[str] = None) -> JsonObject:
        """Mints a token (admins); the secret is in this answer only. Not retried: that could mint two."""
        body: JsonObject = {"name": name, "role": role}
        if scopes is not None:
            body["scopes"] = scopes
        if principal is not None:
            body["principal"] = principal
        return self._do("POST", "/v1/tokens", body=body, want=(201,))

    def list_tokens(self) -> List[JsonObject]:
        return self._do("GET", "/v1/tokens", retry=True, check=_items_are)["items"]

    def revoke_token(self, token_id: str) -> JsonObject:
        """Revokes a token (admins); it stops working at once."""
        return self._do("DELETE", f"/v1/tokens/{_q(token_id)}", retry=True)

    # Approval tokens' keys (docs/tokens.md).

    def jwks(self) -> JsonObject:
        """The public keys approval tokens may be signed with; needs no token."""
        return self._do("GET", "/.well-known/jwks.json", retry=True, check=_keys_are)

    def list_signing_keys(self) -> List[JsonObject]:
        """The published signing keys, the active one first (admins)."""
        return self._do("GET", "/v1/signing-keys", retry=True, check=_items_are)["items"]

    def rotate_signing_key(self) -> JsonObject:
        """Signs with a new key from now on (admins). Not retried: that could rotate twice."""
        return self._do("POST", "/v1/signing-keys/rotate")

    def consume_approval_token(self, token: str, *, tool: Optional[str] = None, arguments: Any = None,
                               audience: Optional[str] = None) -> JsonObject:
        """Has the server verify an approval token against its own keys and record its single use
        (a verifier token, or an admin's; docs/tokens.md, "Single use"). Give tool and arguments
        together to hold the token to the call about to run.

        The first consume of a request's token returns its use (``request_id``, ``jti``,
        ``consumed_at``); every later one, on any replica, raises AirlockError with code
        ``already_used`` (409), and a token that does not verify raises one with ``invalid_token``
        (400). Not retried: a retry after a lost answer would be told ``already_used``. An answer
        that does not name the request and when raises MalformedAnswerError.
        """
        body: JsonObject = {"token": token}
        if tool is not None:
            body["tool"] = tool
            body["arguments"] = arguments
        if audience:
            body["audience"] = audience
        return self._do("POST", "/v1/approval-tokens/consume", body=body, check=_use_is)

    # The audit log (auditors and admins; docs/audit.md).

    def get_audit_checkpoint(self) -> str:
        """The latest signed checkpoint, a C2SP tlog-checkpoint note, exactly as stored."""
        return self._do("GET", "/v1/audit/checkpoint", retry=True, text=True)

    def get_audit_key(self) -> str:
        """The note verifier key checkpoints are signed with; keep it apart from the server."""
        return self._do("GET", "/v1/audit/key", retry=True, text=True).strip()

    def list_audit_entries(self, *, start: int = 0, limit: Optional[int] = None) -> List[JsonObject]:
        """Entries of the tree from ``start``, at most ``limit`` (default 1000, at most 10000): each
        ``{"index": N, "leaf": "<the leaf's JSON text>"}``, the leaf kept as served so that it hashes
        as the tree does."""
        text = self._do("GET", "/v1/audit/entries", query={"start": str(start), "limit": None if limit is None else str(limit)},
                        retry=True, text=True)
        return _audit_lines(text)

    def get_audit_inclusion_proof(self, index: int, tree_size: int) -> JsonObject:
        """Proof that the leaf at ``index`` is in the tree of ``tree_size`` leaves (base64 hashes, tlog's order)."""
        return self._do("GET", "/v1/audit/proofs/inclusion", query={"index": str(index), "tree_size": str(tree_size)},
                        retry=True, check=_hashes_are)

    def get_audit_consistency_proof(self, from_size: int, to_size: int) -> JsonObject:
        """Proof that the tree of ``from_size`` leaves is a prefix of the tree of ``to_size``."""
        return self._do("GET", "/v1/audit/proofs/consistency", query={"from": str(from_size), "to": str(to_size)},
                        retry=True, check=_hashes_are)

    def get_request_proof(self, request_id: str) -> JsonObject:
        """The proof of a request's events against the latest checkpoint."""
        def is_it(b: JsonObject) -> Optional[str]:
            ok = b.get("request_id") == request_id and isinstance(b.get("checkpoint"), str) and isinstance(b.get("entries"), list)
            return None if ok else "it is not the proof of the request asked for"
        return self._do("GET", f"/v1/approval-requests/{_q(request_id)}/proof", retry=True, check=is_it)

    def export_audit(self, *, format: str = "jsonl", since: Optional[str] = None, until: Optional[str] = None) -> str:
        """The audit log's export as text: JSON lines, CSV or OCSF lines (``since``, ``until``: RFC 3339).
        The whole export is held in memory; for a large log, page through list_audit_entries."""
        return self._do("GET", "/v1/audit/export", query={"format": format, "since": since, "until": until},
                        retry=True, text=True, extra=60.0)

    def verify_approval_token(self, token: str, *, tool: str, args: Any, audience: Optional[str] = None,
                              now: Optional[float] = None, leeway: float = 30,
                              replay: Optional["ReplayCache"] = None) -> JsonObject:
        """Checks an approval token for the call about to run and returns its claims (docs/tokens.md).

        The key set comes from ``/.well-known/jwks.json`` (fetched without the
        client's token), kept for five minutes and fetched again when a token
        names a key it lacks, at most every ten seconds. The checks are
        :func:`airlock.verify_approval_token`'s; a refusal raises
        :class:`airlock.ApprovalTokenError` with the reason. Needs the
        optional ``cryptography`` package (ImportError without it); a tool
        server's client needs no token of its own (``Client(url, "")``).
        """
        from .verify import verify_with_client
        return verify_with_client(self, token, tool=tool, args=args, audience=audience, now=now, leeway=leeway,
                                  replay=replay)

    # Grants (reviewers and admins; docs/policy.md).

    def create_grant(self, tool: str, expires_in: str, *, arguments: Optional[JsonObject] = None,
                     match: Optional[str] = None, instance_id: Optional[str] = None, agent: Optional[str] = None,
                     uses: Optional[int] = None, valid_for: Optional[str] = None) -> JsonObject:
        """Makes a grant: exactly one of instance_id and agent; arguments for a same_arguments grant,
        or match, a CEL expression. Not retried on a network error: that could make two."""
        body = {k: v for k, v in {"tool": tool, "expires_in": expires_in, "arguments": arguments, "match": match,
                                  "instance_id": instance_id, "agent": agent, "uses": uses,
                                  "valid_for": valid_for}.items() if v is not None}
        return self._do("POST", "/v1/grants", body=body, want=(201,))

    def list_grants(self, *, state: Optional[str] = None, tool: Optional[str] = None) -> List[JsonObject]:
        """Grants, newest first, with their uses left; state="live" for the live ones only."""
        return self._do("GET", "/v1/grants", query={"state": state, "tool": tool}, retry=True, check=_items_are)["items"]

    def get_grant(self, grant_id: str) -> JsonObject:
        return self._do("GET", f"/v1/grants/{_q(grant_id)}", retry=True)

    def revoke_grant(self, grant_id: str) -> JsonObject:
        """Revokes a grant; it approves nothing more. Revoking twice keeps the first revocation."""
        return self._do("DELETE", f"/v1/grants/{_q(grant_id)}", retry=True)

    # Webhooks (admins; docs/notifications.md).

    def create_webhook(self, url: str, *, events: Optional[List[str]] = None, description: Optional[str] = None) -> JsonObject:
        """Creates a webhook endpoint; its signing secret (``whsec_…``) is in this answer only.

        ``events`` are the approval_request.* types to receive (empty or
        None: all). Not retried on a network error: that could create two.
        A loopback or private URL is refused unless the server runs with
        ``--outbound-allow-private``.
        """
        body: JsonObject = {"url": url}
        if events is not None:
            body["events"] = events
        if description is not None:
            body["description"] = description
        return self._do("POST", "/v1/webhooks", body=body, want=(201,))

    def list_webhooks(self) -> List[JsonObject]:
        """The webhook endpoints, oldest first, without secrets."""
        return self._do("GET", "/v1/webhooks", retry=True, check=_items_are)["items"]

    # Web Push (reviewers and admins, for their own browsers; docs/phone.md).

    def get_vapid_public_key(self) -> JsonObject:
        """The server's VAPID public key, the applicationServerKey a browser subscribes with: {public_key}."""
        return self._do("GET", "/v1/push/vapid-public-key", retry=True)

    def create_push_subscription(self, endpoint: str, p256dh: str, auth: str) -> JsonObject:
        """Subscribes the caller's own browser to pushes of {request_id, tool, deadline_at}.

        The arguments are those of the browser's ``PushSubscription.toJSON()``.
        The same endpoint subscribed again replaces the earlier subscription,
        so it is retried.
        """
        body: JsonObject = {"endpoint": endpoint, "keys": {"p256dh": p256dh, "auth": auth}}
        return self._do("POST", "/v1/push/subscriptions", body=body, want=(201,), retry=True)

    def delete_push_subscription(self, subscription_id: str) -> None:
        """Deletes one of the caller's own push subscriptions. Not retried: a retry after a lost answer would report not_found."""
        self._do("DELETE", f"/v1/push/subscriptions/{_q(subscription_id)}", want=(204,))

    def get_webhook(self, webhook_id: str) -> JsonObject:
        """Reads a webhook endpoint, without its secret."""
        return self._do("GET", f"/v1/webhooks/{_q(webhook_id)}", retry=True)

    def delete_webhook(self, webhook_id: str) -> None:
        """Deletes a webhook endpoint and its deliveries. Not retried: a retry after a lost answer would report not_found."""
        self._do("DELETE", f"/v1/webhooks/{_q(webhook_id)}", want=(204,))

    def list_webhook_deliveries(self, webhook_id: str, *, cursor: Optional[str] = None, limit: Optional[int] = None) -> JsonObject:
        """One page of the endpoint's deliveries, newest first, each with its attempts: {items, next_cursor?}."""
        q = {"cursor": cursor, "limit": None if limit is None else str(limit)}
        return self._do("GET", f"/v1/webhooks/{_q(webhook_id)}/deliveries", query=q, retry=True)

    def test_webhook(self, webhook_id: str) -> JsonObject:
        """Queues a signed ``webhook.test`` delivery to the endpoint. Not retried: that could queue two."""
        return self._do("POST", f"/v1/webhooks/{_q(webhook_id)}/test", want=(202,))

    def enable_webhook(self, webhook_id: str) -> JsonObject:
        """Enables an endpoint disabled for failing; the deliveries its failures failed are attempted again. Retried: enabling twice changes nothing."""
        return self._do("POST", f"/v1/webhooks/{_q(webhook_id)}/enable", retry=True)

    # Operations.


    def list_reviewers(self) -> List[JsonObject]:
        """The reviewer principals with their Slack user and email address (admins)."""
        return self._do("GET", "/v1/reviewers", retry=True, check=_items_are)["items"]

    def link_reviewer(self, principal: str, *, slack_user_id: Optional[str] = None, email: Optional[str] = None) -> JsonObject:
        """Replaces a principal's link (admins): a field left out is cleared, neither removes it.
        The same link put again changes nothing, so it is retried."""
        body: JsonObject = {}
        if slack_user_id:
            body["slack_user_id"] = slack_user_id
        if email:
            body["email"] = email
        return self._do("PUT", f"/v1/reviewers/{_q(principal)}/link", body=body, retry=True)

    def end_reviewer_sessions(self, principal: str) -> JsonObject:
        """Ends every inbox session of a principal on every replica (admins): the revocation of
        a reviewer who signed in with OIDC (docs/teams.md). Ending them again ends nothing
        more, so it is retried. Returns {"principal", "ended"}."""
        return self._do("POST", "/v1/reviewers/end-sessions", body={"principal": principal}, retry=True)

    def reviewer_stats(self, principal: str, *, since: Optional[str] = None) -> JsonObject:
        """A decider's approvals, denials and times to decision over the window (30d, 12h;
        default 30 days): admins read anyone's, a reviewer their own (docs/policy.md)."""
        q = f"?since={_q(since)}" if since else ""
        return self._do("GET", f"/v1/reviewers/{_q(principal)}/stats{q}", retry=True)

    def suggestions(self, *, min: Optional[int] = None, since: Optional[str] = None) -> List[JsonObject]:
        """The tool calls people approved at least min times (default 10) in the window (default
        30 days) with no denial, each with a proposed rule and grant (admins; docs/policy.md)."""
        params = []
        if min is not None:
            params.append(f"min={int(min)}")
        if since:
            params.append(f"since={_q(since)}")
        q = "?" + "&".join(params) if params else ""
        return self._do("GET", f"/v1/suggestions{q}", retry=True, check=_items_are)["items"]

    def healthz(self) -> JsonObject:
        return self._do("GET", "/healthz", retry=True)

    def readyz(self) -> JsonObject:
        """Readiness: the store can serve; an AirlockError (503) when not."""
        return self._do("GET", "/readyz", retry=True)

    def metrics(self) -> str:
        """The Prometheus metrics text."""
        return self._do("GET", "/metrics", retry=True, text=True)

    def openapi(self) -> str:
        """The OpenAPI document the server serves, as YAML text."""
        return self._do("GET", "/openapi.yaml", retry=True, text=True)

    # Plumbing.

    def _do(self, method: str, path: str, *, body: Optional[JsonObject] = None, raw: Optional[str] = None,
            query: Optional[Dict[str, Optional[str]]] = None, headers: Optional[Dict[str, str]] = None,
            retry: bool = False, extra: float = 0.0, want: Tuple[int, ...] = (200,), text: bool = False,
            on_status: Optional[Callable[[int], None]] = None,
            check: Optional[Callable[[JsonObject], Optional[str]]] = None) -> Any:
        """Sends one call, with retries when ``retry``; a success's body is a JSON object (``check`` says
        whether it is the resource asked for), the text with ``text``, or None for a 204 where one is wanted."""
        data: Optional[bytes] = None
        if body is not None:
            raw = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        if raw is not None:
            data = raw.encode("utf-8")
        url = self.base_url + path
        if query:
            q = {k: v for k, v in query.items() if v not in (None, "")}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        h = {"Accept": "application/json", "User-Agent": self.user_agent}
        if data is not None:
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if headers:
            h.update(headers)
        last: Optional[BaseException] = None
        for attempt in range(max(1, self.retry.attempts)):
            if attempt > 0:
                pause = self.retry.backoff(attempt - 1)
                if isinstance(last, AirlockError) and last.retry_after is not None:
                    pause = min(last.retry_after, 30.0)
                time.sleep(pause)
            try:
                status, rh, payload = self._send(method, url, h, data, self.timeout + extra)
            except (OSError, urllib.error.URLError) as e:
                last = NetworkError(method, path, e)
                if retry:
                    continue
                raise last
            if status not in want:
                if 200 <= status < 300:
                    # Another success than the operation's is no answer to believe: a 204 to a claim ran nothing.
                    raise MalformedAnswerError(method, path, status, f"the status is not {' or '.join(map(str, want))}")
                last = _decode_error(method, path, status, rh, payload)
                if _retryable(retry, last):
                    continue
                raise last
            if on_status is not None:
                on_status(status)
            if text:
                return payload.decode("utf-8")
            if status == 204:
                return None
            if not payload.strip():
                raise MalformedAnswerError(method, path, status, "the body is empty")
            try:
                got = json.loads(payload)
            except ValueError as e:
                raise MalformedAnswerError(method, path, status, f"the body is not JSON ({e}): {_clip(payload)}") from None
            if not isinstance(got, dict):
                raise MalformedAnswerError(method, path, status, f"the body is not a JSON object: {_clip(payload)}")
            wrong = check(got) if check is not None else None
            if wrong is not None:
                raise MalformedAnswerError(method, path, status, wrong)
            return got
        assert last is not None
        raise last


class WaitCancelled(Exception):
    """wait_request gave up because its cancel event was set."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(f"gave up waiting for a decision on {request_id}")


def _retryable(retry: bool, err: AirlockError) -> bool:
    """A rate limit always (the server did nothing); an unavailable store or a gateway error only for calls safe to repeat."""
    if err.code == "rate_limited":
        return True
    if err.code == "unavailable":
        return retry
    return retry and err.code is None and err.status in (502, 503, 504)


def transient(err: BaseException) -> bool:
    """Whether err may pass by itself: no answer, a rate limit, an unavailable store, a server error."""
    if isinstance(err, NetworkError):
        return True
    if isinstance(err, AirlockError):
        return err.code in ("rate_limited", "unavailable", "internal") or err.status >= 500
    return False


def _decode_error(method: str, path: str, status: int, headers: Dict[str, str], body: bytes) -> AirlockError:
    retry_after = None
    ra = headers.get("retry-after", "")
    if ra.isdigit():
        retry_after = float(ra)
    mt = headers.get("content-type", "").split(";")[0].strip().lower()
    if mt in ("application/problem+json", "application/json"):
        try:
            p = json.loads(body)
        except ValueError:
            p = None
        if isinstance(p, dict) and p.get("code"):
            return AirlockError(status=status, method=method, path=path, code=p["code"], state=p.get("state"),
                                field=p.get("field"), detail=p.get("detail") or p.get("title") or "", retry_after=retry_after,
                                reason=p.get("reason"), consumed_at=p.get("consumed_at"))
    text = body.decode("utf-8", "replace").strip()
    if len(text) > 200:
        text = text[:200] + "…"
    return AirlockError(status=status, method=method, path=path, retry_after=retry_after,
                        detail="the server answered without a problem document: " + (text or str(status)))


def _create_body(tool: str, arguments: Union[JsonObject, str, None], timeout: Optional[str],
                 reasoning: Optional[str], context: Union[JsonObject, str, None],
                 preview: Optional[JsonObject] = None, reversibility: Optional[str] = None) -> str:
    """A create body in which arguments and context given as JSON text go out byte for byte."""
    def raw(name: str, v: Union[JsonObject, str, None]) -> Optional[str]:
        if v is None:
            return None
        if isinstance(v, str):
            if not v.strip():
                return None
            try:
                json.loads(v)
            except ValueError:
                raise ValueError(f"airlock: {name} is not valid JSON; pass the intercepted call's {name} object") from None
            return v
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    def s(v: str) -> str:
        return json.dumps(v, ensure_ascii=False)

    b = '{"tool":' + s(tool) + ',"arguments":' + (raw("arguments", arguments) or "{}")
    if timeout:
        b += ',"timeout":' + s(timeout)
    if reasoning:
        b += ',"agent_reasoning":' + s(reasoning)
    ctx = raw("context", context)
    if ctx is not None:
        b += ',"context":' + ctx
    if preview is not None:
        b += ',"preview":' + json.dumps({"type": preview.get("type"), "content": preview.get("content")},
                                        ensure_ascii=False, separators=(",", ":"))
    if reversibility:
        b += ',"reversibility":' + s(reversibility)
    return b + "}"


def check_idempotency_key(key: str) -> None:
    """Checks an Idempotency-Key as the server does: 1..200 printable ASCII characters without spaces."""
    if not key or not _KEY.match(key):
        raise ValueError("airlock: an Idempotency-Key is 1 to 200 printable ASCII characters without spaces: "
                         "send a unique key per intended call and reuse it on retries")


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _sleep(seconds: float, cancel: Optional[threading.Event]) -> None:
    if cancel is None:
        time.sleep(seconds)
    else:
        cancel.wait(seconds)


_STATES = ("pending", "approved", "denied", "expired", "cancelled")


def _clip(payload: bytes) -> str:
    t = payload.decode("utf-8", "replace").strip()
    return t[:120] + "…" if len(t) > 120 else t


def _id_is(b: JsonObject, want: Optional[str] = None) -> Optional[str]:
    """What is wrong with a resource's id: none, or not the one asked about."""
    got = b.get("id")
    if not isinstance(got, str) or not got:
        return "it has no id"
    if want is not None and got != want:
        return f"it is {got!r}, not {want!r}"
    return None


def _audit_lines(text: str) -> List[JsonObject]:
    """The entries of a JSON lines answer, each leaf kept as its own bytes' text."""
    out: List[JsonObject] = []
    for line in text.split("\n"):
        if line == "":
            continue
        head, sep, rest = line.partition(',"leaf":')
        if not head.startswith('{"index":') or not sep or not rest.endswith("}") or not head[len('{"index":'):].isdigit():
            raise MalformedAnswerError("GET", "/v1/audit/entries", 200, f"a line is not an entry: {line[:200]}")
        # A passkey-signed decision's record follows its leaf; a leaf has no
        # such member and escapes every quote in its strings, so the first
        # '},"passkey":' ends the leaf.
        leaf, pk, record = rest.partition('},"passkey":')
        if not pk:
            out.append({"index": int(head[len('{"index":'):]), "leaf": rest[:-1]})
            continue
        try:
            passkey = json.loads(record[:-1])
        except ValueError:
            raise MalformedAnswerError("GET", "/v1/audit/entries", 200, f"a line's passkey record is not JSON: {line[:200]}") from None
        out.append({"index": int(head[len('{"index":'):]), "leaf": leaf + "}", "passkey": passkey})
    return out


def _hashes_are(b: JsonObject) -> Optional[str]:
    h = b.get("hashes")
    ok = isinstance(h, list) and all(isinstance(x, str) and re.fullmatch(r"[A-Za-z0-9+/]{43}=", x) for x in h)
    return None if ok else "its hashes are not base64 SHA-256 hashes"


def _request_is(b: JsonObject, want: Optional[str] = None) -> Optional[str]:
    """What is wrong with an approval request: no id, another request's id, no known state."""
    return _id_is(b, want) or (None if b.get("state") in _STATES else f"its state {b.get('state')!r} is not a request's state")


def claimed_is(b: Any, want: str) -> Optional[str]:
    """What is wrong with a claim's answer: it must be the same request, approved, with its execution claimed.

    The Gate runs a call only on such an answer.
    """
    if not isinstance(b, dict):
        return "it is not a request"
    wrong = _request_is(b, want)
    if wrong is not None:
        return wrong
    if b["state"] != "approved":
        return f"it is {b['state']}, not approved"
    ex = b.get("execution")
    if not isinstance(ex, dict) or ex.get("status") != "claimed":
        return "it does not show the execution claimed"
    return None


def _use_is(b: JsonObject) -> Optional[str]:
    """What is wrong with a consume's answer: it must name the request and when its token was consumed."""
    if not isinstance(b.get("request_id"), str) or not b["request_id"] or not isinstance(b.get("consumed_at"), str) or not b["consumed_at"]:
        return "it does not name the request and when its token was consumed"
    return None


def _items_are(b: JsonObject) -> Optional[str]:
    return None if isinstance(b.get("items"), list) else "it has no items list"


def _keys_are(b: JsonObject) -> Optional[str]:
    return None if isinstance(b.get("keys"), list) else "it has no keys list"


def _oldest_named(items: List[JsonObject], name: str) -> Optional[JsonObject]:
    """The oldest of the instances called name (the API lists only live ones)."""
    from .gate import parse_time
    found = [i for i in items if i.get("name") == name]
    if not found:
        return None
    return min(found, key=lambda i: (parse_time(i["created_at"]), i["id"]))


def _batch_answers(b: JsonObject, ids: List[str]) -> Optional[str]:
    """What is wrong with a batch decision's answer: it must hold a result per id, in order."""
    results = b.get("results")
    if not isinstance(results, list) or len(results) != len(ids):
        return f"it does not hold a result for each of the {len(ids)} ids"
    for i, (r, want) in enumerate(zip(results, ids)):
        if not isinstance(r, dict) or r.get("id") != want:
            return f"result {i} is not for {want}"
    return None
