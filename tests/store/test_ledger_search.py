"""search_history and the recall search: BM25 over English, Chinese and Japanese text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makad.core.types import EventInput
from makad.errors import NotFound
from makad.store.ledger import Ledger
from makad.store.ledger import search as ledger_module

FIXTURE = {
    "en": [
        "We decided to migrate the billing service to PostgreSQL next sprint.",
        "The user prefers tabs over spaces in Python files.",
        "Run the test suite with pytest before every commit.",
        "Lunch was pizza again.",
    ],
    "zh": [
        "我们决定下周把数据库迁移到新的服务器上。",
        "用户喜欢在代码里使用四个空格缩进。",
        "今天中午吃了饺子，味道不错。",
        "数据分析报告已经发给老板了。",
    ],
    "ja": [
        "来週、データベースを新しいサーバーに移行することにしました。",
        "ユーザーはインデントにスペースを四つ使うのが好きです。",
        "東京の天気は晴れです。",
        "昼ご飯はラーメンでした。",
    ],
}


@pytest.fixture
def corpus(ledger: Ledger) -> Ledger:
    """One session per language, events in the order listed, ts = 100 * seq."""
    for lang, texts in FIXTURE.items():
        ledger.open_session(lang)
        ledger.append_events(
            lang,
            [EventInput(type="user_message", text=t, ts=100 * (i + 1)) for i, t in enumerate(texts)],
        )
    return ledger


def top(ledger: Ledger, query: str, **kw: object) -> tuple[str, int]:
    hits = ledger.search_history(query, **kw)  # type: ignore[arg-type]
    assert hits, query
    return hits[0].event.session_id, hits[0].event.seq


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("database migration to postgres", ("en", 1)),
        ("Which indentation does the user prefer, tabs or spaces?", ("en", 2)),
        ("running tests", ("en", 3)),
        ("数据库迁移", ("zh", 1)),
        ("用户喜欢什么缩进", ("zh", 2)),
        ("饺子", ("zh", 3)),
        ("データベースの移行", ("ja", 1)),
        ("インデント", ("ja", 2)),
        ("東京の天気", ("ja", 3)),
        ("ラーメン", ("ja", 4)),
    ],
)
def test_search_finds_its_target_in_each_language(
    corpus: Ledger, query: str, expected: tuple[str, int]
) -> None:
    """English (stemmed), Chinese and Japanese queries rank their target first."""
    assert top(corpus, query) == expected


def test_single_cjk_character_matches_anywhere_in_a_run(corpus: Ledger) -> None:
    """A one-character query finds the character at the start, middle or end of a run."""
    assert {h.event.seq for h in corpus.search_history("器", session_id="zh")} == {1}
    assert {h.event.seq for h in corpus.search_history("饺", session_id="zh")} == {3}
    assert {h.event.seq for h in corpus.search_history("晴", session_id="ja")} == {3}


def test_full_width_and_half_width_forms_match(ledger: Ledger) -> None:
    """NFKC folds full-width Latin and half-width katakana on both sides."""
    ledger.open_session("s")
    ledger.append_events("s", [EventInput(type="note", text="ＳＱＬｉｔｅ と ﾃﾞｰﾀﾍﾞｰｽ")])
    assert top(ledger, "sqlite") == ("s", 1)
    assert top(ledger, "データベース") == ("s", 1)


def test_scores_are_positive_and_best_first(corpus: Ledger) -> None:
    """Hits carry a positive score (negated bm25), sorted from best to worst."""
    hits = corpus.search_history("user database spaces 数据库 データベース", limit=50)
    scores = [h.score for h in hits]
    assert scores and all(s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)


def test_filters_by_session_time_and_limit(corpus: Ledger) -> None:
    """sessionId, before/after (exclusive, ms) and limit narrow the hits."""
    assert {h.event.session_id for h in corpus.search_history("user 用户 ユーザー", session_id="zh")} == {
        "zh"
    }
    timed = corpus.search_history("user preferences tabs pizza test", after=100, before=400)
    assert timed and all(100 < h.event.ts < 400 for h in timed)
    assert len(corpus.search_history("the user 用户", limit=1)) == 1
    with pytest.raises(NotFound):
        corpus.search_history("x", session_id="ghost")


def test_recall_search_excludes_sessions_and_caps_seqs(corpus: Ledger) -> None:
    """search_events_ranked drops excluded sessions and events past a session's max seq."""
    hits = corpus.search_events_ranked(
        "数据库 billing データベース 用户 user ユーザー",
        limit=50,
        exclude_sessions=["ja"],
        max_seq_by_session={"zh": 1},
    )
    found = {(h.event.session_id, h.event.seq) for h in hits}
    assert ("zh", 1) in found and ("en", 1) in found
    assert all(s != "ja" for s, _ in found) and ("zh", 2) not in found


def test_only_the_most_recent_window_is_ranked(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """With more matches than SEARCH_WINDOW, the newest window is ranked, filters first."""
    monkeypatch.setattr(ledger_module, "SEARCH_WINDOW", 3)
    ledger.open_session("a")
    ledger.open_session("b")
    ledger.append_events("a", [EventInput(type="note", text="apple " * 9)])
    ledger.append_events("b", [EventInput(type="note", text=f"apple {i}") for i in range(5)])
    assert {h.event.seq for h in ledger.search_history("apple", limit=10)} == {3, 4, 5}
    assert [h.event.session_id for h in ledger.search_history("apple", session_id="a")] == ["a"]
    narrowed = ledger.search_events_ranked("apple", limit=10, exclude_sessions=["b"])
    assert [h.event.session_id for h in narrowed] == ["a"]


def test_the_window_holds_for_matches_added_after_their_terms_were_counted(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Term counts are cached; events that match after the count still make the window apply."""
    monkeypatch.setattr(ledger_module, "SEARCH_WINDOW", 3)
    ledger.open_session("s", now=1)
    ledger.append_events("s", [EventInput(type="note", text=f"filler {i}") for i in range(100)])
    ledger.append_events("s", [EventInput(type="note", text="kiwi") for _ in range(2)])
    assert len(ledger.search_events_ranked("kiwi plum", limit=10, rare_only=True)) == 2
    ledger.append_events("s", [EventInput(type="note", text="kiwi") for _ in range(4)])
    found = ledger.search_events_ranked("kiwi plum", limit=10, rare_only=True)
    assert sorted(hit.event.seq for hit in found) == [104, 105, 106]


def test_filtered_rows_crowding_the_top_do_not_shrink_the_result(ledger: Ledger) -> None:
    """When the best matches are all filtered out, the search reads further until it has enough."""
    ledger.open_session("live")
    ledger.open_session("old")
    ledger.append_events("live", [EventInput(type="note", text="apple apple") for _ in range(300)])
    ledger.append_events(
        "old", [EventInput(type="note", text=f"apple pie number {i} of many") for i in range(10)]
    )
    hits = ledger.search_events_ranked("apple", limit=5, max_seq_by_session={"live": 0})
    assert [h.event.session_id for h in hits] == ["old"] * 5
    best = ledger.search_events_ranked("apple", limit=5)
    assert {h.event.session_id for h in best} == {"live"}


def test_rebuilt_index_answers_the_same(corpus: Ledger) -> None:
    """rebuild_search_index re-derives an index that gives the same hits."""
    before = [(h.event.session_id, h.event.seq) for h in corpus.search_history("数据 user 天気")]
    corpus.rebuild_search_index()
    after = [(h.event.session_id, h.event.seq) for h in corpus.search_history("数据 user 天気")]
    assert before == after and before


@pytest.mark.parametrize(
    "query", ['"unbalanced', "NEAR(a b)", "a AND OR NOT", "*", "-x", "col:foo", "^a", "", "  ", "()"]
)
def test_fts_syntax_in_queries_is_inert(corpus: Ledger, query: str) -> None:
    """Queries that would be FTS5 syntax errors are searched as words (or match nothing)."""
    assert isinstance(corpus.search_history(query), list)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.text(max_size=40))
def test_any_text_is_a_safe_query(corpus: Ledger, query: str) -> None:
    """No user text makes search raise."""
    for hit in corpus.search_history(query, limit=3):
        assert hit.score > 0


def test_rare_only_searches_only_the_uncommon_terms(ledger: Ledger) -> None:
    """A term in more than COMMON_TERM_FLOOR events of a small ledger is left out; alone, nothing is searched."""
    ledger.open_session("s", now=1)
    ledger.append_events(
        "s",
        [EventInput(type="note", text=f"common word {i}", ts=i + 1) for i in range(60)]
        + [EventInput(type="note", text="common zebra", ts=100)],
    )
    assert len(ledger.search_events_ranked("common zebra", limit=100)) == 61
    rare = ledger.search_events_ranked("common zebra", limit=100, rare_only=True)
    assert [hit.event.seq for hit in rare] == [61]
    assert ledger.search_events_ranked("common", limit=100, rare_only=True) == []


def test_an_expansion_counts_a_common_term_only_past_the_share(ledger: Ledger) -> None:
    """rare_only counts a term to twice the common share, not to its end, and still leaves it out."""
    ledger.open_session("s", now=1)
    ledger.append_events("s", [EventInput(type="note", text=f"common word {i}") for i in range(120)])
    ledger.append_events("s", [EventInput(type="note", text="common zebra")])
    cap = ledger_module.COMMON_TERM_FLOOR + 1  # the floor rules in a small ledger
    rare = ledger.search_events_ranked("common zebra", limit=100, rare_only=True)
    assert [hit.event.seq for hit in rare] == [121]
    assert ledger._df_cache['"common"'] == (cap, 121, False)
    assert ledger._df_cache['"zebra"'] == (1, 121, True)


def test_a_query_counts_its_terms_in_full_after_an_expansion_capped_them(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain search keeps terms by their counts: a capped count of rare_only is counted again in full."""
    monkeypatch.setattr(ledger_module, "SMALL_LEDGER_EVENTS", 0)
    ledger.open_session("s", now=1)
    ledger.append_events("s", [EventInput(type="note", text=f"apple pear {i}") for i in range(70)])
    ledger.append_events("s", [EventInput(type="note", text=f"apple {i}") for i in range(10)])
    ledger.search_events_ranked("plum apple", limit=5, rare_only=True)  # counts to the cap only
    assert ledger._df_cache['"apple"'][2] is False
    hits = ledger.search_events_ranked("apple pear", limit=100)
    assert len(hits) == 80
    assert ledger._df_cache['"apple"'] == (80, 80, True)
    assert ledger._df_cache['"pear"'] == (70, 80, True)


def _interleaved(ledger: Ledger, sessions: int, rounds: int, seed: int) -> None:
    """``sessions`` sessions appending in turns, each event holding "apple" or "pear" or both."""
    import random

    rng = random.Random(seed)
    for s in range(sessions):
        ledger.open_session(f"s{s}", now=1)
    for r in range(rounds):
        for s in range(sessions):
            words = rng.choice(["apple", "pear", "apple pear", "apple apple fig", "plum"])
            ledger.append_events(f"s{s}", [EventInput(type="note", text=f"{words} {r}")])


def _newest_ranked_reference(
    ledger: Ledger, query: str, window: int, limit: int, keep: object
) -> list[tuple[str, int]]:
    """What the window means, computed the slow way: every passing match scored, the newest
    ``window`` of them kept (by append order: the ledger's ids), the best ``limit`` of those."""
    everything = ledger.search_events_ranked(query, limit=1000, window=10**9)
    with ledger.snapshot() as conn:
        order = {
            (sid, seq): rowid for rowid, sid, seq in conn.execute("SELECT id, session_id, seq FROM events")
        }
    passing = [h for h in everything if keep(h.event)]  # type: ignore[operator]
    newest = sorted(passing, key=lambda h: -order[(h.event.session_id, h.event.seq)])[:window]
    best = sorted(newest, key=lambda h: (-h.score, order[(h.event.session_id, h.event.seq)]))[:limit]
    return [(h.event.session_id, h.event.seq) for h in best]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_filtered_window_is_the_newest_passing_matches(ledger: Ledger, seed: int) -> None:
    """With the live part of a session and whole sessions filtered out, the window still
    holds exactly the newest ``window`` matches that pass, however the sessions interleave."""
    _interleaved(ledger, sessions=4, rounds=60, seed=seed)
    caps = {"s0": 20, "s2": 0}

    def keep(event: object) -> bool:
        sid, seq = event.session_id, event.seq  # type: ignore[attr-defined]
        return sid != "s3" and not (sid in caps and seq > caps[sid])

    for window in (5, 17, 40):
        hits = ledger.search_events_ranked(
            "apple", limit=10, window=window, max_seq_by_session=caps, exclude_sessions=["s3"]
        )
        found = [(h.event.session_id, h.event.seq) for h in hits]
        assert found == _newest_ranked_reference(ledger, "apple", window, 10, keep)


def test_a_rare_terms_old_matches_are_ranked_past_the_window(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the window, every match of the query's rare terms is still ranked however old,
    while the common term's older matches are not."""
    monkeypatch.setattr(ledger_module, "SMALL_LEDGER_EVENTS", 0)
    ledger.open_session("old", now=1)
    ledger.append_events(
        "old",
        [EventInput(type="note", text="the zebra crossing plan")]
        + [EventInput(type="note", text="a common remark, common again") for _ in range(3)],
    )
    ledger.open_session("new", now=2)
    ledger.append_events("new", [EventInput(type="note", text=f"common remark {i}") for i in range(40)])
    hits = ledger.search_events_ranked("common zebra", limit=100, window=10)
    found = {(h.event.session_id, h.event.seq) for h in hits}
    assert ("old", 1) in found
    assert not found & {("old", 2), ("old", 3), ("old", 4)}
    assert len(found) <= 10


def test_a_rare_terms_old_match_scores_as_its_part_of_the_query(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old match found through the rare terms is scored on those terms alone: never above
    what the whole query scores it, and its order among the rare matches is BM25's."""
    monkeypatch.setattr(ledger_module, "SMALL_LEDGER_EVENTS", 0)
    ledger.open_session("old", now=1)
    ledger.append_events(
        "old",
        [
            EventInput(type="note", text="zebra common"),
            EventInput(type="note", text="zebra zebra stripes and more words here"),
        ],
    )
    ledger.open_session("new", now=2)
    ledger.append_events("new", [EventInput(type="note", text=f"common {i}") for i in range(40)])
    exact = {
        (h.event.session_id, h.event.seq): h.score
        for h in ledger.search_events_ranked("common zebra", limit=100, window=10**9)
    }
    bounded = ledger.search_events_ranked("common zebra", limit=100, window=10)
    old = [(h.event.session_id, h.event.seq, h.score) for h in bounded if h.event.session_id == "old"]
    assert {(sid, seq) for sid, seq, _ in old} == {("old", 1), ("old", 2)}
    for sid, seq, score in old:
        assert 0 < score <= exact[(sid, seq)] + 1e-9
