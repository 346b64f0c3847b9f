"""Episodes and the evidence gate's rules, without IO (``makad.service.episodes`` runs them).

An episode's summary is one redacted line; its tags are slugs. A consolidation
passes the gate when every episode it cites exists, carries its tag and is
unconsolidated, and they reach the threshold (5 episodes from 2 sessions by
default). The digest a consolidation proposes lists the last 50 of the tag's
episodes, each with its date.

The episode ``close_session`` records, without any model:

- summary: ``Goals: g1; g2 — Decisions: d1; d2`` from the working state
  (nothing when both lists are empty), clipped to 200 characters;
- tags: the ``#hashtags`` in the decisions and goals; without any, their three
  most frequent words of 4+ letters outside a stop list (ties: first seen,
  decisions before goals), never a word of a ``[REDACTED:kind]`` marker; in Chinese,
  Japanese and Korean text, its kanji compounds of 2–6 characters, katakana and hangul
  words, never a whole sentence;
- refs: for each goal and decision, the session's user message sharing the
  most words with it (BM25 over the session), else its last user message; a
  session without user messages records no episode.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from makad.core.redaction import redact, without_markers
from makad.core.types import EpisodeRecord, WorkingState
from makad.core.when import utc_moment
from makad.errors import InsufficientEvidence, InvalidParams, TooLarge

MIN_EPISODES: Final = 5
MIN_SESSIONS: Final = 2
MAX_SUMMARY_CHARS: Final = 200
MAX_EPISODE_TAGS: Final = 16
MAX_EPISODE_REFS: Final = 64

MAX_TAG_CHARS = 64
# consolidation_candidates lists each tag's newest episodes, this many, for the first
# CANDIDATES_WITH_EPISODES tags (their counts count them all): every episode once per
# tag it carries, a long history went past the reply cap.
CANDIDATE_EPISODES: Final = 20
CANDIDATES_WITH_EPISODES: Final = 200
CLOSE_TAGS = 3
DIGEST_LINES = 50
_NOT_SLUG = re.compile(r"[\W_]+")
_HASHTAG = re.compile(r"(?<![\w#])#(\w[\w-]*)")
_WORD = re.compile(r"[^\W\d_][\w-]*")
# Chinese and Japanese are written without spaces, so a "word" above is a whole sentence.
# Their candidate tags are the runs of one script in it: kanji/hanzi compounds of 2–6
# characters, katakana words, hangul words; hiragana (Japanese particles and endings) is
# never one. A longer han run is a Chinese phrase, not a word: no tag rather than a
# sentence that never repeats.
_SCRIPT_RUN = re.compile(
    r"(?P<han>[\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+)"
    r"|(?P<kata>[\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff]+)"
    r"|(?P<hangul>[\u1100-\u11ff\u3131-\u318e\uac00-\ud7af]+)"
    r"|(?P<kana>[\u3041-\u3096\u309d-\u309f]+)"
    r"|(?P<other>[^\u3005\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
    r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f\u1100-\u11ff\u3131-\u318e\uac00-\ud7af]+)"
)
_CJK_TAG_CHARS: Final = {"han": (2, 6), "kata": (2, 16), "hangul": (2, 8)}
_STOPWORDS = """
about above after again against also always because been before being below between both
cannot could decision decisions does doing done down during each every from further goal
goals have having here instead into itself just keep like made make makes more most must
need needs never next only other over please rather same session should some still such
than that their theirs them then there these they this those through under until very
want wants what when where which while will with would your yours using used uses work
"""
STOPWORDS = frozenset(_STOPWORDS.split())


def slug(tag: str) -> str:
    """A tag as a slug: case-folded, runs of anything but letters and digits as ``-``."""
    clean = redact(tag).text  # a secret pasted as a tag must not survive as a slug
    return _NOT_SLUG.sub("-", clean.casefold()).strip("-")[:MAX_TAG_CHARS].strip("-")


def episode_tags(tags: list[str]) -> list[str]:
    """Normalized, de-duplicated tags; one that normalizes to nothing is invalid."""
    out: dict[str, None] = {}  # in order, each once (a list's `in` is quadratic in the tags sent)
    for i, tag in enumerate(tags):
        normal = slug(tag)
        if not normal:
            raise InvalidParams("a tag needs a letter or a digit", path=f"$.tags[{i}]")
        out.setdefault(normal)
    if len(out) > MAX_EPISODE_TAGS:
        raise TooLarge(f"at most {MAX_EPISODE_TAGS} tags", limit=MAX_EPISODE_TAGS, count=len(out))
    return list(out)


def clean_summary(summary: str) -> tuple[str, int]:
    """The summary, trimmed and redacted, with how many secrets that took."""
    text = summary.strip()
    if not text:
        raise InvalidParams("summary must not be empty", path="$.summary")
    if "\n" in text or "\r" in text:
        raise InvalidParams("summary must be one line", path="$.summary")
    if len(text) > MAX_SUMMARY_CHARS:
        raise TooLarge(
            f"summary is over {MAX_SUMMARY_CHARS} characters", limit=MAX_SUMMARY_CHARS, actual=len(text)
        )
    cleaned = redact(text)
    return cleaned.text, cleaned.count


def one_line(text: str) -> str:
    return " ".join(text.split())


def clip(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def close_summary(state: WorkingState) -> str | None:
    """``Goals: …; … — Decisions: …; …`` (one line, ≤ 200 characters), or None."""
    parts = []
    goals = [one_line(g) for g in state.goals if one_line(g)]
    decisions = [one_line(d) for d in state.decisions if one_line(d)]
    if goals:
        parts.append("Goals: " + "; ".join(goals))
    if decisions:
        parts.append("Decisions: " + "; ".join(decisions))
    return clip(" — ".join(parts)) if parts else None


def close_tags(state: WorkingState) -> list[str]:
    """The decisions' and goals' #hashtags, else their most frequent content words."""
    text = "\n".join([*state.decisions, *state.goals])
    hashtags = [slug(t) for t in _HASHTAG.findall(text)]
    picked = list(dict.fromkeys(t for t in hashtags if t))
    if picked:
        return picked[:MAX_EPISODE_TAGS]
    words = [w for m in _WORD.findall(without_markers(text).casefold()) for w in _tag_words(m)]
    counts = Counter(words)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    return sorted(counts, key=lambda w: (-counts[w], first[w]))[:CLOSE_TAGS]


def _tag_words(word: str) -> list[str]:
    """The candidate tags in one word of the text: itself when it has 4–32 letters and is
    no stop word, or, in Chinese, Japanese and Korean, its runs of one script (``_SCRIPT_RUN``)."""
    out = []
    for run in _SCRIPT_RUN.finditer(word):
        kind, piece = run.lastgroup, slug(run.group())
        low, high = _CJK_TAG_CHARS.get(kind or "", (4, 32))
        if kind != "kana" and piece and low <= len(piece) <= high and piece not in STOPWORDS:
            out.append(piece)
    return out


def digest(tag: str, episodes: list[EpisodeRecord]) -> tuple[str, str]:
    """The deterministic digest proposal of a tag's evidence: (title, content)."""
    sessions = len({e.session_id for e in episodes})
    lines = [f"recurring: {tag} — {len(episodes)} episodes across {sessions} sessions"]
    shown = episodes[-DIGEST_LINES:]
    if len(episodes) > len(shown):
        lines.append(f"- … and {len(episodes) - len(shown)} earlier episodes")
    lines += [f"- {utc_moment(e.at):%Y-%m-%d} {e.summary}" for e in shown]
    return f"Recurring: {tag}", "\n".join(lines)


@dataclass(frozen=True)
class Threshold:
    """How much evidence a consolidation needs: episodes, and distinct sessions."""

    min_episodes: int = MIN_EPISODES
    min_sessions: int = MIN_SESSIONS

    def met(self, episodes: int, sessions: int) -> bool:
        return episodes >= self.min_episodes and sessions >= self.min_sessions


def check_evidence(
    tag: str,
    ids: Sequence[str],
    found: Mapping[str, EpisodeRecord],
    unconsolidated: Collection[str],
    threshold: Threshold,
) -> None:
    """The evidence gate of a consolidation of ``tag`` citing ``ids``: InsufficientEvidence
    unless each is ``found`` (not deleted), carries the tag and is ``unconsolidated``, and
    together they meet the threshold."""
    if not tag or not ids:
        raise InsufficientEvidence("a consolidation cites a tag and its episodes", reason="no_episodes")
    unknown = [i for i in ids if i not in found or found[i].deleted_at is not None]
    if unknown:
        raise InsufficientEvidence(
            "the proposal cites episodes this workspace does not have",
            reason="unknown_episodes",
            episodeIds=unknown[:20],
        )
    foreign = [i for i in ids if tag not in found[i].tags]
    if foreign:
        raise InsufficientEvidence(
            "the proposal cites episodes without its tag",
            reason="foreign_tag",
            tag=tag,
            episodeIds=foreign[:20],
        )
    spent = [i for i in ids if i not in unconsolidated]
    if spent:
        raise InsufficientEvidence(
            "the proposal cites episodes already consolidated",
            reason="already_consolidated",
            tag=tag,
            episodeIds=spent[:20],
        )
    sessions = len({found[i].session_id for i in ids})
    if not threshold.met(len(ids), sessions):
        raise below_threshold(
            tag, len(ids), sessions, threshold, "too few episodes or sessions for a consolidation"
        )


def below_threshold(
    tag: str, episodes: int, sessions: int, threshold: Threshold, message: str
) -> InsufficientEvidence:
    return InsufficientEvidence(
        message,
        reason="below_threshold",
        tag=tag,
        episodes=episodes,
        sessions=sessions,
        minEpisodes=threshold.min_episodes,
        minSessions=threshold.min_sessions,
    )


def check_ref_count(refs: Sequence[str]) -> None:
    """An episode cites at least one source ref and at most MAX_EPISODE_REFS."""
    if not refs:
        raise InvalidParams("an episode needs at least one source ref", path="$.sourceRefs")
    if len(refs) > MAX_EPISODE_REFS:
        raise TooLarge(f"at most {MAX_EPISODE_REFS} source refs", limit=MAX_EPISODE_REFS, count=len(refs))


def episode_refs(refs: Sequence[str], incognito: Collection[str]) -> list[str]:
    """An episode's source refs as given (the ledger keeps each once); InvalidParams at
    ``$.sourceRefs[i]`` for one into an incognito session (``data.reason``
    ``incognito_session``)."""
    for index, ref in enumerate(refs):
        parts = ref.split(":")
        if len(parts) == 3 and parts[1] in incognito:
            raise InvalidParams(
                "a source ref names an incognito session",
                path=f"$.sourceRefs[{index}]",
                reason="incognito_session",
                ref=ref,
            )
    return list(refs)
