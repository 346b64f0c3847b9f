"""Memory files through the socket: foreign encodings, agent text, canonical duplicates, lossless metadata.

Each test starts one real daemon and, where a space of inputs exists, lets hypothesis
try many of them, each in a fresh workspace of that daemon.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from maka.errors import RemoteError
from makad.core.entry_text import prepare
from tests.support import DaemonProcess, ping_ok

_WORKSPACES = itertools.count()
_FOREIGN = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def fresh_workspace(d: DaemonProcess) -> Path:
    path = d.root / f"w{next(_WORKSPACES)}"
    (path / "memory").mkdir(parents=True)
    return path


def call(d: DaemonProcess, method: str, ws: Path, **params: Any) -> Any:
    return d.call(method, {"workspace": str(ws), **params})


def entries_of(d: DaemonProcess, ws: Path) -> list[dict[str, Any]]:
    state = call(d, "read_state", ws, includeEntries=True, includeArchived=True)
    assert state["status"] == "ok", state
    result: list[dict[str, Any]] = state["entries"]
    return result


def section(title: str, entry_id: str, body: str, extra: str = "") -> str:
    return (
        f"## {title}\n<!-- maka-memory: id={entry_id} origin=manual createdAt=1 updatedAt=1 "
        f"status=active tags={extra} -->\n{body}\n\n"
    )


# --- 1. files that are not UTF-8 -------------------------------------------------------

_LATIN = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f#<>`~[\\"),
    min_size=1,
    max_size=24,
)


@_FOREIGN
@given(
    # Legacy encodings editors still save in (single-byte Western, Central European,
    # Cyrillic, Mac; multi-byte Japanese and Korean): every one leaves bytes that are not UTF-8.
    encoding=st.sampled_from(
        ["latin-1", "cp1252", "iso-8859-15", "cp1250", "koi8-r", "mac-roman", "shift_jis", "euc-kr"]
    ),
    words=st.lists(_LATIN, min_size=3, max_size=3),
    noise=st.binary(min_size=1, max_size=12).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")),
)
@example(encoding="latin-1", words=["Café", "naïve", "crème"], noise=b"\xff\xfe")
def test_non_utf8_files_keep_every_method_working(
    module_daemon: DaemonProcess, encoding: str, words: list[str], noise: bytes
) -> None:
    """A Latin-1/cp1252 MEMORY.md and PENDING.md never break a method, and untouched bytes stay."""
    ws = fresh_workspace(module_daemon)
    keep = section("Kept " + words[0].strip(), "k1", words[1]).encode(encoding, "replace")
    touched = section("Touched", "t1", words[2]).encode(encoding, "replace")
    preamble = b"# Maka Memory\n\nraw noise " + noise + b"\n\n"
    memory = preamble + keep + touched
    pending = (
        b"# Pending\n\n"
        + section("Proposal " + words[0].strip(), "p1", words[1], ",x")
        .replace("status=active", "status=review_required")
        .encode(encoding, "replace")
        + section("Other", "p2", "second " + words[2])
        .replace("status=active", "status=review_required")
        .encode(encoding, "replace")
    )
    (ws / "memory" / "MEMORY.md").write_bytes(memory)
    (ws / "memory" / "PENDING.md").write_bytes(pending)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True)

    state = call(module_daemon, "read_state", ws, includeEntries=True)
    assert state["status"] == "ok"
    assert {e["id"] for e in state["entries"]} == {"k1", "t1"}
    assert state["content"].startswith("# Maka Memory")
    bad_lines = [w["line"] for w in state["warnings"] if w["kind"] == "not_utf8" and "line" in w]
    expected = [n for n, line in enumerate(memory.split(b"\n"), start=1) if _not_utf8(line)]
    assert bad_lines == expected[:10]
    assert call(module_daemon, "list_proposals", ws)["proposals"]
    pack = call(module_daemon, "build_context", ws, budgetTokens=4000, query=words[1])
    assert any(s["kind"] == "memory" for s in pack["segments"])
    for fmt in ("json", "markdown"):
        assert call(module_daemon, "export_memories", ws, format=fmt)["count"] == 2
    assert call(module_daemon, "memory_history", ws, id="k1")["entry"]["id"] == "k1"
    call(module_daemon, "search_history", ws, query=words[0])
    call(module_daemon, "update_entry", ws, id="t1", content="rewritten")
    call(module_daemon, "approve", ws, ids=["p1"])
    call(module_daemon, "reject", ws, ids=["p2"])

    after = (ws / "memory" / "MEMORY.md").read_bytes()
    assert after.startswith(preamble + keep)
    assert {e["id"] for e in entries_of(module_daemon, ws)} >= {"k1", "t1"}
    assert ping_ok(module_daemon.socket)


def _not_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_not_utf8_warning_names_the_lines(module_daemon: DaemonProcess) -> None:
    """read_state stays ok and names each bad MEMORY.md line; list_proposals names PENDING.md's."""
    ws = fresh_workspace(module_daemon)
    (ws / "memory" / "MEMORY.md").write_bytes(b"# M\n\n## Caf\xe9\nbody \x93q\x94\n")
    (ws / "memory" / "PENDING.md").write_bytes(
        b"# P\n\n## P\n<!-- maka-memory: id=p status=review_required -->\n\xe9t\xe9\n"
    )
    state = call(module_daemon, "read_state", ws, includeEntries=True)
    assert state["status"] == "ok"
    assert [(w["kind"], w.get("line")) for w in state["warnings"]] == [
        ("not_utf8", 3),
        ("not_utf8", 4),
        ("not_utf8", None),
    ]
    assert "PENDING.md" in state["warnings"][2]["message"]
    assert state["entries"][0]["title"] == "Café" and state["entries"][0]["content"] == "body “q”"
    assert "## Café\nbody “q”" in state["content"]
    proposals = call(module_daemon, "list_proposals", ws)
    assert [w.get("line") for w in proposals["warnings"]] == [5]
    assert proposals["proposals"][0]["proposal"]["content"] == "été"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32-le"])
def test_a_utf16_memory_file_is_refused_and_left_as_it_is(
    module_daemon: DaemonProcess, encoding: str
) -> None:
    """MEMORY.md saved as UTF-16 (Notepad's "Unicode", PowerShell's Out-File; with a
    byte-order mark or without one): read_state says so (status error), a write is
    io_error with reason utf16 naming the file, and the file keeps its bytes (no UTF-8
    section appended to it); saved again as UTF-8 its entry is read."""
    ws = fresh_workspace(module_daemon)
    path = ws / "memory" / "MEMORY.md"
    text = "# Maka Memory\r\n\r\n## Wide entry\r\nsaved by Notepad\r\n"
    path.write_bytes(text.encode(encoding))
    before = path.read_bytes()
    state = call(module_daemon, "read_state", ws)
    assert state["status"] == "error" and "UTF-16" in state["reason"]
    with pytest.raises(RemoteError) as refused:
        call(module_daemon, "add_entry", ws, title="New", content="c")
    assert (refused.value.kind, refused.value.data["reason"]) == ("io_error", "utf16")
    assert refused.value.data["file"] == "MEMORY.md"
    assert path.read_bytes() == before
    assert ping_ok(module_daemon.socket)
    path.write_bytes(text.encode("utf-8"))
    assert [e["title"] for e in entries_of(module_daemon, ws)] == ["Wide entry"]


def test_a_utf8_memory_file_with_a_zeroed_tail_keeps_its_entries(module_daemon: DaemonProcess) -> None:
    """A UTF-8 MEMORY.md whose end a crash zeroed (a block of NULs) is read, not refused as UTF-16: its entry is there."""
    ws = fresh_workspace(module_daemon)
    path = ws / "memory" / "MEMORY.md"
    path.write_bytes(b"# Maka Memory\n\n## Prefers tabs\nUses tabs in Go code.\n" + b"\x00" * 2000)
    state = call(module_daemon, "read_state", ws)
    assert state["status"] == "ok", state["reason"]
    assert [e["title"] for e in entries_of(module_daemon, ws)] == ["Prefers tabs"]


def test_importing_a_latin1_file_reads_it_as_cp1252(daemon: DaemonProcess) -> None:
    """A Latin-1 notes file imports with its accented letters, not replacement characters."""
    ws = fresh_workspace(daemon)
    notes = daemon.root / "notes.md"
    notes.write_bytes("- Prefers caf\u00e9 au lait\n- Likes cr\u00e8me br\u00fbl\u00e9e\n".encode("latin-1"))
    imported = call(daemon, "import_memories", ws, path=str(notes), format="markdown")["imported"]
    assert len(imported) == 2
    contents = sorted(v["proposal"]["content"] for v in call(daemon, "list_proposals", ws)["proposals"])
    assert contents == ["Likes crème brûlée", "Prefers café au lait"]


# --- 3. agent text cannot swallow the user's notes -------------------------------------------

_BLOCKY = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "```",
                "````",
                "```py",
                "  ```",
                "~~~~",
                "<pre>",
                "<PRE class=x>",
                "<script>",
                "<style>",
                "<textarea>",
                "<!--",
                "<!-- maka-memory: ",
                "<?x",
                "<!DOCTYPE",
                "<![CDATA[",
                "<details>",
                "<div>",
                "<custom-tag>",
                "[ref]: /url",
                "> ",
                "- ",
                "* ",
                "1. ",
                "---",
                "===",
                "    ",
                "\t",
                "\r\n",
                "## ",
                "\\## ",
                "\n",
                "\n\n",
                "x",
            ]
        ),
        st.text(alphabet="ab #`~<>-[]", max_size=4),
    ),
    min_size=1,
    max_size=14,
).map("".join)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(content=_BLOCKY, path=st.sampled_from(["add_entry", "approve", "import"]))
@example(content="```python\nprint(1)", path="approve")
@example(content="<details>\n<summary>more</summary>", path="add_entry")
@example(content="<!-- todo", path="import")
def test_a_users_section_after_agent_text_stays_its_own_entry(
    module_daemon: DaemonProcess, content: str, path: str
) -> None:
    """Whatever content the daemon writes, a `## ` note the user types after it is a separate entry."""
    if not prepare(content).content.strip():
        return
    ws = fresh_workspace(module_daemon)
    written = _write_through(module_daemon, ws, content, path)
    memory = ws / "memory" / "MEMORY.md"
    with memory.open("a", encoding="utf-8") as fh:
        fh.write("## My own note\nI typed this myself.\n")
    by_title = {e["title"]: e for e in entries_of(module_daemon, ws)}
    assert by_title["My own note"]["content"] == "I typed this myself."
    assert by_title["Agent text"]["content"] == written
    if path != "import":  # importers trim their items
        assert written == prepare(content).content


def _write_through(d: DaemonProcess, ws: Path, content: str, path: str) -> str:
    if path == "add_entry":
        result: str = call(d, "add_entry", ws, title="Agent text", content=content)["entry"]["content"]
        return result
    if path == "import":
        data = json.dumps([{"id": "m1", "memory": content}])
        imported = call(d, "import_memories", ws, data=data, format="mem0")["imported"]
        approved = call(d, "approve", ws, ids=imported, edits={imported[0]: {"title": "Agent text"}})
        result = approved["approved"][0]["entry"]["content"]
        return result
    call(d, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    proposal = call(d, "propose", ws, title="Agent text", content=content)["proposal"]
    approved = call(d, "approve", ws, ids=[proposal["id"]])
    result = approved["approved"][0]["entry"]["content"]
    return result


# --- 9. one canonical form for duplicates and rejections -------------------------------------


def test_the_same_content_is_never_approved_twice(module_daemon: DaemonProcess) -> None:
    """Escaped, CRLF and re-cased spellings of approved content are duplicates; a hand copy too."""
    ws = fresh_workspace(module_daemon)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    content = "## Deploys\nWe deploy on Tuesdays."
    first = call(module_daemon, "propose", ws, title="Deploys", content=content)["proposal"]
    call(module_daemon, "approve", ws, ids=[first["id"]])
    for variant in (
        "\\## Deploys\nWe deploy on Tuesdays.",
        "## Deploys\r\nWe deploy on Tuesdays.",
        "\\\\## DEPLOYS\nwe deploy  on tuesdays.",
    ):
        again = call(module_daemon, "propose", ws, title="Deploys", content=variant)
        assert not again["queued"] and again["duplicateOf"]
    pending = ws / "memory" / "PENDING.md"
    copy = (
        "# Pending\n\n"
        + section("Copy", "c1", "\\## Deploys\nWe deploy on Tuesdays.")
        + section("Copy two", "c2", "\\## Deploys\nwe deploy on tuesdays.")
    )
    pending.write_text(copy.replace("status=active", "status=review_required"), encoding="utf-8")
    approved = call(module_daemon, "approve", ws, ids=["c1", "c2"])["approved"]
    active = [e for e in entries_of(module_daemon, ws) if e["status"] == "active"]
    assert len(active) == 1
    assert [a["duplicateOf"] for a in approved] == [active[0]["id"]] * 2


def test_rejected_content_stays_rejected_whatever_its_escaping(module_daemon: DaemonProcess) -> None:
    """A rejected proposal with a `## ` line is recognised when proposed again in any spelling."""
    ws = fresh_workspace(module_daemon)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    proposal = call(module_daemon, "propose", ws, title="T", content="## Rule\nNever on Fridays")["proposal"]
    call(module_daemon, "reject", ws, ids=[proposal["id"]], reason="wrong")
    for variant in ("## Rule\nNever on Fridays", "\\## Rule\r\nnever on fridays"):
        again = call(module_daemon, "propose", ws, title="T", content=variant)
        assert not again["queued"] and again["previouslyRejected"]["proposalId"] == proposal["id"]


def test_decomposed_accents_are_the_same_content(module_daemon: DaemonProcess) -> None:
    """A MEMORY.md saved decomposed (macOS) holds the same memory as an agent's precomposed
    proposal: a duplicate; and a rejected proposal is recognised in either spelling."""
    ws = fresh_workspace(module_daemon)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    (ws / "memory" / "MEMORY.md").write_text(
        "# M\n\n## Cafe\u0301 notes\nPrefers re\u0301sume\u0301 format\n", encoding="utf-8"
    )
    [entry] = entries_of(module_daemon, ws)
    again = call(module_daemon, "propose", ws, title="Café notes", content="Prefers résumé format")
    assert not again["queued"] and again["duplicateOf"] == entry["id"]
    proposal = call(module_daemon, "propose", ws, title="T", content="Crème brûlée on Fridays")["proposal"]
    call(module_daemon, "reject", ws, ids=[proposal["id"]], reason="wrong")
    decomposed = "Cre\u0300me bru\u0302le\u0301e on Fridays"
    again = call(module_daemon, "propose", ws, title="T", content=decomposed)
    assert not again["queued"] and again["previouslyRejected"]["proposalId"] == proposal["id"]


def test_nul_characters_from_a_client_never_reach_the_files(module_daemon: DaemonProcess) -> None:
    """A proposal, an entry or an import holding NUL characters (which no UTF-8 text file
    holds: enough of them made PENDING.md read as UTF-16 and refused, stopping every review)
    is stored without them, and the files keep working."""
    ws = fresh_workspace(module_daemon)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    proposed = call(module_daemon, "propose", ws, title="P\x00", content="\x00a" * 1900)["proposal"]
    assert proposed["title"] == "P" and proposed["content"] == "a" * 1900
    assert call(module_daemon, "propose", ws, title="Q", content="next")["queued"]
    added = call(module_daemon, "add_entry", ws, title="T", content="tab\x00s")["entry"]
    assert added["content"] == "tabs"
    data = json.dumps({"entries": [{"title": "I", "content": "i\u0000j"}]})
    call(module_daemon, "import_memories", ws, data=data, format="makad")
    listed = call(module_daemon, "list_proposals", ws)["proposals"]
    assert sorted(p["proposal"]["content"] for p in listed) == ["a" * 1900, "ij", "next"]
    for name in ("MEMORY.md", "PENDING.md"):
        assert b"\x00" not in (ws / "memory" / name).read_bytes()


def test_terminal_control_characters_from_a_client_never_reach_the_files(
    module_daemon: DaemonProcess,
) -> None:
    """An agent's title, content or tag holding terminal escapes (clearing the screen,
    retitling the window, a disguised link) is stored without the control characters, so
    `cat MEMORY.md` or `maka memory list` never runs them; tabs and line breaks stay."""
    ws = fresh_workspace(module_daemon)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    proposed = call(
        module_daemon,
        "propose",
        ws,
        title="Build \x1b]0;pwned\x07notes",
        content="Run\tmake\r\n\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 \x9b31m\x7f",
        tags=["ops\x1b[5m"],
    )["proposal"]
    call(module_daemon, "approve", ws, ids=[proposed["id"]])
    [entry] = entries_of(module_daemon, ws)
    assert entry["title"] == "Build ]0;pwnednotes"
    assert entry["content"] == "Run\tmake\n[2J[31mred[0m ]8;;http://xlink]8;; 31m"
    assert entry["tags"] == ["ops[5m"]
    written = (ws / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert not any(char in written for char in "\x1b\x07\x9b\x7f")


# --- 11. lossless metadata ----------------------------------------------------------------------

_HELD_TOKENS = st.lists(
    st.sampled_from(
        [
            "origin=robot",
            "status=frozen",
            "scope=planet",
            "createdAt=99999999999999999999",
            "createdAt=2024-01-01",
            "decayTtlMs=forever",
            "x-v3=1",
            "flag",
        ]
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda t: t.partition("=")[0],
)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tokens=_HELD_TOKENS)
def test_touching_an_entry_keeps_values_it_does_not_understand(
    module_daemon: DaemonProcess, tokens: list[str]
) -> None:
    """update, archive and restore never rewrite a value they do not understand to a default."""
    ws = fresh_workspace(module_daemon)
    memory = ws / "memory" / "MEMORY.md"
    memory.write_text(
        f"# M\n\n## Held\n<!-- maka-memory: id=h updatedAt=1 {' '.join(tokens)} -->\noriginal\n",
        encoding="utf-8",
    )
    call(module_daemon, "update_entry", ws, id="h", content="changed", tags=["t"])
    call(module_daemon, "archive_entry", ws, id="h")
    call(module_daemon, "restore_entry", ws, id="h")
    comment = memory.read_text(encoding="utf-8").split("<!-- maka-memory:", 1)[1].split("-->")[0]
    for token in tokens:
        if not token.startswith("status="):  # archive and restore set the status on purpose
            assert token in comment.split(), (token, comment)


# --- 13. small fidelity defects -----------------------------------------------------------------


def test_heading_lines_read_back_without_the_escape_everywhere(module_daemon: DaemonProcess) -> None:
    """Content with `## ` lines reads back as written through every reader; the file stays whole."""
    ws = fresh_workspace(module_daemon)
    call(module_daemon, "set_settings", ws, agentReadEnabled=True, extractToolEnabled=True)
    content = "## Step one\nrun it\n\\## literally escaped"
    added = call(module_daemon, "add_entry", ws, title="Steps", content=content)["entry"]
    assert added["content"] == content
    assert [e["content"] for e in entries_of(module_daemon, ws)] == [content]
    proposal = call(module_daemon, "propose", ws, title="P", content="## Other\ntext")["proposal"]
    assert (
        call(module_daemon, "list_proposals", ws)["proposals"][0]["proposal"]["content"] == "## Other\ntext"
    )
    exported = json.loads(call(module_daemon, "export_memories", ws)["data"])["entries"]
    assert [e["content"] for e in exported] == [content]
    assert call(module_daemon, "memory_history", ws, id=added["id"])["entry"]["content"] == content
    pack = call(module_daemon, "build_context", ws, budgetTokens=4000, query="step")
    memory_text = next(s["text"] for s in pack["segments"] if s["kind"] == "memory")
    assert "## Step one" in memory_text and "\\## Step one" not in memory_text
    approved = call(module_daemon, "approve", ws, ids=[proposal["id"]])["approved"][0]["entry"]
    assert approved["content"] == "## Other\ntext"
    assert len(entries_of(module_daemon, ws)) == 2


def test_restoring_a_decayed_entry_keeps_its_created_at(module_daemon: DaemonProcess) -> None:
    """restore_entry on a decayed entry keeps createdAt; a fresh TTL keeps it active."""
    ws = fresh_workspace(module_daemon)
    (ws / "memory" / "MEMORY.md").write_text(
        "# M\n\n## Old\n<!-- maka-memory: id=old origin=manual createdAt=1000 updatedAt=1000 "
        "status=active tags= decayTtlMs=60000 -->\nlong ago\n",
        encoding="utf-8",
    )
    assert [e["status"] for e in entries_of(module_daemon, ws)] == ["archived"]
    restored = call(module_daemon, "restore_entry", ws, id="old")["entry"]
    assert restored["createdAt"] == 1000 and restored["status"] == "active"
    assert restored["decayTtlMs"] >= restored["updatedAt"] - 1000 + 60000
    after = entries_of(module_daemon, ws)
    assert [(e["status"], e["createdAt"]) for e in after] == [("active", 1000)]


def test_an_entry_under_an_empty_heading_takes_new_content_and_tags(module_daemon: DaemonProcess) -> None:
    """update_entry without a title on an entry whose heading is a bare `## ` changes its
    content and tags and keeps the heading as typed; an explicit empty title stays refused."""
    ws = fresh_workspace(module_daemon)
    memory = ws / "memory" / "MEMORY.md"
    memory.write_text("# M\n\n## Kept\nfirst\n\n## \nuntitled body\n", encoding="utf-8")
    [untitled] = [e for e in entries_of(module_daemon, ws) if e["content"].startswith("untitled")]
    assert untitled["title"] == ""
    call(module_daemon, "update_entry", ws, id=untitled["id"], content="new body", tags=["later"])
    [after] = [e for e in entries_of(module_daemon, ws) if e["title"] != "Kept"]
    assert (after["title"], after["content"], after["tags"]) == ("", "new body", ["later"])
    text = memory.read_text(encoding="utf-8")
    assert "\n## \n" in text and "new body" in text and "untitled body" not in text, text
    with pytest.raises(RemoteError) as caught:
        call(module_daemon, "update_entry", ws, id=after["id"], title="  ")
    assert caught.value.kind == "invalid_params" and caught.value.data.get("path") == "$.title"
    assert "## Kept\n" in memory.read_text(encoding="utf-8")


def test_a_byte_order_mark_inside_the_file_does_not_hide_the_heading_after_it(
    module_daemon: DaemonProcess,
) -> None:
    """Two files concatenated (the second starting with a UTF-8 BOM): the `## ` line after
    the BOM still starts an entry, and the BOM's bytes stay in the file through a rewrite."""
    ws = fresh_workspace(module_daemon)
    memory = ws / "memory" / "MEMORY.md"
    second = "\ufeff## Second\nfrom the other file\n"
    memory.write_bytes(("\ufeff# M\n\n## First\none\n" + second).encode("utf-8"))
    found = entries_of(module_daemon, ws)
    assert [(e["title"], e["content"]) for e in found] == [
        ("First", "one"),
        ("Second", "from the other file"),
    ]
    call(module_daemon, "update_entry", ws, id=found[1]["id"], content="changed")
    call(module_daemon, "update_entry", ws, id=found[0]["id"], content="also changed")
    data = memory.read_bytes().decode("utf-8")
    assert data.startswith("\ufeff# M") and "\n\ufeff## Second\n" in data, data
    assert [(e["title"], e["content"]) for e in entries_of(module_daemon, ws)] == [
        ("First", "also changed"),
        ("Second", "changed"),
    ]


def test_content_with_a_byte_order_mark_before_a_heading_stays_in_its_entry(
    module_daemon: DaemonProcess,
) -> None:
    """Content holding a line that is a BOM then `## ` is written so it reads back as that
    entry's content, not as an entry of its own."""
    ws = fresh_workspace(module_daemon)
    content = "before\n\ufeff## Not an entry\nafter"
    call(module_daemon, "add_entry", ws, title="Holder", content=content)
    [entry] = entries_of(module_daemon, ws)
    assert (entry["title"], entry["content"]) == ("Holder", content)
