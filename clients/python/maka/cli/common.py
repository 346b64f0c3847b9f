"""What every command group shares: exit codes, common options, ids, the editor."""

from __future__ import annotations

import argparse
import difflib
import logging
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

from maka.cli.output import short_id
from maka.client import Client
from maka.ids import DERIVED_ID_PREFIX, matching_ids
from maka.workspace import resolve_workspace

EXIT_OK, EXIT_REMOTE, EXIT_USAGE, EXIT_NO_DAEMON, EXIT_PROTOCOL = 0, 1, 2, 3, 4
EXIT_UNTRUSTED = 5
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    the daemon answered with an error (its kind is printed, e.g. not_found)
  2    usage error: bad arguments, an ambiguous id or title, invalid JSON, a missing optional extra
  3    no daemon is running on the socket
  4    the connection broke, the reply was malformed, or it timed out
  5    the server on the socket runs as another user: refused (see --server-uid)
  130  interrupted (Ctrl-C)
"""

Command = Callable[[Client, argparse.Namespace], int]


class CliError(Exception):
    """A failure the CLI itself detects: printed as ``maka: message``, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def default_workspace() -> str:
    """$MAKA_WORKSPACE, else the workspace found by walking up from the current directory
    (like git: the nearest folder holding memory/MEMORY.md or .git); always absolute."""
    return resolve_workspace(None)


def did_you_mean(given: str, choices: Iterable[str], *, casefold: bool = False) -> str | None:
    """The choice closest to ``given`` (difflib's ratio, 0.6 at least), if any."""
    pool = list(choices)
    if casefold:
        folded = {c.casefold(): c for c in pool}
        if given.casefold() in folded:
            return folded[given.casefold()]
    close = difflib.get_close_matches(given, pool, n=1, cutoff=0.6)
    return close[0] if close else None


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command or choice."""

    #: Makes ``description`` when the help is shown: for one read from something costly to
    #: load, which building the parser (every command) should not pay for.
    describe: Callable[[], str] | None = None

    def format_help(self) -> str:
        if self.describe is not None:
            self.description = self.describe()
        return super().format_help()

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        if isinstance(action, argparse._SubParsersAction) and f"--{value}" in self._option_string_actions:
            # `maka help`, `maka version`: the option of that name, not a command close to it
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}; did you mean '{self.prog} --{value}'?"
            )
        names = [str(c) for c in choices]
        meant = _meant_command(self.prog, choices, str(value)) if isinstance(choices, Mapping) else None
        if meant is not None:
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}; {meant}")
        close = did_you_mean(str(value), names)
        hint = f"; did you mean {close!r}?" if close else f" (choose from {', '.join(names)})"
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint}")

    def error(self, message: str) -> NoReturn:
        """argparse's usage error; a missing command (or action) also names the choices."""
        for action in self._actions:
            if (
                isinstance(action, argparse._SubParsersAction)
                and action.choices
                and message.endswith(f"required: {argparse._get_action_name(action)}")
            ):
                message += f" (choose from {', '.join(action.choices)}; `{self.prog} --help` describes each)"
        super().error(message)


# Commands other tools have, where maka does the same with another command. Spelling
# distance would name a wrong one (`start`: 'status'), or none at all.
_OTHER_TOOLS_WORDS: Final = {
    "init": "there is no init: the first write creates memory/ (`{prog} memory add TITLE TEXT`, "
    "`{prog} settings agentReadEnabled=on`)",
    "doctor": "`{prog} status` checks the daemon and what the workspace's files hold that makad cannot use",
    "start": "{prog} starts makad on demand (any command does; `makad` runs it in the foreground)",
    "restart": "`{prog} stop`, then any command starts makad again",
}
_OTHER_TOOLS_WORDS["check"] = _OTHER_TOOLS_WORDS["health"] = _OTHER_TOOLS_WORDS["doctor"]


def _meant_command(prog: str, choices: Mapping[str, Any], word: str) -> str | None:
    """What ``prog WORD`` most likely meant when WORD is no command: an action of ``memory``
    typed without it (`maka pin ID`: 'maka memory pin', never 'ping'), or a command another
    tool has (`maka init`, `maka doctor`)."""
    memory = choices.get("memory")
    if isinstance(memory, argparse.ArgumentParser):
        for sub in memory._actions:
            if isinstance(sub, argparse._SubParsersAction) and word in sub.choices:
                return f"did you mean '{prog} memory {word}'?"
    said = _OTHER_TOOLS_WORDS.get(word) if "status" in choices else None
    return None if said is None else said.format(prog=prog)


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args``, with the closest option of the command typed named for a
    mistyped one (``--achived``: did you mean '--archived'?), and an option of ``maka``
    itself typed after the command said to go before it."""
    unknown = _unknown_option_before_command(parser, argv)
    if unknown is not None:
        known = [o for action in parser._actions for o in action.option_strings]
        folded = [o for o in known if o.casefold() == unknown.casefold()]
        close = folded or difflib.get_close_matches(unknown, known, n=1, cutoff=0.7)
        parser.error(f"unrecognized option: {unknown}" + (f"; did you mean '{close[0]}'?" if close else ""))
    swallowed = _command_taken_for_workspace(parser, argv)
    if swallowed is not None:
        flag, taken, following = swallowed
        parser.error(
            f"argument COMMAND: invalid choice: {following!r}: {flag} took the command {taken!r} "
            f"for the workspace folder; name the folder after it: maka {flag} DIR {taken} {following} …"
        )
    args, extras = parser.parse_known_args(argv)
    if extras:
        message = f"unrecognized arguments: {' '.join(extras)}"
        command = getattr(args, "command", None)
        own = _chosen_options(parser, args)
        top = [o for o in _own_options(parser) if o not in own]
        for extra in (e.partition("=")[0].lstrip("-") for e in extras if e.startswith("--")):
            close = difflib.get_close_matches(extra, [*own, *top], n=1, cutoff=0.7)
            if not close:
                continue
            option = f"--{close[0]}"
            if close[0] not in top or command is None:
                message += f"; did you mean '{option}'?"
            else:
                where = f"goes before the command: maka {option} {command} …"
                guess = f"'{option}'" if close[0] == extra else f"did you mean '{option}'? it"
                message += f"; {guess} {where}"
            break
        # The usage shown is the command's own (`maka memory list [-h] …`), not maka's.
        _chosen_parser(parser, args).error(message)
    return args


def _chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subcommand's parser ``args`` chose below ``parser`` (``parser`` itself
    when none was)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _chosen_parser(chosen, args)
    return parser


def _unknown_option_before_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """An option typed before the command that ``parser`` does not take (``-W``), if any:
    argparse would take the value after it for the command and name that instead."""
    known = {o for action in parser._actions for o in action.option_strings}
    commands = {
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }
    for token in argv:
        if token == "--" or token in commands:
            return None
        if not token.startswith("-") or token == "-" or _NUMBER.fullmatch(token):
            continue  # an option's value
        # ``-wDIR`` is -w with its value; ``-json`` is no short option at all
        name = token[:2] if not token.startswith("--") and token[:2] in known else token.partition("=")[0]
        abbreviates = name.startswith("--") and any(option.startswith(name) for option in known)
        if name not in known and not abbreviates:  # argparse takes a long option's prefix
            return name
    return None


_NUMBER = re.compile(r"-[0-9.]+")


def _command_taken_for_workspace(
    parser: argparse.ArgumentParser, argv: list[str]
) -> tuple[str, str, str] | None:
    """(the option, the command, the word after it) for ``maka -w memory list``: ``-w`` left
    without its folder took the command as one, and argparse would only name ``list``."""
    commands = {
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    }
    for at, token in enumerate(argv[:-2]):
        if token in commands or token == "--":
            return None  # past the command: a -w there belongs to it
        following = argv[at + 2]
        if (
            token in ("-w", "--workspace")
            and argv[at + 1] in commands
            and following not in commands
            and not following.startswith("-")
        ):
            return token, argv[at + 1], following
    return None


def _own_options(parser: argparse.ArgumentParser) -> list[str]:
    """The long options (without their dashes) ``parser`` itself takes."""
    return [o[2:] for action in parser._actions for o in action.option_strings if o.startswith("--")]


def _chosen_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The long options of the subcommands ``args`` chose below ``parser``."""
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                names += _own_options(chosen) + _chosen_options(chosen, args)
    return names


USER_LEVEL = "@user"


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 (a socket cannot wait 0 or -1 s)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"not a number of seconds above 0: {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 up."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a whole number from 1 up: {text!r}")
    return value


def user_path(value: str) -> str:
    """A file argument with a leading ``~`` expanded, as -w and import do: a quoted one (from a
    script or a config) reaches maka unexpanded. ``-`` (stdin) stays as it is."""
    return value if value == "-" else os.path.expanduser(value)


def absolute(path: str) -> str:
    """A workspace as the daemon takes it: an absolute path, or "@user" as it is."""
    if path == USER_LEVEL:
        return path
    return os.path.abspath(os.path.expanduser(path))


@dataclass
class Parents:
    """Parent parsers so that ``--json`` and ``--workspace`` work after any command name."""

    json: argparse.ArgumentParser = field(default_factory=lambda: _json_parent())
    workspace: argparse.ArgumentParser = field(default_factory=lambda: _workspace_parent())

    @property
    def scoped(self) -> list[argparse.ArgumentParser]:
        return [self.json, self.workspace]


def _json_parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given after the command it sets the flag; absent, the top-level value stays.
    parser.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print machine-readable JSON"
    )
    return parser


WORKSPACE_HELP = (
    'workspace directory, or "@user" for the user-level memory '
    "(env MAKA_WORKSPACE; default: found like git from the current one)"
)
USER_HELP = 'the user-level memory, shown in every workspace (the same as -w "@user")'


def _workspace_parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: absent after the command, the value given before it (or None) stays.
    parser.add_argument(
        "-w", "--workspace", metavar="DIR", type=absolute, default=argparse.SUPPRESS, help=WORKSPACE_HELP
    )
    add_user_flag(parser, default=argparse.SUPPRESS)
    return parser


def add_user_flag(parser: argparse.ArgumentParser, default: object) -> None:
    """``--user``: the workspace is the user level ("@user")."""
    parser.add_argument(
        "--user", dest="workspace", action="store_const", const=USER_LEVEL, default=default, help=USER_HELP
    )


def workspace_of(args: argparse.Namespace) -> str:
    """``-w`` (before or after the command), else $MAKA_WORKSPACE, else found like git."""
    ws: str | None = getattr(args, "workspace", None)
    return sendable_workspace(ws or default_workspace())


# The id file outlives nothing git removes as untracked (docs/WORKSPACES.md, "In a git repository").
GIT_NOTE: Final = (
    "this workspace is a git repository: commit memory/ with its .maka-id, or add memory/.maka-id "
    "to .gitignore; left untracked, `git stash -u` or `git clean -fd` removes it and the folder "
    "becomes a new workspace (switches off, sessions set aside: makad's docs/WORKSPACES.md)"
)


def unmade_id_file(args: argparse.Namespace) -> Path | None:
    """The ``memory/.maka-id`` this command may make, when its workspace is a git work tree
    without one yet: the daemon writes it at the workspace's first write (``maka settings
    agentReadEnabled=on``), or at its first call once ``memory/`` is there (a MEMORY.md typed
    by hand), and whichever command that is says to keep it (``GIT_NOTE``). None for ``maka
    mcp``, whose stderr is the agent host's log."""
    if not hasattr(args, "workspace") or getattr(args, "command", None) == "mcp":
        return None
    if not isinstance(args.workspace, str | None):  # several (``maka watch DIR DIR``): no one note
        return None
    try:
        ws = workspace_of(args)
    except CliError:
        return None  # the command itself says why
    if ws == USER_LEVEL or not (Path(ws) / ".git").exists():
        return None
    id_file = Path(ws) / "memory" / ".maka-id"
    return None if id_file.exists() else id_file


def sendable_workspace(ws: str) -> str:
    """``ws``, or CliError when its path is not UTF-8 (a byte Python decoded to a lone
    surrogate): requests are JSON, which cannot carry it."""
    try:
        ws.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(ws).decode("utf-8", "backslashreplace")
        raise CliError(
            f"the workspace folder's path is not UTF-8 ({shown}): makad names a workspace by its "
            "path in JSON, which cannot carry those bytes; rename the folder (convmv can), or "
            "name another one with -w"
        ) from None
    return ws


def maka_command(args: argparse.Namespace, rest: str) -> str:
    """``maka REST`` as the user runs it next: with ``-w DIR`` when this command was given
    one (the next command, run in the same folder, would find another workspace)."""
    workspace: str | None = getattr(args, "workspace", None)
    where = f" -w {shlex.quote(workspace)}" if workspace else ""
    if workspace == USER_LEVEL:
        where = " --user"
    return f"maka{where} {rest}"


_MAKA_COMMAND = re.compile(r"\bmaka (?=[a-z])")


def with_workspace(args: argparse.Namespace, hint: str) -> str:
    """A hint of the CLI's own with every ``maka COMMAND`` in it as `maka_command` writes it
    (never a daemon's message or the user's text: a word "maka" there is not a command)."""
    return _MAKA_COMMAND.sub(lambda _: maka_command(args, ""), hint)


def resolve_ids(
    known: Iterable[str], given: list[str], titles: Mapping[str, str] | None = None, noun: str = "entry"
) -> list[str]:
    """Each given id, or the one known id it is a unique prefix of (like git's short hashes).

    A title of ``titles`` (id → title) given where an id goes is refused with the ids of
    the entries (``noun``: the proposals …) titled so: these are the commands that change
    things, and two entries may share a title. Any other id that matches nothing is passed
    on unchanged so the daemon reports it, after a "did you mean" on stderr when a known id
    is close to it.
    """
    pool = list(dict.fromkeys(known))
    out: list[str] = []
    for wanted in given:
        matches = matching_ids(pool, wanted)
        if len(matches) > 1:
            raise CliError(f"id {wanted!r} is ambiguous: {', '.join(matches[:5])}")
        if not matches:
            titled = titled_ids(titles or {}, wanted)
            if titled:
                raise CliError(
                    f"{titled_text(wanted, titled, titles or {}, noun)}: give "
                    f"{'that' if len(titled) == 1 else 'one of them'} instead (a change takes an id, "
                    "never a title)",
                    EXIT_REMOTE,
                )
            _hint_close_id(wanted, pool)
        out.append(matches[0] if matches else wanted)
    return out


def titled_ids(titles: Mapping[str, str], wanted: str) -> list[str]:
    """The ids (of ``titles``: id → title) titled exactly ``wanted``; if none, those titled
    so whatever the case. Never a part of a title: a title only ever names whole titles."""
    exact = [i for i, title in titles.items() if title == wanted]
    return exact or [i for i, title in titles.items() if title.casefold() == wanted.casefold()]


def titled_text(wanted: str, titled: list[str], titles: Mapping[str, str], noun: str = "entry") -> str:
    """``'Tabs' is no id; the entry titled 'Tabs' has id …`` (or the ids of several) for
    the ids ``titled`` that `titled_ids` found for ``wanted``."""
    shown = ", ".join(short_id(i) for i in titled[:5]) + (", …" if len(titled) > 5 else "")
    if len(titled) == 1:
        return f"{wanted!r} is no id; the {noun} titled {titles[titled[0]]!r} has id {shown}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{wanted!r} is no id; {len(titled)} {plural} are titled {wanted!r}, with ids {shown}"


def resolve_session(client: Client, workspace: str, given: str | None) -> str | None:
    """A session id as given, or the one session of the workspace it is a unique prefix of
    (``maka sessions`` and ``maka episodes`` show them short)."""
    if not given:
        return given
    listing = client.call("list_sessions", {"workspace": workspace, "includeClosed": True})
    (session,) = resolve_ids([s["sessionId"] for s in listing["sessions"]], [given])
    return session


def _hint_close_id(wanted: str, pool: list[str]) -> None:
    """Print the known id whose start (or hex part's start) is closest to ``wanted``.

    Hex parts are compared without the ``h-`` of hand-typed ids: those two characters alone
    would make ``h-40f5`` (an entry deleted since) look like any other ``h-`` id."""
    want = wanted.removeprefix(DERIVED_ID_PREFIX)
    starts: dict[str, str] = {}
    for known in pool:
        starts.setdefault(known.removeprefix(DERIVED_ID_PREFIX)[: len(want)], known)
    close = did_you_mean(want, starts)
    if close is not None:
        print(f"maka: no id starts with {wanted!r}; did you mean {starts[close][:12]}?", file=sys.stderr)


def read_text_arg(value: str) -> str:
    """A text argument, where ``-`` means standard input."""
    return sys.stdin.read() if value == "-" else value


class _StderrNote(logging.Handler):
    """Prints to whatever sys.stderr is at the time (tests redirect it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"maka: {record.getMessage()}", file=sys.stderr, flush=True)


def announce_autostart() -> None:
    """Say on stderr when a command starts the daemon, and when the walk up to the workspace
    passed a folder of another user's (the library only logs them)."""
    for name in ("maka.autostart", "maka.workspace"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, _StderrNote) for h in logger.handlers):
            logger.addHandler(_StderrNote(logging.INFO))
            logger.setLevel(logging.INFO)
            logger.propagate = False


# ---------------------------------------------------------------- editor ---

FORM_SEPARATOR = "--- content below this line (empty content cancels) ---"


def entry_form(title: str, tags: list[str], content: str) -> str:
    return (
        f"# Lines starting with # above the separator are ignored.\n"
        f"Title: {title}\nTags: {', '.join(tags)}\n{FORM_SEPARATOR}\n{content}\n"
    )


@dataclass
class EntryEdit:
    title: str
    tags: list[str]
    content: str

    def changes(self, entry: dict[str, Any]) -> dict[str, Any]:
        """The fields that differ from ``entry``, named as the daemon names them."""
        out: dict[str, Any] = {}
        if self.title != entry.get("title"):
            out["title"] = self.title
        if self.content != entry.get("content"):
            out["content"] = self.content
        if self.tags != list(entry.get("tags", [])):
            out["tags"] = self.tags
        return out


def parse_entry_form(text: str) -> EntryEdit | None:
    """The edited form, or None when its content is empty (the user cancelled)."""
    lines = text.replace("\r\n", "\n").split("\n")
    title, tags = "", []
    body_start = len(lines)
    for i, line in enumerate(lines):
        if line.startswith("---"):
            body_start = i + 1
            break
        if line.startswith("#"):
            continue
        key, _, value = line.partition(":")
        if key.strip().lower() == "title":
            title = value.strip()
        elif key.strip().lower() == "tags":
            tags = [t.strip() for t in value.split(",") if t.strip()]
    content = "\n".join(lines[body_start:]).strip("\n")
    if not content.strip():
        return None
    return EntryEdit(title=title or content.strip().splitlines()[0][:80], tags=tags, content=content)


def edit_in_editor(initial: str) -> str:
    """Open $VISUAL or $EDITOR (default vi) on a private temp file and return what was saved."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    if not (os.environ.get("VISUAL") or os.environ.get("EDITOR")) and not sys.stdin.isatty():
        # vi on a pipe draws escapes into the log and exits 1; an editor the user named
        # (`code --wait`) may open its own window, so only the fallback is refused here.
        raise CliError(
            "no terminal to edit in: pass the fields (--title, --content, --tags) or "
            "--from FILE, or set $VISUAL or $EDITOR to an editor that opens its own window"
        )
    with tempfile.TemporaryDirectory(prefix="maka-") as tmp:  # 0700: memory is private
        path = Path(tmp) / "entry.md"
        path.write_text(initial, encoding="utf-8")
        try:
            code = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise CliError(f"cannot run the editor {editor!r}: {exc.strerror}") from None
        if code != 0:
            raise CliError(f"the editor exited with {code}; nothing changed")
        return path.read_text(encoding="utf-8")
