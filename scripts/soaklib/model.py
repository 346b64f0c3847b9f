"""What must be on disk: every acknowledged write, tracked by a unique marker.

Each tracked object (an entry, a proposal, a hand-written section) carries a
marker in its title and content (``E-12 v3``: object ``E-12``, version 3). Its
state on disk is where that marker appears: a tuple of
``(file, status, version)`` locations, ``()`` when it is nowhere.

``must`` is the state after the last acknowledged write; ``may`` holds the
states of writes whose outcome is unknown (the daemon died before answering).
After a restart the object must be in ``must`` or one of ``may``; anything
else is a lost write, and a marker found in more than one place is duplicated.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from makad.core import memory_format as fmt

Location = tuple[str, str, int]  # (file: "memory" | "pending", status, version)
State = tuple[Location, ...]
ABSENT: State = ()
MARKER = re.compile(r"^(?P<marker>[A-Z]+-\d+) v(?P<version>\d+)\b")


def located(file: str, status: str, version: int) -> State:
    return ((file, status, version),)


def content(marker: str, version: int) -> str:
    return f"{marker} v{version}"


@dataclass
class Tracked:
    must: State | None = None  # None: never acknowledged
    may: set[State] = field(default_factory=set)
    entry_id: str | None = None

    def acceptable(self) -> set[State]:
        return {self.must if self.must is not None else ABSENT} | self.may


class Expectations:
    """Thread-safe record of acknowledged and in-flight writes, by marker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.objects: dict[str, Tracked] = {}
        self.acknowledged = 0

    def begin(self, marker: str, state: State) -> None:
        """A write is being sent: until it is answered, ``state`` is possible."""
        with self._lock:
            self.objects.setdefault(marker, Tracked()).may.add(state)

    def ack(self, marker: str, state: State, entry_id: str | None = None) -> None:
        """The daemon acknowledged a write: ``state`` is now the only right answer."""
        with self._lock:
            tracked = self.objects.setdefault(marker, Tracked())
            tracked.must = state
            tracked.may.clear()
            if entry_id is not None:
                tracked.entry_id = entry_id
            self.acknowledged += 1

    def refused(self, marker: str, state: State) -> None:
        """The daemon refused the write: it did not happen."""
        with self._lock:
            tracked = self.objects.get(marker)
            if tracked is not None and state != tracked.must:
                tracked.may.discard(state)

    def get(self, marker: str) -> Tracked:
        with self._lock:
            return self.objects.setdefault(marker, Tracked())

    def learn_id(self, marker: str, entry_id: str) -> None:
        with self._lock:
            self.objects.setdefault(marker, Tracked()).entry_id = entry_id

    def settle(self, observed: dict[str, State]) -> None:
        """After a verified restart, what is on disk is the new truth for unknown outcomes."""
        with self._lock:
            for marker, tracked in self.objects.items():
                state = observed.get(marker, ABSENT)
                if tracked.may and state in tracked.acceptable():
                    tracked.must = state
                    tracked.may.clear()

    def snapshot(self) -> dict[str, Tracked]:
        with self._lock:
            return {m: Tracked(t.must, set(t.may), t.entry_id) for m, t in self.objects.items()}


def observe(
    memory: fmt.MemoryDocument, pending: fmt.MemoryDocument
) -> tuple[dict[str, State], dict[str, str]]:
    """Where each marker is, and the entry id it has (last seen wins)."""
    found: dict[str, list[Location]] = {}
    ids: dict[str, str] = {}
    for file, doc in (("memory", memory), ("pending", pending)):
        for section in doc.sections:
            match = MARKER.match(section.entry.content)
            if match is None:
                continue
            marker = match["marker"]
            found.setdefault(marker, []).append((file, section.entry.status, int(match["version"])))
            ids[marker] = section.entry.id
    return {m: tuple(sorted(locs)) for m, locs in found.items()}, ids
