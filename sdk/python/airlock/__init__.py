"""Airlock's Python SDK (docs/sdks.md), standard library only.

A client for every endpoint of the REST API, and a Gate that runs one tool
call only with a person's valid approval, and only once, across restarts
too (docs/protocol.md)::

    from airlock import Client, Gate, Call, DeniedError

    client = Client("http://127.0.0.1:8080", token)
    instance = client.register_instance("billing-agent")
    with Gate(client, instance["id"], journal_dir=".airlock-journal") as gate:
        try:
            out = gate.run(Call("refund", {"order": "A-17", "cents": 500}), lambda: refund("A-17", 500))
        except DeniedError as e:
            print("denied:", e.note)
"""

from .client import Client, Retry, WaitCancelled, check_idempotency_key, transient
from .errors import (AirlockError, AlreadyExecutedError, CancelledError, DeniedError, ExpiredError, GateError,
                     InterruptedRunError, LapsedError, NetworkError, OutcomeUnknown, ToolError, is_code)
from .gate import Call, Gate, Outcome, Recovered, canonical_json, describe_outcome, parse_time

__version__ = "0.1.0"

__all__ = [
    "Client", "Retry", "WaitCancelled", "check_idempotency_key", "transient",
    "AirlockError", "NetworkError", "is_code", "GateError", "DeniedError", "ExpiredError", "CancelledError",
    "LapsedError", "AlreadyExecutedError", "InterruptedRunError", "ToolError", "OutcomeUnknown",
    "Call", "Gate", "Outcome", "Recovered", "canonical_json", "describe_outcome", "parse_time",
]
