"""The parts of jsonrpcserver the dispatcher calls, loaded without its package ``__init__``.

jsonrpcserver's ``__init__`` imports its ready-made entry points (``dispatch``, ``serve``):
they pull in jsonschema (for a default request validator the dispatcher never uses: it
validates with msgspec, ``makad.rpc.dispatch``) and http.server, about a fifth of the
daemon's start-up (callgrind: 1,182M → 960M instructions to the first pong).
The modules that find and call a method (``async_dispatcher``,
``dispatcher``, ``request``, ``response``, ``result``) import none of that. So the package
module is created from its real spec without running ``__init__``, and its submodules are
imported under it. ``__init__`` runs, in that same module, the first time anyone asks the
package for a name it does not have yet (``jsonrpcserver.dispatch``, ``from jsonrpcserver
import method``): a later plain ``import jsonrpcserver`` in the process still gets the whole
package. If jsonrpcserver is already imported, it is used as it is.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any


def install_deferred_package(name: str) -> None:
    """Put package ``name`` in sys.modules with its ``__init__`` deferred to the first
    lookup of a missing attribute (a no-op when it is imported already)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an installed package", name=name)
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()
    running = False

    def __getattr__(attr: str) -> Any:  # the module's PEP 562 hook
        nonlocal running
        with lock:
            if running:  # asked by __init__ itself while it runs: let its import go on
                raise AttributeError(f"module {name!r} has no attribute {attr!r}")
            if module.__dict__.get("__getattr__") is __getattr__:
                running = True
                try:
                    assert spec.loader is not None
                    spec.loader.exec_module(module)
                finally:
                    running = False
                if module.__dict__.get("__getattr__") is __getattr__:  # not one __init__ defined
                    del module.__dict__["__getattr__"]
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module


install_deferred_package("jsonrpcserver")
# jsonrpcserver's results are oslash's Either: its __init__ imports every other monad too.
install_deferred_package("oslash")

from jsonrpcserver.async_dispatcher import call  # noqa: E402
from jsonrpcserver.dispatcher import to_response  # noqa: E402
from jsonrpcserver.request import Request  # noqa: E402
from jsonrpcserver.response import to_serializable_one  # noqa: E402
from jsonrpcserver.result import Error, SuccessResult  # noqa: E402
from jsonrpcserver.sentinels import NOID  # noqa: E402
from oslash.either import Right  # noqa: E402  # a success (jsonrpcserver: Right(SuccessResult))

__all__ = [
    "NOID",
    "Error",
    "Request",
    "Right",
    "SuccessResult",
    "call",
    "to_response",
    "to_serializable_one",
]
