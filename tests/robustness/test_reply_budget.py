"""Replies that return whole event texts (search_history, retrieve) carry as many as fit in
8 MiB as JSON, one at least, and say what they left out, so a few large events never make
every such call ``reply_too_large`` (the reply cap is 16 MiB)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import DaemonProcess

MIB = 1024 * 1024
BUDGET = 8 * MIB
# The most one event may take as JSON, as sent.
MAX_EVENT_BYTES = 8 * MIB
# Words rather than one letter repeated: an append's secret scan reads them several times
# faster, and they take as many bytes.
WORDS = "lorem ipsum dolor sit amet "


def prose(chars: int) -> str:
    """``chars`` characters of words, none of them "needle"."""
    return (WORDS * (chars // len(WORDS) + 1))[:chars]


def _append_large(d: DaemonProcess, session: str, texts: list[str]) -> dict[str, Any]:
    params = {"workspace": str(d.workspace), "sessionId": session}
    d.call("open_session", params)
    for text in texts:
        d.call("append_events", {**params, "events": [{"type": "note", "text": text}]}, timeout=120)
    return params


def _six_of_3_mib(d: DaemonProcess, session: str) -> tuple[dict[str, Any], list[str]]:
    """Six events of 3 MiB each (18 MiB together), each holding the word "needle"."""
    texts = [f"needle {letter} {prose(3 * MIB)}" for letter in "abcdef"]
    return _append_large(d, session, texts), texts


@pytest.mark.slow
def test_search_history_returns_the_hits_that_fit_and_counts_the_rest(shared_daemon: DaemonProcess) -> None:
    """Six hits of 3 MiB: the reply carries the best two (9 MiB would pass 8 MiB) with
    ``omitted: 4``; a small hit set says ``omitted: 0``."""
    params, texts = _six_of_3_mib(shared_daemon, "hits")
    found = shared_daemon.call("search_history", {**params, "query": "needle"}, timeout=120)
    assert len(found["hits"]) == 2
    assert found["omitted"] == 4
    assert all(hit["event"]["text"] in texts and not hit.get("textCut") for hit in found["hits"])
    one = shared_daemon.call("search_history", {**params, "query": "needle", "limit": 1}, timeout=120)
    assert len(one["hits"]) == 1 and one["omitted"] == 0


def test_search_history_cuts_one_hit_over_the_budget_and_says_how_to_read_it(
    shared_daemon: DaemonProcess,
) -> None:
    """An event as large as may be appended is, as a hit (with its hash, ref and score),
    over 8 MiB: its text comes back cut, marked ``textCut`` with the full length, and
    ``retrieve`` on its ref returns it whole."""
    # The event as the daemon measures it, all its fields written out.
    envelope = len(
        '{"type":"note","text":"","ts":null,"toolCallId":null,"toolName":null,"meta":null,"tokens":null}'
    )
    text = "needle " + prose(MAX_EVENT_BYTES - envelope - len("needle "))
    params = _append_large(shared_daemon, "cut", [text])
    found = shared_daemon.call("search_history", {**params, "query": "needle"}, timeout=120)
    (hit,) = found["hits"]
    assert hit["textCut"] is True and hit["textChars"] == len(text)
    assert text.startswith(hit["event"]["text"]) and len(hit["event"]["text"]) < len(text)
    whole = shared_daemon.call("retrieve", {**params, "refs": [hit["ref"]]}, timeout=120)
    assert whole["results"][0]["events"][0]["text"] == text


def test_retrieve_returns_the_refs_that_fit_and_names_the_rest(shared_daemon: DaemonProcess) -> None:
    """Six refs to 3 MiB events: each reply carries the refs that fit in 8 MiB, one at
    least, and lists the others in ``omitted``; asking again for those reads them all."""
    params, texts = _six_of_3_mib(shared_daemon, "refs")
    wanted = [f"event:refs:{seq}" for seq in range(1, len(texts) + 1)]
    seen: list[str] = []
    refs = wanted
    while refs:
        got = shared_daemon.call("retrieve", {**params, "refs": refs}, timeout=120)
        assert 1 <= len(got["results"]) <= 2
        assert [r["ref"] for r in got["results"]] + got["omitted"] == refs
        seen += [e["text"] for r in got["results"] for e in r["events"]]
        refs = got["omitted"]
    assert seen == texts


def test_retrieve_cuts_a_range_ref_and_names_its_rest(shared_daemon: DaemonProcess) -> None:
    """One ref naming six 3 MiB events returns the first two, verified, and names the
    rest of its range in ``omitted`` (the reply was ``reply_too_large`` every time)."""
    params, texts = _six_of_3_mib(shared_daemon, "range")
    got = shared_daemon.call("retrieve", {**params, "refs": ["event:range:1-6"]}, timeout=120)
    (result,) = got["results"]
    assert [e["seq"] for e in result["events"]] == [1, 2] and result["ok"] is True
    assert got["omitted"] == ["event:range:3-6"]
    rest = shared_daemon.call("retrieve", {**params, "refs": got["omitted"]}, timeout=120)
    assert [e["text"] for e in rest["results"][0]["events"]] == texts[2:4]
    assert rest["omitted"] == ["event:range:5-6"]
