"""What a read does when the record it keeps of itself cannot be written for want of disk
space: it answers from what can be read and says so (warning ``not_recorded``).

build_context records what each pack showed (later packs leave out what the session was
shown already) and get_attention stores the state it derived. On a full data disk, or a
ledger opened read-only by one (``ledger_read_only``), those writes fail with
``disk_full``: failing the read too would leave the agent with no context at all. So the
record is skipped and the next call once space is freed records as usual. Nothing of a
pack is kept to be written later: a later pack that does not know what an unrecorded one
showed shows it again, which repeats but never hides. The attention state, one per
workspace, is kept in memory until it can be stored (``makad.service.attention``).
"""

from __future__ import annotations

from typing import Final

from makad.core.types import Warning
from makad.errors import IOFailure

NOT_RECORDED: Final = "not_recorded"

PACK_NOT_RECORDED: Final = (
    "the disk of makad's data directory is full: this pack was served but not recorded, so a "
    "later pack in this session may show again what this one showed; packs are recorded "
    "again once space is freed"
)
ATTENTION_NOT_STORED: Final = (
    "the disk of makad's data directory is full: this attention state was derived from what "
    "the ledger holds but not stored; it is stored once space is freed"
)


def disk_full(exc: IOFailure) -> bool:
    """Whether a write failed for want of disk space (a full disk, or a ledger it keeps
    read-only)."""
    return exc.details.get("reason") == "disk_full"


def not_recorded(message: str) -> Warning:
    return Warning(kind=NOT_RECORDED, message=message)
