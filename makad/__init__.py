"""makad: a local daemon that owns an AI agent's durable, white-box memory."""

import sys

__version__ = "0.1.0"


def _load_structlog_without_rich() -> None:
    """structlog imports rich (and pygments) whenever it is installed — maka's CLI needs it —
    only to render local variables and pretty tracebacks, both of which makad turns off
    (locals can hold memory content; exceptions are rendered plainly, ``makad.logs``). Hiding
    rich while structlog loads keeps those imports (about a tenth of the daemon's start-up)
    off the path to the first pong; rich stays importable afterwards."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_load_structlog_without_rich()
