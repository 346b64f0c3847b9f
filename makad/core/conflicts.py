"""Facts that changed: which older line a newer one supersedes, decided without a model.

``supersessions`` reads each item a pack may show (a memory entry, a recalled event, a
live-history message) for *claims* — a subject and the value it has — and says which
older item states a value for a subject that a newer item gives a different value:

- statements: ``the locker code is 4411``, ``Locker code: 4411``, ``my manager's name is
  Dana``, ``the deploy day = Tuesday``, ``I live in Porto``, ``we use MySQL``;
- changes: ``I changed it to 7720``, ``the code changed from 4411 to 7720``, ``the
  offsite moved to Gdansk``, ``we switched to Postgres``, ``the meeting is now on
  Thursday``, ``updated the limit to 50``, ``rescheduled the review for Friday``;
- negations: ``we no longer use MySQL``, ``Porto is no longer the venue``.

A plain statement counts only when its value is of a kind that can be compared — a
number, a date or weekday, a time, a name (capitalized words), yes/no — so ordinary
description ("the game was fun") is never a claim; a change or a negation says by its
form that the value changed, whatever the value. Subjects are compared on their content
words (articles, pronouns and aspect words such as ``time`` aside, plurals folded), which
must be the same; an owner (``my``, ``Alice's``) may be said by one and not the other —
``locker code`` is ``my locker code``, but ``Alice's phone`` is not ``Bob's phone`` and the
``guest wifi password`` is not the ``wifi password``. "I", "my" and "we" belong to who
said them (a transcript line's speaker label, else the item's speaker). A change naming
its subject by a pronoun (``I changed it to 7720``) takes the subject of the nearest claim
before it in the same session whose value is of the same kind.

Only a newer item supersedes an older one; equal values never conflict; the newest
value wins along a chain (``4411`` → ``5500`` → ``7720``: both older lines name the
newest). Everything here is pure: the assembler (``makad.core.assembly``) decides what a
supersession does to the pack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from makad.core.refs import event_ref, memory_ref
from makad.core.types import Entry, Event

ValueKind = Literal["number", "date", "time", "name", "bool", "code", "text"]
STRONG_KINDS: Final[frozenset[str]] = frozenset({"number", "date", "time", "name", "bool", "code"})
# Subjects that hold several values at once (a team uses MySQL *and* Redis): a plain
# statement of another value is no change; only a change or a negation says one.
MULTI_VALUED: Final[frozenset[str]] = frozenset({"tool"})
# A change that names no subject but an actor (``Paul switched to a Tesla``): it updates
# any single verb subject of that actor (what Paul drives, uses, prefers).
ANY_VERB: Final = "~any"
# How many seqs back a subjectless change looks for the claim it changes.
PRONOUN_REACH: Final = 6
# ``Name: text`` is a speaker's line unless ``text`` is this short (``Locker code: 4411``).
SUBJECT_VALUE_WORDS: Final = 3
# Texts longer than this are read only up to here (claims sit in short sentences).
MAX_SCAN_CHARS: Final = 2_000

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = (
    "monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun"
)
_BOOL_WORDS: Final = {
    "yes": "yes",
    "no": "no",
    "true": "yes",
    "false": "no",
    "on": "yes",
    "off": "no",
    "enabled": "yes",
    "disabled": "no",
    "allowed": "yes",
    "forbidden": "no",
    "required": "yes",
    "optional": "no",
}
_DET = (
    r"(?:the|my|our|your|his|her|their|its|this|that|a|an|"
    r"[A-Z][\w-]{1,30}'s)"
)
_PRONOUNS: Final = frozenset(
    {
        "it",
        "that",
        "this",
        "they",
        "them",
        "these",
        "those",
        "there",
        "what",
        "which",
        "who",
        "he",
        "she",
        "one",
    }
)
_STOP: Final = frozenset(
    {
        "the", "a", "an", "of", "for", "to", "in", "on", "at", "my", "our", "your", "his", "her",
        "their", "its", "this", "that", "new", "current", "old", "now", "also", "still", "just",
        "really", "actually", "and", "is", "are", "was", "were", "be", "been", "has", "have", "had",
    }
)  # fmt: skip
# Verbs whose object is the value of a subject the verb names (``I live in Porto``):
# each maps to the subject it states, so a change form of another verb of the same
# group (``moved to Lisbon``) updates it.
_VERB_SUBJECTS: Final = {
    "live": "residence",
    "lives": "residence",
    "living": "residence",
    "based": "residence",
    "located": "location",
    "work": "employer",
    "works": "employer",
    "working": "employer",
    "use": "tool",
    "uses": "tool",
    "using": "tool",
    "drive": "car",
    "drives": "car",
    "prefer": "preference",
    "prefers": "preference",
    "meet": "meeting",
    "meets": "meeting",
    "deploy": "deploy",
    "deploys": "deploy",
}
# A change verb with no named subject and a value ``to`` a place: which verb subject it updates.
_CHANGE_VERB_SUBJECTS: Final = {
    "moved": "residence",
    "relocated": "residence",
    "switched": ANY_VERB,
    "migrated": ANY_VERB,
}

_CHANGE_VERBS = (
    r"changed|updated|moved|switched|reset|set|rescheduled|renamed|bumped|raised|lowered|"
    r"increased|decreased|migrated|relocated|shifted|pushed|postponed"
)
# Who does something: a pronoun, or a capitalized name that is not a determiner or a
# pronoun opening a sentence (matched case-sensitively inside case-blind patterns).
_WHO = (
    r"(?P<who>I|we|he|she|they|(?-i:(?!(?:The|This|That|These|Those|My|Our|Your|His|Her|Their"
    r"|Its|It|There|What|When|Then)\b)[A-Z][a-z]{1,30}))"
)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_CONJUNCTIONS: Final = frozenset(
    ["and", "but", "because", "so", "since", "which", "when", "while", "if", "as", "instead"]
)
_CHANGE_NAMED = re.compile(
    rf"\b(?:{_CHANGE_VERBS})\s+(?!(?:from|to|over|back|up|out|off|about|in|on|it\s+up)\b)(?P<subj>(?:{_DET}\s+)?[\w'-]+(?:\s+[\w'-]+){{0,3}}?)"
    r"(?:\s+from\s+(?P<old>[^;!?]{1,40}?))?\s+(?:to|(?<=rescheduled\s)for)\s+(?P<val>.{1,80})",
    re.IGNORECASE,
)
_CHANGED_PASSIVE = re.compile(
    rf"(?:^|\b{_DET}\s+)(?P<subj>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:has\s+|have\s+|had\s+|was\s+|were\s+|got\s+|is\s+being\s+|been\s+)*"
    rf"(?:{_CHANGE_VERBS})\s+(?:from\s+(?P<old>[^;!?]{{1,40}}?)\s+)?to\s+(?P<val>.{{1,80}})",
    re.IGNORECASE,
)
_CHANGE_BARE = re.compile(
    rf"\b{_WHO}\s+(?:have\s+|has\s+|just\s+|finally\s+)*"
    r"(?:(?P<verb>moved|relocated|switched|migrated)\s+(?:over\s+|back\s+)?to|(?P<joined>joined|started\s+at))"
    r"\s+(?P<val>.{1,80})",
    re.IGNORECASE,
)
_IS_NOW = re.compile(
    rf"(?:^|\b{_DET}\s+)(?P<subj>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:is|are|'s)\s+now\s+(?:on\s+|at\s+|in\s+)?(?P<val>.{{1,80}})",
    re.IGNORECASE,
)
_NO_LONGER_VERB = re.compile(
    rf"\b{_WHO}\s+(?:do\s+not|don't|does\s+not|doesn't)?\s*"
    r"(?:no\s+longer|not\s+anymore)\s+(?P<verb>\w+)\s+(?:in\s+|at\s+|for\s+|with\s+)?(?P<val>.{1,80})",
    re.IGNORECASE,
)
_NO_LONGER_IS = re.compile(
    rf"(?:^|(?<=[,:])\s+|\b{_DET}\s+)(?P<val>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:is|are)\s+no\s+longer\s+(?:{_DET}\s+)?(?P<subj>[\w'-]+(?:\s+[\w'-]+){{0,3}})",
    re.IGNORECASE,
)
_VERB_STATEMENT = re.compile(
    rf"\b{_WHO}\s+(?:still\s+|currently\s+|now\s+|usually\s+)?"
    r"(?P<verb>live|lives|based|work|works|use|uses|drive|drives|prefer|prefers|meet|meets|deploy|deploys)"
    r"\s+(?:in\s+|at\s+|for\s+|on\s+|with\s+)?(?P<val>.{1,80})",
    re.IGNORECASE,
)
# ``<subject> happens/runs/opens … on/at <value>``: neutral verbs say when or how often the
# subject is; the others (opens, closes, starts, ends) are part of the subject.
_EVENT_STATEMENT = re.compile(
    rf"(?:^|(?<=[,:])\s+|\b{_DET}\s+)(?P<subj>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?P<now>now\s+)?"
    r"(?P<verb>happens?|runs?|takes?\s+place|is\s+held|are\s+held|rotates?|opens?|closes?|starts?|ends?|begins?)"
    r"\s+(?:on|at|in|every|each|from)?\s*(?P<val>.{1,80})",
    re.IGNORECASE,
)
_NEUTRAL_VERBS: Final = ("happen", "run", "take", "is", "are", "rotate")
# ``<subject> has <number> <unit>``: the unit joins the subject (``server has 16 cores``).
_HAS_COUNT = re.compile(
    rf"(?:^|(?<=[,:])\s+|\b{_DET}\s+)(?P<subj>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:has|have)\s+"
    r"(?P<val>\d[\d,.]*)\s+(?P<unit>[a-z][\w-]*)",
    re.IGNORECASE,
)
# Cheap gates: a pattern runs only on a text holding one of its trigger words (one
# split of the text into words, then a dictionary look-up each).
_CHANGE_WORDS: Final = frozenset(_CHANGE_VERBS.split("|"))
_TRIGGERS: Final[dict[str, frozenset[str]]] = {}
for _name, _words in (
    ("change", _CHANGE_WORDS),
    ("bare", frozenset({"moved", "relocated", "switched", "migrated", "joined", "started"})),
    ("verb", frozenset(_VERB_SUBJECTS)),
    (
        "event",
        frozenset(
            [
                "happen",
                "happens",
                "run",
                "runs",
                "take",
                "takes",
                "place",
                "held",
                "rotate",
                "rotates",
                "open",
                "opens",
                "close",
                "closes",
                "start",
                "starts",
                "end",
                "ends",
                "begin",
                "begins",
            ]
        ),
    ),
    ("has", frozenset({"has", "have"})),
    ("now", frozenset({"now"})),
    ("longer", frozenset({"longer", "anymore"})),
):
    for _word in _words:
        _TRIGGERS[_word] = _TRIGGERS.get(_word, frozenset()) | {_name}
_WORDS = re.compile(r"[a-z]+")
# A statement: found by its copula or its ``:``/``=``, the subject read back from there.
_COPULA = re.compile(r"\s(?:is|are|was|were)\s+|\s?[:=]\s*", re.IGNORECASE)
_DETERMINERS: Final = frozenset(
    {"the", "my", "our", "your", "his", "her", "their", "its", "this", "that", "a", "an"}
)
_CLAUSE_MARKS: Final = ",:;!?()"
_VALUE_LEAD = re.compile(r"(?:(?:set\s+to|on|at|in)\s+)?", re.IGNORECASE)
# "_" is no separator: \w holds it, and a character both sides can take backtracks.
_CODE = re.compile(r"^[#@]?\w+(?:[-./:]\w+)*$")
_NUMBER = re.compile(r"[-+]?\$?\d[\d,._]*%?")
_NOT_NUMERIC = re.compile(r"[^\d.%-]")
_TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_DATE_WORDS: Final = frozenset(_MONTHS.split("|")) | frozenset(_WEEKDAYS.split("|"))
_DATE_NUMBER = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?")
_CAPITALIZED = re.compile(r"^[A-Z][\w.-]*(?:\s+(?:[A-Z][\w.-]*|de|da|do|van|von|of))*")
_WORD = re.compile(r"[\w'-]+")
_SPEAKER = re.compile(r"\s*([^\W\d_][\w'.-]{0,30}(?: [^\W\d_][\w'.-]{0,30}){0,2}):\s")
# Words that name an aspect of a subject rather than another subject.
_ASPECTS: Final = frozenset(
    {"time", "date", "day", "number", "value", "setting", "rotation", "schedule", "count", "amount", "size"}
)
_REFERRING: Final = frozenset({"it", "that", "this", "them", "those", "these"})
_FIRST_PERSON: Final = frozenset({"i", "we", "my", "our", "me", "us"})


@dataclass(frozen=True, slots=True)
class Item:
    """Something a pack may show: ``ref`` names it, ``ts`` orders it (newer wins);
    ``speaker`` owns its "I" (a transcript label in ``text`` wins); ``session``/``seq``
    place an event, for a subjectless change to find what it changes."""

    ref: str
    ts: int
    text: str
    speaker: str = ""
    session: str | None = None
    seq: int | None = None
    # A memory entry's title: a short content is read as the title's value (``Wifi`` /
    # ``hunter2``) when it says nothing by itself.
    title: str = ""


@dataclass(frozen=True, slots=True)
class Claim:
    """A subject (its content words) with a value; ``change``: the form says the value
    changed; ``negated``: the form says the value no longer holds."""

    subject: frozenset[str]
    value: str
    kind: ValueKind
    change: bool = False
    negated: bool = False


def _stem(word: str) -> str:
    word = word.lower().removesuffix("'s").strip("'-")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _subject(raw: str, owner: str) -> frozenset[str] | None:
    """The content words of a subject phrase; None for a pronoun or nothing."""
    words = _WORD.findall(raw)
    if not words:
        return None
    first = words[0].lower()
    out: set[str] = set()
    if first in _FIRST_PERSON and owner:
        out.add(f"@{owner}")
    for word in words:
        low = word.lower()
        if low in _STOP or low in _FIRST_PERSON:
            continue
        if low in _PRONOUNS:
            return None
        if word.endswith("'s") and word[0].isupper():
            out.add(f"@{low.removesuffix(chr(39) + 's')}")
            continue
        out.add(_stem(word))
    return frozenset(out) if any(not w.startswith("@") for w in out) else None


def _clause_words(raw: str) -> list[str]:
    """The first words of ``raw`` up to its clause's end (a ``, . ; ! ? ( )`` not inside a
    number, or a conjunction), at most 6."""
    words: list[str] = []
    for word in raw.split():
        if word[0] in _CLAUSE_MARKS or (words and word.lower() in _CONJUNCTIONS):
            break
        cut = next(
            (
                at
                for at, char in enumerate(word)
                if char in ";!?()" or (char in ",." and not (at + 1 < len(word) and word[at + 1].isdigit()))
            ),
            None,
        )
        if cut is not None:
            if cut:
                words.append(word[:cut])
            break
        words.append(word)
        if len(words) == 6:
            break
    return words


def _value(raw: str) -> tuple[str, ValueKind] | None:
    """The value at the start of ``raw`` (cut at the clause's end), normalized, and its kind."""
    words = _clause_words(raw[:120])
    if not words:
        return None
    first = words[0].lower().strip(".,!")
    if first in _BOOL_WORDS and len(words) <= 3:
        return _BOOL_WORDS[first], "bool"
    while words and words[0].lower() in ("the", "a", "an", "on", "at", "in", "to"):
        words = words[1:]
    if not words:
        return None
    text = " ".join(words)
    time = _TIME.search(text)
    if time is not None and time.start() == 0:
        return "".join(time.group(0).lower().split()), "time"
    lead = words[0].lower().strip(".,!")
    if lead in _DATE_WORDS or _DATE_NUMBER.fullmatch(lead):
        return " ".join(text.lower().split()[:3]).strip(".,"), "date"
    number = _NUMBER.match(text)
    if len(words) > 1 and number is not None and words[1][:1].isupper():  # 12 Rue Cler: an address
        return " ".join(w.lower().strip(".,!") for w in words[:4]), "name"
    if number is not None and any(c.isdigit() for c in number.group(0)):
        return _NOT_NUMERIC.sub("", number.group(0)).rstrip("."), "number"
    first = words[0].lower().strip(".,!")
    token = words[0].rstrip(".,!")
    if _CODE.match(token) and (any(c.isdigit() for c in token) or token[0] in "#@"):
        return token.lower(), "code"
    if first in _PRONOUNS or first in _FIRST_PERSON or first in ("it's", "i'm", "that's"):
        return None
    name = _CAPITALIZED.match(text)
    if name is not None:
        return name.group(0).lower().rstrip("."), "name"
    if first in _PRONOUNS:
        return None
    return " ".join(w.lower().strip(".,!") for w in words[:4]), "text"


@lru_cache(maxsize=8_192)
def claims(text: str, owner: str = "") -> tuple[Claim, ...]:
    """The claims of one text (see module doc); ``owner`` is who "I" and "my" are.

    Remembered per (text, owner): the same events come back call after call."""
    return tuple(_claims(text, owner))


def _claims(text: str, owner: str) -> list[Claim]:
    body = text[:MAX_SCAN_CHARS]
    label = _SPEAKER.match(body)
    if label is not None:  # a transcript's ``Name: text``, or a short ``Subject: value`` line
        found = _text_claims(body[label.end() :], label.group(1).lower())
        subject_like = any(word[:1].islower() for word in label.group(1).split())
        if found or not subject_like or len(body[label.end() :].split()) > SUBJECT_VALUE_WORDS:
            return found
    return _text_claims(body, owner)


def _text_claims(body: str, owner: str) -> list[Claim]:
    found: list[Claim] = []
    triggers: frozenset[str] = frozenset()
    for word in set(_WORDS.findall(body.lower())) & _TRIGGERS.keys():
        triggers |= _TRIGGERS[word]
    has_copula = _COPULA.search(body) is not None
    if not triggers and not has_copula:
        return found
    for sentence in _SENTENCES.split(body):
        found.extend(_sentence_claims(sentence.strip(), owner, triggers))
    return found


def _actor(who: str, owner: str) -> str:
    low = who.lower()
    if low in _FIRST_PERSON:
        return f"@{owner}" if owner else "@i"
    return f"@{low}"


def _sentence_claims(sentence: str, owner: str, triggers: frozenset[str]) -> list[Claim]:
    """The claims of one sentence; ``triggers``: the gate groups its text matched (a
    pattern whose trigger the text lacks is not tried)."""
    if len(sentence) < 5:
        return []
    out: list[Claim] = []
    subject: frozenset[str] | None
    value: tuple[str, ValueKind] | None
    if "longer" in triggers:
        match = _NO_LONGER_VERB.search(sentence)
        if match is not None:
            verb = _VERB_SUBJECTS.get(match["verb"].lower(), _stem(match["verb"]))
            value = _value(match["val"])
            if value is not None:
                subject = frozenset({_actor(match["who"], owner), verb})
                return [Claim(subject, value[0], value[1], negated=True)]
        match = _NO_LONGER_IS.search(sentence)
        if match is not None:  # "Porto is no longer the venue" or "the room is no longer Everest"
            readings = []
            for subj, val in ((match["subj"], match["val"]), (match["val"], match["subj"])):
                subject = _subject(subj, owner)
                value = _value(val)
                if subject is not None and value is not None:
                    readings.append(Claim(subject, value[0], value[1], negated=True))
            if readings:
                return readings
    match = _CHANGE_BARE.search(sentence) if "bare" in triggers else None
    if match is not None:
        value = _value(match["val"])
        if value is not None and (match["verb"] or value[1] == "name"):
            verb = match["verb"]
            topic = _CHANGE_VERB_SUBJECTS[verb.lower()] if verb else "employer"
            return [Claim(frozenset({_actor(match["who"], owner), topic}), value[0], value[1], change=True)]
    for pattern in (_CHANGE_NAMED, _CHANGED_PASSIVE) if "change" in triggers else ():
        match = pattern.search(sentence)
        if match is None:
            continue
        value = _value(match["val"])
        if value is None:
            continue
        subject = _subject(match["subj"], owner)
        if subject is None and not _refers_back(match["subj"], value[1]):
            continue
        out.append(Claim(subject or frozenset(), value[0], value[1], change=True))
        old = match["old"] and _value(match["old"])
        if subject is not None and old:
            out.append(Claim(subject, old[0], old[1], negated=True))
        return out
    match = _IS_NOW.search(sentence) if "now" in triggers else None
    if match is not None:
        value = _value(match["val"])
        subject = _subject(match["subj"], owner)
        if value is not None and (subject is not None or _refers_back(match["subj"], value[1])):
            return [Claim(subject or frozenset(), value[0], value[1], change=True)]
    match = _VERB_STATEMENT.search(sentence) if "verb" in triggers else None
    if match is not None:
        value = _value(match["val"])
        if value is not None:
            verb = _VERB_SUBJECTS[match["verb"].lower()]
            return [Claim(frozenset({_actor(match["who"], owner), verb}), value[0], value[1])]
    match = _EVENT_STATEMENT.search(sentence) if "event" in triggers else None
    if match is not None:
        subject = _subject(match["subj"], owner)
        value = _value(match["val"])
        verb = match["verb"].lower()
        if subject is not None and value is not None and value[1] in STRONG_KINDS:
            if not verb.startswith(_NEUTRAL_VERBS):
                subject = subject | {_stem(verb.split()[0])}
            return [Claim(subject, value[0], value[1], change=bool(match["now"]))]
    match = _HAS_COUNT.search(sentence) if "has" in triggers else None
    if match is not None:
        subject = _subject(match["subj"], owner)
        value = _value(match["val"])
        if subject is not None and value is not None:
            return [Claim(subject | {_stem(match["unit"])}, value[0], value[1])]
    for copula in _COPULA.finditer(sentence):
        before = _subject_before(sentence[max(0, copula.start() - 80) : copula.start()])
        if before is None:
            continue
        subject = _subject(before, owner)
        rest = sentence[copula.end() :]
        value = _value(rest[_VALUE_LEAD.match(rest).end() :])  # type: ignore[union-attr]
        if subject is not None and value is not None:
            out.append(Claim(subject, value[0], value[1]))
            break
    return out


_VERB_TOPICS: Final = frozenset(_VERB_SUBJECTS.values()) - {"residence", "location"}


def _refers_back(phrase: str, kind: ValueKind) -> bool:
    """Whether a change's subject is a pronoun standing for something said before
    (``changed it to 7720``), with a value comparable enough to find what it was."""
    words = phrase.lower().split()
    return bool(words) and words[-1] in _REFERRING and kind in STRONG_KINDS


def _subject_before(left: str) -> str | None:
    """The subject phrase that ends ``left``: at most 5 words after its clause's start or
    after the first determiner of its last 6 words (a possessive name, ``Alice's``, stays part of it)."""
    cut = max(left.rfind(mark) for mark in _CLAUSE_MARKS)
    words = left[cut + 1 :].split()
    if not words:
        return None
    for at in range(max(len(words) - 6, 0), len(words)):
        if words[at].lower() in _DETERMINERS:
            words = words[at + 1 :]
            break
    return " ".join(words) if 0 < len(words) <= 5 else None


def _same_subject(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    if ANY_VERB in a or ANY_VERB in b:
        actors_a = {w for w in a if w.startswith("@")}
        actors_b = {w for w in b if w.startswith("@")}
        other = b if ANY_VERB in a else a
        return bool(actors_a) and actors_a == actors_b and bool(other & _VERB_TOPICS)
    owners_a = {w for w in a if w.startswith("@")}
    owners_b = {w for w in b if w.startswith("@")}
    if not (owners_a <= owners_b or owners_b <= owners_a):
        return False
    return _topic(a - owners_a) == _topic(b - owners_b)


def _topic(words: frozenset[str]) -> frozenset[str]:
    """A subject's words without those naming an aspect of it (``standup time`` is the
    standup's), unless nothing else is left."""
    return words - _ASPECTS or words


def _same_value(a: Claim, b: Claim) -> bool:
    if a.value == b.value:
        return True
    wa, wb = set(a.value.split()), set(b.value.split())
    return a.kind == b.kind and a.kind in ("name", "text") and (wa <= wb or wb <= wa)


def _conflicts(old: Claim, new: Claim) -> bool:
    """Whether ``new`` (stated later) says ``old``'s value no longer holds."""
    if old.negated or not _same_subject(old.subject, new.subject):
        return False
    if new.negated:
        return _same_value(old, new)
    if _same_value(old, new):
        return False
    if new.change:
        return True
    # Two plain statements: only comparable values of a single-valued subject.
    return old.kind == new.kind and old.kind in STRONG_KINDS and not (old.subject & MULTI_VALUED)


def _resolved(item: Item, found: Sequence[Claim], earlier: Sequence[tuple[Item, list[Claim]]]) -> list[Claim]:
    """A subjectless change takes the subject of the nearest earlier claim of its
    session with a value of the same kind (within ``PRONOUN_REACH`` seqs)."""
    out: list[Claim] = []
    for claim in found:
        if claim.subject or item.session is None or item.seq is None:
            out.append(claim)
            continue
        for other, other_claims in reversed(earlier):
            if other.session != item.session or other.seq is None:
                continue
            if not 0 < item.seq - other.seq <= PRONOUN_REACH:
                continue
            match = next(
                (c for c in other_claims if c.subject and not c.negated and c.kind == claim.kind), None
            )
            if match is not None:
                out.append(Claim(match.subject, claim.value, claim.kind, change=True))
                break
    return out


def supersessions(items: Iterable[Item]) -> dict[str, str]:
    """Older item's ref → the ref of the newest item that supersedes it (module doc).

    Items are taken oldest first (by ``ts``, then session and seq); an item with no
    claim costs one scan of its text.
    """
    ordered = sorted(items, key=lambda i: (i.ts, i.session or "", i.seq or 0, i.ref))
    by_word: dict[str, list[tuple[Item, Claim]]] = {}  # a subject word → earlier claims with it
    by_session: dict[str, list[tuple[Item, list[Claim]]]] = {}
    superseded: dict[str, str] = {}
    for item in ordered:
        found = list(claims(item.text, item.speaker.lower()))
        if not found and item.title and len(item.text.split()) <= SUBJECT_VALUE_WORDS:
            found = list(claims(f"{item.title} is {item.text}", item.speaker.lower()))
        if not found:
            continue
        if any(not c.subject for c in found):
            found = _resolved(item, found, by_session.get(item.session or "", []))
        for new in found:
            for word in new.subject:
                for old_item, old in by_word.get(word, ()):
                    if old_item.ts < item.ts and old_item.ref != item.ref and _conflicts(old, new):
                        superseded[old_item.ref] = item.ref
        kept = [c for c in found if not c.negated]
        for claim in kept:
            for word in claim.subject:
                by_word.setdefault(word, []).append((item, claim))
        if item.session is not None:
            by_session.setdefault(item.session, []).append((item, kept))
    # Along a chain, every older line names the newest value.
    for ref, newer in list(superseded.items()):
        seen = {ref}
        while newer in superseded and newer not in seen:
            seen.add(newer)
            newer = superseded[newer]
        superseded[ref] = newer
    return superseded


# ------------------------------------------------------------------ a pack's items ---

# What a pack is read for, at most: the newest live-history messages, the best-ranked
# memory entries, and the best recall candidates (those past ``recall_top_k`` are never
# shown). A larger memory is read for the entries most relevant to the call.
MAX_HISTORY_ITEMS: Final = 100
MAX_MEMORY_ITEMS: Final = 50
_SPOKEN: Final = frozenset({"user_message", "assistant_message"})


def pack_items(entries: Iterable[Entry], history: Iterable[Event], recalled: Iterable[Event]) -> list[Item]:
    """The items of one pack's candidates that state something: memory entries (the
    user's), live-history and recalled messages (each by its role, a transcript's label
    winning). A text with no claim can neither supersede nor be superseded: it is left out
    here, so the pass costs little more than a look-up per candidate."""
    items = [
        Item(
            ref=memory_ref(e.id),
            ts=e.updated_at or e.created_at,
            text=e.content,
            speaker="user",
            title=e.title,
        )
        for e in entries
        if claims(e.content, "user") or len(e.content.split()) <= SUBJECT_VALUE_WORDS
    ]
    spoken = sorted((e for e in history if e.type in _SPOKEN), key=lambda e: e.seq)[-MAX_HISTORY_ITEMS:]
    seen: set[tuple[str, int]] = set()
    for event in [*spoken, *recalled]:
        key = (event.session_id, event.seq)
        speaker = "user" if event.type == "user_message" else "assistant"
        if event.type not in _SPOKEN or key in seen or not claims(event.text, speaker):
            continue
        seen.add(key)
        items.append(
            Item(
                ref=event_ref(event.session_id, event.seq),
                ts=event.ts,
                text=event.text,
                speaker=speaker,
                session=event.session_id,
                seq=event.seq,
            )
        )
    return items
