"""The LLM curator over the socket, against a scripted OpenAI-compatible server on loopback.

The daemon's behaviour is under test, not a model's quality: the server answers as
each test scripts it (a good pick, an unknown ref, garbage, a hang past the timeout,
HTTP 500, a server without JSON mode) and records every request it got.
"""

from __future__ import annotations

import itertools
import json
import re
import select
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from tests.fake_chat import FakeChat, completion, serving
from tests.support import DaemonProcess, RawConnection, daemon_in_tmp

TIMEOUT_MS = 2_000  # short, yet room for a loaded machine (two test workers and more) to answer in time
HANG_S = 4.0
FLOOD = 3_000  # refs of ~120 characters: the answer stays under the size cap
MODEL = "scripted-curator"
API_KEY = "test-key-123"


class Script(FakeChat):
    """What the server answers next (``mode``), and what it was sent."""

    def __init__(self) -> None:
        super().__init__(self.answer)
        self.mode = "good"
        self.marker = "Berlin"  # "good" picks the offered refs whose text has this word
        self.hanging = threading.Event()  # set once a "hang" holds a request
        self.release = threading.Event()  # ends a "hang" before HANG_S

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        mode = self.mode
        if mode == "absurd_usage":  # the picks "good" makes, with usage counts made up
            prompt = body["messages"][-1]["content"]
            picks = [x.split(" | ", 1)[0] for x in prompt.splitlines() if " | " in x and self.marker in x]
            reply = completion(json.dumps({"selected": picks}))
            reply["usage"] = {"prompt_tokens": 10**30, "completion_tokens": True}
            return 200, reply
        if mode == "hang":
            self.hanging.set()
            self.release.wait(HANG_S)
        if mode == "http500":
            return 500, {"error": "boom"}
        if mode == "no_json_mode" and "response_format" in body:
            return 400, {"error": "response_format is not supported"}
        if mode == "not_a_completion":
            return 200, "<html>proxy error</html>"
        if mode == "endless":  # a valid start, then padding that never ends
            return 200, itertools.chain(
                [b'{"choices": [{"message": {"content": "'], itertools.repeat(b" " * 65536)
            )
        if mode == "flood":  # thousands of refs never offered, one of them 100,000 characters long
            refs = [f"memory:unoffered-{i}-" + "x" * 100 for i in range(FLOOD)] + ["event:" + "y" * 100_000]
            return 200, completion(json.dumps({"selected": refs}))
        prompt = body["messages"][-1]["content"]
        marked = [
            line.split(" | ", 1)[0] for line in prompt.splitlines() if " | " in line and self.marker in line
        ]
        if mode == "garbage":
            content = "I think you should look at the Berlin one!"
        elif mode == "unknown":
            content = json.dumps({"selected": ["memory:not-offered", "event:nope:1"]})
        elif mode == "mixed":
            content = json.dumps({"selected": ["memory:not-offered", *marked]})
        elif mode == "empty":
            content = json.dumps({"selected": []})
        elif mode == "padded":  # a good pick, then megabytes of spaces
            content = json.dumps({"selected": marked}) + " " * (3 << 20)
        else:
            content = json.dumps({"selected": marked})
        return 200, completion(content)


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def endpoint(script: Script) -> Iterator[str]:
    with serving(script) as base:
        yield f"{base}/v1"


@pytest.fixture(scope="module")
def curated_daemon(endpoint: str) -> Iterator[DaemonProcess]:
    yield from daemon_in_tmp(curator_env(endpoint))


def curator_env(endpoint: str) -> dict[str, str]:
    return {
        "MAKAD_CURATOR_URL": endpoint,
        "MAKAD_CURATOR_MODEL": MODEL,
        "MAKAD_CURATOR_API_KEY": API_KEY,
        "MAKAD_CURATOR_TIMEOUT_MS": str(TIMEOUT_MS),
    }


_names = itertools.count()


@pytest.fixture
def d(curated_daemon: DaemonProcess, script: Script) -> DaemonProcess:
    """The module's daemon, the server reset to a good pick."""
    script.mode, script.marker = "good", "Berlin"
    script.hanging.clear()
    script.release.clear()
    script.clear()
    return curated_daemon


@pytest.fixture
def ws(curated_daemon: DaemonProcess) -> str:
    path = curated_daemon.root / f"w{next(_names)}"
    path.mkdir()
    return str(path)


def open_session(d: DaemonProcess, ws: str, **kw: Any) -> str:
    sid: str = d.call("open_session", {"workspace": ws, **kw})["sessionId"]
    return sid


def append(d: DaemonProcess, ws: str, sid: str, *texts: str) -> None:
    events = [
        {"type": "user_message" if i % 2 == 0 else "assistant_message", "text": t}
        for i, t in enumerate(texts)
    ]
    d.call("append_events", {"workspace": ws, "sessionId": sid, "events": events})


FILLERS = 80  # reports sharing no word with the query: with them memory does not all fit


def add_fillers(d: DaemonProcess, ws: str) -> None:
    """The filler entries, saved into MEMORY.md at once as ``add_entry`` would have written
    each (80 calls rewrite the file 80 times), and taken in before this returns."""
    memory = Path(ws) / "memory" / "MEMORY.md"
    now = int(time.time() * 1000)
    fillers = "".join(
        f"\n## Report {index}\n<!-- maka-memory: id={index:016x} origin=manual createdAt={now} "
        f"updatedAt={now} status=active -->\nQuarterly report {index}: " + "figures and tables " * 12 + "\n"
        for index in range(FILLERS)
    )
    before = len(d.call("read_state", {"workspace": ws, "includeEntries": True})["entries"])
    memory.write_text(memory.read_text() + fillers)
    entries = d.call("read_state", {"workspace": ws, "includeEntries": True})["entries"]
    assert len(entries) == before + FILLERS


def seed(d: DaemonProcess, ws: str, *, crowded: bool = True) -> dict[str, str]:
    """Memory and an earlier session, about two cities; the question session; ids by name.

    ``crowded``: with filler entries that do not all fit in memory's share, so memory is
    under pressure and the curator is asked; without them everything fits."""
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    ids = {}
    for title, content in [
        ("Move", "Ann moved to Berlin in May 2023."),
        ("Trip", "Ann visited Lisbon in June; the Berlin flat was being painted."),
        ("Editor", "Ann edits code in neovim."),
        ("Token", "The Berlin deploy key is AKIAABCDEFGHIJKLMNOP."),
    ]:
        ids[title] = d.call("add_entry", {"workspace": ws, "title": title, "content": content})["entry"]["id"]
    if crowded:
        add_fillers(d, ws)
    old = open_session(d, ws)
    append(d, ws, old, "Where did Ann move?", "She moved to Berlin, near the river.", "Nice city, Berlin.")
    ids["old"] = old
    ids["sid"] = open_session(d, ws)
    append(d, ws, ids["sid"], "Which city did Ann move to, Berlin or Lisbon?")
    return ids


def seed_crowded_recall(d: DaemonProcess, ws: str) -> dict[str, str]:
    """Seven short memory entries that fit whole, and far more recalled Berlin events than
    fit: recall alone is under pressure. One event mentions a zebra."""
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "historyRecallEnabled": True})
    ids = {}
    for index in range(7):
        entry = d.call(
            "add_entry", {"workspace": ws, "title": f"Fact {index}", "content": f"Ann's Berlin fact {index}."}
        )["entry"]
        ids[f"fact{index}"] = entry["id"]
    old = open_session(d, ws)
    texts = [f"Ann in Berlin, day {i}: " + "walked along the river and met friends " * 3 for i in range(120)]
    texts[77] = "Ann in Berlin saw a zebra at the zoo."
    append(d, ws, old, *texts)
    ids["old"] = old
    ids["sid"] = open_session(d, ws)
    append(d, ws, ids["sid"], "Which city did Ann move to, Berlin or Lisbon?")
    return ids


def build(d: DaemonProcess, ws: str, **kw: Any) -> tuple[dict[str, Any], float]:
    params = {
        "workspace": ws,
        "budgetTokens": kw.pop("budgetTokens", 3000),
        "query": "Ann move city Berlin",
        **kw,
    }
    started = time.monotonic()
    pack: dict[str, Any] = d.call("build_context", params)
    return pack, time.monotonic() - started


def shown(pack: dict[str, Any]) -> list[str]:
    return [c["sourceId"] for c in pack["trace"]["candidates"] if c["included"]]


def visible(pack: dict[str, Any]) -> tuple[Any, ...]:
    """What the model would see of a pack (its trace aside)."""
    return pack["segments"], pack["messages"], pack["totalTokens"]


def timeless(pack: dict[str, Any]) -> dict[str, Any]:
    """A pack without the recency part of its scores, which moves with the clock between
    two calls (1.0, then 0.999999)."""
    out = dict(pack, trace=dict(pack["trace"]))
    out["trace"]["candidates"] = [
        dict(c, parts={k: v for k, v in c.get("parts", {}).items() if k != "recency"}, score=None)
        for c in pack["trace"]["candidates"]
    ]
    return out


def stored_record(d: DaemonProcess, ws: str, sid: str, call_id: str) -> dict[str, Any]:
    """The curator's part kept with one call's manifest, as get_manifest returns it."""
    record: dict[str, Any] = d.call("get_manifest", {"workspace": ws, "sessionId": sid, "callId": call_id})[
        "curator"
    ]
    return record


# ------------------------------------------------------------------ the pick ---


def test_curator_uses_the_models_pick_within_budget(d: DaemonProcess, ws: str, script: Script) -> None:
    """strategy curator: the offered refs the model picked are what is shown; trace.path slow."""
    ids = seed(d, ws)
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    curator = pack["trace"]["curator"]
    assert pack["trace"]["path"] == "slow" and pack["trace"]["strategy"] == "curator"
    assert curator["status"] == "ok" and curator["model"] == MODEL and curator["shadow"] is False
    assert (curator["promptTokens"], curator["completionTokens"]) == (321, 12)
    assert curator["selected"] and curator["latencyMs"] > 0 and curator["pressure"] == ["memory"]
    memory = [ref for ref in shown(pack) if ref.startswith("memory:")]
    assert set(memory) <= set(curator["selected"]) and curator["packed"] == shown(pack)
    # recall fit whole: the pick changes memory only, the earlier session's events stay
    assert {ref for ref in shown(pack) if ref.startswith("event:")} == {
        f"event:{ids['old']}:{seq}" for seq in (1, 2, 3)
    }
    assert f"memory:{ids['Move']}" in shown(pack) and f"memory:{ids['Editor']}" not in shown(pack)
    reasons = {c["sourceId"]: c.get("reason") for c in pack["trace"]["candidates"]}
    assert reasons[f"memory:{ids['Editor']}"] == "not_selected"
    assert pack["totalTokens"] <= pack["budgetTokens"]
    (request,) = script.requests
    assert request["path"] == "/v1/chat/completions" and request["auth"] == f"Bearer {API_KEY}"
    assert request["body"]["model"] == MODEL
    assert request["body"]["response_format"] == {"type": "json_object"}
    assert stored_record(d, ws, ids["sid"], pack["callId"])["selected"] == curator["selected"]


def test_usage_counts_a_server_makes_up_are_reported_as_unknown(
    d: DaemonProcess, ws: str, script: Script
) -> None:
    """A server claiming 10^30 prompt tokens and ``true`` completion tokens: its pick is
    used, and the trace and the stored record say 0 (unknown), a count every client reads."""
    ids = seed(d, ws)
    script.mode = "absurd_usage"
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    curator = pack["trace"]["curator"]
    assert pack["trace"]["path"] == "slow" and curator["status"] == "ok"
    assert (curator["promptTokens"], curator["completionTokens"]) == (0, 0)
    assert stored_record(d, ws, ids["sid"], pack["callId"])["promptTokens"] == 0


def test_refs_the_curator_was_not_shown_are_ignored(d: DaemonProcess, ws: str, script: Script) -> None:
    """A pick naming unoffered refs besides offered ones: only the offered count, the rest are listed."""
    ids = seed(d, ws)
    script.mode, script.marker = "mixed", "neovim"
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    assert pack["trace"]["path"] == "slow"
    assert [ref for ref in shown(pack) if ref.startswith("memory:")] == [f"memory:{ids['Editor']}"]
    assert pack["trace"]["curator"]["ignored"] == ["memory:not-offered"]
    script.mode = "unknown"
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator", budgetTokens=2999)
    curator = pack["trace"]["curator"]
    assert pack["trace"]["path"] == "fallback" and curator["reason"] == "no_known_refs"
    assert curator["ignored"] == ["memory:not-offered", "event:nope:1"] and curator["selected"] == []
    assert "memory:not-offered" not in str(pack["segments"])


def test_curator_shadow_returns_the_deterministic_pack_and_keeps_the_choice(
    d: DaemonProcess, ws: str, script: Script
) -> None:
    """curator_shadow: exactly the deterministic pack; the model's choice in the trace and the ledger."""
    ids = seed(d, ws)
    script.marker = "neovim"  # a pick that would differ from the deterministic one
    deterministic, _ = build(d, ws, strategy="deterministic")
    # The default call: the same pack, the same call id.
    assert timeless(build(d, ws)[0]) == timeless(deterministic)
    shadow, _ = build(d, ws, strategy="curator_shadow")
    assert visible(shadow) == visible(deterministic)
    assert shadow["trace"]["path"] == deterministic["trace"]["path"] != "slow"
    assert shadow["trace"]["curator"]["shadow"] is True
    assert shadow["trace"]["curator"]["selected"] == [f"memory:{ids['Editor']}"]
    in_session, _ = build(d, ws, sessionId=ids["sid"], strategy="curator_shadow")
    record = stored_record(d, ws, ids["sid"], in_session["callId"])
    assert record["shadow"] is True and record["selected"] == [f"memory:{ids['Editor']}"]
    assert record["model"] == MODEL and record["promptTokens"] == 321


def test_get_manifest_shows_the_shadow_pick_beside_what_was_shown(
    d: DaemonProcess, ws: str, script: Script
) -> None:
    """get_manifest: what was shown (items) and what the shadow curator would have shown, with
    their overlap; a deterministic call's manifest has no curator part."""
    ids = seed(d, ws)
    script.marker = "neovim"
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator_shadow")
    manifest = d.call("get_manifest", {"workspace": ws, "sessionId": ids["sid"], "callId": pack["callId"]})
    curator = manifest["curator"]
    assert curator == pack["trace"]["curator"]
    assert curator["shadow"] is True and curator["status"] == "ok"
    assert curator["selected"] == [f"memory:{ids['Editor']}"]
    items = [item["sourceId"] for item in manifest["items"]]
    assert f"memory:{ids['Move']}" in items and f"memory:{ids['Editor']}" in items
    # the pick would show Editor alone of memory, and the same recalled events
    assert f"memory:{ids['Editor']}" in curator["packed"]
    assert f"memory:{ids['Move']}" not in curator["packed"]
    assert f"event:{ids['old']}:2" in curator["packed"]
    shown_det = set(shown(pack))
    expected = len(shown_det & set(curator["packed"])) / len(shown_det | set(curator["packed"]))
    assert curator["overlap"] == pytest.approx(expected, abs=1e-4) and 0 < curator["overlap"] < 1
    assert d.call("get_manifest", {"workspace": ws, "sessionId": ids["sid"]})["curator"] == curator
    plain, _ = build(d, ws, sessionId=ids["sid"], strategy="deterministic", budgetTokens=2900)
    latest = d.call("get_manifest", {"workspace": ws, "sessionId": ids["sid"]})
    assert latest["callId"] == plain["callId"] and latest["curator"] is None


# ---------------------------------------------------------------- fast path ---


@pytest.mark.parametrize("name", ["curator", "curator_shadow"])
def test_nothing_is_asked_when_everything_fits(d: DaemonProcess, ws: str, script: Script, name: str) -> None:
    """Every candidate fits: no request reaches the model, the deterministic pack, path fast
    (shadow: the deterministic path), curator skipped because it fits."""
    seed(d, ws, crowded=False)
    deterministic, _ = build(d, ws, strategy="deterministic", budgetTokens=8000)
    pack, _ = build(d, ws, strategy=name, budgetTokens=8000)
    assert script.requests == []
    assert visible(pack) == visible(deterministic)
    curator = pack["trace"]["curator"]
    assert (curator["status"], curator["reason"], curator["pressure"]) == ("skipped", "fits", [])
    assert curator["offered"] == 0 and curator["latencyMs"] == 0
    expected = deterministic["trace"]["path"] if name == "curator_shadow" else "fast"
    assert pack["trace"]["path"] == expected
    assert len([ref for ref in shown(pack) if ref.startswith("memory:")]) == 4


def test_without_an_endpoint_a_call_that_fits_is_fast(shared_daemon: DaemonProcess) -> None:
    """No model configured and nothing to choose: path fast, not a fallback."""
    ws = str(shared_daemon.workspace)
    ids = seed(shared_daemon, ws, crowded=False)
    pack, _ = build(shared_daemon, ws, sessionId=ids["sid"], strategy="curator")
    assert pack["trace"]["path"] == "fast" and pack["trace"]["curator"]["status"] == "skipped"


def test_a_narrow_pick_never_drops_the_memory_that_fit(d: DaemonProcess, ws: str, script: Script) -> None:
    """Recall under pressure, memory fitting whole, a one-event pick: all the memory the
    deterministic pack carried stays, beside the picked event; only recall was offered."""
    ids = seed_crowded_recall(d, ws)
    script.marker = "zebra"
    deterministic, _ = build(d, ws, strategy="deterministic")  # no session: nothing counts as shown
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    curator = pack["trace"]["curator"]
    assert pack["trace"]["path"] == "slow" and curator["pressure"] == ["recall"]
    memory = [ref for ref in shown(deterministic) if ref.startswith("memory:")]
    assert len(memory) == 7
    zebra = f"event:{ids['old']}:78"
    assert curator["selected"] == [zebra] and curator["trimmed"] == 0
    assert shown(pack) == [*memory, zebra] == curator["packed"]
    assert [m["sourceId"] for m in pack["messages"]] == [f"event:{ids['sid']}:1"]
    (request,) = script.requests
    offered = re.findall(r"^(\S+) \|", request["body"]["messages"][-1]["content"], re.M)
    assert offered and all(ref.startswith("event:") for ref in offered)
    assert len(offered) == curator["offered"] <= 40


# ----------------------------------------------------------------- failures ---


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("hang", "timeout"),
        ("http500", "http_500"),
        ("garbage", "unparseable"),
        ("not_a_completion", "unparseable"),
        ("empty", "empty"),
    ],
)
def test_every_failure_falls_back_within_the_timeout(
    d: DaemonProcess, ws: str, script: Script, mode: str, reason: str
) -> None:
    """Timeout, HTTP error, garbage, empty: the deterministic pack, path fallback, the reason, in time."""
    seed(d, ws)
    deterministic, _ = build(d, ws, strategy="deterministic")
    script.mode = mode
    pack, elapsed = build(d, ws, strategy="curator")
    assert pack["trace"]["path"] == "fallback"
    assert pack["trace"]["curator"]["status"] == "failed" and pack["trace"]["curator"]["reason"] == reason
    assert visible(pack) == visible(deterministic)
    assert elapsed < TIMEOUT_MS / 1000 + 1.0  # the timeout plus the call's own work
    assert d.call("ping") == "pong"


def test_a_flood_of_unoffered_refs_is_listed_only_in_part(d: DaemonProcess, ws: str, script: Script) -> None:
    """3,000 unoffered refs named: fallback, at most 20 of them, each cut, in the trace and the ledger."""
    ids = seed(d, ws)
    script.mode = "flood"
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    curator = pack["trace"]["curator"]
    assert pack["trace"]["path"] == "fallback" and curator["reason"] == "no_known_refs"
    for record in (curator, stored_record(d, ws, ids["sid"], pack["callId"])):
        assert 0 < len(record["ignored"]) <= 20
        assert all(len(ref) <= 200 for ref in record["ignored"])
    assert d.call("ping") == "pong"


@pytest.mark.parametrize("mode", ["padded", "endless"])
def test_an_oversized_answer_is_refused_as_soon_as_it_is_too_large(
    d: DaemonProcess, ws: str, script: Script, mode: str
) -> None:
    """An answer over 1 MiB (a good pick padded, a body without end): fallback too_large, before the timeout."""
    seed(d, ws)
    deterministic, _ = build(d, ws, strategy="deterministic")
    script.mode = mode
    pack, elapsed = build(d, ws, strategy="curator")
    assert pack["trace"]["path"] == "fallback"
    assert pack["trace"]["curator"]["reason"] == "too_large"
    assert visible(pack) == visible(deterministic)
    assert elapsed < TIMEOUT_MS / 1000  # stopped reading at the cap, not at the deadline
    assert d.call("ping") == "pong"


def test_a_server_without_json_mode_is_asked_again_in_plain_text(
    d: DaemonProcess, ws: str, script: Script
) -> None:
    """HTTP 400 to response_format: one retry without it, and its pick is used."""
    ids = seed(d, ws)
    script.mode = "no_json_mode"
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    assert pack["trace"]["path"] == "slow"
    assert ["response_format" in r["body"] for r in script.requests] == [True, False]


def test_a_hang_does_not_block_other_clients(
    short_tmp: Path, endpoint: str, d: DaemonProcess, script: Script
) -> None:
    """While the curator waits on a hung server, the daemon answers other requests: a ping
    sent once the server holds the curator's request is answered before the build's reply
    (an order, not a time), and the build goes on once the server answers."""
    # A timeout no loaded machine reaches: the server holds the request until released.
    patient = DaemonProcess(short_tmp, env={**curator_env(endpoint), "MAKAD_CURATOR_TIMEOUT_MS": "60000"})
    patient.start()
    try:
        ws = str(patient.workspace)
        seed(patient, ws)
        script.mode = "hang"
        params = {
            "workspace": ws,
            "budgetTokens": 3000,
            "query": "Ann move city Berlin",
            "strategy": "curator",
        }
        with RawConnection(patient.socket, timeout=60) as builder, RawConnection(patient.socket) as pinger:
            builder.send(
                json.dumps({"jsonrpc": "2.0", "id": "build", "method": "build_context", "params": params})
            )
            assert script.hanging.wait(30)
            assert pinger.request({"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == "pong"
            assert not builder.buffer and not select.select([builder.sock], [], [], 0)[0]
            script.release.set()
            reply = builder.recv_message()
        curator = reply["result"]["trace"]["curator"]
        assert reply["result"]["trace"]["path"] == "slow" and curator["status"] == "ok"
    finally:
        patient.stop()


# ------------------------------------------------------------------ privacy ---


def _sent(script: Script) -> str:
    return json.dumps([r["body"] for r in script.requests])


def test_nothing_is_sent_when_reads_are_off_or_incognito(d: DaemonProcess, ws: str, script: Script) -> None:
    """Agent reads off, workspace incognito, incognito session: no request, path fallback (gated)."""
    ids = seed(d, ws)
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": False})
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    assert pack["trace"]["curator"]["status"] == "gated" and pack["trace"]["path"] == "fallback"
    d.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "incognito": True})
    pack, _ = build(d, ws, strategy="curator_shadow")
    assert pack["trace"]["curator"]["status"] == "gated"
    d.call("set_settings", {"workspace": ws, "incognito": False})
    hidden = open_session(d, ws, incognito=True)
    append(d, ws, hidden, "Where is Ann? In Berlin.")
    pack, _ = build(d, ws, sessionId=hidden, strategy="curator")
    assert pack["trace"]["curator"]["status"] == "gated"
    assert script.requests == []


def test_what_is_sent_is_redacted_and_never_scoped_elsewhere(
    d: DaemonProcess, ws: str, script: Script
) -> None:
    """Secrets are redacted and another session's scoped entry is never offered."""
    ids = seed(d, ws)
    other = open_session(d, ws)
    d.call(
        "add_entry",
        {
            "workspace": ws,
            "title": "Scratch",
            "content": "Berlin scratchpad for the other session only: gate-9931",
            "scope": "session",
            "sessionId": other,
        },
    )
    pack, _ = build(d, ws, sessionId=ids["sid"], strategy="curator")
    sent = _sent(script)
    assert f"memory:{ids['Token']}" in sent and "AKIAABCDEFGHIJKLMNOP" not in sent
    assert "gate-9931" not in sent and "gate-9931" not in str(pack["segments"])
    # the live history of the asking session is never offered as a candidate
    assert not re.search(rf"event:{ids['sid']}:\d+ \|", sent)


# ----------------------------------------------------------- setting, status ---


def test_the_workspace_setting_chooses_the_strategy_and_status_counts_paths(
    d: DaemonProcess, ws: str, script: Script
) -> None:
    """contextStrategy applies when a call names none; status counts fast/slow/fallback per workspace."""
    ids = seed(d, ws)
    settings = d.call("set_settings", {"workspace": ws, "contextStrategy": "curator"})
    assert settings["contextStrategy"] == "curator"
    pack, _ = build(d, ws, sessionId=ids["sid"])
    assert pack["trace"]["strategy"] == "curator" and pack["trace"]["path"] == "slow"
    script.mode = "http500"
    build(d, ws, sessionId=ids["sid"], budgetTokens=2500)
    build(d, ws, strategy="deterministic", query=None)
    (counts,) = [c for c in d.call("status")["contextPaths"] if c["workspace"] == ws]
    assert (counts["slow"], counts["fallback"], counts["fast"] + counts["bounded"]) == (1, 1, 1)
    with pytest.raises(RemoteError) as bad:
        d.call("set_settings", {"workspace": ws, "contextStrategy": "psychic"})
    assert bad.value.kind == "invalid_params"
    with pytest.raises(RemoteError) as bad_call:
        build(d, ws, strategy="psychic")
    assert bad_call.value.kind == "invalid_params"
    assert d.call("get_settings", {"workspace": ws})["contextStrategy"] == "curator"


def test_without_an_endpoint_the_curator_falls_back_unconfigured(shared_daemon: DaemonProcess) -> None:
    """No MAKAD_CURATOR_URL and memory under pressure: the deterministic pack, path fallback,
    reason unconfigured."""
    ws = str(shared_daemon.workspace)
    seed(shared_daemon, ws)
    pack, _ = build(shared_daemon, ws, strategy="curator", budgetTokens=2998)
    assert pack["trace"]["path"] == "fallback"
    assert pack["trace"]["curator"]["status"] == "unconfigured"
