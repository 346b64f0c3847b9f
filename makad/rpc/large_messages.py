"""How many connections may be in the middle of receiving a large message at once.

Each connection may hold the part of a message received so far, up to the message size
cap (16 MiB by default); the connection cap is in the thousands, so clients that each
send most of a large message and then stop (or send it a byte at a time) could make the
daemon hold more memory than the machine has. A connection whose partial message passes
``LARGE_PARTIAL_BYTES`` reads on only while it holds one of a few slots: the others stop
reading, so the rest of their messages waits in the kernel's socket buffers (their
clients' sends block), and they read on as slots come free, in the order they asked.
A slot is given back once the message is whole, or when the connection stops reading.
Small messages (every ping, most calls) never touch a slot. A holder that keeps its slot
longer than the hold limit while others wait for one (a client trickling its message, or
one stopped mid-message) is closed, so the holders cannot keep the rest out for good.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Final

import anyio

# A message that arrives in one read (the reader takes 64 KiB at a time) is never
# partial past this.
LARGE_PARTIAL_BYTES: Final = 64 * 1024
# What the partial large messages of all connections may hold together, at most.
LARGE_PARTIALS_BUDGET_BYTES: Final = 256 * 1024 * 1024
# Slots there are however large the cap is set: one client's large message never waits
# only because another client is sending one.
MIN_LARGE_SLOTS: Final = 2


def large_slots(max_message_bytes: int) -> int:
    """How many connections may hold a large partial message at once."""
    return max(MIN_LARGE_SLOTS, LARGE_PARTIALS_BUDGET_BYTES // max(1, max_message_bytes))


class LargeMessages:
    """The slots, and which connection (by its reading state) holds one."""

    def __init__(self, max_message_bytes: int) -> None:
        self.slots = large_slots(max_message_bytes)
        self._free = anyio.Semaphore(self.slots)
        # Each holder: since when, and how to end it when it holds on too long.
        self._held: dict[Hashable, tuple[float, Callable[[], None]]] = {}

    async def take(self, holder: Hashable, end: Callable[[], None]) -> None:
        """Wait for a slot (first come, first served); ``end`` closes ``holder``."""
        await self._free.acquire()
        self._held[holder] = (time.monotonic(), end)

    def give_back(self, holder: Hashable) -> None:
        del self._held[holder]
        self._free.release()

    def end_stalled(self, hold_s: float, now: float) -> int:
        """End the holders that held a slot longer than ``hold_s`` while another waits for
        one; how many."""
        if not self._held or self._free.statistics().tasks_waiting == 0:
            return 0
        stalled = [end for since, end in self._held.values() if now - since >= hold_s]
        for end in stalled:
            end()
        return len(stalled)
