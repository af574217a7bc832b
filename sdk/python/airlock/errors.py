"""Errors of the Airlock client and the Gate's outcomes.

Each of the Gate's outcomes for a call that did not run (or ran and failed)
is its own class with its own ``outcome``, so callers tell the agent what
happened: a denial is not an expiry, and neither is a cancellation.
"""

from typing import Any, Dict, Optional


class AirlockError(Exception):
    """An answer of the server that is not a success: an RFC 9457 problem.

    Switch on ``code`` (the stable code, or None when the answer was not a
    problem, a proxy's page say); for 409 conflicts ``state`` names the state
    that holds; ``field`` names the input at fault for ``invalid_request``;
    ``reason`` says why an approval token was refused (``invalid_token``) and
    ``consumed_at`` when it was consumed (``already_used``).
    """

    def __init__(self, *, status: int, method: str, path: str, detail: str, code: Optional[str] = None,
                 state: Optional[str] = None, field: Optional[str] = None,
                 retry_after: Optional[float] = None, reason: Optional[str] = None,
                 consumed_at: Optional[str] = None) -> None:
        self.reason = reason
        self.consumed_at = consumed_at
        self.code = code
        self.status = status
        self.state = state
        self.field = field
        self.detail = detail
        self.method = method
        self.path = path
        self.retry_after = retry_after
        super().__init__(f"{method} {path}: {detail} ({code or 'no problem code'}, HTTP {status})")


class NetworkError(Exception):
    """A call that got no answer: the connection failed, broke or timed out.

    The server may have acted on it.
    """

    def __init__(self, method: str, path: str, cause: BaseException) -> None:
        self.method = method
        self.path = path
        self.cause = cause
        super().__init__(f"{method} {path}: no answer from the Airlock server: {cause}")


class MalformedAnswerError(Exception):
    """A success status whose body is not what the call expects.

    Empty, not JSON (a proxy's HTML page), cut short, or another resource
    than the one asked about (another request's id, a claim that does not
    show the execution claimed). An adapter believes only what it can
    check, so it acts on such an answer as on no answer: nothing is run or
    approved on it.
    """

    def __init__(self, method: str, path: str, status: int, reason: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        super().__init__(f"{method} {path}: the server's {status} answer cannot be trusted: {reason}")


def is_code(err: BaseException, *codes: str) -> bool:
    """Whether err is an answer of the server with one of codes."""
    return isinstance(err, AirlockError) and err.code is not None and err.code in codes


class GateError(Exception):
    """The base of the Gate's outcome errors; ``request`` is the request as last seen."""

    outcome = ""

    def __init__(self, message: str, request: Dict[str, Any]) -> None:
        self.request = request
        super().__init__(message)


def _tool(r: Dict[str, Any]) -> str:
    return str(r.get("tool", "the call"))


class DeniedError(GateError):
    """A reviewer denied the call; ``note`` says why. Pass it on to the agent."""

    outcome = "denied"

    def __init__(self, request: Dict[str, Any]) -> None:
        note = self._note(request)
        msg = f"airlock: {_tool(request)} was denied (request {request['id']})"
        rep = (request.get("decision") or {}).get("replaced_by")
        if rep:
            msg = (f"airlock: {_tool(request)} was approved with changed arguments as request {rep}; this call "
                   f"(request {request['id']}) did not run, and the gate runs edited calls only with accept_edits")
        if note:
            msg += f": reviewer's note: {note}"
        super().__init__(msg, request)

    @staticmethod
    def _note(r: Dict[str, Any]) -> str:
        return str((r.get("decision") or {}).get("note", ""))

    @property
    def note(self) -> str:
        """The reviewer's note, or ""."""
        return self._note(self.request)

    @property
    def replaced_by(self) -> str:
        """The request a reviewer approved in this one's place with changed arguments (an edit), or ""."""
        return str((self.request.get("decision") or {}).get("replaced_by", ""))


class ExpiredError(GateError):
    """Nobody decided before the deadline; the call did not run."""

    outcome = "expired"

    def __init__(self, request: Dict[str, Any]) -> None:
        super().__init__(f"airlock: nobody decided on {_tool(request)} in time (request {request['id']}, "
                         f"deadline {request.get('deadline_at')}); it did not run", request)


class CancelledError(GateError):
    """The request was withdrawn, so the call did not run.

    ``abandoned`` is True when the caller gave up waiting (the gate then
    cancelled the request itself); otherwise someone else cancelled it or
    deleted the instance.
    """

    outcome = "cancelled"

    def __init__(self, request: Dict[str, Any], abandoned: bool = False, cancel_error: Optional[BaseException] = None) -> None:
        self.abandoned = abandoned
        self.cancel_error = cancel_error
        if abandoned:
            msg = f"airlock: gave up waiting for a decision on {_tool(request)} (request {request['id']}); the request was withdrawn"
            if cancel_error is not None:
                msg += f" (withdrawing failed: {cancel_error}; it will expire)"
        else:
            msg = f"airlock: the request for {_tool(request)} was cancelled (request {request['id']}); it did not run"
        super().__init__(msg, request)


class LapsedError(GateError):
    """Approved, but permission to start (``expires_at``) ended before the call could start; it did not run.

    ``claimed`` is True when the gate had claimed the execution and reported it failed.
    """

    outcome = "lapsed"

    def __init__(self, request: Dict[str, Any], claimed: bool = False) -> None:
        self.claimed = claimed
        exp = (request.get("decision") or {}).get("expires_at")
        super().__init__(f"airlock: the approval of {_tool(request)} (request {request['id']}) expired at {exp} "
                         "before the call could start; it did not run", request)


class AlreadyExecutedError(GateError):
    """This approval's one execution was already claimed, here earlier (``here``) or elsewhere. Not run again."""

    outcome = "already_executed"

    def __init__(self, request: Dict[str, Any], status: str, here: bool = False) -> None:
        self.status = status
        self.here = here
        where = "by this gate" if here else "elsewhere"
        super().__init__(f"airlock: the approval of {_tool(request)} (request {request['id']}) was already used {where} "
                         f"(execution {status}); it is not run again", request)


class InterruptedRunError(GateError):
    """An earlier run of this call was cut short (a crash while it ran, or before the gate learned whether its claim succeeded).

    Whether it took effect is unknown; the gate reported ``unknown`` and
    never runs it again. ``started`` is True when the journal shows the call
    had started.
    """

    outcome = "interrupted"

    def __init__(self, request: Dict[str, Any], started: bool) -> None:
        self.started = started
        if started:
            msg = (f"airlock: an earlier run of {_tool(request)} (request {request['id']}) was interrupted; "
                   "its outcome is unknown and it is not run again")
        else:
            msg = (f"airlock: the claim of {_tool(request)} (request {request['id']}) was interrupted before the call "
                   "started here; reported unknown, not run again")
        super().__init__(msg, request)


class ToolError(GateError):
    """The call ran and raised; ``status`` is what was reported (failed, or unknown for an OutcomeUnknown)."""

    outcome = "tool_failed"

    def __init__(self, request: Dict[str, Any], status: str, cause: BaseException) -> None:
        self.status = status
        self.cause = cause
        super().__init__(f"airlock: the approved call ran and failed (request {request['id']}): {cause}", request)


class OutcomeUnknown(Exception):
    """Raise (or chain from) this in a tool when whether the call took effect is unknown.

    The gate then reports ``unknown`` instead of ``failed``.
    """

