#!/usr/bin/env python3
"""Recall directions beyond the ones build_context takes, as recall_lab strategies.

    .venv/bin/python lab/recall_directions.py --conversations 0,1,2 [--variant NAME ...]

Each variant starts from what build_context does (``recall_lab.assembled``:
``makad.store.recall_source.recall_hits`` into ``makad.core.assembly``) and
changes one thing:

- ``prf-idf*``: pseudo-relevance feedback whose words are weighted by how
  discriminative they are in the ledger (strength x idf, RM3 with an idf
  prior) rather than by how often the best hits share them;
- ``cooc*``: expansion from a co-occurrence table over the whole ledger (words
  that appear in the same or adjacent turns as the query's words, by PMI);
- ``multi*``: multi-query decomposition: the question split into clauses and
  into one query per named entity plus the rest, each searched on its own and
  its hits fused with the first query's (scaled bm25, or reciprocal-rank fusion);
- ``coverage*``: entity/term anchors: every query word's best-ranked event
  (or two) moved to the front before packing, so the pack covers each;
- ``session*``: session-level retrieval: each session scored as one document
  (BM25 over its concatenated turns) or by its turns' aggregated scores, that
  score a stronger part of every turn's rank;
- ``lines*``: packing: shorter recalled lines (``recall_line_max_chars``), so
  more distinct turns fit in the budget; ``short-headers`` prices the block
  headers (an upper bound, not a format); ``--hits`` counts lines per pack;
- ``wordnet*``: a thesaurus channel: events whose nouns have a WordNet 3.0
  hypernym the question names (needs Debian's ``wordnet-base``:
  ``apt-get install wordnet-base``, read from /usr/share/wordnet).

Tune on one half of the development conversations, report the other, and
both ways; nothing here knows a data set, a speaker or a phrasing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "lab")]

import msgspec  # noqa: E402

import recall_lab  # noqa: E402
from makad.core import recall as recall_core  # noqa: E402
from makad.core.assembly import assemble  # noqa: E402
from makad.core.cjk import QUERY_NOISE_WORDS, query_tokens  # noqa: E402
from makad.core.context_types import ContextInputs, ContextLimits, RecallHit  # noqa: E402
from makad.core.feedback import _content_words, stem  # noqa: E402
from makad.core.tokens import HeuristicCounter  # noqa: E402
from makad.core.types import Event  # noqa: E402
from makad.store.recall_source import recall_hits as gather  # noqa: E402
from recall_lab import DEFAULT_DATASET, Loaded, Outcome, Strategy, evaluate, ingest, packed, selected  # noqa: E402

Key = tuple[str, int]


# ------------------------------------------------------------------ helpers


def pack(question: str, hits: list[RecallHit], budget: int, limits: ContextLimits | None = None) -> Outcome:
    return packed(question, hits, budget, int(time.time() * 1000), limits)


def neighbours(loaded: Loaded, event: Event, radius: int = 2) -> list[Event]:
    session = loaded.events[event.session_id]
    low = max(event.seq - radius, 1)
    return [e for e in session[low - 1 : event.seq + radius] if e.seq != event.seq]


def best_strength(hits: list[RecallHit]) -> float:
    return max((-h.bm25 for h in hits if h.bm25 < 0), default=0.0)


def fuse(
    loaded: Loaded, base: list[RecallHit], extra: list[tuple[Event, float]], share: float, mode: str = "max"
) -> list[RecallHit]:
    """``base`` plus ``extra`` (event, positive strength), the extra scaled to ``share`` of base's best.

    ``mode`` "max": an event found by both keeps the stronger match; "add": the
    strengths add (an event matching two sub-queries beats one matching one).
    """
    top = best_strength(base)
    extra_top = max((s for _, s in extra), default=0.0)
    if top <= 0 or extra_top <= 0:
        return base
    factor = share * top / extra_top
    by_key: dict[Key, RecallHit] = {(h.event.session_id, h.event.seq): h for h in base}
    for event, strength in extra:
        key = (event.session_id, event.seq)
        value = strength * factor
        found = by_key.get(key)
        if found is None:
            by_key[key] = RecallHit(event=event, bm25=-value, neighbours=neighbours(loaded, event))
        else:
            old = -found.bm25 if found.bm25 < 0 else 0.0
            new = max(old, value) if mode == "max" else old + value
            by_key[key] = msgspec.structs.replace(found, bm25=-new)
    return sorted(by_key.values(), key=lambda h: (h.bm25, h.event.session_id, h.event.seq))


def search(loaded: Loaded, text: str, limit: int, rare_only: bool = False) -> list[tuple[Event, float]]:
    return [
        (h.event, h.score)  # SearchHit.score is the negated bm25: a positive strength
        for h in loaded.ledger.search_events_ranked(text, limit=limit, rare_only=rare_only)
        if h.score > 0
    ]


@contextlib.contextmanager
def patched(**changes: object) -> Iterator[None]:
    """Temporarily change ``makad.core.recall`` globals (WEIGHTS entries by ``w_<part>``)."""
    saved_weights = dict(recall_core.WEIGHTS)
    saved: dict[str, object] = {}
    for name, value in changes.items():
        if name.startswith("w_"):
            recall_core.WEIGHTS[name[2:]] = value  # type: ignore[index]
        else:
            saved[name] = getattr(recall_core, name)
            setattr(recall_core, name, value)
    try:
        yield
    finally:
        recall_core.WEIGHTS.clear()
        recall_core.WEIGHTS.update(saved_weights)  # type: ignore[attr-defined]
        for name, value in saved.items():
            setattr(recall_core, name, value)


# ------------------------------------------------------- ledger statistics


class Stats:
    """Per-conversation document frequencies and co-occurrence counts (the ledger's own text)."""

    def __init__(self, loaded: Loaded) -> None:
        self.df: Counter[str] = Counter()
        self.cooc: dict[str, Counter[str]] = defaultdict(Counter)
        self.n = 0
        for events in loaded.events.values():
            stems = [{stem(w) for w in _content_words(e.text)} for e in events]
            for index, words in enumerate(stems):
                self.n += 1
                self.df.update(words)
                window = set(words)
                if index + 1 < len(stems):
                    window |= stems[index + 1]
                for a in words:
                    counter = self.cooc[a]
                    for b in window:
                        if b != a:
                            counter[b] += 1

    def idf(self, word: str) -> float:
        return math.log((self.n + 1) / (self.df.get(word, 0) + 0.5))


_stats: dict[str, Stats] = {}


def stats_of(loaded: Loaded) -> Stats:
    key = loaded.conv.sample_id
    if key not in _stats:
        _stats[key] = Stats(loaded)
    return _stats[key]


# ------------------------------------------------------------ directions


def prf_idf(docs: int = 10, terms: int = 10, share: float = 0.3, min_hits: int = 2) -> Strategy:
    """RM3 with an idf prior: feedback words weighted by strength x idf over the first hits."""

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        stats = stats_of(loaded)
        base = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        head = [h for h in base if h.bm25 < 0][:docs]
        top = best_strength(head)
        weight: dict[str, float] = defaultdict(float)
        seen: Counter[str] = Counter()
        surface: dict[str, str] = {}
        for hit in head:
            for word in _content_words(hit.event.text):
                root = stem(word)
                surface.setdefault(root, word)
                weight[root] += (-hit.bm25 / top) * stats.idf(root)
                seen[root] += 1
        taken = {stem(t) for t, _ in query_tokens(question)}
        chosen = [
            surface[r]
            for r, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))
            if seen[r] >= min_hits and r not in taken
        ][:terms]
        if not chosen:
            return pack(question, base, budget)
        extra = search(loaded, " ".join(chosen), 50)
        return pack(question, fuse(loaded, base, extra, share), budget)

    return run


def cooc(terms: int = 8, share: float = 0.3, min_count: int = 3) -> Strategy:
    """Expansion by PMI co-occurrence with the query's words over the whole ledger."""

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        stats = stats_of(loaded)
        base = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        roots = {stem(t) for t, _ in query_tokens(question) if t not in QUERY_NOISE_WORDS}
        score: dict[str, float] = defaultdict(float)
        for root in roots:
            df_a = stats.df.get(root, 0)
            if df_a == 0 or df_a > stats.n * 0.05:
                continue
            for other, count in stats.cooc.get(root, {}).items():
                if count < min_count or other in roots:
                    continue
                pmi = math.log(count * stats.n / (df_a * stats.df[other]))
                if pmi > 0:
                    score[other] += pmi * math.log(count)
        chosen = [w for w, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]]
        if not chosen:
            return pack(question, base, budget)
        extra = search(loaded, " ".join(chosen), 50)
        return pack(question, fuse(loaded, base, extra, share), budget)

    return run


_CLAUSE = re.compile(r",|;|\band\b|\bor\b|\bas well as\b|\bafter\b|\bbefore\b|\bwhile\b|\bwhen\b", re.I)
_NAME = re.compile(r"\b[A-Z][\w'-]*")
_POSSESSIVE = re.compile(r"'s?$")


def sub_queries(question: str, entities: bool) -> list[str]:
    """Clauses of the question with content words, and (``entities``) one per named entity.

    A named entity is a capitalized word that is not the question's first word;
    its query is the entity plus the question's words that are not names, so
    "What did A and B both paint?" asks "A paint" and "B paint".
    """
    parts = [p.strip() for p in _CLAUSE.split(question) if p and p.strip()]
    subs = [p for p in parts if query_tokens(p) and len(parts) > 1]
    if entities:
        words = question.split()
        names = {_POSSESSIVE.sub("", m.group(0)) for m in _NAME.finditer(" ".join(words[1:]))}
        names = {n for n in names if n.lower() not in QUERY_NOISE_WORDS}
        if len(names) > 1:
            rest = _NAME.sub(" ", question)
            subs += [f"{name} {rest}" for name in sorted(names)]
    return list(dict.fromkeys(subs))


def multi(
    share: float = 0.7, limit: int = 30, entities: bool = True, mode: str = "max", rrf: bool = False
) -> Strategy:
    """Multi-query decomposition: each sub-query searched alone, fused with the first query's hits."""

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        base = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        subs = sub_queries(question, entities)
        if not subs:
            return pack(question, base, budget)
        hits = base
        if rrf:
            # Reciprocal-rank fusion: rank in each list -> 1 / (60 + rank), bm25 replaced by it.
            lists = [[(h.event, -h.bm25) for h in base if h.bm25 < 0]] + [
                search(loaded, s, limit) for s in subs
            ]
            fused: dict[Key, float] = defaultdict(float)
            events: dict[Key, Event] = {}
            for found in lists:
                for rank, (event, _) in enumerate(found):
                    key = (event.session_id, event.seq)
                    fused[key] += 1 / (60 + rank)
                    events[key] = event
            base_keys = {(h.event.session_id, h.event.seq): h for h in base}
            out = []
            for key, value in fused.items():
                old = base_keys.get(key)
                nb = old.neighbours if old is not None else neighbours(loaded, events[key])
                out.append(RecallHit(event=events[key], bm25=-value, neighbours=nb))
            out += [h for k, h in base_keys.items() if k not in fused]
            return pack(question, out, budget)
        for sub in subs:
            hits = fuse(loaded, hits, search(loaded, sub, limit), share, mode)
        return pack(question, hits, budget)

    return run


class SessionIndex:
    """Each session of a conversation as one FTS5 document (porter, as the ledger indexes)."""

    def __init__(self, loaded: Loaded) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(
            "CREATE VIRTUAL TABLE s USING fts5(sid UNINDEXED, body, tokenize='porter unicode61')"
        )
        self.conn.executemany(
            "INSERT INTO s VALUES (?, ?)",
            [(sid, "\n".join(e.text for e in events)) for sid, events in loaded.events.items()],
        )

    def scores(self, question: str) -> dict[str, float]:
        tokens = [t for t, _ in query_tokens(question)]
        if not tokens:
            return {}
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
        rows = self.conn.execute("SELECT sid, -bm25(s) FROM s WHERE s MATCH ?", (match,)).fetchall()
        best = max((v for _, v in rows), default=0.0)
        return {sid: v / best for sid, v in rows} if best > 0 else {}


_sessions: dict[str, SessionIndex] = {}


def session_doc(weight: float = 0.3) -> Strategy:
    """Session-level retrieval: a session's own BM25 as one document is every turn's session part."""

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        key = loaded.conv.sample_id
        if key not in _sessions:
            _sessions[key] = SessionIndex(loaded)
        scores = _sessions[key].scores(question)
        hits = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        with patched(w_session=weight, _session_parts=lambda own: scores):
            return pack(question, hits, budget)

    return run


def session_agg(weight: float = 0.3, top: int = 3) -> Strategy:
    """Sessions scored by their turns' aggregated scores (the session part), weighted more."""

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        hits = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        with patched(w_session=weight, SESSION_TOP=top):
            return pack(question, hits, budget)

    return run


def lines(max_chars: int) -> Strategy:
    """Packing: recalled lines cut at ``max_chars`` characters instead of 400."""
    limits = ContextLimits(recall_line_max_chars=max_chars)

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        hits = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        return pack(question, hits, budget, limits)

    return run


WORDNET = Path("/usr/share/wordnet")  # Debian's wordnet-base (WordNet 3.0 database files)
_NOUN_SUFFIXES = (
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
    ("s", ""),
)


class Hypernyms:
    """A word's most frequent noun sense and the single-word names of its hypernyms, ``depth`` up.

    Read from the WordNet 3.0 database files (index.noun, data.noun, noun.exc):
    a lexical database, deterministic, no model. "swimming" -> sport, athletics,
    diversion, recreation, activity.
    """

    def __init__(self, root: Path = WORDNET, depth: int = 4) -> None:
        self.depth = depth
        self.first: dict[str, str] = {}
        for line in (root / "index.noun").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            fields = line.split()
            count = int(fields[2])
            self.first[fields[0]] = fields[-count]
        self.words: dict[str, list[str]] = {}
        self.up: dict[str, list[str]] = {}
        with (root / "data.noun").open(encoding="latin-1") as data:
            for line in data:
                if line.startswith(" "):
                    continue
                fields = line.split(" | ")[0].split()
                offset, n_words = fields[0], int(fields[3], 16)
                self.words[offset] = [fields[4 + 2 * i].lower() for i in range(n_words)]
                at = 4 + 2 * n_words
                n_ptrs = int(fields[at])
                ptrs = fields[at + 1 : at + 1 + 4 * n_ptrs]
                self.up[offset] = [ptrs[i + 1] for i in range(0, len(ptrs), 4) if ptrs[i] in ("@", "@i")]
        self.exceptions = {}
        for line in (root / "noun.exc").read_text(encoding="latin-1").splitlines():
            parts = line.split()
            if len(parts) >= 2:
                self.exceptions[parts[0]] = parts[1]
        self.cache: dict[str, frozenset[str]] = {}

    def lemma(self, word: str) -> str | None:
        if word in self.first:
            return word
        if word in self.exceptions:
            return self.exceptions[word]
        for suffix, repl in _NOUN_SUFFIXES:
            if word.endswith(suffix) and (base := word[: len(word) - len(suffix)] + repl) in self.first:
                return base
        return None

    def above(self, word: str) -> frozenset[str]:
        found = self.cache.get(word)
        if found is not None:
            return found
        lemma = self.lemma(word)
        names: set[str] = set()
        if lemma is not None:
            level = [self.first[lemma]]
            for _ in range(self.depth):
                level = [h for offset in level for h in self.up.get(offset, [])]
                for offset in level:
                    names.update(w for w in self.words.get(offset, []) if "_" not in w)
        found = self.cache[word] = frozenset(names)
        return found


_hypernyms: list[Hypernyms] = []
_concepts: dict[str, tuple[list[tuple[Event, frozenset[str]]], Counter[str]]] = {}


def hypernym(share: float = 0.3, limit: int = 30, depth: int = 4, plural_only: bool = False) -> Strategy:
    """A thesaurus channel: events whose nouns have a hypernym the question names.

    Each event's nouns map to their most frequent sense's hypernyms (``depth``
    up, computed once per conversation as a daemon would at append time); a
    question word (its noun lemma) that is such a hypernym of an event, and not
    a word of the event itself, scores it by the concept's idf in the ledger;
    the best ``limit`` join the candidates like feedback hits (``fuse``).
    With ``plural_only`` only the question's plural nouns count ("What
    activities…", "Which instruments…": a plural names a category whose
    members the answer lists).
    """

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        if not _hypernyms or _hypernyms[0].depth != depth:
            _hypernyms[:] = [Hypernyms(depth=depth)]
        wn = _hypernyms[0]
        key = f"{loaded.conv.sample_id}/{depth}"
        if key not in _concepts:
            rows: list[tuple[Event, frozenset[str]]] = []
            df: Counter[str] = Counter()
            for events in loaded.events.values():
                for event in events:
                    words = _content_words(event.text)
                    concepts = frozenset(c for w in words for c in wn.above(w)) - words
                    rows.append((event, concepts))
                    df.update(concepts)
            _concepts[key] = (rows, df)
        rows, df = _concepts[key]
        base = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
        tokens = [t for t, _ in query_tokens(question)]
        if plural_only:
            wanted = {lemma for t in tokens if (lemma := wn.lemma(t)) is not None and lemma != t}
        else:
            wanted = {wn.lemma(t) or t for t in tokens}
        n = len(rows)
        scored = []
        for event, concepts in rows:
            value = sum(math.log((n + 1) / (df[c] + 0.5)) for c in wanted if c in concepts)
            if value > 0:
                scored.append((event, value))
        scored.sort(key=lambda item: (-item[1], item[0].session_id, item[0].seq))
        if not scored:
            return pack(question, base, budget)
        return pack(question, fuse(loaded, base, scored[:limit], share), budget)

    return run


def term_coverage(per_term: int = 1) -> Strategy:
    """Entity/term anchors the pack must cover: for each query word, its best-ranked event first.

    The events are ranked as build_context ranks them; then, for every query
    word (its Porter stem), the ``per_term`` best events containing it move
    to the front (in rank order), so a word matched only by lower-ranked
    turns (the second entity of "A and B", a rare detail) is still shown.
    """

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        now = int(time.time() * 1000)
        hits = gather(loaded.ledger, question, now_ms=now)
        ranked = recall_core.rank_events(hits, question, now)
        terms = {stem(t) for t, _ in query_tokens(question)}
        first: list[int] = []
        for term in sorted(terms):
            found = 0
            for index, item in enumerate(ranked):
                if term in {stem(w.lower()) for w in _WORDS.findall(item.event.text)}:
                    if index not in first:
                        first.append(index)
                    found += 1
                    if found >= per_term:
                        break
        order = sorted(first) + [i for i in range(len(ranked)) if i not in set(first)]
        refs = [f"event:{ranked[i].event.session_id}:{ranked[i].event.seq}" for i in order]
        return packed(question, hits, budget, now, selection=refs)

    return run


_WORDS = re.compile(r"[^\W\d_]+")


def short_headers(keep: int = 8) -> Strategy:
    """An upper bound for a cheaper block header: the session id cut to ``keep`` hex digits.

    Not a format to ship (a cut id is no longer a ref); it prices the headers'
    share of the budget (``--hits``: ~12%) in recall.
    """
    from makad.core import assembly, render

    def header(session_id: str, ts_ms: int) -> str:
        return f"event:{session_id[:keep]} · {render.recall_day(ts_ms)}"

    def run(loaded: Loaded, question: str, budget: int) -> Outcome:
        saved = (render.recall_header, assembly.recall_header)
        render.recall_header = assembly.recall_header = header
        try:
            hits = gather(loaded.ledger, question, now_ms=int(time.time() * 1000))
            return pack(question, hits, budget)
        finally:
            render.recall_header, assembly.recall_header = saved

    return run


def hits_per_budget(loaded_all: list[Loaded], max_chars: int, budget: int) -> dict[str, float]:
    """Per pack of categories 1-4: lines shown, session-day blocks (a ~21-token header each),
    lines cut short, and the tokens the headers take."""
    limits = ContextLimits(recall_line_max_chars=max_chars)
    counter = HeuristicCounter()
    packs = lines_shown = blocks = cut = header_tokens = 0
    for loaded in loaded_all:
        for q in loaded.conv.questions:
            if q.category not in (1, 2, 3, 4):
                continue
            now = int(time.time() * 1000)
            hits = gather(loaded.ledger, q.text, now_ms=now)
            result = assemble(
                ContextInputs(
                    budget_tokens=budget,
                    now_ms=now,
                    query=q.text,
                    include=frozenset({"recall"}),
                    recall_hits=hits,
                    limits=limits,
                )
            )
            for segment in result.segments:
                if segment.kind != "recall":
                    continue
                packs += 1
                rows = segment.text.split("\n")
                heads = [row for row in rows if row.startswith("event:")]
                body = [row for row in rows if _LINE.match(row)]
                lines_shown += len(body)
                blocks += len(heads)
                cut += sum(row.endswith("\u2026") for row in body)
                header_tokens += sum(counter.count(row + "\n") for row in heads)
    return {
        "maxChars": max_chars,
        "packs": packs,
        "linesPerPack": round(lines_shown / max(packs, 1), 2),
        "blocksPerPack": round(blocks / max(packs, 1), 2),
        "cutLinesPerPack": round(cut / max(packs, 1), 2),
        "headerTokensPerPack": round(header_tokens / max(packs, 1), 1),
    }


_LINE = re.compile(r"\d+ ")


VARIANTS: dict[str, Callable[[], Strategy]] = {
    "assembled": recall_lab.assembled,
    "prf-idf": prf_idf,
    "prf-idf-5t": lambda: prf_idf(terms=5),
    "prf-idf-s5": lambda: prf_idf(share=0.5),
    "cooc": cooc,
    "cooc-4t": lambda: cooc(terms=4),
    "cooc-s6": lambda: cooc(share=0.6),
    "cooc-4t-s6": lambda: cooc(terms=4, share=0.6),
    "multi": multi,
    "multi-clauses": lambda: multi(entities=False),
    "multi-s1": lambda: multi(share=1.0),
    "multi-s4": lambda: multi(share=0.4),
    "multi-add": lambda: multi(mode="add"),
    "multi-rrf": lambda: multi(rrf=True),
    "session-doc-0.15": lambda: session_doc(0.15),
    "session-doc-0.3": lambda: session_doc(0.3),
    "session-doc-0.8": lambda: session_doc(0.8),
    "session-agg-0.3": lambda: session_agg(0.3),
    "session-agg-0.8": lambda: session_agg(0.8),
    "session-agg-0.3-top1": lambda: session_agg(0.3, 1),
    "short-headers": short_headers,
    "coverage": term_coverage,
    "coverage-2": lambda: term_coverage(2),
    "wordnet": hypernym,
    "wordnet-s5": lambda: hypernym(share=0.5),
    "wordnet-d2": lambda: hypernym(depth=2),
    "wordnet-plural": lambda: hypernym(plural_only=True),
    "wordnet-plural-s5": lambda: hypernym(share=0.5, plural_only=True),
    "wordnet-plural-d3": lambda: hypernym(depth=3, plural_only=True),
    "lines-250": lambda: lines(250),
    "lines-160": lambda: lines(160),
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="recall_directions")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--conversations", default=None)
    parser.add_argument(
        "--hits", action="store_true", help="print lines and headers per pack (400, 250, 160 chars) instead"
    )
    args = parser.parse_args()
    conversations = selected(args.dataset, args.conversations)
    with tempfile.TemporaryDirectory(prefix="recall-dir") as tmp:
        loaded = [ingest(conv, Path(tmp)) for conv in conversations]
        for max_chars in (400, 250, 160) if args.hits else ():
            print(json.dumps(hits_per_budget(loaded, max_chars, args.budget)), flush=True)
        for name in () if args.hits else args.variant or list(VARIANTS):
            result = evaluate(loaded, VARIANTS[name](), args.budget)
            cats = result.pop("byCategory")
            overall = result["overall"]
            print(
                json.dumps(
                    {
                        "variant": name,
                        "atBudget": overall["recallAtBudget"],  # type: ignore[index]
                        "cat1": cats["1"]["recallAtBudget"],  # type: ignore[index]
                        "cat3": cats["3"]["recallAtBudget"],  # type: ignore[index]
                        "r@50": overall["recall@50"],  # type: ignore[index]
                        "tokens": overall["meanTokens"],  # type: ignore[index]
                        **result["latency"],  # type: ignore[dict-item]
                    }
                ),
                flush=True,
            )
        for item in loaded:
            item.ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
