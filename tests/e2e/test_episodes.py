"""Episodes and evidence-gated profile proposals over the socket."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import MakaError, RemoteError
from makad.core.episodes import close_summary, close_tags, digest, episode_tags, slug
from makad.core.types import EpisodeRecord, WorkingState
from makad.errors import InvalidParams
from tests.cli.helpers import run_maka
from tests.support import DaemonProcess, daemon_in_tmp


@pytest.fixture(scope="module")
def shared() -> Iterator[DaemonProcess]:
    """One daemon for the tests that never restart it (each gets its own workspace)."""
    yield from daemon_in_tmp()


@pytest.fixture
def d(shared: DaemonProcess) -> DaemonProcess:
    """The shared daemon pointed at a fresh workspace."""
    shared.workspace = Path(tempfile.mkdtemp(prefix="ws", dir=shared.root))
    return shared


SECRET = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n"


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def call(d: DaemonProcess, method: str, **params: Any) -> Any:
    return d.call(method, {"workspace": ws(d), **params})


def open_gate(d: DaemonProcess) -> None:
    call(d, "set_settings", agentReadEnabled=True, extractToolEnabled=True)


def session(d: DaemonProcess, *texts: str, **kw: Any) -> str:
    """A session holding these user messages."""
    sid: str = call(d, "open_session", **kw)["sessionId"]
    if texts:
        call(d, "append_events", sessionId=sid, events=[{"type": "user_message", "text": t} for t in texts])
    return sid


def record(d: DaemonProcess, sid: str, summary: str, tags: list[str], **kw: Any) -> str:
    kw.setdefault("sourceRefs", [f"event:{sid}:1"])
    episode_id: str = call(d, "record_episode", sessionId=sid, summary=summary, tags=tags, **kw)["episodeId"]
    return episode_id


def expect(d: DaemonProcess, kind: str, method: str, **params: Any) -> dict[str, Any]:
    with pytest.raises(RemoteError) as info:
        d.call(method, {"workspace": ws(d), **params})
    assert info.value.kind == kind, info.value.data
    data: dict[str, Any] = info.value.data
    return data


def evidence(
    d: DaemonProcess, tag: str, count: int, sessions: int = 2, said: str = "came up again"
) -> list[str]:
    """``count`` episodes tagged ``tag`` spread round-robin over ``sessions`` sessions."""
    sids = [session(d, f"{tag} remark {i}") for i in range(sessions)]
    return [record(d, sids[i % sessions], f"{tag} {said} ({i})", [tag]) for i in range(count)]


def candidates(d: DaemonProcess, **kw: Any) -> dict[str, dict[str, Any]]:
    return {c["tag"]: c for c in call(d, "consolidation_candidates", **kw)["candidates"]}


def pending_bytes(d: DaemonProcess) -> bytes | None:
    path = d.workspace / "memory" / "PENDING.md"
    return path.read_bytes() if path.exists() else None


# --- pure rules ---------------------------------------------------------------------------


def test_tags_are_normalized_slugs() -> None:
    """Tags are case-folded with runs of punctuation and spaces as one dash, de-duplicated."""
    assert slug("  Green Tea!! ") == "green-tea" and slug("C++/Rust") == "c-rust"
    assert episode_tags(["Green tea", "green_TEA", "中文 标签"]) == ["green-tea", "中文-标签"]
    with pytest.raises(InvalidParams):
        episode_tags(["!!!"])


def test_close_summary_and_tags_are_deterministic() -> None:
    """The close episode: goals then decisions on one line; hashtags win over keywords."""
    state = WorkingState(goals=["Speed up\nthe parser"], decisions=["use sqlite", "keep sqlite WAL"])
    assert close_summary(state) == "Goals: Speed up the parser — Decisions: use sqlite; keep sqlite WAL"
    assert close_tags(state) == ["sqlite", "speed", "parser"]
    assert close_tags(WorkingState(decisions=["prefer #Tabs in #go-code"])) == ["tabs", "go-code"]
    assert close_summary(WorkingState(open_threads=["x"])) is None
    long = close_summary(WorkingState(goals=["word " * 100]))
    assert long is not None and len(long) == 200 and long.endswith("…")


def test_close_tags_in_chinese_and_japanese_are_words_not_sentences() -> None:
    """Goals written without spaces give their kanji compounds and katakana words as tags
    (so they can repeat across sessions and be consolidated), never the whole sentence;
    hiragana particles and a long Chinese phrase give none."""
    japanese = WorkingState(
        goals=["構造化ログを導入する", "ログの形式を決める"], decisions=["ログは構造化する"]
    )
    assert close_tags(japanese) == ["ログ", "構造化", "導入"]
    assert close_tags(WorkingState(goals=["引入结构化日志并统一所有服务的格式"])) == []
    assert close_tags(WorkingState(goals=["用 sqlite 存储 日志"])) == ["sqlite", "存储", "日志"]
    assert close_tags(WorkingState(goals=["로그 형식을 통일한다"])) == ["로그", "형식을", "통일한다"]


def test_digest_names_tag_counts_and_episode_lines() -> None:
    """The digest proposal: 'recurring: <tag> — N episodes across M sessions' and one line each."""
    eps = [
        EpisodeRecord(
            episode_id=f"e{i}",
            session_id=f"s{i % 2}",
            kind="client",
            summary=f"said {i}",
            tags=["tea"],
            source_refs=[],
            at=0,
            created_at=0,
            ordinal=i,
        )
        for i in range(3)
    ]
    title, content = digest("tea", eps)
    assert title == "Recurring: tea"
    assert content.splitlines() == [
        "recurring: tea — 3 episodes across 2 sessions",
        "- 1970-01-01 said 0",
        "- 1970-01-01 said 1",
        "- 1970-01-01 said 2",
    ]


# --- recording ------------------------------------------------------------------------------


def test_record_and_list_episodes(d: DaemonProcess) -> None:
    """An episode is stored redacted with slug tags and found by tag, session, time and id."""
    sid = session(d, "I always drink green tea", "and jasmine too")
    other = session(d, "unrelated")
    result = call(
        d,
        "record_episode",
        sessionId=sid,
        summary=f"likes tea {SECRET}",
        tags=["Green Tea", "drinks"],
        sourceRefs=[f"event:{sid}:1-2"],
        at=1_000,
    )
    assert result["recorded"] is True and result["redactions"] == 1
    episode = result["episode"]
    assert SECRET not in episode["summary"] and episode["tags"] == ["green-tea", "drinks"]
    assert episode["kind"] == "client" and episode["at"] == 1_000
    later = record(d, other, "something else", ["misc"], at=5_000)
    listed = lambda **kw: [e["episodeId"] for e in call(d, "list_episodes", **kw)["episodes"]]  # noqa: E731
    assert listed() == [result["episodeId"], later]
    assert listed(tag="GREEN tea") == [result["episodeId"]]
    assert listed(sessionId=other) == [later]
    assert listed(since=2_000) == [later]
    assert listed(ids=[f"episode:{later}"]) == [later]


def test_summary_is_one_short_line(d: DaemonProcess) -> None:
    """Empty or multi-line summaries are invalid_params, over 200 characters too_large."""
    sid = session(d, "hello")
    refs = [f"event:{sid}:1"]
    expect(d, "invalid_params", "record_episode", sessionId=sid, summary="  ", sourceRefs=refs)
    expect(d, "invalid_params", "record_episode", sessionId=sid, summary="a\nb", sourceRefs=refs)
    data = expect(d, "too_large", "record_episode", sessionId=sid, summary="x" * 201, sourceRefs=refs)
    assert data["limit"] == 200
    assert call(d, "list_episodes")["episodes"] == []


def test_source_refs_must_name_stored_events(d: DaemonProcess) -> None:
    """A ref to a missing event, a non-event ref or no ref at all is refused, naming the ref."""
    sid = session(d, "one message")
    data = expect(
        d,
        "invalid_params",
        "record_episode",
        sessionId=sid,
        summary="s",
        sourceRefs=[f"event:{sid}:1", f"event:{sid}:2"],
    )
    assert data["ref"] == f"event:{sid}:2" and data["missingSeqs"] == [2]
    assert (
        expect(d, "invalid_params", "record_episode", sessionId=sid, summary="s", sourceRefs=["memory:abc"])[
            "ref"
        ]
        == "memory:abc"
    )
    expect(d, "invalid_params", "record_episode", sessionId=sid, summary="s", sourceRefs=[])
    expect(d, "not_found", "record_episode", sessionId="ghost", summary="s", sourceRefs=[f"event:{sid}:1"])
    assert call(d, "list_episodes")["episodes"] == []


def test_same_remark_is_one_episode_per_session(d: DaemonProcess) -> None:
    """Recording the same summary (case and spacing aside) again returns the first episode;
    a retried requestId returns the first result."""
    sid = session(d, "x")
    first = call(
        d,
        "record_episode",
        sessionId=sid,
        summary="Likes tea",
        tags=["tea"],
        sourceRefs=[f"event:{sid}:1"],
        requestId="r1",
    )
    again = call(
        d, "record_episode", sessionId=sid, summary="likes   TEA", tags=["tea"], sourceRefs=[f"event:{sid}:1"]
    )
    assert again["recorded"] is False and again["episodeId"] == first["episodeId"]
    retry = call(
        d,
        "record_episode",
        sessionId=sid,
        summary="Likes tea",
        tags=["tea"],
        sourceRefs=[f"event:{sid}:1"],
        requestId="r1",
    )
    assert retry == first
    assert len(call(d, "list_episodes")["episodes"]) == 1


def test_incognito_never_produces_episodes(d: DaemonProcess) -> None:
    """An incognito session records no episode (by call or at close), no episode cites its
    events, and nothing is recorded while the workspace is incognito."""
    hidden = session(d, "secret plan about tea", incognito=True)
    public = session(d, "public words")
    expect(
        d,
        "incognito_blocked",
        "record_episode",
        sessionId=hidden,
        summary="s",
        sourceRefs=[f"event:{hidden}:1"],
    )
    data = expect(
        d, "invalid_params", "record_episode", sessionId=public, summary="s", sourceRefs=[f"event:{hidden}:1"]
    )
    assert data["ref"] == f"event:{hidden}:1"
    call(d, "set_working_state", sessionId=hidden, goals=["plan about tea"])
    call(d, "close_session", sessionId=hidden)
    call(d, "set_settings", incognito=True)
    expect(
        d,
        "incognito_blocked",
        "record_episode",
        sessionId=public,
        summary="s",
        sourceRefs=[f"event:{public}:1"],
    )
    call(d, "set_settings", incognito=False)
    assert call(d, "list_episodes", includeDeleted=True)["episodes"] == []


def test_close_session_records_the_deterministic_episode(d: DaemonProcess) -> None:
    """close_session turns goals and decisions into one episode whose refs are the user
    messages they came from, resolvable through retrieve; closing again adds nothing."""
    sid = session(
        d, "please make the parser faster", "hello there", "we should store it in sqlite with WAL", "thanks"
    )
    empty = session(d, "nothing decided")
    call(
        d,
        "set_working_state",
        sessionId=sid,
        goals=["make the parser faster"],
        decisions=["store in sqlite with WAL"],
    )
    closed = call(d, "close_session", sessionId=sid)
    call(d, "close_session", sessionId=empty)
    (episode,) = call(d, "list_episodes")["episodes"]
    assert episode["kind"] == "session_close" and episode["sessionId"] == sid
    assert episode["summary"] == "Goals: make the parser faster — Decisions: store in sqlite with WAL"
    assert episode["sourceRefs"] == [f"event:{sid}:1", f"event:{sid}:3"]
    assert episode["at"] == closed["closedAt"]
    assert episode["tags"] == ["store", "sqlite", "parser"]
    results = call(d, "retrieve", refs=episode["sourceRefs"])["results"]
    assert all(r["ok"] for r in results)
    call(d, "open_session", sessionId=sid)
    call(d, "close_session", sessionId=sid)
    assert len(call(d, "list_episodes")["episodes"]) == 1


def test_close_episode_tags_never_come_from_a_redaction_marker(d: DaemonProcess) -> None:
    """Goals and decisions quoting secrets tag the episode by their own words: the
    [REDACTED:kind] markers the secrets became are no tag ("redacted", "openai-key")."""
    sid = session(d, "deploy the billing service to staging")
    call(
        d,
        "set_working_state",
        sessionId=sid,
        goals=[f"Deploy billing with key {SECRET}", f"Rotate {SECRET} after the billing deploy"],
        decisions=[f"Staging uses {SECRET} until Friday"],
    )
    call(d, "close_session", sessionId=sid)
    (episode,) = call(d, "list_episodes")["episodes"]
    assert "[REDACTED:" in episode["summary"] and SECRET not in episode["summary"]
    assert episode["tags"] == ["deploy", "billing", "staging"]
    assert call(d, "list_episodes", tag="redacted")["episodes"] == []


def test_close_episode_falls_back_to_the_last_user_message(d: DaemonProcess) -> None:
    """A goal sharing no word with any user message points at the session's last one."""
    sid = session(d, "first", "second", "third")
    call(d, "set_working_state", sessionId=sid, goals=["zzz quux"])
    call(d, "close_session", sessionId=sid)
    (episode,) = call(d, "list_episodes")["episodes"]
    assert episode["sourceRefs"] == [f"event:{sid}:3"]


# --- evidence and the gate --------------------------------------------------------------------


def test_threshold_is_crossed_exactly_when_it_should(d: DaemonProcess) -> None:
    """A tag is a candidate from its 5th episode with 2 sessions among them, not before."""
    one, two = session(d, "a"), session(d, "b")
    for i in range(5):
        record(d, one, f"tea {i}", ["tea"])
        assert "tea" not in candidates(d), i  # one session only
    assert candidates(d, minSessions=1)["tea"]["eligible"] is False
    record(d, two, "tea elsewhere", ["tea"])
    found = candidates(d)["tea"]
    assert (found["episodeCount"], found["sessionCount"], found["eligible"]) == (6, 2, True)
    for i in range(4):
        record(d, (one, two)[i % 2], f"go {i}", ["go"])
    assert "go" not in candidates(d)
    record(d, one, "go 4", ["go"])
    assert candidates(d)["go"]["episodeCount"] == 5
    assert [c for c in candidates(d, minEpisodes=6)] == ["tea"]


def test_proposal_citing_too_few_or_foreign_episodes_is_refused(d: DaemonProcess) -> None:
    """The gate refuses unknown, foreign-tag, too few and already consolidated episodes,
    writing nothing; enough fresh evidence is queued and advances the tag's offset."""
    open_gate(d)
    tea = evidence(d, "tea", 5)
    go = evidence(d, "go", 1)
    base = {"title": "Tea", "content": "The user drinks tea.", "origin": "extracted"}

    def refused(reason: str, episode_ids: list[str], tag: str = "tea") -> None:
        before = pending_bytes(d)
        data = expect(
            d,
            "insufficient_evidence",
            "propose",
            **base,
            consolidates={"tag": tag, "episodeIds": episode_ids},
        )
        assert data["reason"] == reason, data
        assert pending_bytes(d) == before

    refused("below_threshold", tea[:4])
    refused("foreign_tag", [*tea[:4], go[0]])
    refused("unknown_episodes", [*tea[:4], "0" * 32])
    other = Path(tempfile.mkdtemp(prefix="ws", dir=d.root))
    sid = d.call("open_session", {"workspace": str(other)})["sessionId"]
    d.call(
        "append_events",
        {"workspace": str(other), "sessionId": sid, "events": [{"type": "user_message", "text": "tea"}]},
    )
    foreign = d.call(
        "record_episode",
        {
            "workspace": str(other),
            "sessionId": sid,
            "summary": "tea",
            "tags": ["tea"],
            "sourceRefs": [f"event:{sid}:1"],
        },
    )["episodeId"]
    refused("unknown_episodes", [*tea[:4], foreign])
    queued = call(d, "propose", **base, consolidates={"tag": "tea", "episodeIds": tea})
    assert queued["queued"] is True
    assert "tea" not in candidates(d, minEpisodes=1, minSessions=1)
    refused("already_consolidated", tea)


def test_gate_closed_comes_before_the_evidence(d: DaemonProcess) -> None:
    """consolidate is an agent proposal: gate_closed until both switches are on."""
    evidence(d, "tea", 5)
    expect(d, "gate_closed", "consolidate", tag="tea")
    assert "tea" in candidates(d)


def test_offsets_do_not_advance_when_the_pending_write_fails(daemon: DaemonProcess) -> None:
    """With the disk full the proposal fails (io_error) and the evidence stays available;
    once the disk is back the same consolidation is queued."""
    open_gate(daemon)
    tea = evidence(daemon, "tea", 5)
    daemon.restart({"MAKAD_FAULT_DISK_FULL": "1"})
    data = expect(daemon, "io_error", "consolidate", tag="tea")
    assert data["reason"] == "disk_full"
    assert pending_bytes(daemon) is None
    assert [e["episodeId"] for e in candidates(daemon)["tea"]["episodes"]] == tea
    daemon.restart()
    assert call(daemon, "consolidate", tag="tea")["queued"] is True
    assert candidates(daemon) == {}


def test_a_crash_between_pending_and_offset_loses_no_evidence(daemon: DaemonProcess) -> None:
    """Killed right after PENDING.md is written: the proposal is there and the evidence
    is reconsidered (the offset did not move)."""
    open_gate(daemon)
    evidence(daemon, "tea", 5)
    daemon.restart({"MAKAD_FAULT_POINT": "consolidation_before_offset"})
    with pytest.raises(MakaError):
        daemon.call("consolidate", {"workspace": ws(daemon), "tag": "tea"}, timeout=10)
    daemon.kill9()
    daemon.start()
    assert b"recurring: tea" in (pending_bytes(daemon) or b"")
    assert candidates(daemon)["tea"]["episodeCount"] == 5


def test_rejected_consolidation_is_not_reproposed_from_the_same_evidence(d: DaemonProcess) -> None:
    """After a reject the same episodes never pass the gate again; new evidence does."""
    open_gate(d)
    tea = evidence(d, "tea", 5)
    proposal = call(d, "consolidate", tag="tea")["proposal"]
    assert proposal["origin"] == "extracted" and proposal["tags"] == ["tea"]
    call(d, "reject", ids=[proposal["id"]], reason="not a preference")
    expect(d, "insufficient_evidence", "consolidate", tag="tea")
    data = expect(
        d,
        "insufficient_evidence",
        "propose",
        title="T",
        content="tea again",
        consolidates={"tag": "tea", "episodeIds": tea},
    )
    assert data["reason"] == "already_consolidated"
    marks = call(d, "list_episodes", tag="tea")["episodes"][0]["consolidations"]
    assert marks == [{"proposalId": proposal["id"], "tag": "tea", "state": "rejected", "entryId": None}]
    same_words = evidence(d, "tea", 5)
    repeat = call(d, "consolidate", tag="tea")
    assert repeat["queued"] is False and repeat["previouslyRejected"] is not None
    fresh = evidence(d, "tea", 1, said="mentioned")
    again = call(d, "consolidate", tag="tea")
    assert again["queued"] is True
    assert again["proposal"]["sourceRefs"] == [f"episode:{i}" for i in [*same_words, *fresh]]


def test_approved_profile_entry_keeps_its_episode_refs(d: DaemonProcess) -> None:
    """An approved digest cites its episodes (memory_history shows them); deleting the
    entry marks the consolidation deleted."""
    open_gate(d)
    tea = evidence(d, "tea", 6, sessions=3)
    proposal = call(d, "consolidate", tag="tea")["proposal"]
    assert proposal["content"].startswith("recurring: tea — 6 episodes across 3 sessions\n")
    (approved,) = call(d, "approve", ids=[proposal["id"]])["approved"]
    entry = approved["entry"]
    assert entry["sourceRefs"] == [f"episode:{i}" for i in tea]
    history = call(d, "memory_history", id=entry["id"])
    assert history["sourceRefs"] == entry["sourceRefs"]
    assert "consolidated" in [e["action"] for e in history["events"]]
    listed = call(d, "list_episodes", ids=[f"episode:{i}" for i in tea])["episodes"]
    assert {e["episodeId"] for e in listed} == set(tea)
    assert all(e["consolidations"][0]["state"] == "approved" for e in listed)
    assert listed[0]["consolidations"][0]["entryId"] == entry["id"]
    call(d, "delete_entry", id=entry["id"])
    marks = call(d, "list_episodes", tag="tea")["episodes"][0]["consolidations"]
    assert marks[0]["state"] == "deleted"
    expect(d, "insufficient_evidence", "consolidate", tag="tea")


def test_deleting_a_session_tombstones_its_episodes(d: DaemonProcess) -> None:
    """delete_session erases its episodes' text and any episode citing its events; they
    stop counting as evidence."""
    one, two = session(d, "tea one"), session(d, "tea two")
    own = record(d, one, "tea in one", ["tea"])
    citing = record(d, two, "tea recalled", ["tea"], sourceRefs=[f"event:{one}:1"])
    kept = record(d, two, "tea in two", ["tea"])
    call(d, "delete_session", sessionId=one)
    assert [e["episodeId"] for e in call(d, "list_episodes")["episodes"]] == [kept]
    gone = {e["episodeId"]: e for e in call(d, "list_episodes", includeDeleted=True)["episodes"]}
    for episode_id in (own, citing):
        assert gone[episode_id]["deletedAt"] is not None
        assert gone[episode_id]["summary"] == "" and gone[episode_id]["tags"] == []
        assert gone[episode_id]["sourceRefs"] == []
    assert candidates(d, minEpisodes=1, minSessions=1)["tea"]["episodeCount"] == 1
    for episode in call(d, "list_episodes")["episodes"]:
        assert all(r["ok"] for r in call(d, "retrieve", refs=episode["sourceRefs"])["results"])


def test_scripted_sessions_grow_a_profile_proposal(d: DaemonProcess) -> None:
    """Five sessions that each decide on #sqlite produce close episodes that, together,
    become a digest proposal — never one session alone."""
    open_gate(d)
    for i in range(5):
        sid = session(d, f"how should we persist batch {i}?", f"let us use sqlite for batch {i}")
        call(
            d,
            "set_working_state",
            sessionId=sid,
            goals=[f"persist batch {i}"],
            decisions=[f"use #sqlite for batch {i}"],
        )
        call(d, "close_session", sessionId=sid)
        found = candidates(d)
        assert ("sqlite" in found) == (i == 4)
    queued = call(d, "consolidate", tag="sqlite")
    assert queued["queued"] and "5 episodes across 5 sessions" in queued["proposal"]["content"]


# --- the CLI ------------------------------------------------------------------------------


def test_maka_consolidate_lists_and_queues(d: DaemonProcess) -> None:
    """`maka consolidate` lists eligible tags; with a tag it queues the digest proposal."""
    open_gate(d)
    evidence(d, "tea", 5)
    listing = run_maka(d, "consolidate")
    assert listing.returncode == 0 and listing.stdout.splitlines()[1].split() == ["tea", "5", "2", "yes"]
    queued = run_maka(d, "consolidate", "tea")
    assert queued.returncode == 0 and "recurring: tea — 5 episodes across 2 sessions" in queued.stdout
    assert run_maka(d, "consolidate").stdout.startswith("No tag has 5+ episodes")
    refused = run_maka(d, "consolidate", "tea")
    assert refused.returncode == 1 and "insufficient_evidence" in refused.stderr
    shown = json.loads(run_maka(d, "episodes", "--tag", "tea", "--json").stdout)
    assert len(shown["episodes"]) == 5


def test_maka_episodes_and_consolidate_name_the_closest_tag(d: DaemonProcess) -> None:
    """`maka episodes --tag teas` and `maka consolidate teas` exit 2 with "did you mean
    'tea'?" when no episode carries the tag, instead of "No episodes." or insufficient_evidence;
    a tag with episodes too few to consolidate still answers insufficient_evidence."""
    open_gate(d)
    evidence(d, "tea", 2)
    listed = run_maka(d, "episodes", "--tag", "teas")
    assert listed.returncode == 2 and "no episode is tagged 'teas': did you mean 'tea'?" in listed.stderr
    assert "No episodes." not in listed.stdout
    queued = run_maka(d, "consolidate", "teas")
    assert queued.returncode == 2 and "did you mean 'tea'?" in queued.stderr
    assert "(tags in use: tea)" in queued.stderr
    few = run_maka(d, "consolidate", "tea")
    assert few.returncode == 1 and "insufficient_evidence" in few.stderr
