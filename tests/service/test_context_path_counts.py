"""``status.contextPaths`` counts the build_context paths of the workspaces that built a
pack most recently: one built in long ago is dropped past the cap, the others' counts stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from makad.service import context
from tests.service.conftest import InProcessDaemon

pytestmark = pytest.mark.anyio


async def test_the_workspace_that_built_a_pack_least_recently_is_dropped_past_the_cap(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for two workspaces, a third building a pack drops the one that built least
    recently; the kept ones' counts are whole (every pack since the daemon started)."""
    monkeypatch.setattr(context, "MAX_PATH_COUNTS", 2)
    folders = {}
    for name in ("a", "b", "c"):
        folders[name] = served.root / name
        folders[name].mkdir()
    async with served.client() as c:

        async def build(name: str) -> None:
            await c.call("build_context", workspace=str(folders[name]), query="deploy", budgetTokens=800)

        async def counted() -> dict[str, int]:
            rows = (await c.call("status"))["contextPaths"]
            return {
                Path(row["workspace"]).name: sum(row[k] for k in ("fast", "bounded", "slow", "fallback"))
                for row in rows
            }

        await build("a")
        await build("a")
        await build("b")
        assert await counted() == {"a": 2, "b": 1}
        await build("a")  # a is now the most recent, b the least
        await build("c")
        assert await counted() == {"a": 3, "c": 1}
        await build("b")
        assert await counted() == {"b": 1, "c": 1}
