"""Import and export against a real daemon: round trips, nothing found, the PENDING.md cap, progress."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka.errors import InvalidParams, RemoteError, TooLarge
from tests.cli.helpers import MAKA, Pty, run_maka
from tests.support import DaemonProcess, RawConnection, daemon_in_tmp

SMALL_CAP = 24 * 1024

ENTRIES = [
    (
        "Release checklist",
        "Before tagging:\n\n1. Run the tests.\n2. Update the changelog.",
        ["ops", "release"],
    ),
    (
        "Code fence",
        "Deploy with:\n\n```sh\nmake deploy\n## not a heading inside a fence\n```\n\nThen wait.",
        [],
    ),
    ("Heading-like line", "## written by an agent\nand a second paragraph\n\n  indented", ["agent"]),
    ("Unicode", "Préfère le thé — 日本語のメモ", ["langues"]),
]


def call(d: DaemonProcess, ws: Path, method: str, **params: Any) -> Any:
    return d.call(method, {"workspace": str(ws), **params})


def fill(d: DaemonProcess, ws: Path) -> None:
    for title, content, tags in ENTRIES:
        call(d, ws, "add_entry", title=title, content=content, tags=tags)


def shown(d: DaemonProcess, ws: Path) -> list[tuple[str, str, list[str]]]:
    state = call(d, ws, "read_state", includeEntries=True)
    return sorted((e["title"], e["content"], e["tags"]) for e in state["entries"])


@pytest.mark.parametrize("export_format", ["json", "markdown"])
def test_own_export_round_trips_losslessly(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path, export_format: str
) -> None:
    """An export read back into another workspace and approved gives the same entries,
    every paragraph, fence and ## line included."""
    fill(module_daemon, new_ws)
    exported = call(module_daemon, new_ws, "export_memories", format=export_format)["data"]
    target = short_tmp / f"other-{export_format}"
    target.mkdir()
    result = call(module_daemon, target, "import_memories", data=exported)
    assert result["format"] == "makad" and result["errors"] == []
    assert len(result["imported"]) == len(ENTRIES)
    call(module_daemon, target, "approve", ids=result["imported"])
    assert shown(module_daemon, target) == shown(module_daemon, new_ws)
    again = call(module_daemon, target, "export_memories", format=export_format)["data"]
    assert call(module_daemon, target, "import_memories", data=again)["imported"] == []  # nothing new


@pytest.mark.parametrize("export_format", ["json", "markdown"])
def test_an_export_brings_back_only_what_was_active_and_keeps_decay(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path, export_format: str
) -> None:
    """An export with its archived entries (-a) read into another workspace: an archived
    entry, and one scoped to a session of the exporting workspace, are skipped saying why
    (never made active memories); an entry that decays keeps its decayTtlMs."""
    call(module_daemon, new_ws, "add_entry", title="Kept", content="Uses pnpm")
    day = 86_400_000
    call(
        module_daemon, new_ws, "add_entry", title="For a while", content="Freeze until Friday", decayTtlMs=day
    )
    old = call(module_daemon, new_ws, "add_entry", title="Retired", content="Deploys on Mondays")["entry"]
    call(module_daemon, new_ws, "archive_entry", id=old["id"])
    session = call(module_daemon, new_ws, "open_session")["sessionId"]
    call(
        module_daemon,
        new_ws,
        "add_entry",
        title="Mine",
        content="Only here",
        scope="session",
        sessionId=session,
    )
    exported = call(module_daemon, new_ws, "export_memories", format=export_format, includeArchived=True)[
        "data"
    ]
    target = short_tmp / f"other-{export_format}"
    target.mkdir()
    result = call(module_daemon, target, "import_memories", data=exported)
    assert sorted(s["reason"].split(":")[0] for s in result["skipped"]) == [
        "archived in the export",
        "scoped to one session of the workspace it was exported from",
    ]
    call(module_daemon, target, "approve", ids=result["imported"])
    entries = call(module_daemon, target, "read_state", includeEntries=True, includeArchived=True)["entries"]
    assert sorted((e["title"], e["status"], e["scope"], e["decayTtlMs"]) for e in entries) == [
        ("For a while", "active", "workspace", day),
        ("Kept", "active", "workspace", None),
    ]


def test_an_export_cut_short_is_refused_and_nothing_queued(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A JSON export cut short is refused as invalid JSON naming where it breaks; PENDING.md
    stays as it was (its lines are never queued as memories of their own)."""
    fill(module_daemon, new_ws)
    exported = call(module_daemon, new_ws, "export_memories", format="json")["data"]
    target = short_tmp / "other"
    target.mkdir()
    with pytest.raises(InvalidParams) as refused:
        call(module_daemon, target, "import_memories", data=exported[: len(exported) // 2])
    assert refused.value.data["reason"] == "invalid_json"
    assert "not valid JSON" in str(refused.value)
    assert call(module_daemon, target, "list_proposals")["proposals"] == []
    assert not (target / "memory" / "PENDING.md").exists()


def test_a_file_with_nothing_to_import_is_an_error_naming_what_was_expected(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """0 items found is invalid_params with the format, what it expects and the reasons."""
    with module_daemon.client() as c, pytest.raises(InvalidParams) as caught:
        c.call(
            "import_memories", {"workspace": str(new_ws), "data": "# Only a heading\n", "format": "markdown"}
        )
    data = caught.value.data
    assert data["format"] == "markdown" and "bullets" in data["expected"]
    assert data["errors"] == [{"locator": "file", "reason": "no bullet items found"}]
    assert not (new_ws / "memory" / "PENDING.md").exists()


def test_cli_zero_items_exits_non_zero(module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path) -> None:
    """`maka import` of a file with nothing in it exits 1 and says what the format expects."""
    empty = short_tmp / "empty.json"
    empty.write_text('{"results": []}')
    result = run_maka(module_daemon, "import", str(empty), "-w", str(new_ws), workspace=False)
    assert result.returncode == 1 and "expected mem0 get_all JSON" in result.stderr


def test_cli_plain_text_imports_every_line_as_text(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A plain .txt list (e.g. pasted from ChatGPT's "Manage memories") imports every line as text."""
    pasted = short_tmp / "notes.txt"
    pasted.write_text("Prefers metric units.\nHas two cats.\n\nIs learning Rust.\n")
    result = run_maka(module_daemon, "import", str(pasted), "-w", str(new_ws), workspace=False)
    assert result.returncode == 0, result.stderr
    assert "Imported 3 memories from text" in result.stdout
    asked = run_maka(module_daemon, "import", "--help", workspace=False)
    assert "plain text" in asked.stdout and "text (plain text" in asked.stdout


CHATGPT_CONVERSATIONS = [
    {
        "title": "Package managers",
        "create_time": 1700000000.0,
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["q"]},
            "q": {
                "id": "q",
                "message": {"author": {"role": "user"}, "content": {"parts": ["pnpm or npm?"]}},
                "parent": "root",
                "children": [],
            },
        },
    }
]


@pytest.mark.parametrize("fmt", [None, "chatgpt", "mem0"])
def test_cli_chatgpt_conversations_are_refused_saying_where_memories_are(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path, fmt: str | None
) -> None:
    """ChatGPT's conversations.json is refused (chat_history), naming where ChatGPT's memories are; nothing queued."""
    export = short_tmp / "conversations.json"
    export.write_text(json.dumps(CHATGPT_CONVERSATIONS))
    asked = ["--format", fmt] if fmt else []
    result = run_maka(module_daemon, "import", str(export), *asked, "-w", str(new_ws), workspace=False)
    assert result.returncode == 1 and "ChatGPT's conversation history" in result.stderr
    assert "Manage memories" in result.stderr
    assert not (new_ws / "memory" / "PENDING.md").exists()
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", data=json.dumps(CHATGPT_CONVERSATIONS))
    assert raised.value.data["reason"] == "chat_history" and "chatgpt" in raised.value.data["formats"]
    assert call(module_daemon, new_ws, "read_state")["status"] in ("ok", "missing")


def test_cli_zip_archive_is_refused_asking_to_unpack_it(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A ZIP archive (a data export as downloaded) is refused as binary, saying to unpack it."""
    archive = short_tmp / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("conversations.json", json.dumps(CHATGPT_CONVERSATIONS))
    result = run_maka(module_daemon, "import", str(archive), "-w", str(new_ws), workspace=False)
    assert result.returncode == 1 and "ZIP archive: unpack it" in result.stderr
    assert not (new_ws / "memory" / "PENDING.md").exists()


@pytest.mark.parametrize("target", [".", "memory", "memory/PENDING.md", "memory/MEMORY.md"])
def test_cli_importing_the_workspaces_own_memory_is_refused(
    module_daemon: DaemonProcess, new_ws: Path, target: str
) -> None:
    """`maka import memory` (or `maka import .`, the workspace folder) in a workspace is
    refused (own_memory); PENDING.md is left as it was."""
    fill(module_daemon, new_ws)
    call(module_daemon, new_ws, "import_memories", data="Waiting memory one\nWaiting memory two\n")
    before = (new_ws / "memory" / "PENDING.md").read_bytes()
    result = run_maka(module_daemon, "import", str(new_ws / target), "-w", str(new_ws), workspace=False)
    assert result.returncode == 1 and "this workspace's own memory" in result.stderr
    assert (new_ws / "memory" / "PENDING.md").read_bytes() == before
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", path=str(new_ws / target))
    assert raised.value.data["reason"] == "own_memory"


@pytest.mark.parametrize("target", [".", "memory"])
def test_another_workspaces_folder_imports_its_entries(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path, target: str
) -> None:
    """Importing another workspace's folder, or its memory folder, queues its MEMORY.md's
    entries one by one, never its MEMORY.md or PENDING.md as one proposal each."""
    fill(module_daemon, new_ws)
    call(module_daemon, new_ws, "import_memories", data="Waiting memory one\n")
    other = short_tmp / "other"
    other.mkdir()
    result = run_maka(module_daemon, "import", str(new_ws / target), "-w", str(other), workspace=False)
    assert result.returncode == 0, result.stderr
    titles = sorted(v["proposal"]["title"] for v in call(module_daemon, other, "list_proposals")["proposals"])
    assert titles == sorted(title for title, _, _ in ENTRIES)


def test_an_import_path_longer_than_the_system_takes_is_refused_unresolved(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A ``path`` past the system's path limit (``/../../…``, which resolving copied the
    rest of at every component: hours of a worker thread for 6 MB) is invalid_params,
    reason too_long, at once; nothing is queued."""
    spelled = "/" + "../" * 200_000 + str(new_ws / "memory" / "MEMORY.md").lstrip("/")
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", path=spelled)
    assert (raised.value.data["reason"], raised.value.data["path"]) == ("too_long", "$.path")
    assert not (new_ws / "memory" / "PENDING.md").exists()


def test_an_import_path_holding_a_nul_is_invalid_params(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A ``path`` with a NUL character (no file can have one) is invalid_params, reason nul,
    not an internal error; nothing is queued."""
    memory = new_ws / "memory" / "MEMORY.md"
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", path=f"{memory}\0.md")
    assert (raised.value.data["reason"], raised.value.data["path"]) == ("nul", "$.path")
    assert not (new_ws / "memory" / "PENDING.md").exists()


def test_cli_binary_file_is_refused_and_nothing_queued(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A binary file is invalid_params naming the formats; PENDING.md is not written, the daemon serves on."""
    binary = short_tmp / "photo.dat"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    result = run_maka(module_daemon, "import", str(binary), "-w", str(new_ws), workspace=False)
    assert result.returncode == 1 and "is not text" in result.stderr and "NUL bytes" in result.stderr
    assert "markdown, text" in result.stderr and "--format" not in result.stderr
    assert not (new_ws / "memory" / "PENDING.md").exists()
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", data="one\x00two\x00")
    assert raised.value.data["reason"] == "binary" and "text" in raised.value.data["formats"]
    assert call(module_daemon, new_ws, "list_proposals")["proposals"] == []


def test_cli_empty_file_says_empty_without_naming_a_wire_field(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """An empty file is refused as empty, listing the formats; a wrong format's hint names --format."""
    empty = short_tmp / "empty.txt"
    empty.write_text("\n  \n")
    result = run_maka(module_daemon, "import", str(empty), "-w", str(new_ws), workspace=False)
    assert result.returncode == 1 and "the file is empty" in result.stderr
    assert "markdown, text" in result.stderr and "pass format" not in result.stderr
    notes = short_tmp / "notes.txt"
    notes.write_text("Has two cats.\n")
    wrong = run_maka(
        module_daemon, "import", str(notes), "--format", "mem0", "-w", str(new_ws), workspace=False
    )
    assert wrong.returncode == 1 and "without --format it is read as text" in wrong.stderr
    assert "pass format" not in wrong.stderr and not (new_ws / "memory" / "PENDING.md").exists()


def test_cli_json_export_is_not_double_encoded(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """`maka --json export` prints the export document itself, not a string holding it."""
    fill(module_daemon, new_ws)
    result = run_maka(module_daemon, "--json", "export", "-w", str(new_ws), workspace=False)
    document = json.loads(result.stdout)
    assert isinstance(document["entries"], list) and len(document["entries"]) == len(ENTRIES)
    plain = json.loads(run_maka(module_daemon, "export", "-w", str(new_ws), workspace=False).stdout)
    assert plain == document


@pytest.fixture(scope="module")
def capped() -> Iterator[DaemonProcess]:
    """A daemon whose memory files are capped at 24 KiB."""
    yield from daemon_in_tmp({"LOCAL_MEMORY_MAX_BYTES": str(SMALL_CAP)})


def lines(count: int, start: int = 0) -> str:
    return "".join(f"- Imported fact number {i}: {'x' * 200}\n" for i in range(start, start + count))


def test_an_import_past_the_pending_cap_is_split(capped: DaemonProcess) -> None:
    """What fits under PENDING.md's cap is queued, the rest deferred and counted; the same
    import after a review brings the rest in, nothing twice."""
    ws = capped.workspace
    first = call(capped, ws, "import_memories", data=lines(300), format="markdown")
    queued, deferred = len(first["imported"]), first["deferred"]
    assert queued > 0 and deferred > 0 and queued + deferred == 300
    assert (ws / "memory" / "PENDING.md").stat().st_size <= SMALL_CAP
    call(capped, ws, "reject", ids=first["imported"])
    second = call(capped, ws, "import_memories", data=lines(300), format="markdown")
    assert second["duplicates"] == queued and len(second["imported"]) > 0
    assert len(second["imported"]) + second["deferred"] == deferred


def test_an_import_into_a_full_pending_md_is_refused_up_front(capped: DaemonProcess, short_tmp: Path) -> None:
    """When nothing fits, the import is too_large saying how to make room, and PENDING.md is unchanged."""
    ws = short_tmp / "full"
    ws.mkdir()
    call(capped, ws, "import_memories", data=lines(300), format="markdown")
    before = (ws / "memory" / "PENDING.md").read_bytes()
    with capped.client() as c, pytest.raises(TooLarge) as caught:
        c.call("import_memories", {"workspace": str(ws), "data": lines(5, start=1000), "format": "markdown"})
    assert "approve or reject" in caught.value.message and caught.value.data["waiting"] == 5
    assert (ws / "memory" / "PENDING.md").read_bytes() == before


def test_cli_says_how_to_bring_in_the_deferred_ones(capped: DaemonProcess, short_tmp: Path) -> None:
    """`maka import` names the deferred count and the way to import them."""
    ws = short_tmp / "cli"
    ws.mkdir()
    source = short_tmp / "many.md"
    source.write_text(lines(300))
    result = run_maka(capped, "import", str(source), "-w", str(ws), workspace=False)
    assert result.returncode == 0, result.stderr
    assert "did not fit" in result.stdout and f"maka -w {ws} import" in result.stdout


def test_progress_notifications_come_before_the_result(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """With progress: true the importing connection gets import_progress counts, then the result."""
    data = lines(250)
    with RawConnection(module_daemon.socket) as conn:
        conn.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "import_memories",
                    "params": {
                        "workspace": str(new_ws),
                        "data": data,
                        "format": "markdown",
                        "progress": True,
                    },
                }
            )
        )
        notes = []
        while True:
            message = conn.recv_message()
            if "id" in message:
                break
            notes.append(message)
    assert message["result"]["imported"]
    assert {n["method"] for n in notes} == {"import_progress"}
    counts = [n["params"]["done"] for n in notes]
    assert counts == sorted(counts) and counts[-1] == 250
    assert all(n["params"]["total"] == 250 for n in notes)


def test_cli_shows_a_progress_bar_on_a_terminal(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """On a terminal a slow import draws a progress bar from the daemon's counts (the one-second
    delay is set to 0 here so the test need not be slow); the summary follows it."""
    source = short_tmp / "bar.md"
    source.write_text(lines(200))
    env = {**os.environ, "MAKA_PROGRESS_AFTER_S": "0", "TERM": "xterm", "COLUMNS": "100"}
    pty = Pty([*MAKA, "--socket", str(module_daemon.socket), "import", str(source), "-w", str(new_ws)], env)
    seen = pty.expect("Imported 200 memories")
    code, _ = pty.wait()
    assert code == 0 and "Importing" in seen and "200/200" in seen


def test_no_progress_bar_off_a_terminal(module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path) -> None:
    """Piped, the import prints only its summary (no bar, no progress asked for)."""
    source = short_tmp / "quiet.md"
    source.write_text(lines(150))
    result = run_maka(
        module_daemon,
        "import",
        str(source),
        "-w",
        str(new_ws),
        workspace=False,
        env={"MAKA_PROGRESS_AFTER_S": "0"},
    )
    assert result.returncode == 0 and "Importing" not in result.stderr + result.stdout


def test_chatgpt_memories_keep_their_dates_and_are_said_once(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A ChatGPT list imported and approved: each entry keeps its line's date (and a default
    decay counts from the approval, so none is archived at once), a long line gets a short
    title, and the pack carries each memory's text once."""
    data = (
        "[2023-04-02] - Has two cats.\n"
        "[2024-05-12] - Works at a bakery in Lisbon and bakes sourdough every Friday morning.\n"
    )
    call(module_daemon, new_ws, "set_settings", agentReadEnabled=True, defaultDecayDays=30)
    imported = call(module_daemon, new_ws, "import_memories", data=data, format="chatgpt")["imported"]
    approved = call(module_daemon, new_ws, "approve", ids=imported)["approved"]
    entries = {item["entry"]["content"]: item["entry"] for item in approved}
    cats = entries["Has two cats."]
    bakery = entries["Works at a bakery in Lisbon and bakes sourdough every Friday morning."]
    assert cats["createdAt"] == 1680393600000 and bakery["createdAt"] == 1715472000000
    assert bakery["title"] == "Works at a bakery in Lisbon…" and cats["title"] == "Has two cats."
    state = call(module_daemon, new_ws, "read_state", includeEntries=True)
    assert {e["status"] for e in state["entries"]} == {"active"}
    month = 30 * 86_400_000
    assert all(e["decayTtlMs"] > month for e in state["entries"])  # 30 days from the approval
    text = "\n".join(
        s["text"]
        for s in call(module_daemon, new_ws, "build_context", query="cats bakery", budgetTokens=2000)[
            "segments"
        ]
    )
    assert text.count("Has two cats") == 1
    assert text.count("bakes sourdough") == 1


def test_a_text_import_queues_no_piece_of_a_secret(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A secret in a text import's line is redacted in the proposal's content and title alike: PENDING.md holds none of it."""
    token = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
    result = call(module_daemon, new_ws, "import_memories", data=f"github token {token}\n", format="text")
    assert len(result["imported"]) == 1
    pending = (new_ws / "memory" / "PENDING.md").read_text()
    assert "## github token [REDACTED:github_token]" in pending
    assert "ghp_" not in pending


def test_a_markdown_import_queues_no_secret_as_a_tag(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A secret as a Markdown section heading reaches PENDING.md as a redaction slug, in no case."""
    data = "# AKIAIOSFODNN7EXAMPLE\n\n- Deploys go through the staging account first\n"
    assert len(call(module_daemon, new_ws, "import_memories", data=data, format="markdown")["imported"]) == 1
    pending = (new_ws / "memory" / "PENDING.md").read_text()
    assert "redacted-aws_access_key" in pending
    assert "akiaiosfodnn7example" not in pending.casefold()


def test_a_file_of_only_a_byte_order_mark_is_empty(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """A file holding a UTF-8 byte-order mark and blank lines is refused as empty, not as no memories in some format."""
    bom = short_tmp / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf\r\n \n")
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", path=str(bom))
    assert raised.value.data["reason"] == "empty" and "the file is empty" in str(raised.value)
    assert call(module_daemon, new_ws, "list_proposals")["proposals"] == []


@pytest.mark.skipif(
    not os.path.exists("/proc/self/mem"), reason="needs /proc/self/mem (Linux), a file no read succeeds on"
)
def test_an_import_path_that_cannot_be_read_is_an_io_error(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """A path whose read fails (``/proc/self/mem``: EIO at offset 0; an unreadable file's
    EACCES goes the same way) is ``io_error`` naming the file and the system's reason, not
    an internal error; nothing is queued and the daemon serves on."""
    with pytest.raises(RemoteError) as raised:
        call(module_daemon, new_ws, "import_memories", path="/proc/self/mem")
    assert raised.value.kind == "io_error", raised.value
    assert raised.value.data["file"] == "mem" and raised.value.data["errno"] == "EIO"
    assert call(module_daemon, new_ws, "list_proposals")["proposals"] == []


def test_a_format_that_finds_nothing_names_the_one_detected(
    module_daemon: DaemonProcess, new_ws: Path, short_tmp: Path
) -> None:
    """--format markdown on a file of `## ` entries finds nothing: the refusal names the
    format the file is detected as (data.detected) and `maka import` says to leave --format
    out; a file no other format reads either has no detected."""
    path = short_tmp / "entries.md"
    path.write_text("## Deploys happen on Tuesdays\nNever on Fridays.\n", encoding="utf-8")
    with pytest.raises(InvalidParams) as raised:
        call(module_daemon, new_ws, "import_memories", path=str(path), format="markdown")
    assert raised.value.data["reason"] == "no_memories" and raised.value.data["detected"] == "makad"
    assert "detected as makad" in raised.value.message
    result = run_maka(
        module_daemon, "import", "--format", "markdown", str(path), "-w", str(new_ws), workspace=False
    )
    assert result.returncode == 1 and "without --format it is read as makad" in result.stderr
    with pytest.raises(InvalidParams) as nothing:
        call(module_daemon, new_ws, "import_memories", data="just prose\n", format="mem0")
    assert "detected" in nothing.value.data and nothing.value.data["detected"] == "text"
    with pytest.raises(InvalidParams) as none:
        call(module_daemon, new_ws, "import_memories", data='{"foo": 1}', format="mem0")
    assert "detected" not in none.value.data
    assert not (new_ws / "memory" / "PENDING.md").exists()
