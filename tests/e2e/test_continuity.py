"""Continuity across sessions with inputs unlike the other suites': a Go and a Rust
project whose tools report failures only in their output, a writer working in German,
one very long session beside short ones, and clocks that run ahead — through a real
daemon on a real socket."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_attention import DAY, OPEN_SECTIONS, fresh, mentions, section_lines, session, wait_for
from tests.support import DaemonProcess, daemon_in_tmp

HOUR = 3_600_000


@pytest.fixture(scope="module")
def shared() -> Iterator[DaemonProcess]:
    yield from daemon_in_tmp(env={"MAKAD_BEHAVIOR_IDLE_MS": "1"})


def now_ms() -> int:
    return int(time.time() * 1000)


def suggested(d: DaemonProcess, w: str) -> list[str]:
    return [s["text"] for s in d.call("suggest", {"workspace": w})["suggestions"]]


def failing(
    at: int, request: str, command: str, output: str, meta: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A request, a call whose result says it failed (in its text only, unless ``meta``), a reply."""
    result: dict[str, Any] = {"type": "tool_result", "text": output, "toolCallId": "k1", "toolName": "bash"}
    return [
        {"type": "user_message", "text": request, "ts": at},
        {"type": "tool_call", "text": command, "toolCallId": "k1", "toolName": "bash", "ts": at + 1},
        {**result, "ts": at + 2, **({"meta": meta} if meta else {})},
        {"type": "assistant_message", "text": "Still red; I will look again next time.", "ts": at + 3},
    ]


# ------------------------------------------------------------ one long session ---


def test_one_very_long_session_does_not_push_the_others_out(shared: DaemonProcess) -> None:
    """A failure left three days ago stays in Recently abandoned after one session of
    6,100 requests (305 segments) is recorded beside it."""
    w = fresh(shared)
    now = now_ms()
    old = session(
        shared,
        w,
        failing(
            now - 3 * DAY,
            "Make the linter pass in cmd/lint",
            "go vet ./cmd/lint",
            "vet: cmd/lint/main.go:9: unreachable code",
            {"exit_code": "1"},
        ),
    )
    shared.call("close_session", {"workspace": w, "sessionId": old})
    wait_for(shared, w, lambda s: mentions(s, "go vet ./cmd/lint", "Recently abandoned"))
    sid = session(shared, w, [])
    start = now - 2 * HOUR
    for batch in range(7):
        events = [
            {"type": "user_message", "text": f"next step {batch}.{i}", "ts": start + batch * 1000 + i}
            for i in range(batch * 1000, min(batch * 1000 + 1000, 6100))
        ]
        shared.call("append_events", {"workspace": w, "sessionId": sid, "events": events})
    shared.call("close_session", {"workspace": w, "sessionId": sid})
    state = wait_for(shared, w, lambda s: mentions(s, "next step 6", "Active threads"))
    assert mentions(state, "next step 6", "Active threads")
    assert mentions(state, "go vet ./cmd/lint", "Recently abandoned")
    assert "2 sessions" in section_lines(state, "Rhythm")[0]["text"]


# ------------------------------------------------------------ other languages ---


def exchange(at: int, request: str, reply: str, last: str | None = None) -> list[dict[str, Any]]:
    """A request and its reply, and the user's last word when given (left unanswered)."""
    events = [
        {"type": "user_message", "text": request, "ts": at},
        {"type": "assistant_message", "text": reply, "ts": at + 1},
    ]
    if last is not None:
        events.append({"type": "user_message", "text": last, "ts": at + 2})
    return events


def test_a_writer_working_in_german_french_and_spanish_is_not_nagged(shared: DaemonProcess) -> None:
    """Work the user thanked for or let go in German, French or Spanish is not suggested
    back as unanswered; the one thread left open still is."""
    w = fresh(shared)
    now = now_ms()
    for index, (request, last) in enumerate(
        [
            ("Überarbeite Kapitel 3 in kapitel/03-ankunft.md, der Dialog wirkt hölzern", "Danke, passt so!"),
            ("Entwirf eine Zeitleiste für Kapitel 5", "Ach, vergiss es."),
            ("Corrige les fautes dans chapitres/02-depart.md", "Merci, c'est parfait."),
            ("Propose un autre titre pour le chapitre 4", "Laisse tomber."),
            ("Revisa la traducción de capitulos/07-vuelta.md", "¡Gracias, ya está!"),
            ("Busca un epígrafe para la segunda parte", "Olvídalo, no hace falta."),
        ]
    ):
        session(shared, w, exchange(now - 3 * DAY + index * HOUR, request, "Erledigt / fait / hecho.", last))
    session(
        shared,
        w,
        exchange(now - 2 * DAY, "Schreib das Nachwort in kapitel/99-nachwort.md", "Ein erster Absatz steht."),
    )
    state = wait_for(shared, w, lambda s: mentions(s, "Nachwort", "Recently abandoned"))
    open_lines = [line["text"] for line in section_lines(state, "Active threads", "Recently abandoned")]
    assert len(open_lines) == 1 and "Nachwort" in open_lines[0]
    assert [text for text in suggested(shared, w) if "Nachwort" not in text] == []


# ----------------------------------------------------- failures said in the output ---


GO_FAIL = (
    "=== RUN   TestParseDuration\n--- FAIL: TestParseDuration (0.00s)\n"
    "    parse_test.go:41: got 0s, want 1h30m\nFAIL\nFAIL\texample.com/tp/internal/timeparse\t0.012s\n"
)
CARGO_FAIL = (
    "running 3 tests\ntest lexer::tests::numbers ... ok\ntest lexer::tests::idents ... FAILED\n\n"
    "failures:\n    lexer::tests::idents\n\ntest result: FAILED. 2 passed; 1 failed; 0 ignored\n"
)


@pytest.mark.parametrize(
    ("request_text", "command", "output", "said"),
    [
        (
            "Fix TestParseDuration in internal/timeparse/parse.go",
            "go test ./internal/timeparse/...",
            GO_FAIL,
            "--- FAIL: TestParseDuration",
        ),
        ("Fix the identifier rule in src/lexer.rs", "cargo test lexer", CARGO_FAIL, "test result: FAILED"),
    ],
    ids=["go", "rust"],
)
def test_a_go_or_rust_test_failing_only_in_its_output_is_still_failing_next_time(
    shared: DaemonProcess, request_text: str, command: str, output: str, said: str
) -> None:
    """A test run whose result carries no exit code, only the runner's verdict in its
    text, left failing two days ago: the attention state and a suggestion name it, by its
    verdict line; the same run passing in a later session takes it away."""
    w = fresh(shared)
    now = now_ms()
    session(shared, w, failing(now - 2 * DAY - HOUR, request_text, command, output))
    state = wait_for(shared, w, lambda s: mentions(s, said, "Recently abandoned"))
    assert mentions(state, f"{command}: {said}", "Recently abandoned")
    assert any(said in text and text.startswith("Still failing") for text in suggested(shared, w))
    passing = failing(
        now - DAY, "Run it again", command, "ok  \texample.com/tp\t0.01s\ntest result: ok. 3 passed"
    )
    session(shared, w, passing)
    state = wait_for(shared, w, lambda s: not mentions(s, said))
    assert not mentions(state, said)


PY_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/.venv/bin/alembic", line 8, in <module>\n'
    "    sys.exit(main())\n"
    '  File "/srv/app/.venv/lib/python3.12/site-packages/sqlalchemy/engine/base.py", line 1967\n'
    "    self.dialect.do_execute(\n"
    "sqlalchemy.exc.OperationalError: duplicate column name: email_verified\n"
)


@pytest.mark.parametrize(
    "output",
    [PY_TRACEBACK, "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\n" + PY_TRACEBACK],
    ids=["alone", "after-log-lines"],
)
def test_a_python_traceback_is_named_by_its_exception_not_its_header(
    shared: DaemonProcess, output: str
) -> None:
    """A failed call whose output is a Python traceback (alone, or after the tool's log
    lines) is listed, and suggested, by the exception it ended on, not by "Traceback (most
    recent call last):" or a log line."""
    w = fresh(shared)
    now = now_ms()
    request = "Add the email_verified column in db/migrations/0042_email_verified.py"
    session(
        shared, w, failing(now - 2 * DAY - HOUR, request, "alembic upgrade head", output, {"exit_code": "1"})
    )
    said = "alembic upgrade head: sqlalchemy.exc.OperationalError: duplicate column name: email_verified"
    state = wait_for(shared, w, lambda s: mentions(s, "alembic upgrade head", "Recently abandoned"))
    assert mentions(state, said, "Recently abandoned"), section_lines(state, "Recently abandoned")
    assert not mentions(state, "most recent call last") and not mentions(state, "Context impl")
    assert any(said in text for text in suggested(shared, w))


# ------------------------------------------------------- one session after another ---


def test_a_session_opened_right_after_one_closes_is_shown_what_that_one_left_open() -> None:
    """A host that closes a session and opens the next at once (a cleared conversation):
    the new session's first pack, asked before the keeper has had its turn, carries the
    thread the closed session left unanswered, as a pack without a session does."""
    for d in daemon_in_tmp():  # behavior records on close only, as in everyday use
        w = fresh(d)
        now = now_ms()
        left = session(
            d,
            w,
            [
                {
                    "type": "user_message",
                    "text": "Port the CSV exporter in src/export/csv.py to streaming writes",
                    "ts": now - 20 * 60_000,
                },
                {
                    "type": "tool_call",
                    "text": "edit src/export/csv.py",
                    "toolCallId": "e",
                    "toolName": "edit",
                    "ts": now - 19 * 60_000,
                },
                {
                    "type": "tool_result",
                    "text": "ok",
                    "toolCallId": "e",
                    "toolName": "edit",
                    "ts": now - 18 * 60_000,
                },
                {
                    "type": "assistant_message",
                    "text": "Half the writer streams; the footer still buffers.",
                    "ts": now - 17 * 60_000,
                },
                {"type": "user_message", "text": "What is left for the footer?", "ts": now - 16 * 60_000},
            ],
        )
        d.call("close_session", {"workspace": w, "sessionId": left})
        sid = session(d, w, [{"type": "user_message", "text": "Morning! Where were we?", "ts": now}])
        pack = d.call("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 2000})
        shown = " ".join(s["text"] for s in pack["segments"] if s["kind"] == "attention")
        assert "Port the CSV exporter" in shown and f"event:{left}:5" in shown, pack["segments"]
        bare = d.call("build_context", {"workspace": w, "budgetTokens": 2000})
        assert any("Port the CSV exporter" in s["text"] for s in bare["segments"] if s["kind"] == "attention")


def test_suggest_and_get_attention_right_after_a_close_know_what_it_left_failing() -> None:
    """Asked the moment a session is closed (the next one opening), suggest offers the
    failure that session left and get_attention lists it: neither answers from before it."""
    for d in daemon_in_tmp():  # behavior records on close only, as in everyday use
        w = fresh(d)
        left = session(
            d,
            w,
            failing(
                now_ms() - DAY,
                "Make the footer stream in src/export/csv.py",
                "pytest tests/test_csv.py",
                "FAILED tests/test_csv.py::test_footer - AssertionError: footer buffered",
                {"exit_code": "1"},
            ),
        )
        d.call("close_session", {"workspace": w, "sessionId": left})
        sid = session(d, w, [])
        assert any("test_footer" in text for text in suggested_to(d, w, sid))
        d.call("close_session", {"workspace": w, "sessionId": sid})
        again = session(
            d,
            w,
            failing(
                now_ms() - DAY,
                "Now the header",
                "pytest tests/test_header.py",
                "FAILED tests/test_header.py::test_bom",
            ),
        )
        d.call("close_session", {"workspace": w, "sessionId": again})
        assert mentions(d.call("get_attention", {"workspace": w}), "test_bom")


def suggested_to(d: DaemonProcess, w: str, sid: str) -> list[str]:
    reply = d.call("suggest", {"workspace": w, "sessionId": sid})
    return [s["text"] for s in reply["suggestions"]]


# ------------------------------------------------------------------ clock skew ---


def test_events_stamped_days_ahead_are_dated_no_later_than_when_they_were_read(shared: DaemonProcess) -> None:
    """A client whose clock runs five days ahead, its events out of order, the session
    closed: no line of the attention state is dated in the future, and its failure is an
    active one, not five days away."""
    w = fresh(shared)
    ahead = now_ms() + 5 * DAY
    events = failing(ahead, "Port the importer to src/import.ts", "npm test", "npm ERR! Test failed.")
    events[3]["ts"] = ahead - 3 * DAY  # the reply stamped before the request
    shared.call("close_session", {"workspace": w, "sessionId": session(shared, w, events)})
    state = wait_for(shared, w, lambda s: mentions(s, "npm ERR!", "Active threads"))
    read = now_ms()
    assert mentions(state, "npm test: npm ERR! Test failed", "Active threads")
    lines = section_lines(state, *(s["name"] for s in state["sections"]))
    assert lines and all(line["at"] <= read for line in lines)


# --------------------------------------------------------------------- secrets ---


def test_a_password_given_as_a_command_line_option_never_reaches_attention_or_a_suggestion(
    shared: DaemonProcess,
) -> None:
    """``--password hunter2…``, ``--client-secret …`` and ``--api-key …`` in a failed call:
    the ledger, the attention state and the suggestion show the call with the values
    redacted."""
    w = fresh(shared)
    command = (
        "./deploy/run.sh --password hunter2hunter2 --client-secret zq9Xv4Lm2Pw8"
        " --api-key k7Qw2Er9Ty4Ui1Op6As3 --env prod"
    )
    sid = session(
        shared,
        w,
        failing(
            now_ms() - 2 * DAY - HOUR,
            "Deploy the API with deploy/run.sh",
            command,
            "Error: 401 Unauthorized",
            {"exit_code": "1"},
        ),
    )
    state = wait_for(shared, w, lambda s: mentions(s, "deploy/run.sh", "Recently abandoned"))
    stored = shared.call("read_events", {"workspace": w, "sessionId": sid})["events"][1]["text"]
    shown = [*[line["text"] for line in section_lines(state, "Recently abandoned")], *suggested(shared, w)]
    assert any("--password [REDACTED" in text and "--env prod" in text for text in shown)
    for text in [stored, *shown]:
        assert not {"hunter2hunter2", "zq9Xv4Lm2Pw8", "k7Qw2Er9Ty4Ui1Op6As3"} & set(text.split())


def test_letting_go_of_work_quoting_a_token_keeps_other_work_that_quoted_one(shared: DaemonProcess) -> None:
    """A publish workflow left half-written with an npm token pasted in its request stays
    open when a later session lets go of a ghcr push whose request pasted a GitHub token:
    the two secrets' markers do not make the two requests name the same work."""
    w = fresh(shared)
    now = now_ms()
    npm_token = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    github_token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    workflow = ".github/workflows/release.yml"
    publish = session(
        shared,
        w,
        [
            {
                "type": "user_message",
                "text": f"Set up npm publish in {workflow}, token is {npm_token}",
                "ts": now - 3 * DAY,
            },
            {
                "type": "tool_call",
                "text": f"edit {workflow}",
                "toolCallId": "k",
                "toolName": "edit",
                "ts": now - 3 * DAY + 1,
            },
            {
                "type": "tool_result",
                "text": "ok",
                "toolCallId": "k",
                "toolName": "edit",
                "ts": now - 3 * DAY + 2,
            },
            {
                "type": "assistant_message",
                "text": "The publish job is half-written.",
                "ts": now - 3 * DAY + 3,
            },
        ],
        working={"openThreads": ["the npm publish job still lacks provenance"]},
    )
    shared.call("close_session", {"workspace": w, "sessionId": publish})
    assert mentions(wait_for(shared, w, lambda s: mentions(s, "lacks provenance")), "lacks provenance")
    docker = session(
        shared,
        w,
        [
            {"type": "user_message", "text": "Write a Dockerfile in docker/api.Dockerfile", "ts": now - DAY},
            {
                "type": "tool_call",
                "text": "edit docker/api.Dockerfile",
                "toolCallId": "d",
                "toolName": "edit",
                "ts": now - DAY + 1,
            },
            {"type": "tool_result", "text": "ok", "toolCallId": "d", "toolName": "edit", "ts": now - DAY + 2},
            {
                "type": "assistant_message",
                "text": "Written; pushing needs a ghcr login.",
                "ts": now - DAY + 3,
            },
            {
                "type": "user_message",
                "text": f"forget the ghcr push with {github_token}, not worth it",
                "ts": now - DAY + 4,
            },
            {"type": "assistant_message", "text": "OK.", "ts": now - DAY + 5},
        ],
    )
    shared.call("close_session", {"workspace": w, "sessionId": docker})
    state = wait_for(shared, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert mentions(state, "lacks provenance", "Recently abandoned"), state["sections"]
    assert not mentions(state, "Dockerfile")


# ------------------------------------------------------------ letting work go ---


def worked(at: int, request: str, path: str, last: str) -> list[dict[str, Any]]:
    """A request, an edit of ``path``, a reply saying more is to do, the user's last word
    and the agent's short answer to it."""
    return [
        {"type": "user_message", "text": request, "ts": at},
        {"type": "tool_call", "text": f"edit {path}", "toolCallId": "e", "toolName": "edit", "ts": at + 1},
        {"type": "tool_result", "text": "ok", "toolCallId": "e", "toolName": "edit", "ts": at + 2},
        {"type": "assistant_message", "text": "A first part is in; more is to do.", "ts": at + 3},
        {"type": "user_message", "text": last, "ts": at + 4},
        {"type": "assistant_message", "text": "OK.", "ts": at + 5},
    ]


@pytest.mark.parametrize(
    "last",
    [
        "Hmm, you know what, forget it.",
        "On reflection, let's just drop it.",
        "Let's not bother with that after all.",
        "We don't need this anymore.",
        "Ach, das brauchen wir nicht mehr.",
        "Bon, on laisse tomber.",
        "Ça ne vaut pas la peine, finalement.",
        "No, mejor lo dejamos.",
        "No hace falta, gracias.",
        "Ладно, забудьте об этом.",
        "Не надо.",
        "うーん、やっぱりやめておこう。",
        "算了吧。",
    ],
)
def test_work_the_user_let_go_in_their_own_words_is_not_brought_back(
    shared: DaemonProcess, last: str
) -> None:
    """Work the user let go of as their last word — after a lead-in, or in German, French,
    Spanish, Russian, Japanese or Chinese — leaves the open threads and is not suggested,
    while the work of another session left without a word stays."""
    w = fresh(shared)
    now = now_ms()
    session(
        shared,
        w,
        worked(now - 3 * DAY, "Add a plugin loader in src/plugins/loader.py", "src/plugins/loader.py", last),
    )
    session(
        shared,
        w,
        worked(
            now - 2 * DAY, "Write the release notes in docs/release.md", "docs/release.md", "Let me think."
        ),
    )
    state = wait_for(shared, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert mentions(state, "release notes", *OPEN_SECTIONS), state["sections"]
    assert not mentions(state, "plugin loader", *OPEN_SECTIONS), state["sections"]
    assert not [text for text in suggested(shared, w) if "plugin loader" in text]


# ------------------------------------------------------------ pasted code ---


@pytest.mark.parametrize(
    ("request_text", "said"),
    [
        (
            "```sql\nSELECT id FROM orders WHERE paid_at IS NULL;\n```\nwhy is this slow?",
            "SELECT id FROM orders",
        ),
        ("~~~\n$ npm run lint\nsrc/cart.ts:12:5  error  no-unused-vars\n~~~", "$ npm run lint"),
        ("   ```   \n\n```ts\nexport const cart = createStore();\n```", "export const cart = createStore();"),
    ],
    ids=["sql-then-question", "tilde-fence", "empty-fence-first"],
)
def test_a_request_pasted_as_a_code_block_is_named_by_its_first_line_of_code(
    shared: DaemonProcess, request_text: str, said: str
) -> None:
    """A request that opens with a code fence (```sql, ~~~) left without a reply: the
    attention line and the suggestion made of it name its first line of code, never the
    fence."""
    w = fresh(shared)
    session(shared, w, [{"type": "user_message", "text": request_text, "ts": now_ms() - 2 * DAY}])
    state = wait_for(shared, w, lambda s: mentions(s, "1 session", "Rhythm"))
    lines = [line["text"] for line in section_lines(state, *OPEN_SECTIONS)]
    assert len(lines) == 1 and said in lines[0] and "```" not in lines[0] and "~~~" not in lines[0], lines
    listed = shared.call("suggest", {"workspace": w, "explain": True})["candidates"]
    assert [c for c in listed if said in c["text"] and "```" not in c["text"]], listed


# ------------------------------------------------------- a wider run passing ---


def run(at: int, request: str, command: str, output: str, code: int, last: str) -> list[dict[str, Any]]:
    """A request, one run of ``command`` (its exit code in ``meta``), a reply, the user's
    last word and the agent's answer to it."""
    return [
        {"type": "user_message", "text": request, "ts": at},
        {"type": "tool_call", "text": command, "toolCallId": "r", "toolName": "bash", "ts": at + 1},
        {
            "type": "tool_result",
            "text": output,
            "toolCallId": "r",
            "toolName": "bash",
            "meta": {"exit_code": str(code)},
            "ts": at + 2,
        },
        {"type": "assistant_message", "text": "That is the run's result.", "ts": at + 3},
        {"type": "user_message", "text": last, "ts": at + 4},
        {"type": "assistant_message", "text": "OK.", "ts": at + 5},
    ]


@pytest.mark.parametrize(
    ("narrow", "wide"),
    [
        ("pytest tests/test_cart.py::test_discount", "pytest tests/test_cart.py"),
        ("npm test -- --testPathPattern cart", "npm test"),
        ("python -m pytest tests/cart/test_totals.py -k rounding", "python -m pytest tests/"),
    ],
    ids=["pytest-file", "npm", "pytest-folder"],
)
def test_a_failure_is_fixed_by_a_later_wider_run_of_the_same_command_passing(
    shared: DaemonProcess, narrow: str, wide: str
) -> None:
    """A test run left failing, and in a later session the same command over more (the
    whole file, folder or suite) passing: the failure leaves the attention state and is not
    suggested as still failing."""
    w = fresh(shared)
    now = now_ms()
    session(shared, w, run(now - 3 * DAY, "Fix the cart discount rounding", narrow, "1 failed", 1, "Hm."))
    session(shared, w, run(now - 2 * DAY, "Run all the cart tests", wide, "52 passed", 0, "Good."))
    state = wait_for(shared, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert not mentions(state, "Failed"), state["sections"]
    assert not [text for text in suggested(shared, w) if text.startswith("Still failing")]


def test_a_narrower_run_passing_leaves_the_wider_failure_standing(shared: DaemonProcess) -> None:
    """The whole suite left failing, and later one test file of it passing: the suite's
    failure still stands, and is still suggested."""
    w = fresh(shared)
    now = now_ms()
    session(
        shared, w, run(now - 3 * DAY, "Get the suite green", "cargo test", "test result: FAILED", 101, "Hm.")
    )
    session(
        shared, w, run(now - 2 * DAY, "Only the lexer now", "cargo test lexer", "test result: ok", 0, "Good.")
    )
    state = wait_for(shared, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert mentions(state, "bash cargo test: test result: FAILED", *OPEN_SECTIONS), state["sections"]
    assert [text for text in suggested(shared, w) if text.startswith("Still failing")]


# ---------------------------------------------- pleased in other scripts ---


@pytest.mark.parametrize(
    ("last", "answer", "finished"),
    [
        ("Супер, заработало!", "Рад помочь.", True),
        ("Чудово, все працює.", "Будь ласка.", True),
        ("素晴らしい、動きました。ありがとうございます", "どういたしまして。", True),
        ("太好了，谢谢！", "不客气。", True),
        ("완벽해요, 감사합니다", "천만에요.", True),
        ("Отлично, но тест всё ещё падает.", "Посмотрю.", False),
        ("ありがとう、でもまだ失敗します。", "確認します。", False),
        ("谢谢，但是还是不行。", "我再看看。", False),
    ],
)
def test_work_the_user_is_pleased_with_in_another_script_is_finished(
    shared: DaemonProcess, last: str, answer: str, finished: bool
) -> None:
    """A short last message of praise or thanks in Russian, Ukrainian, Japanese, Chinese or
    Korean, answered in words, finishes the work as "great, thanks" does; one that goes
    on with "but" (но, でも, 但是) leaves it open."""
    w = fresh(shared)
    events = worked(
        now_ms() - 2 * DAY, "Fix the locale fallback in src/i18n/fallback.py", "src/i18n/fallback.py", last
    )
    events[-1]["text"] = answer
    session(shared, w, events)
    state = wait_for(shared, w, lambda s: mentions(s, "1 session", "Rhythm"))
    assert mentions(state, "locale fallback", *OPEN_SECTIONS) is not finished, state["sections"]


# ------------------------------------------------------- failing since when ---


def test_a_failure_left_before_midnight_is_failing_since_that_day(shared: DaemonProcess) -> None:
    """A test that failed ten minutes before midnight (UTC) in a session that went on past
    it: the suggestion says it has been failing since the day it failed, not the next."""
    w = fresh(shared)
    midnight = (now_ms() // DAY - 3) * DAY
    events = failing(midnight - 10 * 60_000, "Fix the invoice totals in src/invoice.py", "pytest", "1 failed")
    events[2]["meta"] = {"exit_code": "1"}
    events += [
        {"type": "user_message", "text": "Show me the invoice fixture", "ts": midnight + 20 * 60_000},
        {"type": "assistant_message", "text": "It rounds each line first.", "ts": midnight + 21 * 60_000},
    ]
    session(shared, w, events)
    wait_for(shared, w, lambda s: mentions(s, "pytest: 1 failed"))
    day_before = time.strftime("%a", time.gmtime((midnight - DAY) / 1000))
    assert [text for text in suggested(shared, w) if text.startswith(f"Still failing since {day_before}:")], (
        suggested(shared, w)
    )


@pytest.mark.parametrize(
    ("last", "finished"),
    [
        ("great, ship it", True),
        ("Awesome — merged.", True),
        ("Nice! Tests are green now.", True),
        ("Отлично, теперь всё работает.", True),
        ("素晴らしい、動きました！", True),
        ("Cool, but it still fails on CI.", False),
        ("Nice, now add the export", False),
    ],
)
def test_praise_then_the_work_said_done_as_the_last_word_finishes_it(
    shared: DaemonProcess, last: str, finished: bool
) -> None:
    """A last message, left without a reply, that opens with praise and goes on to say the
    work is done ("great, ship it", "Отлично, теперь всё работает.") finishes the work as
    the same words alone do; praise then "but …" or a new request does not."""
    w = fresh(shared)
    events = worked(
        now_ms() - 2 * DAY, "Wire the webhook retries in src/hooks/retry.py", "src/hooks/retry.py", last
    )
    session(shared, w, events[:-1])
    state = wait_for(shared, w, lambda s: mentions(s, "1 session", "Rhythm"))
    assert mentions(state, "webhook retries", *OPEN_SECTIONS) is not finished, state["sections"]


# ------------------------------------------- why a pack shows attention or not ---


def test_the_trace_says_why_a_pack_shows_the_attention_segment_or_not(shared: DaemonProcess) -> None:
    """Each pack's ``trace.attention`` says why it carries the attention segment (no
    session, a session's first pack, asked by ``include``) or why not (a later pack of the
    session, left out of ``include``, an incognito session, agent reads or attention off)."""
    w = fresh(shared)
    quoting = failing(
        now_ms() - 2 * DAY, "Fix the CSV quoting in src/csv.py", "pytest", "1 failed", {"exit_code": "1"}
    )
    session(shared, w, quoting)
    wait_for(shared, w, lambda s: mentions(s, "pytest: 1 failed"))

    def why(sid: str | None = None, **params: Any) -> tuple[str | None, bool]:
        pack = shared.call(
            "build_context",
            {"workspace": w, "budgetTokens": 4000, **({"sessionId": sid} if sid else {}), **params},
        )
        return pack["trace"].get("attention"), any(s["kind"] == "attention" for s in pack["segments"])

    assert why() == ("no_session", True)
    sid = session(shared, w, [{"type": "user_message", "text": "Hi, what is left?", "ts": now_ms()}])
    assert why(sid) == ("first_pack", True)
    shared.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "And?"}]},
    )
    assert why(sid) == ("later_pack", False)
    assert why(sid, include=["attention"]) == ("asked", True)
    assert why(sid, include=["memory", "recall"]) == ("not_included", False)
    hidden = session(shared, w, [], incognito=True)
    assert why(hidden) == ("incognito", False)
    shared.call("set_settings", {"workspace": w, "attentionEnabled": False})
    assert why() == ("attention_off", False)
    shared.call("set_settings", {"workspace": w, "attentionEnabled": True, "agentReadEnabled": False})
    assert why() == ("reads_off", False)


# ------------------------------------------------------- to be continued ---


@pytest.mark.parametrize(
    "last",
    [
        "Cheers, we'll finish this next week.",
        "Ok, let's call it a day.",
        "Danke, für heute reicht's.",
        "Merci, on reprend la suite plus tard.",
        "Gracias, lo terminamos otro día.",
        "Спасибо, доделаем в следующий раз.",
        "今日はここまで。ありがとう",
    ],
)
@pytest.mark.parametrize("closed", [False, True], ids=["idle", "closed"])
def test_work_the_user_means_to_continue_later_stays_open(
    shared: DaemonProcess, last: str, closed: bool
) -> None:
    """A last word that puts the work off ("we'll finish this next week", "für heute
    reicht's", "продолжим в следующий раз"), thanks before it or not, the session left idle
    or closed: the thread stays open and is suggested; plain thanks still finish it."""
    w = fresh(shared)
    now = now_ms()
    later = session(
        shared,
        w,
        worked(now - 2 * DAY, "Port the mailer to async in src/mail/send.py", "src/mail/send.py", last),
    )
    done = session(
        shared,
        w,
        worked(now - 2 * DAY + HOUR, "Tidy the logging setup in src/log.py", "src/log.py", "Thanks!"),
    )
    if closed:
        for sid in (later, done):
            shared.call("close_session", {"workspace": w, "sessionId": sid})
    state = wait_for(shared, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert mentions(state, "Port the mailer", *OPEN_SECTIONS), state["sections"]
    assert not mentions(state, "logging setup", *OPEN_SECTIONS)
    assert [text for text in suggested(shared, w) if "Port the mailer" in text]


@pytest.mark.parametrize(
    ("reply", "left_open"),
    [
        ("The retry loop is in; the backoff cap is still to do.", True),
        ("Ich habe den Sender umgebaut, die Tests fehlen noch.", True),
        ("J'ai ajouté l'envoi ; il reste la gestion des erreurs.", True),
        ("Añadí el envío; queda pendiente el reintento.", True),
        ("Отправку переписал, осталось добавить тесты.", True),
        ("送信は直しました。テストはまだ残っています。", True),
        ("The remaining tests pass and the mailer is async now.", False),
        ("Done — the old tests still pass.", False),
    ],
)
def test_a_session_closed_after_a_reply_saying_work_remains_leaves_it_open(
    shared: DaemonProcess, reply: str, left_open: bool
) -> None:
    """A session closed right after the agent's reply says what is still to do ("the
    backoff cap is still to do", "осталось добавить тесты") leaves the thread open, in the
    state and as a suggestion; closed after a reply saying nothing remains, it is done."""
    w = fresh(shared)
    events = worked(
        now_ms() - 2 * DAY, "Port the mailer to async in src/mail/send.py", "src/mail/send.py", ""
    )
    events = [*events[:3], {**events[3], "text": reply}]
    sid = session(shared, w, events)
    shared.call("close_session", {"workspace": w, "sessionId": sid})
    state = wait_for(shared, w, lambda s: mentions(s, "1 session", "Rhythm"))
    assert mentions(state, "Port the mailer", *OPEN_SECTIONS) is left_open, state["sections"]
    assert bool([text for text in suggested(shared, w) if "Port the mailer" in text]) is left_open


# ------------------------------------------------ dismissed, then again ---


def test_a_dismissed_failure_that_was_fixed_and_broke_again_is_suggested_again(shared: DaemonProcess) -> None:
    """A failure the user dismissed stays hidden while it keeps failing; once a later run
    fixed it and a still later one failed again, that new failure is suggested, dismissal
    or not."""
    w = fresh(shared)
    now = now_ms()
    command = "go test ./internal/lexer/..."
    session(
        shared,
        w,
        run(now - 5 * DAY, "Fix the lexer's unicode idents", command, "--- FAIL: TestIdent", 1, "Hm."),
    )
    wait_for(shared, w, lambda s: mentions(s, "1 session", "Rhythm"))
    [first] = [
        s for s in shared.call("suggest", {"workspace": w})["suggestions"] if s["kind"] == "unfixed_failure"
    ]
    shared.call("dismiss_suggestion", {"workspace": w, "id": first["id"]})
    session(
        shared,
        w,
        run(now - 4 * DAY, "Once more on the lexer idents", command, "--- FAIL: TestIdent", 1, "Hm."),
    )
    wait_for(shared, w, lambda s: mentions(s, "2 sessions", "Rhythm"))
    assert not [text for text in suggested(shared, w) if text.startswith("Still failing")]
    session(
        shared, w, run(now - 3 * DAY, "The lexer idents, last try", command, "ok  lexer 0.01s", 0, "Good.")
    )
    session(
        shared, w, run(now - 2 * DAY, "Add raw strings to the lexer", command, "--- FAIL: TestRaw", 1, "Hm.")
    )
    wait_for(shared, w, lambda s: mentions(s, "4 sessions", "Rhythm"))
    assert [text for text in suggested(shared, w) if text.startswith("Still failing") and "TestRaw" in text]
