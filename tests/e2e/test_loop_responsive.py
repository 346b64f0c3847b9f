"""One request's CPU work never starves the others: while the worst import these tests
can build runs (items that made regexes quadratic, keyword-dense and JWT-like text for
the redactor, a large JSON document), a second connection's pings keep being answered."""

from __future__ import annotations

import json
import select
import sqlite3
from typing import Any

from makad.core.importers.collect import MAX_IMPORT_ITEMS
from makad.core.memory_format import render_entry
from makad.core.types import Entry
from makad.rpc.value_cap import MAX_MESSAGE_VALUES
from tests.support import DaemonProcess, RawConnection
from tests.worst_imports import worst_json, worst_markdown


def _pings_during(d: DaemonProcess, data: str) -> tuple[int, dict[str, object]]:
    """Send one import on a connection, ping from another until the import's reply comes;
    how many pings were answered before it, and the reply."""
    request = {
        "jsonrpc": "2.0",
        "id": "import",
        "method": "import_memories",
        "params": {"workspace": str(d.workspace), "data": data},
    }
    return _pings_while(d, json.dumps(request).encode())


def _pings_while(d: DaemonProcess, payload: bytes, ping_timeout: float = 60) -> tuple[int, Any]:
    """Send ``payload`` (one message) on a connection, ping from another until its reply
    comes; how many pings were answered before it, and the reply. A ping unanswered for
    ``ping_timeout`` seconds raises TimeoutError."""
    with (
        RawConnection(d.socket, timeout=600) as importer,
        RawConnection(d.socket, timeout=ping_timeout) as pinger,
    ):
        importer.send(payload)
        answered = 0
        while True:
            ready, _, _ = select.select([importer.sock], [], [], 0)
            if ready or importer.buffer:
                return answered, importer.recv_message()
            reply = pinger.request({"jsonrpc": "2.0", "id": answered, "method": "ping"})
            assert reply["result"] == "pong"
            answered += 1


def test_pings_are_answered_while_a_worst_case_import_runs(shared_daemon: DaemonProcess) -> None:
    """Pings sent from a second connection after the import was sent are answered before
    the import's own reply arrives (an order, not a time): the import never holds the
    event loop, whatever its items make the parsers and the redactor do."""
    answered, reply = _pings_during(shared_daemon, worst_markdown())
    assert "result" in reply, reply
    assert answered >= 3


def test_pings_are_answered_while_a_large_json_import_is_decoded(shared_daemon: DaemonProcess) -> None:
    """The same while a large JSON document is recognised, decoded and its records read
    (recognising it was a json.loads of the whole document on the event loop)."""
    answered, reply = _pings_during(shared_daemon, worst_json())
    assert "result" in reply, reply
    assert answered >= 3


def test_pings_are_answered_while_a_batch_of_millions_of_elements_is_refused(
    shared_daemon: DaemonProcess,
) -> None:
    """A 15 MB batch of five million empty objects (within the size cap, over the value
    cap): refused unread with one ``too_large`` error, and a second connection is served
    while it is read and counted."""
    answered, reply = _pings_while(shared_daemon, b"[" + b"{}," * 4_999_999 + b"{}]")
    assert reply["error"]["data"]["kind"] == "too_large", reply
    assert reply["error"]["data"]["limit"] == MAX_MESSAGE_VALUES
    assert reply["id"] is None
    with RawConnection(shared_daemon.socket) as pinger:
        assert pinger.request({"jsonrpc": "2.0", "id": answered, "method": "ping"})["result"] == "pong"


def test_pings_are_answered_while_a_request_full_of_duplicate_keys_is_checked(
    shared_daemon: DaemonProcess,
) -> None:
    """A request whose params hold 30,000 objects each with a key twice (just within the
    value cap): the exact check that finds the duplicate runs off the event loop, pings
    are answered before its ``invalid_request`` reply."""
    payload = (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":[' + b'{"a":1,"a":1},' * 30_000 + b"{}]}}"
    )
    answered, reply = _pings_while(shared_daemon, payload)
    assert reply["error"]["data"]["kind"] == "invalid_request", reply
    assert "duplicate key 'a'" in reply["error"]["data"]["reason"]
    assert answered >= 3


def test_an_import_of_more_memories_than_are_read_is_refused_while_pings_are_answered(
    shared_daemon: DaemonProcess,
) -> None:
    """Text of one short line per memory, past ``MAX_IMPORT_ITEMS`` of them (16 MiB of such
    lines are a million memories: minutes of redaction and titles for one call), and a mem0
    list as long: ``too_large`` with the limit once that many are read, nothing queued, and
    pings from a second connection answered before the reply."""
    lines = "".join(f"w{i}\n" for i in range(MAX_IMPORT_ITEMS * 2))
    records = json.dumps({"results": [{"memory": f"m{i}"} for i in range(MAX_IMPORT_ITEMS + 1)]})
    for data in (lines, records):
        answered, reply = _pings_during(shared_daemon, data)
        assert reply["error"]["data"] == {"kind": "too_large", "limit": MAX_IMPORT_ITEMS}, reply
        assert answered >= 3
    assert not (shared_daemon.workspace / "memory" / "PENDING.md").exists()


# A letter and 300,000 combining marks of alternating classes: putting them in canonical
# order was quadratic and held the interpreter, minutes during which a ping (waited for a
# minute at most) went unanswered.
MARKS_BOMB = "a" + "\u0301\u0316" * 150_000


def test_pings_are_answered_while_an_event_full_of_combining_marks_is_indexed(
    shared_daemon: DaemonProcess,
) -> None:
    """An event whose text is ``MARKS_BOMB`` (Unicode normalisation for the search index
    sorted its marks in time quadratic in their number, without letting go of the
    interpreter): it is stored, and pings from a second connection are answered before
    its reply."""
    shared_daemon.call("open_session", {"workspace": str(shared_daemon.workspace), "sessionId": "marks"})
    request = {
        "jsonrpc": "2.0",
        "id": "append",
        "method": "append_events",
        "params": {
            "workspace": str(shared_daemon.workspace),
            "sessionId": "marks",
            "events": [{"type": "user_message", "text": MARKS_BOMB}],
        },
    }
    answered, reply = _pings_while(shared_daemon, json.dumps(request).encode())
    assert reply["result"]["lastSeq"] == 1, reply
    assert answered >= 3


def test_pings_are_answered_while_a_query_full_of_combining_marks_is_searched(
    shared_daemon: DaemonProcess,
) -> None:
    """The same text as a ``search_history`` query: answered (no hits), and pings first."""
    request = {
        "jsonrpc": "2.0",
        "id": "search",
        "method": "search_history",
        "params": {"workspace": str(shared_daemon.workspace), "query": MARKS_BOMB},
    }
    answered, reply = _pings_while(shared_daemon, json.dumps(request).encode())
    assert reply["result"]["hits"] == [], reply
    assert answered >= 3


def test_pings_are_answered_while_an_incognito_session_is_searched(shared_daemon: DaemonProcess) -> None:
    """An incognito session keeps no search index, so its search reads every event's
    text afresh (a second and more for a few megabytes): it runs off the event loop,
    and pings from a second connection are answered while it runs."""
    workspace = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": workspace, "sessionId": "quiet", "incognito": True})
    # Four events of a few megabytes: long enough a search that the pings answered while it
    # runs in a thread stand far above those the steps before it let through.
    texts = [" ".join(f"{letter}{i}" for i in range(400_000)) for letter in "wxyz"]
    events = [{"type": "user_message", "text": text} for text in texts]
    shared_daemon.call("append_events", {"workspace": workspace, "sessionId": "quiet", "events": events})
    request = {
        "jsonrpc": "2.0",
        "id": "search",
        "method": "search_history",
        "params": {"workspace": workspace, "sessionId": "quiet", "query": "w7* w399999"},
    }
    answered, reply = _pings_while(shared_daemon, json.dumps(request).encode())
    assert [hit["ref"] for hit in reply["result"]["hits"]] == ["event:quiet:1"], reply
    # The steps before the search (its query redacted in a worker thread…) let a few
    # pings through even when the search itself holds the loop (10 to 30 measured),
    # against 150 to 250 for one such event while it runs in a thread (42 on a machine
    # busy with other work); more for four.
    assert answered >= 60, answered


def test_a_memory_file_of_thirty_thousand_empty_headings_is_served(shared_daemon: DaemonProcess) -> None:
    """A MEMORY.md at its cap made of ``## `` lines only (32,000 entries with one id): read
    whole, an entry added to it, and pings from a second connection answered before the
    add's reply (reading such a file was quadratic, and after a write it was read again
    on the event loop)."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("## \n" * 32_000, encoding="utf-8")
    state = shared_daemon.call("read_state", {"workspace": str(shared_daemon.workspace)}, timeout=120)
    assert state["status"] == "ok" and state["entryCount"] == 32_000
    request = {
        "jsonrpc": "2.0",
        "id": "add",
        "method": "add_entry",
        "params": {"workspace": str(shared_daemon.workspace), "title": "kept", "content": "after them all"},
    }
    answered, reply = _pings_while(shared_daemon, json.dumps(request).encode())
    assert reply["result"]["entry"]["title"] == "kept", reply
    assert answered >= 3
    assert (memory / "MEMORY.md").read_text(encoding="utf-8").startswith("## \n" * 32_000)


def secret_dense(word: str) -> str:
    """238 KB of ``password=<word>…`` for the redactor to read through: under the size above
    which a message is decoded off the event loop, so the request starts on it at once."""
    return f"password={word} " * 14_000


# The redaction takes about a second: on a worker thread, pings are answered throughout it
# (dozens on a quiet machine); on the event loop, only the one or two that queued behind
# it. Five leaves room for a loaded machine and still tells the two apart.
PINGS_DURING_REDACTION = 5


def _request(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": method, "method": method, "params": params}).encode()


def test_pings_are_answered_while_working_state_notes_are_redacted(shared_daemon: DaemonProcess) -> None:
    """``set_working_state`` with 238 KB of ``password=…`` in a note: its redaction runs off
    the event loop (it ran on it: the daemon answered nobody meanwhile), pings are answered
    before the reply, and no secret comes back."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "notes"})
    notes = {"Current State": secret_dense("hunter2")}
    answered, reply = _pings_while(
        shared_daemon, _request("set_working_state", {"workspace": ws, "sessionId": "notes", "notes": notes})
    )
    assert "result" in reply or reply["error"]["data"]["kind"] == "too_large", reply
    assert "hunter2" not in json.dumps(reply)
    assert answered >= PINGS_DURING_REDACTION


def test_pings_are_answered_while_an_event_of_one_repeated_character_is_redacted(
    daemon: DaemonProcess,
) -> None:
    """``append_events`` with an 8 MB tool output of ``////…`` holding a token at its end
    (a separator line, a minified file): the event is redacted in pieces off the event
    loop, pings are answered before the reply, and the token is not stored."""
    ws = str(daemon.workspace)
    daemon.call("open_session", {"workspace": ws, "sessionId": "runs"})
    token = "sk-ant-api03-" + "x7Kq9" * 8
    event = {"type": "tool_result", "text": "/" * 8_000_000 + " " + token, "toolCallId": "c", "toolName": "t"}
    answered, reply = _pings_while(
        daemon, _request("append_events", {"workspace": ws, "sessionId": "runs", "events": [event]})
    )
    assert "result" in reply, reply
    assert answered >= PINGS_DURING_REDACTION
    (ledger,) = (daemon.data_dir / "workspaces").glob("*/ledger.sqlite3")
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        (stored,) = conn.execute("SELECT text FROM events WHERE session_id = 'runs'").fetchone()
    finally:
        conn.close()
    assert stored.endswith(" [REDACTED:anthropic_key]")


def test_a_long_session_title_is_refused_before_it_is_redacted(shared_daemon: DaemonProcess) -> None:
    """``open_session`` with a 238 KB title full of ``password=…``: ``too_large`` at once (a
    title sent is at most 65,536 characters), before the redactor reads it; no secret in the
    reply, nor in a long title shortened to 300 characters across a secret."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "first"})  # the ledger is made
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request(
            json.loads(_request("open_session", {"workspace": ws, "title": secret_dense("hunter3")}))
        )
    assert reply["error"]["data"]["kind"] == "too_large", reply
    assert "hunter3" not in json.dumps(reply)
    titled = shared_daemon.call("open_session", {"workspace": ws, "title": "password=hunter3 " * 10})
    assert titled["title"].startswith("password=[REDACTED") and "hunter3" not in titled["title"]
    across = shared_daemon.call(
        "open_session", {"workspace": ws, "title": "word " * 58 + "password=hunter4hunter4 tail"}
    )
    assert "hunter4" not in across["title"] and len(across["title"]) <= 300


def test_a_long_rejection_reason_is_refused_before_it_is_redacted(shared_daemon: DaemonProcess) -> None:
    """``reject`` with a 238 KB reason full of ``password=…``: ``too_large`` at once (a reason
    is at most 2,000 characters), before the redactor reads it; no secret in the reply."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("list_proposals", {"workspace": ws})  # the workspace is opened
    payload = _request("reject", {"workspace": ws, "ids": ["nope"], "reason": secret_dense("hunter4")})
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request(json.loads(payload))
    assert reply["error"]["data"]["kind"] == "too_large", reply
    assert "hunter4" not in json.dumps(reply)


def test_pings_are_answered_while_a_long_request_id_is_scrubbed(shared_daemon: DaemonProcess) -> None:
    """A 238 KB ``requestId`` full of ``password=…`` (identifiers are scrubbed of secrets
    before any method sees them): scrubbed off the event loop, the entry added."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("read_state", {"workspace": ws})  # the workspace is opened
    params = {"workspace": ws, "title": "t", "content": "c", "requestId": secret_dense("hunter5")}
    answered, reply = _pings_while(shared_daemon, _request("add_entry", params))
    assert reply["result"]["entry"]["title"] == "t", reply
    assert "hunter5" not in json.dumps(reply)
    assert answered >= PINGS_DURING_REDACTION


def test_pings_are_answered_while_episode_tags_and_refs_are_redacted(shared_daemon: DaemonProcess) -> None:
    """``record_episode`` with tags and source refs of 238 KB of ``password=…`` each (a tag
    is redacted before it becomes a slug, a ref scrubbed): off the event loop, the call
    refused for its refs, no secret in the reply."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "ep"})
    params = {
        "workspace": ws,
        "sessionId": "ep",
        "summary": "one line",
        "tags": [secret_dense("hunter6")],
        "sourceRefs": [secret_dense("hunter7")],
    }
    answered, reply = _pings_while(shared_daemon, _request("record_episode", params))
    assert reply["error"]["data"]["kind"] in ("invalid_params", "too_large"), reply
    assert answered >= PINGS_DURING_REDACTION


def test_pings_are_answered_while_an_episode_tag_filter_is_redacted(shared_daemon: DaemonProcess) -> None:
    """``list_episodes`` filtered by a 238 KB tag of ``password=…``: the same, no episodes."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "ep"})
    answered, reply = _pings_while(
        shared_daemon, _request("list_episodes", {"workspace": ws, "tag": secret_dense("hunter8")})
    )
    assert reply["result"]["episodes"] == [], reply
    assert answered >= PINGS_DURING_REDACTION


def test_pings_are_answered_while_an_entry_tag_is_redacted(shared_daemon: DaemonProcess) -> None:
    """``add_entry`` with a 238 KB tag of ``password=…`` (a tag is redacted before it becomes
    a slug): off the event loop; no secret in the reply."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("read_state", {"workspace": ws})  # the workspace is opened
    params = {"workspace": ws, "title": "t", "content": "c", "tags": [secret_dense("hunter10")]}
    answered, reply = _pings_while(shared_daemon, _request("add_entry", params))
    assert "hunter10" not in json.dumps(reply)
    assert answered >= PINGS_DURING_REDACTION


def test_pings_are_answered_while_proposal_tags_are_redacted(shared_daemon: DaemonProcess) -> None:
    """``propose`` with a 238 KB tag of ``password=…``, then ``approve`` editing a proposal's
    tags to one: both redact off the event loop; no secret in either reply."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call(
        "set_settings", {"workspace": ws, "extractToolEnabled": True, "agentReadEnabled": True}
    )
    first = shared_daemon.call(
        "propose", {"workspace": ws, "title": "t", "content": "c", "origin": "extracted"}
    )
    params = {
        "workspace": ws,
        "title": "t2",
        "content": "c2",
        "origin": "extracted",
        "tags": [secret_dense("hunter12")],
    }
    answered, reply = _pings_while(shared_daemon, _request("propose", params))
    assert "hunter12" not in json.dumps(reply)
    assert answered >= PINGS_DURING_REDACTION
    pid = first["proposal"]["id"]
    edits = {pid: {"tags": [secret_dense("hunter13")]}}
    answered, reply = _pings_while(
        shared_daemon, _request("approve", {"workspace": ws, "ids": [pid], "edits": edits})
    )
    assert "hunter13" not in json.dumps(reply)
    assert answered >= PINGS_DURING_REDACTION


# Within the 16 MiB message cap: about 11 MB of distinct words.
MILLION_WORDS = " ".join(f"w{i}" for i in range(1_400_000))


def test_a_query_is_read_up_to_its_first_16_kib(shared_daemon: DaemonProcess) -> None:
    """``search_history`` and ``build_context`` read a query's first 16,384 characters: a
    word there is searched for, one past them is not (every pattern over a whole 11 MB
    query held the interpreter for seconds at a time, 20 s in all)."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "q"})
    shared_daemon.call("set_settings", {"workspace": ws, "historyRecallEnabled": True})
    shared_daemon.call(
        "append_events",
        {"workspace": ws, "sessionId": "q", "events": [{"type": "note", "text": "zebrafinch"}]},
    )
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "later"})
    filler = "filler " * 2_400  # 16,800 characters
    found = shared_daemon.call("search_history", {"workspace": ws, "query": "zebrafinch " + filler})
    assert [hit["ref"] for hit in found["hits"]] == ["event:q:1"]
    assert (
        shared_daemon.call("search_history", {"workspace": ws, "query": filler + "zebrafinch"})["hits"] == []
    )
    pack = shared_daemon.call(
        "build_context",
        {"workspace": ws, "sessionId": "later", "budgetTokens": 2000, "query": filler + "zebrafinch"},
    )
    assert "zebrafinch" not in json.dumps(pack)


def test_pings_are_answered_while_a_pack_is_built_for_a_query_of_a_million_words(
    shared_daemon: DaemonProcess,
) -> None:
    """``build_context`` with an 11 MB query of 1.4 million distinct words: pings from a
    second connection are answered before its pack arrives."""
    ws = str(shared_daemon.workspace)
    shared_daemon.call("open_session", {"workspace": ws, "sessionId": "big"})
    shared_daemon.call("set_settings", {"workspace": ws, "historyRecallEnabled": True})
    params = {"workspace": ws, "sessionId": "big", "budgetTokens": 2000, "query": MILLION_WORDS}
    answered, reply = _pings_while(shared_daemon, _request("build_context", params))
    assert "segments" in reply["result"], reply
    assert answered >= 3


PINGS_DURING_COMPARING = 10


def test_pings_are_answered_while_hundreds_of_proposals_are_compared(shared_daemon: DaemonProcess) -> None:
    """``list_proposals`` over 700 open proposals (PENDING.md near its cap) compares each
    with every entry and proposal off the event loop, and lists each one's near duplicates."""
    ws = shared_daemon.workspace
    shared_daemon.call("read_state", {"workspace": str(ws)})  # the workspace is opened
    proposals = [
        Entry(
            id=f"{i:016x}",
            title=f"Fact {i}",
            content=f"The value number {i} is {i * 7} units",
            origin="extracted",
            status="review_required",
        )
        for i in range(700)
    ]
    pending = "# Pending\n\n" + "\n".join(render_entry(p) for p in proposals)
    (ws / "memory").mkdir(mode=0o700, exist_ok=True)
    (ws / "memory" / "PENDING.md").write_text(pending, encoding="utf-8")
    request = _request("list_proposals", {"workspace": str(ws)})
    shared_daemon.call("list_proposals", {"workspace": str(ws)})  # PENDING.md is read: only comparing is left
    answered, reply = _pings_while(shared_daemon, request)
    listed = reply["result"]["proposals"]
    assert len(listed) == len(proposals)
    assert f"{1:016x}" in listed[10]["similarTo"]  # "number 10 is 70" is near "number 1 is 7"
    # On the event loop, only the pings answered before the comparing began (none or
    # one: PENDING.md was read already); on a worker thread, one per round trip for the
    # whole comparing (dozens under CI load, hundreds on a quiet machine).
    assert answered >= PINGS_DURING_COMPARING


def test_pings_are_answered_while_a_memory_file_of_tiny_entries_is_exported(
    shared_daemon: DaemonProcess,
) -> None:
    """A MEMORY.md at its cap made of 18,000 two-line entries (a cloned repository's, say),
    exported as Markdown and as JSON: every entry is in the export, and pings from a
    second connection are answered before each reply, none waiting half a minute
    (building the Markdown export re-read the document once per entry, on the event
    loop: 84 s)."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir()
    count = 18_000
    (memory / "MEMORY.md").write_text("# Maka Memory\n\n" + "## a\nb\n" * count, encoding="utf-8")
    shared_daemon.call("read_state", {"workspace": str(shared_daemon.workspace)}, timeout=120)  # read once
    for form in ("markdown", "json"):
        params = {"workspace": str(shared_daemon.workspace), "format": form}
        answered, reply = _pings_while(shared_daemon, _request("export_memories", params), ping_timeout=30)
        assert reply["result"]["count"] == count, reply
        assert answered >= 3, form
    assert reply["result"]["data"].count('"title": "a"') == count
