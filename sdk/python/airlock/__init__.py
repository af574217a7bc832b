"""Airlock's Python SDK (docs/sdks.md), standard library only.

A client for every endpoint of the REST API, and a Gate that runs one tool
call only with a person's valid approval, and only once, across restarts
too (docs/protocol.md)::

    from airlock import Call, Client, Gate, GateError, describe_outcome

    client = Client.from_env()  # AIRLOCK_URL and AIRLOCK_AGENT_TOKEN
    instance = client.instance_named("billing-agent")  # the same one after a restart
    with Gate(client, instance["id"], journal_dir=".airlock-journal") as gate:
        gate.recover()
        try:
            out = gate.run(Call("refund", {"order": "A-17", "cents": 500}, attempt_key="refund-A-17"),
                           lambda: refund("A-17", 500))
        except GateError as e:
            print(describe_outcome(e)["message"])

The README's quick-start is the same, with a ``refund`` to run.

A tool server verifies the approval token a claim returns (the Gate hands
it to the function with ``pass_token=True``) with
``Client.verify_approval_token`` or, offline, :func:`verify_approval_token`;
these need the optional ``cryptography`` package (docs/tokens.md).
"""

from .client import Client, Retry, WaitCancelled, check_idempotency_key, transient
from .errors import (AirlockError, AlreadyExecutedError, CancelledError, DeniedError, ExpiredError, GateError,
                     InterruptedRunError, LapsedError, MalformedAnswerError, NetworkError, OutcomeUnknown, ToolError,
                     is_code)
from .gate import Call, Gate, Outcome, Recovered, canonical_json, describe_outcome, parse_time
from .verify import ApprovalTokenError, KeySet, ReplayCache, ReplayCacheFull, args_digest, verify_approval_token

__version__ = "0.1.0"

__all__ = [
    "Client", "Retry", "WaitCancelled", "check_idempotency_key", "transient",
    "AirlockError", "NetworkError", "MalformedAnswerError", "is_code", "GateError", "DeniedError", "ExpiredError", "CancelledError",
    "LapsedError", "AlreadyExecutedError", "InterruptedRunError", "ToolError", "OutcomeUnknown",
    "Call", "Gate", "Outcome", "Recovered", "canonical_json", "describe_outcome", "parse_time",
    "ApprovalTokenError", "KeySet", "ReplayCache", "ReplayCacheFull", "args_digest", "verify_approval_token",
]
