"""Secrets in disguise and in odd places, through the real socket: hidden by invisible
characters, base64-wrapped, split across events, typed into MEMORY.md by the user, or
used as an identifier. None reaches the ledger, the backups or the log; the user's own
file keeps what they typed; the agent only ever sees it redacted."""

from __future__ import annotations

import base64
import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka.errors import RemoteError
from makad import logs
from makad.core.redaction import IDENTIFIER_PREFIX
from makad.core.secret_views import normalized_view
from makad.service.identifiers import KEY_BYTES, KEY_FILE, load_or_create_key
from tests.core.secret_corpus import CASES
from tests.robustness.planting import github_token
from tests.support import DaemonProcess

# Secrets that are one token (a split inside them is a split of the token).
TOKENS = [c for c in CASES if " " not in c.secret and "\n" not in c.secret and len(c.secret) >= 20]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e"]


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def stored_bytes(d: DaemonProcess, *, backups: bool = True) -> bytes:
    """Every byte the daemon keeps: ledger (with -wal), settings, backups, markers."""
    return b"".join(
        p.read_bytes()
        for p in sorted(d.data_dir.rglob("*"))
        if p.is_file() and (backups or "backups" not in p.parts)
    )


def pieces(secret: str, size: int = 10) -> list[str]:
    """Overlapping chunks of a secret: any one of them stored is a leak."""
    return [secret[i : i + size] for i in range(0, max(1, len(secret) - size + 1), 5)]


def seen(text: str) -> str:
    """Text as the detector reads it: invisible characters dropped, look-alikes folded."""
    view = normalized_view(text)
    return text if view is None else view.text


@st.composite
def disguised(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """(the secret, the event texts carrying it in disguise, what must not be stored)."""
    case = draw(st.sampled_from(TOKENS))
    how = draw(st.sampled_from(["invisible", "base64", "split", "split3", "fullwidth"]))
    text = case.text
    if how == "invisible":
        at = draw(st.lists(st.integers(1, len(case.secret) - 1), min_size=1, max_size=3))
        hidden = case.secret
        for position in sorted(at, reverse=True):
            hidden = hidden[:position] + draw(st.sampled_from(INVISIBLE)) + hidden[position:]
        return case.secret, [text.replace(case.secret, hidden)], []
    if how == "fullwidth":
        wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in case.secret)
        return case.secret, [text.replace(case.secret, wide)], []
    if how == "base64":
        encode = draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
        run = encode(text.encode()).decode()
        if draw(st.booleans()):
            run = run.rstrip("=")
        return case.secret, [f"the config blob is {run} (keep it)"], [run]
    start = text.index(case.secret)
    cuts = sorted(
        draw(
            st.lists(
                st.integers(start + 1, start + len(case.secret) - 1),
                min_size=1 if how == "split" else 2,
                max_size=1 if how == "split" else 2,
                unique=True,
            )
        )
    )
    bounds = [0, *cuts, len(text)]
    return case.secret, [text[a:b] for a, b in itertools.pairwise(bounds)], []


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(disguised())
def test_disguised_secrets_in_events_are_redacted(
    daemon: DaemonProcess, sample: tuple[str, list[str], list[str]]
) -> None:
    """A token hidden by zero-width or format characters, written in full-width forms,
    base64-wrapped, or split across two or three consecutive events of one append: the
    stored events hold no piece of it, and neither does any file of the data dir."""
    secret, texts, forms = sample
    sid = daemon.call("open_session", {"workspace": ws(daemon)})["sessionId"]
    result = daemon.call(
        "append_events",
        {
            "workspace": ws(daemon),
            "sessionId": sid,
            "events": [{"type": "user_message", "text": text} for text in texts],
        },
    )
    assert result["redactions"] >= 1
    stored = seen(
        "".join(
            e["text"]
            for e in daemon.call("read_events", {"workspace": ws(daemon), "sessionId": sid})["events"]
        )
    )
    needles = [*pieces(secret), *(p for form in forms for p in pieces(form))]
    assert [p for p in needles if p in stored] == []
    on_disk = seen(stored_bytes(daemon).decode("utf-8", "replace"))
    assert [p for p in needles if p in on_disk] == []


def test_non_secret_text_around_disguises_is_kept(daemon: DaemonProcess) -> None:
    """Invisible characters outside a secret, emoji sequences and ordinary base64 (binary
    data) are stored exactly as sent."""
    texts = [
        "family 👨\u200d👩\u200d👧 trip\u00ad planning\u200b done",
        "avatar AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFake",
        "see you",
        "tomorrow",
    ]
    sid = daemon.call("open_session", {"workspace": ws(daemon)})["sessionId"]
    result = daemon.call(
        "append_events",
        {
            "workspace": ws(daemon),
            "sessionId": sid,
            "events": [{"type": "user_message", "text": text} for text in texts],
        },
    )
    assert result["redactions"] == 0
    events = daemon.call("read_events", {"workspace": ws(daemon), "sessionId": sid})["events"]
    assert [e["text"] for e in events] == texts


def test_identifiers_holding_secrets_stay_distinct_and_usable(daemon: DaemonProcess) -> None:
    """A session id, request id or supersedes holding a secret is stored as a keyed stand-in:
    calls naming the raw id or the stand-in reach the same session, two secret ids stay two
    sessions, a retried request id returns the first result (also after a restart), and
    no id is on disk."""
    w = ws(daemon)
    raw = {name: github_token(name) for name in ("a", "b", "req1", "req2", "sup")}
    first = daemon.call("open_session", {"workspace": w, "sessionId": raw["a"]})["sessionId"]
    second = daemon.call("open_session", {"workspace": w, "sessionId": raw["b"]})["sessionId"]
    assert first.startswith(IDENTIFIER_PREFIX) and second.startswith(IDENTIFIER_PREFIX)
    assert first != second
    turn = [{"type": "user_message", "text": "hello"}]
    once = daemon.call(
        "append_events", {"workspace": w, "sessionId": raw["a"], "events": turn, "requestId": raw["req1"]}
    )
    again = daemon.call(
        "append_events", {"workspace": w, "sessionId": first, "events": turn, "requestId": raw["req1"]}
    )
    other = daemon.call(
        "append_events", {"workspace": w, "sessionId": raw["a"], "events": turn, "requestId": raw["req2"]}
    )
    assert once == again and other["firstSeq"] == once["lastSeq"] + 1
    assert daemon.call("read_events", {"workspace": w, "sessionId": raw["b"]})["events"] == []
    found = daemon.call("retrieve", {"workspace": w, "refs": [f"event:{raw['a']}:1"]})["results"]
    assert found[0]["ok"] and found[0]["events"][0]["text"] == "hello"
    daemon.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
    params = {
        "workspace": w,
        "title": "T",
        "content": "c",
        "sessionId": raw["a"],
        "sourceRefs": [f"event:{raw['a']}:1"],
    }
    with pytest.raises(RemoteError) as refused:  # it names no entry: refused, by its stand-in
        daemon.call("propose", {**params, "supersedes": raw["sup"]})
    assert refused.value.data["kind"] == "invalid_params"
    assert refused.value.data["supersedes"].startswith(IDENTIFIER_PREFIX)
    proposal = daemon.call("propose", params)["proposal"]
    assert proposal["sessionId"] == first
    assert proposal["sourceRefs"] == [f"event:{first}:1"]
    daemon.restart()
    assert len(daemon.call("read_events", {"workspace": w, "sessionId": raw["a"]})["events"]) == 2
    retried = daemon.call(
        "append_events", {"workspace": w, "sessionId": raw["a"], "events": turn, "requestId": raw["req2"]}
    )
    assert retried == other
    roots = [*daemon.data_dir.rglob("*"), daemon.stderr_path, *(daemon.workspace / "memory").iterdir()]
    leaked = [
        name for name, value in raw.items() for p in roots if p.is_file() and value.encode() in p.read_bytes()
    ]
    assert leaked == []


def save(path: Path, text: str) -> None:
    """Save the way most editors do: a temp file renamed over the original."""
    temp = path.with_name(".edit.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def entry(title: str, content: str, entry_id: str) -> str:
    return (
        f"## {title}\n<!-- maka-memory: id={entry_id} origin=manual createdAt=1 updatedAt=1 "
        f"status=active tags= -->\n{content}\n"
    )


def test_a_secret_typed_into_memory_md(daemon: DaemonProcess) -> None:
    """The user types two secrets into MEMORY.md. The file keeps them; build_context hands
    the agent the memory redacted; the ledger, stored request results and the log never
    hold them. Once the user deletes one by hand, no backup holds it any more (the other,
    still in the file, stays in the backups); deleting the second through the daemon
    scrubs it too, from the backup that very write made included."""
    w = ws(daemon)
    first, second = github_token("typed-1"), "sk-ant-api03-" + "Q" * 60 + "xyzAA"
    memory = daemon.workspace / "memory"
    memory.mkdir(mode=0o700)
    text = (
        "# Maka Memory\n\n"
        + entry("Deploy", f"the deploy token is {first}", "deploy00000001")
        + "\n"
        + entry("Claude", f"claude key {second}", "claude00000001")
    )
    (memory / "MEMORY.md").write_text(text)
    daemon.call("set_settings", {"workspace": w, "agentReadEnabled": True})
    sid = daemon.call("open_session", {"workspace": w})["sessionId"]
    daemon.call(
        "append_events",
        {
            "workspace": w,
            "sessionId": sid,
            "events": [{"type": "user_message", "text": "what is the deploy token?"}],
        },
    )
    pack = daemon.call(
        "build_context",
        {"workspace": w, "sessionId": sid, "budgetTokens": 3000, "query": "deploy token claude key"},
    )
    shown = json.dumps(pack)
    assert "[REDACTED:github_token]" in shown and "[REDACTED:anthropic_key]" in shown
    assert first not in shown and second not in shown
    daemon.call("add_entry", {"workspace": w, "title": "Other", "content": "unrelated"})
    daemon.call("archive_entry", {"workspace": w, "id": "deploy00000001", "requestId": "arch-1"})
    daemon.call("restore_entry", {"workspace": w, "id": "deploy00000001", "requestId": "rest-1"})
    assert first in (memory / "MEMORY.md").read_text() and second in (memory / "MEMORY.md").read_text()
    outside_backups = stored_bytes(daemon, backups=False) + daemon.stderr_path.read_bytes()
    assert first.encode() not in outside_backups and second.encode() not in outside_backups
    assert first.encode() in stored_bytes(daemon)  # the daemon's backups of the live file

    current = (memory / "MEMORY.md").read_text()
    save(memory / "MEMORY.md", current.replace(f"the deploy token is {first}", "rotated"))
    daemon.call("read_state", {"workspace": w})  # the daemon notices the edit
    assert first.encode() not in stored_bytes(daemon)
    assert second.encode() in stored_bytes(daemon)
    backups = daemon.call("list_backups", {"workspace": w})["backups"]
    restored = [
        daemon.call("restore_backup", {"workspace": w, "backupId": b["backupId"]}) for b in backups[-1:]
    ]
    assert restored and first not in (memory / "MEMORY.md").read_text()

    daemon.call("delete_entry", {"workspace": w, "id": "claude00000001"})
    assert second not in (memory / "MEMORY.md").read_text()
    assert second.encode() not in stored_bytes(daemon)
    assert first.encode() not in stored_bytes(daemon)


def test_log_lines_are_redacted_exception_text_included(capsys: pytest.CaptureFixture[str]) -> None:
    """A log line naming a workspace whose directory name holds a token, and an exception
    whose message holds one, are written with both redacted (JSON and console formats)."""
    token = github_token("log")
    try:
        for log_format in ("json", "console"):
            logs.configure(log_format, "info")
            log = structlog.get_logger("test")
            try:
                raise FileNotFoundError(f"/home/u/{token}/memory/MEMORY.md")
            except FileNotFoundError:
                log.error("request_crashed", workspace=f"/home/u/{token}", ref="x", exc_info=True)
            log.info("opened", paths=[f"/srv/{token}"], nested={"dir": token})
            written = capsys.readouterr().err
            assert "request_crashed" in written and "[REDACTED:github_token]" in written
            assert token not in written and token[-16:] not in written
    finally:
        structlog.reset_defaults()


def test_redacted_logs_keep_ordinary_values() -> None:
    """The redaction processor leaves lines without secrets as they were."""
    event: dict[str, Any] = {
        "event": "listening",
        "socket": "/run/maka.sock",
        "pid": 12,
        "nested": {"ok": [1, "two"]},
    }
    assert logs.redact_event(None, "info", dict(event)) == event


def test_identifier_key_is_made_once_private_and_whole(short_tmp: Path) -> None:
    """The identifier key is created with mode 0600, read back unchanged by every later
    start, and a damaged (wrong-size) key file is replaced rather than trusted."""
    key = load_or_create_key(short_tmp)
    path = short_tmp / KEY_FILE
    assert len(key) == KEY_BYTES and path.stat().st_mode & 0o777 == 0o600
    assert load_or_create_key(short_tmp) == key
    assert [p.name for p in short_tmp.iterdir()] == [KEY_FILE]  # no temp file left behind
    path.write_bytes(b"short")
    fresh = load_or_create_key(short_tmp)
    assert len(fresh) == KEY_BYTES and fresh != key
