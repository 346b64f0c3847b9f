"""Slips made typing MEMORY.md by hand are named with the fix, and the file stays as typed."""

from __future__ import annotations

import pytest

from tests.cli.helpers import call, run_maka
from tests.support import DaemonProcess


def write_memory(d: DaemonProcess, text: str) -> bytes:
    (d.workspace / "memory").mkdir(exist_ok=True)
    path = d.workspace / "memory" / "MEMORY.md"
    path.write_text(text, encoding="utf-8")
    return path.read_bytes()


COMMENT = "id=5922a6112320ab35 origin=manual createdAt=1764547200000 status=active tags=ops,deploy"


@pytest.mark.parametrize(
    "opening",
    [
        "<!-- maka-memroy:",
        "<!-- Maka-Memory:",
        "<!-- maka memory:",
        "<!-- maka_memory:",
        "<!-- maka-memory :",
        "<!--maka-memory",
        "<!--",
    ],
)
def test_a_misspelt_metadata_comment_is_named_with_the_spelling_makad_reads(
    shared_daemon: DaemonProcess, opening: str
) -> None:
    """A metadata comment whose maka-memory: is misspelt or missing is named on its line: the entry
    got an id from its text and the comment reads as its content; the file is untouched."""
    typed = COMMENT.replace(",", ", ")  # the list typed with a space: the suggestion joins it
    before = write_memory(
        shared_daemon, f"# Maka Memory\n\n## Use pnpm\n{opening} {typed} -->\nThe frontend uses pnpm.\n"
    )
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "line 4" in result.stderr and '"Use pnpm"' in result.stderr
    assert "<!-- maka-memory:" in result.stderr  # the spelling makad reads
    assert "id=5922a6112320ab35" in result.stderr  # the id the entry does not answer to
    assert f"did you mean <!-- maka-memory: {COMMENT} -->?" in result.stderr
    assert (shared_daemon.workspace / "memory" / "MEMORY.md").read_bytes() == before


@pytest.mark.parametrize(
    "comment",
    ["<!-- TODO: check this with ops -->", "<!-- prettier-ignore -->", "<!-- note: id=7 is the ticket -->"],
)
def test_an_ordinary_comment_under_a_heading_warns_about_nothing(
    shared_daemon: DaemonProcess, comment: str
) -> None:
    """A comment of the user's own under a heading is content, not a misspelt metadata comment."""
    write_memory(shared_daemon, f"# Maka Memory\n\n## Use pnpm\n{comment}\nThe frontend uses pnpm.\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("##Deploys on Tuesdays", "## Deploys on Tuesdays"),
        ("### Deploys on Tuesdays", "## Deploys on Tuesdays"),
    ],
)
def test_a_heading_typed_without_its_space_or_with_three_hashes_is_named(
    shared_daemon: DaemonProcess, typed: str, meant: str
) -> None:
    """A first entry typed as ``##Title`` or ``### Title`` is not an entry: the warning on its
    line says so and gives the heading makad reads, not only the general advice."""
    write_memory(shared_daemon, f"# Maka Memory\n\n{typed}\nNever on Fridays.\n\n## Tabs\nUse tabs.\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    (line3,) = [line for line in result.stderr.splitlines() if "line 3" in line]
    assert f"did you mean {meant}?" in line3
    assert "line 4" in result.stderr  # its text is outside any entry too


def test_a_heading_without_its_space_below_an_entry_is_named(shared_daemon: DaemonProcess) -> None:
    """``##Second`` typed below an entry reads as part of that entry: the warning on its line
    names the entry it joined and the heading meant; the file is untouched."""
    before = write_memory(shared_daemon, "# Maka Memory\n\n## First\ntext one\n\n##Second note\ntext two\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    (line6,) = [line for line in result.stderr.splitlines() if "line 6" in line]
    assert '"First"' in line6 and "did you mean ## Second note?" in line6
    assert (shared_daemon.workspace / "memory" / "MEMORY.md").read_bytes() == before


def test_a_heading_typed_with_one_hash_below_an_entry_is_named(shared_daemon: DaemonProcess) -> None:
    """``# Second`` typed below an entry (one # short of an entry) reads as part of that entry:
    the warning on its line says so, names the entry it joined and ``## Second``, and the
    fix says how an entry's heading is typed; a ``# `` line in a code block warns about nothing."""
    before = write_memory(
        shared_daemon,
        "# Maka Memory\n\n## First\ntext one\n\n# Second note\ntext two\n\n"
        "## Build\n```sh\n# install first\nnpm ci\n```\n",
    )
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    (line6,) = [line for line in result.stderr.splitlines() if "line 6" in line]
    assert "has one # where an entry's heading has two" in line6
    assert '"First"' in line6 and "did you mean ## Second note?" in line6
    assert "type that line as ## Title" in result.stderr
    assert "install first" not in result.stderr
    assert (shared_daemon.workspace / "memory" / "MEMORY.md").read_bytes() == before


def test_hashes_in_a_code_block_of_an_entry_warn_about_nothing(shared_daemon: DaemonProcess) -> None:
    """``##x`` inside a fenced code block of an entry is code, not a heading typed wrong."""
    write_memory(shared_daemon, "# Maka Memory\n\n## Build\n```sh\n##run this\n```\nthen deploy\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


def test_a_hashtag_starting_content_the_daemon_wrote_warns_about_nothing(
    shared_daemon: DaemonProcess,
) -> None:
    """An entry added with content that starts ``##tag`` is the user's text as given: the
    file the daemon wrote warns about nothing."""
    added = run_maka(shared_daemon, "memory", "add", "Tags", "##release-notes go in the wiki\nweekly")
    assert added.returncode == 0, added.stderr
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


def test_tags_typed_with_spaces_after_the_commas_are_named_with_the_list_meant(
    shared_daemon: DaemonProcess,
) -> None:
    """``tags=ops, deploy, ci`` (spaces after the commas) names each word left out with the
    whole list as makad reads it: ``tags=ops,deploy,ci``."""
    write_memory(
        shared_daemon,
        "# Maka Memory\n\n## Deploys\n<!-- maka-memory: id=aaaa000000000001 tags=ops, deploy, ci -->\nTuesdays.\n",
    )
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "line 4" in line]
    assert len(warned) == 2
    assert all("did you mean tags=ops,deploy,ci?" in line for line in warned), warned


def test_warnings_about_huge_slips_stay_small_in_read_state(shared_daemon: DaemonProcess) -> None:
    """``##`` lines, a misspelt comment and a title of 30 KB each are quoted
    abbreviated: each warning stays small, and there are at most ten of each kind."""
    long = "x" * 30_000
    write_memory(
        shared_daemon,
        "# Maka Memory\n\n##"
        + long
        + "\n\n## Notes\nbody\n\n##"
        + long
        + "\n\n## T"
        + long
        + "\n<!-- maka-memroy: id="
        + long
        + " status=active -->\nbody\n"
        + "".join(
            f"## E{i}\n<!-- maka-memroy: id=e{i} status=active -->\nbody\n\n##x{i}\n" for i in range(30)
        ),
    )
    ws = str(shared_daemon.workspace)
    with shared_daemon.client() as c:
        warnings = c.call("read_state", workspace=ws)["warnings"]
    kinds = [w["kind"] for w in warnings]
    assert 1 <= kinds.count("not_a_heading") <= 10 and 1 <= kinds.count("bad_metadata") <= 11
    assert "text_outside_entries" in kinds
    assert max(len(w["message"]) for w in warnings) < 2_000


def test_headings_typed_right_under_the_text_of_a_hand_typed_entry_are_named(
    shared_daemon: DaemonProcess,
) -> None:
    """``# Testing`` and ``##Editor`` typed by hand with no blank line above them (in a file
    saved with a BOM and CRLF) read as part of the entry above: ``maka memory list`` and
    ``maka status`` name each line, the entry it joined and the heading meant."""
    before = write_memory(
        shared_daemon,
        "\ufeff# My notes\r\n\r\n## Deploys\r\nDeploys go out on Tuesdays.\r\n# Testing\r\n"
        "Run\tpytest -q before pushing.\r\n##Editor\r\nhelix, tabs\r\n",
    )
    listed = run_maka(shared_daemon, "memory", "list")
    assert listed.returncode == 0, listed.stderr
    (line5,) = [line for line in listed.stderr.splitlines() if "line 5" in line]
    assert '"Deploys"' in line5 and "did you mean ## Testing?" in line5
    (line7,) = [line for line in listed.stderr.splitlines() if "line 7" in line]
    assert '"Deploys"' in line7 and "did you mean ## Editor?" in line7
    status = run_maka(shared_daemon, "status", "-w", str(shared_daemon.workspace))
    assert status.returncode == 0, status.stderr
    assert "not_a_heading 2" in status.stdout
    assert (shared_daemon.workspace / "memory" / "MEMORY.md").read_bytes() == before
    # Once the daemon wrote the entry's comment (an archive), the lines are still named.
    (entry,) = call(shared_daemon, "read_state", includeEntries=True)["entries"]
    assert run_maka(shared_daemon, "memory", "archive", entry["id"]).returncode == 0
    assert "origin=unknown" in (shared_daemon.workspace / "memory" / "MEMORY.md").read_text()
    again = run_maka(shared_daemon, "memory", "list", "-a")
    assert "did you mean ## Testing?" in again.stderr and "did you mean ## Editor?" in again.stderr


def test_a_hash_line_right_under_text_the_daemon_wrote_warns_about_nothing(
    shared_daemon: DaemonProcess,
) -> None:
    """Content added through makad whose second line starts ``# `` (a shell comment, say) is
    the text as given: the entry the daemon wrote, with its comment, warns about nothing."""
    added = run_maka(shared_daemon, "memory", "add", "Build", "Run these:\n# install first\nnpm ci")
    assert added.returncode == 0, added.stderr
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


def test_entries_typed_with_one_hash_each_are_named_with_the_heading_meant(
    shared_daemon: DaemonProcess,
) -> None:
    """A file typed as ``# Deploys`` / text / ``# Testing`` / text (one # per heading, so no
    entry at all): the warning on each text line names the ``# `` heading above it and the
    ``## `` heading meant, not only the general rule; the file is untouched."""
    before = write_memory(shared_daemon, "# Deploys\nTuesdays only\n\n# Testing\nrun pytest\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    (line2,) = [line for line in result.stderr.splitlines() if "line 2 " in line]
    assert '"# Deploys" above it (line 1)' in line2 and "did you mean ## Deploys?" in line2
    (line5,) = [line for line in result.stderr.splitlines() if "line 5 " in line]
    assert '"# Testing" above it (line 4)' in line5 and "did you mean ## Testing?" in line5
    assert "fix: type each heading named above as ## Title" in result.stderr
    assert "tidy --import" not in result.stderr  # no bullets to import: only headings to retype
    assert (shared_daemon.workspace / "memory" / "MEMORY.md").read_bytes() == before


def test_a_file_title_above_bullets_is_not_taken_for_an_entry_heading(shared_daemon: DaemonProcess) -> None:
    """One ``# Title`` above a list of bullets is the file's title: the bullets' warnings give
    the general rule and name no ``## `` heading meant."""
    write_memory(shared_daemon, "# Project notes\n- use pnpm\n- tabs\n")
    result = run_maka(shared_daemon, "memory", "list")
    assert result.returncode == 0, result.stderr
    assert "line 2 " in result.stderr and "did you mean" not in result.stderr
    assert "tidy --import" in result.stderr
