"""LoCoMo-format conversations as events, and their questions with normalized evidence.

Each LoCoMo session becomes one ledger session, each turn one event, in order:

- the text is ``"<speaker>: <text>"``, plus ``" [shared image: <blip_caption>]"``
  when the turn shared a photo (the caption is the only trace of the image);
- the first speaker's turns are ``user_message`` events and the second speaker's
  ``assistant_message`` ones, so a session reads like an agent conversation;
- ``ts`` is the session's date-time (``"1:56 pm on 8 May, 2023"``, taken as UTC)
  plus one second per turn, keeping the turns' order in time.

Evidence ids (``D<session>:<turn>``) are normalized as the data's README says:
split on ``;`` or whitespace, a stray colon dropped (``D:11:26``), leading zeros
stripped (``D30:05``); an id naming no turn stays in the list (it can never be
found, and the figures say so honestly).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SOURCE = "data/locomo10.json in github.com/snap-research/LoCoMo"


def missing_dataset(tool: str, path: Path) -> str:
    """What a tool says when the LoCoMo file is not where it looks: the file is not shipped."""
    return (
        f"{tool}: no LoCoMo dataset at {path}. It is not shipped with makad: save the first "
        f"five conversations (elements 0-4 of the list) of {SOURCE} there, or pass "
        '--dataset PATH (docs/PERFORMANCE.md, "Recall on LoCoMo")'
    )


_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    event_type: str
    text: str
    ts: int


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    ts: int
    turns: list[Turn]


@dataclass(frozen=True, slots=True)
class Question:
    qid: str
    text: str
    category: int
    evidence: list[str]
    # The reference answer ("" for category 5, whose right answer is "not mentioned").
    answer: str = ""


@dataclass(slots=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[Question] = field(default_factory=list)

    def dia_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}


def parse_when(text: str) -> int:
    """``"1:56 pm on 8 May, 2023"`` → Unix milliseconds (UTC)."""
    moment = datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")
    return int(moment.replace(tzinfo=UTC).timestamp() * 1000)


def normalize_evidence(raw: list[Any]) -> list[str]:
    """Evidence dia_ids cleaned as the dataset README describes; unparseable bits dropped."""
    ids: list[str] = []
    for item in raw:
        for piece in re.split(r"[;\s]+", str(item)):
            match = _DIA.fullmatch(piece.strip())
            if match:
                ids.append(f"D{int(match[1])}:{int(match[2])}")
    return list(dict.fromkeys(ids))


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shared image: {caption}]"
    return text


def conversation(record: dict[str, Any]) -> Conversation:
    conv = record["conversation"]
    first, second = conv["speaker_a"], conv["speaker_b"]
    numbers = sorted(int(m[1]) for key in conv if (m := _SESSION_KEY.fullmatch(key)) and conv[key])
    sessions: list[Session] = []
    for number in numbers:
        start = parse_when(conv[f"session_{number}_date_time"])
        turns = [
            Turn(
                dia_id=turn["dia_id"],
                event_type="user_message" if turn["speaker"] != second else "assistant_message",
                text=turn_text(turn),
                ts=start + 1000 * index,
            )
            for index, turn in enumerate(conv[f"session_{number}"])
        ]
        sessions.append(Session(number, start, turns))
    questions = [
        Question(
            qid=f"{record['sample_id']}#{index}",
            text=str(qa["question"]),
            category=int(qa["category"]),
            evidence=normalize_evidence(qa.get("evidence") or []),
            answer=str(qa.get("answer", "")),
        )
        for index, qa in enumerate(record.get("qa", []))
    ]
    return Conversation(record["sample_id"], (first, second), sessions, questions)


def load(path: Path) -> list[Conversation]:
    data = json.loads(path.read_bytes())
    return [conversation(record) for record in data]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
