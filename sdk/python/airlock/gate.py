"""The Gate: runs a tool call only with a valid approval, and at most once (docs/protocol.md).

For one call it asks Airlock for approval of exactly that tool and those
arguments, waits for a reviewer, claims the single execution attempt, checks
``expires_at`` against the local clock immediately before starting, runs the
function, and reports succeeded, failed or unknown.

"At most once" holds when the same approval arrives twice, when several
gates race for it, and across restarts: each step is written to an on-disk
journal before the gate acts on it, the step before the claim is fsynced
before the call starts, and a run a crash interrupted is reported unknown
and never run again.
"""

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from .client import Client, WaitCancelled, check_idempotency_key, claimed_is
from .errors import (AirlockError, AlreadyExecutedError, CancelledError, DeniedError, ExpiredError,
                     InterruptedRunError, LapsedError, MalformedAnswerError, OutcomeUnknown, ToolError, is_code)
from .journal import Entry, Journal

T = TypeVar("T")
JsonObject = Dict[str, Any]


@dataclass
class Call:
    """One intercepted tool call.

    ``arguments`` are exactly as intercepted (a dict, or the JSON text); they
    are what the reviewer sees, and the function run must use these and no
    others. ``attempt_key`` tells deliberate attempts of the same call apart
    (the agent's tool-call ID, say): the same tool, arguments and attempt key
    on the same instance are the same request, so running it again finds the
    earlier outcome instead of asking again. ``idempotency_key`` is used
    instead of the derived key when set. ``preview`` (``{"type": "diff"|"text",
    "content": ...}``) and ``reversibility`` (reversible, partial,
    irreversible) are the adapter's claims about the call, shown to
    reviewers as such.
    """

    tool: str
    arguments: Union[JsonObject, str, None] = None
    attempt_key: str = ""
    idempotency_key: str = ""
    timeout: Optional[str] = None
    agent_reasoning: Optional[str] = None
    context: Optional[JsonObject] = None
    on_pending: Optional[Callable[[JsonObject], None]] = None
    preview: Optional[JsonObject] = None
    reversibility: Optional[str] = None


@dataclass
class Outcome:
    """A call that ran and succeeded: the function's ``value`` and the request as last seen.

    ``report_error`` is why the outcome could not be reported; the journal
    keeps it, and :meth:`Gate.recover` reports it.
    """

    value: Any
    request: JsonObject
    status: str = "succeeded"
    report_error: Optional[BaseException] = None


@dataclass
class Recovered:
    """One call that :meth:`Gate.recover` settled."""

    request_id: str
    status: Optional[str] = None
    error: Optional[BaseException] = None


@dataclass
class _KeyLock:
    lock: threading.Lock = field(default_factory=threading.Lock)
    refs: int = 0


class Gate:
    """Runs tool calls only with a valid approval, each at most once, across restarts too.

    ``client`` talks to Airlock with an agent token; ``instance_id`` is the
    instance that owns the gate's requests (keep it across restarts: the
    idempotency key is derived from it); ``journal_dir`` is where each step
    is recorded (created if needed, locked while open; give each gate
    process its own). ``timeout`` is the decision window asked for calls
    that name none; ``poll_wait`` one long-poll's wait; ``now`` the local
    clock (seconds since the epoch) checked against expires_at.
    ``sync_every_step`` fsyncs every journal line before going on, not only
    the one written before the claim (fsynced while the claim is in flight,
    and before the call starts: that is what keeps a call from running
    twice), so that after a power loss the report is as precise as after a
    crash. ``accept_edits`` runs a call a reviewer approved with changed
    arguments (docs/protocol.md, "Edits"): the gate claims and runs the
    replacement, calling fn with the keyword argument ``arguments``, the
    approved arguments (a dict), which fn must use; without it such a call
    does not run and :class:`DeniedError` names the replacement
    (``replaced_by``).
    """

    def __init__(self, client: Client, instance_id: str, journal_dir: str, *, timeout: Optional[str] = None,
                 poll_wait: Optional[float] = None, now: Callable[[], float] = time.time,
                 sync_every_step: bool = False, accept_edits: bool = False) -> None:
        if not instance_id:
            raise ValueError("airlock gate: instance_id is required: register an instance with client.register_instance")
        self.client = client
        self.instance_id = instance_id
        self._journal = Journal(journal_dir, sync_every_step)
        self._timeout = timeout
        self._poll_wait = poll_wait
        self._now = now
        self._accept_edits = accept_edits
        self._mu = threading.Lock()
        self._locks: Dict[str, _KeyLock] = {}

    def close(self) -> None:
        """Releases the journal."""
        self._journal.close()

    def __enter__(self) -> "Gate":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def key(self, call: Call) -> str:
        """The call's idempotency key: a hash of the instance, the tool, the canonical arguments and the attempt key."""
        if call.idempotency_key:
            check_idempotency_key(call.idempotency_key)
            return call.idempotency_key
        args = call.arguments
        if isinstance(args, str):
            args = json.loads(args or "{}")
        h = hashlib.sha256()
        for part in ("airlock-gate/v1", self.instance_id, call.tool, canonical_json(args or {}), call.attempt_key):
            b = part.encode("utf-8")
            h.update(f"{len(b)}:".encode() + b)
        return "gate-" + h.hexdigest()[:40]

    def ask(self, call: Call) -> JsonObject:
        """Asks for approval of call without waiting or running anything; returns the request as it is now.

        The same call always finds the same request (its key is journaled).
        """
        key = self.key(call)
        with self._lock(key):
            try:
                e = self._journal.read(key)
                if e.request_id:
                    return self.client.get_request(e.request_id)
                return self._create(key, call)
            finally:
                self._journal.release(key)

    def run(self, call: Call, fn: Callable[..., T], *, cancel: Optional[threading.Event] = None,
            pass_token: bool = False) -> Outcome:
        """Asks for approval of call and, once approved, runs fn at most once.

        fn is called with no arguments; with ``pass_token`` it is called with
        one, the approval token the claim returned (a str, or None from a
        server that signs none), so the tool it calls can verify that exactly
        these arguments were approved (docs/tokens.md).

        Returns an :class:`Outcome` with fn's value when it ran and
        succeeded. Raises :class:`ToolError` when fn raised (after reporting
        failed, or unknown for an :class:`OutcomeUnknown`); when fn did not
        run, :class:`DeniedError` (with the reviewer's note),
        :class:`ExpiredError`, :class:`CancelledError` (withdrawn, or
        ``cancel`` was set while waiting: the gate then cancels the request),
        :class:`LapsedError`, :class:`AlreadyExecutedError`,
        :class:`InterruptedRunError` (an earlier run was cut short by a
        crash; reported unknown, not re-run), or an error reaching Airlock.
        """
        if not callable(fn):
            raise TypeError("airlock gate: run needs a function to run")
        key = self.key(call)
        with self._lock(key):
            try:
                e = self._journal.read(key)
                if e.request_id:
                    # This call was asked before: the journal says how far it got.
                    r = self.client.get_request(e.request_id)
                    r = self._follow(r, call.on_pending, cancel)
                    done = self._resume(e, r)
                    if done is not None:
                        raise done
                else:
                    r = self._create(key, call)
                if r["state"] == "pending":
                    r = self._wait(r, call.on_pending, cancel)
                r = self._follow(r, call.on_pending, cancel)
                return self._execute(key, r, fn, pass_token)
            finally:
                self._journal.release(key)

    def _follow(self, r: JsonObject, on_pending: Optional[Callable[[JsonObject], None]],
                cancel: Optional[threading.Event]) -> JsonObject:
        """With accept_edits, the replacement of a request approved with changed arguments, once decided; else r.

        The replacement is believed only when it says it was derived from r,
        for the same tool on the same instance.
        """
        rid = (r.get("decision") or {}).get("replaced_by")
        if not self._accept_edits or r.get("state") != "denied" or not rid:
            return r
        n = self.client.get_request(rid)
        if n.get("id") != rid or n.get("derived_from") != r["id"] or n.get("tool") != r.get("tool") \
                or n.get("instance_id") != r.get("instance_id"):
            raise RuntimeError(f"airlock gate: request {r['id']} names {rid} as its edited replacement, "
                               "but the server's answer is not an edit of it; nothing runs")
        if n["state"] == "pending":
            n = self._wait(n, on_pending, cancel)
        return n

    def _create(self, key: str, call: Call) -> JsonObject:
        opened = self._journal.prepare(key)  # the file is created on the thread pool while the request is
        try:
            r, _ = self.client.create_request(self.instance_id, key, call.tool, call.arguments,
                                              timeout=call.timeout or self._timeout, agent_reasoning=call.agent_reasoning,
                                              context=call.context, preview=call.preview,
                                              reversibility=call.reversibility)
        except BaseException:
            opened.exception()  # before release() closes it
            raise
        opened.result()
        self._journal.append(key, "requested", r["id"], key)
        return r

    def _wait(self, r: JsonObject, on_pending: Optional[Callable[[JsonObject], None]], cancel: Optional[threading.Event]) -> JsonObject:
        """Waits for a decision; when cancel is set first, withdraws the request so nobody approves a call that will not run."""
        if on_pending is not None:
            on_pending(r)
        try:
            return self.client.wait_request(r["id"], poll_wait=self._poll_wait, on_pending=on_pending, cancel=cancel)
        except WaitCancelled:
            try:
                withdrawn = self.client.cancel_request(r["id"])
            except AirlockError as err:
                if is_code(err, "not_pending", "deadline_passed"):
                    raise CancelledError(r, abandoned=True) from None
                raise CancelledError(r, abandoned=True, cancel_error=err) from None
            except Exception as err:  # noqa: BLE001 - any failure to withdraw is reported alongside
                raise CancelledError(r, abandoned=True, cancel_error=err) from None
            raise CancelledError(withdrawn, abandoned=True) from None

    def _resume(self, e: Entry, r: JsonObject) -> Optional[Exception]:
        """The error to end with for a call the journal has seen, or None when it may go on as new."""
        if e.finished:
            if not e.reported:
                r, _ = self._report(e.key, r, e.finished, "outcome recorded before the gate restarted")
            return AlreadyExecutedError(r, e.finished, here=True)
        if e.claimed:
            return self._interrupted(e.key, r, True)[0]
        if e.claiming:
            if not r.get("execution"):
                return None  # the claim never landed
            return self._interrupted(e.key, r, False)[0]
        return None

    def _interrupted(self, key: str, r: JsonObject, started: bool):
        """Reports unknown for a run a crash cut short, or whose claim answer was lost; never runs it again."""
        detail = ("the gate stopped while the call was running; it was not run again" if started else
                  "the gate lost the answer to its claim (crash or network); the call was not started here and is not run again")
        self._journal.append(key, "finished", r["id"], "unknown")
        req, err = self._report(key, r, "unknown", detail)
        return InterruptedRunError(req, started), err

    def _execute(self, key: str, r: JsonObject, fn: Callable[..., T], pass_token: bool = False) -> Outcome:
        state = r["state"]
        if state == "denied":
            raise DeniedError(r)
        if state == "expired":
            raise ExpiredError(r)
        if state == "cancelled":
            raise CancelledError(r)
        if state != "approved":
            raise RuntimeError(f"airlock gate: request {r['id']} is {state}, not terminal")
        if r.get("execution"):
            raise AlreadyExecutedError(r, r["execution"]["status"])
        exp = (r.get("decision") or {}).get("expires_at")
        if not exp:
            raise RuntimeError(f"airlock gate: approved request {r['id']} has no expires_at")
        expires = parse_time(exp)
        if self._now() >= expires:
            raise LapsedError(r)

        rid = r["id"]
        r = self._claim(key, r)
        # The call runs only on what the claim's answer shows: this request,
        # approved, its execution claimed. The client checks it too; this is
        # the last word before anything runs.
        wrong = claimed_is(r, rid)
        if wrong is not None:
            raise MalformedAnswerError("POST", f"/v1/approval-requests/{rid}/execution", 200, wrong)
        try:
            self._journal.append(key, "claimed", r["id"])
        except OSError as err:
            # Without the record a crash during the run would go unnoticed: do not start.
            self._report(key, r, "failed", "not started: the gate could not write its journal", journal=False)
            raise RuntimeError(f"airlock gate: not started: {err}") from err
        # Immediately before starting: permission to start ends at expires_at.
        if self._now() >= expires:
            self._journal.append(key, "finished", r["id"], "failed")
            r, _ = self._report(key, r, "failed", f"not started: permission to start ended at {exp} before the call could start")
            raise LapsedError(r, claimed=True)

        try:
            kw = {"arguments": r.get("arguments")} if self._accept_edits else {}
            value = fn((r.get("execution") or {}).get("approval_token"), **kw) if pass_token else fn(**kw)
        except BaseException as err:
            unknown = isinstance(err, OutcomeUnknown) or isinstance(err.__cause__, OutcomeUnknown) or not isinstance(err, Exception)
            status = "unknown" if unknown else "failed"
            self._journal.append(key, "finished", r["id"], status)
            r, _ = self._report(key, r, status, str(err) or type(err).__name__)
            if not isinstance(err, Exception):
                raise  # KeyboardInterrupt, SystemExit: reported unknown, carried on
            raise ToolError(r, status, err) from err
        out = Outcome(value=value, request=r)
        try:
            self._journal.append(key, "finished", r["id"], "succeeded")
        except OSError as err:
            out.report_error = err
            return out
        out.request, out.report_error = self._report(key, r, "succeeded", "")
        return out

    def _claim(self, key: str, r: JsonObject) -> JsonObject:
        """Claims the execution; returns once the claim is granted and the "claiming" line is durable, so the call may start.

        The line is written before the claim is sent (it survives the process
        being killed) and fsynced while the claim is in flight (it survives a
        power cut once the call may start); docs/sdks.md, "The journal", goes
        through each crash point.
        """
        self._journal.append(key, "claiming", r["id"])
        synced = self._journal.sync(key)
        try:
            got = self._send_claim(key, r)
        except BaseException:
            synced.exception()  # the fsync is done with the file before the gate releases it
            raise
        err = synced.exception()
        if err is not None:
            # Without a durable record a power cut during the run would go unnoticed: do not start.
            self._report(key, got, "failed", "not started: the gate could not write its journal", journal=False)
            raise RuntimeError(f"airlock gate: not started: {err}") from err
        return got

    def _send_claim(self, key: str, r: JsonObject) -> JsonObject:
        """Sends the claim.

        When its answer is lost, or is a success that cannot be trusted
        (empty, not JSON, another request's), the request is read to learn whether it
        landed: if not, the claim is sent again; if so, nobody can tell
        whether it was this gate's, so the call does not start and is
        reported unknown.
        """
        last: Optional[BaseException] = None
        for attempt in range(max(1, self.client.retry.attempts)):
            if attempt > 0:
                time.sleep(self.client.retry.backoff(attempt - 1))
            try:
                return self.client.claim_execution(r["id"])
            except AirlockError as err:
                if err.code and err.code not in ("rate_limited", "internal", "unavailable"):
                    self._journal.append(key, "refused", r["id"], err.code)
                    raise self._refusal(r, err) from None
                last = err
            except Exception as err:  # noqa: BLE001 - no answer, or none to believe: find out below whether it landed
                last = err
            try:
                now = self.client.get_request(r["id"])
            except Exception as rerr:
                raise RuntimeError(f"airlock gate: claim {r['id']}: {last}; and reading it back: {rerr}") from last
            if now.get("execution"):
                raise self._interrupted(key, now, False)[0]
        self._journal.append(key, "refused", r["id"], "unsent")
        raise RuntimeError(f"airlock gate: claim {r['id']}: {last}") from last

    def _refusal(self, r: JsonObject, err: AirlockError) -> Exception:
        if err.code == "already_executed":
            status = "claimed"
            try:
                now = self.client.get_request(r["id"])
                if now.get("execution"):
                    r, status = now, now["execution"]["status"]
            except Exception:  # noqa: BLE001 - keep what is known
                pass
            return AlreadyExecutedError(r, status)
        if err.code == "approval_expired":
            return LapsedError(r)
        return RuntimeError(f"airlock gate: claim {r['id']}: {err}")

    def _report(self, key: str, r: JsonObject, status: str, detail: str, journal: bool = True):
        """Sends the outcome and journals that the server has it; returns (request, error)."""
        if len(detail) > 4000:
            detail = detail[:3997] + "..."
        try:
            got = self.client.report_execution(r["id"], status, detail)
        except Exception as err:  # noqa: BLE001 - the journal keeps it; recover() reports it
            # The server has another outcome already (the journal lost a line
            # to a power cut, say): it holds, and nothing is left to report.
            if is_code(err, "already_executed"):
                try:
                    now = self.client.get_request(r["id"])
                except Exception:  # noqa: BLE001
                    return r, err
                ex = now.get("execution") or {}
                if ex.get("status") not in (None, "claimed"):
                    if journal:
                        self._journal.append(key, "reported", r["id"], ex["status"])
                    return now, None
            return r, err
        if journal:
            self._journal.append(key, "reported", r["id"], status)
        return got, None

    def recover(self) -> List[Recovered]:
        """Settles what an earlier process left in the journal. Call it at start.

        A run it started and did not finish is reported unknown (never run
        again); an outcome it recorded but did not report is reported.
        """
        out: List[Recovered] = []
        for e0 in self._journal.entries():
            if e0.settled() or not e0.request_id:
                continue
            with self._lock(e0.key):
                try:
                    self._recover_one(e0.key, out)
                finally:
                    self._journal.release(e0.key)
        return out

    def _recover_one(self, key: str, out: List[Recovered]) -> None:
        e = self._journal.read(key)  # again, under the lock
        if e.settled():
            return
        try:
            r = self.client.get_request(e.request_id)
        except Exception as err:  # noqa: BLE001
            out.append(Recovered(e.request_id, error=err))
            return
        if e.finished:
            err = None if e.reported else self._report(e.key, r, e.finished, "outcome recorded before the gate restarted")[1]
            out.append(Recovered(r["id"], e.finished, err))
        elif e.claimed or (e.claiming and r.get("execution")):
            _, err = self._interrupted(e.key, r, e.claimed)
            out.append(Recovered(r["id"], "unknown", err))
        else:
            self._journal.append(e.key, "refused", r["id"], "unsent")  # the claim never landed: nothing ran

    def outstanding(self) -> int:
        """How many of the journal's calls the server does not have the outcome of yet."""
        return sum(1 for e in self._journal.entries() if not e.settled())

    class _Held:
        def __init__(self, gate: "Gate", key: str) -> None:
            self.gate, self.key = gate, key

        def __enter__(self) -> None:
            g = self.gate
            with g._mu:
                kl = g._locks.setdefault(self.key, _KeyLock())
                kl.refs += 1
            kl.lock.acquire()
            self.kl = kl

        def __exit__(self, *exc: Any) -> None:
            g = self.gate
            self.kl.lock.release()
            with g._mu:
                self.kl.refs -= 1
                if self.kl.refs == 0:
                    g._locks.pop(self.key, None)

    def _lock(self, key: str) -> "Gate._Held":
        """Serializes runs of one call within a process: a second run waits, then finds the outcome in the journal."""
        return Gate._Held(self, key)


def canonical_json(v: Any) -> str:
    """JSON with object keys sorted, so equal arguments give equal keys whatever their order."""
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")


def parse_time(s: str) -> float:
    """An RFC 3339 time (as the server sends: UTC, the fraction's trailing zeros trimmed) as seconds since the epoch.

    Written out because datetime.fromisoformat before Python 3.11 reads only
    3 or 6 fraction digits.
    """
    m = _TIME.match(s)
    if not m:
        raise ValueError(f"airlock: {s!r} is not an RFC 3339 time")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    frac = (m.group(2) or "").ljust(6, "0")[:6]
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{zone}").timestamp()


def describe_outcome(err: BaseException) -> Optional[Dict[str, Any]]:
    """What to tell the agent for one of the Gate's outcome errors; None for any other error (re-raise it: nothing fails open)."""
    from .errors import GateError
    if not isinstance(err, GateError):
        return None
    r = err.request
    note = (r.get("decision") or {}).get("note")
    tool = r.get("tool", "the call")
    messages = {
        "denied": f"A reviewer denied {tool}; it did not run." + (f" Reviewer's note: {note}" if note else ""),
        "expired": f"Nobody decided on {tool} before its deadline; it did not run.",
        "cancelled": f"The approval request for {tool} was withdrawn; it did not run.",
        "lapsed": f"{tool} was approved, but the approval lapsed before it could start; it did not run. Ask again if it is still needed.",
        "already_executed": f"This approval of {tool} was already used; it is not run again.",
        "interrupted": f"An earlier run of {tool} was interrupted; whether it took effect is unknown, and it is not run again.",
        "tool_failed": f"{tool} ran and failed: {getattr(err, 'cause', err)}",
    }
    ran = err.outcome == "tool_failed" or (err.outcome == "interrupted" and getattr(err, "started", False))
    v: Dict[str, Any] = {"outcome": err.outcome, "ran": ran, "request_id": r.get("id"), "message": messages[err.outcome]}
    if note:
        v["note"] = note
    return v
