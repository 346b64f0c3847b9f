"""The Python client's error table (maka.errors.BY_KIND) follows the daemon's (makad.errors)."""

from __future__ import annotations

import pytest

from maka import Client
from maka import errors as client
from makad.errors import ALL_ERRORS, MakadError
from makad.rpc.dispatch import error_response
from tests.support import DaemonProcess

# Kinds the JSON-RPC layer itself sends (makad.rpc.dispatch) that have a class of their own;
# parse_error, too_deep and invalid_request arrive as a plain RemoteError.
PROTOCOL_KINDS = {"method_not_found": "MethodNotFound"}
# The daemon's base class is what a crash reports; the client names it for what it is.
CLIENT_NAMES = {MakadError: "InternalError"}
DAEMON_ERRORS = (MakadError, *ALL_ERRORS)


@pytest.mark.parametrize("error", DAEMON_ERRORS, ids=lambda error: error.kind)
def test_each_daemon_error_has_its_client_class(error: type[MakadError]) -> None:
    """A kind the daemon can send maps to the client class of the same name."""
    assert client.BY_KIND[error.kind].__name__ == CLIENT_NAMES.get(error, error.__name__)
    assert getattr(client, CLIENT_NAMES.get(error, error.__name__)) is client.BY_KIND[error.kind]


def test_the_client_knows_no_kind_the_daemon_lacks() -> None:
    """Every kind in the client's table is one the daemon defines or the JSON-RPC layer sends."""
    daemon_kinds = {error.kind for error in DAEMON_ERRORS} | set(PROTOCOL_KINDS)
    assert set(client.BY_KIND) == daemon_kinds
    assert all(client.BY_KIND[kind].__name__ == name for kind, name in PROTOCOL_KINDS.items())


@pytest.mark.parametrize("error", DAEMON_ERRORS, ids=lambda error: error.kind)
def test_a_daemon_error_reply_is_rebuilt_as_its_class(error: type[MakadError]) -> None:
    """The reply the daemon writes for an error comes back as its class, code and details."""
    raised = error("it failed", sessionId="s-1")
    reply = error_response(raised.code, raised.message, raised.data(), 7)
    rebuilt = client.from_error_object(reply["error"])
    assert type(rebuilt) is client.BY_KIND[error.kind]
    assert (rebuilt.code, rebuilt.kind, rebuilt.message) == (error.code, error.kind, "it failed")
    assert rebuilt.data["sessionId"] == "s-1"


def test_an_unknown_kind_stays_a_remote_error() -> None:
    """A kind this client does not know (a newer daemon) is still an error with its kind."""
    rebuilt = client.from_error_object({"code": -32099, "message": "new", "data": {"kind": "brand_new"}})
    assert type(rebuilt) is client.RemoteError and rebuilt.kind == "brand_new"


def test_params_that_do_not_fit_say_which_and_why_in_the_text(shared_daemon: DaemonProcess) -> None:
    """An InvalidParams for params the method's schema refuses names the param and what is
    wrong with it in its text, not only "Invalid params"."""
    with Client(str(shared_daemon.socket)) as c:
        session = c.call("open_session", workspace=str(shared_daemon.workspace))["sessionId"]
        with pytest.raises(client.InvalidParams) as caught:
            c.call(
                "append_events",
                workspace=str(shared_daemon.workspace),
                sessionId=session,
                events=[{"type": "user_message", "content": "hi"}],
            )
    assert str(caught.value).startswith(
        "Invalid params: $.events[0]: Object contains unknown field `content` (invalid_params"
    )


def test_a_domain_invalid_params_keeps_its_own_message() -> None:
    """An InvalidParams whose message already says what is wrong is not given its data's
    reason token again."""
    error = {
        "code": -32602,
        "message": "nothing to compact yet",
        "data": {"kind": "invalid_params", "reason": "nothing_to_compact"},
    }
    assert str(client.from_error_object(error)) == "nothing to compact yet (invalid_params, code -32602)"
