"""A workspace with a long history of episodes: ``consolidation_candidates`` answers with
every tag's counts and a bounded sample of its episodes, not one reply holding every
episode once per tag it carries (past the 16 MiB reply cap, ``maka consolidate`` could
not list a tag)."""

from __future__ import annotations

from makad.core.episodes import CANDIDATE_EPISODES, MAX_EPISODE_REFS, MAX_EPISODE_TAGS, MAX_TAG_CHARS
from tests.support import DaemonProcess, RawConnection, ping_ok

EPISODES = 300


def test_candidates_list_a_bounded_sample_of_each_tags_episodes(served: DaemonProcess) -> None:
    """300 episodes, each with 16 long tags and 64 source refs (every one of them in 16
    candidates: over 16 MiB listed whole): each candidate counts all 300 and lists the
    newest CANDIDATE_EPISODES; the daemon answers pings after."""
    ws = str(served.workspace)
    sid = served.call("open_session", {"workspace": ws})["sessionId"]
    served.call(
        "append_events",
        {
            "workspace": ws,
            "sessionId": sid,
            "events": [{"type": "user_message", "text": f"step {i}"} for i in range(MAX_EPISODE_REFS)],
        },
    )
    tags = [f"{i:02d}".ljust(MAX_TAG_CHARS, "t") for i in range(MAX_EPISODE_TAGS)]
    refs = [f"event:{sid}:{seq}" for seq in range(1, MAX_EPISODE_REFS + 1)]
    recorded = []
    with RawConnection(served.socket) as conn:  # one at a time: recorded in this order
        for i in range(EPISODES):
            params = {
                "workspace": ws,
                "sessionId": sid,
                "summary": f"did {i}",
                "sourceRefs": refs,
                "tags": tags,
            }
            reply = conn.request({"jsonrpc": "2.0", "id": i, "method": "record_episode", "params": params})
            recorded.append(reply["result"]["episodeId"])
    result = served.call("consolidation_candidates", {"workspace": ws, "minSessions": 1}, timeout=120)
    candidates = result["candidates"]
    assert sorted(c["tag"] for c in candidates) == sorted(tags)
    for candidate in candidates:
        assert candidate["episodeCount"] == EPISODES
        assert [e["episodeId"] for e in candidate["episodes"]] == recorded[-CANDIDATE_EPISODES:]
    assert ping_ok(served.socket)
