"""The LLM curator's exchange with an OpenAI-compatible chat-completions endpoint.

One ``POST <url>/chat/completions`` per call, asking for JSON mode
(``response_format: {"type": "json_object"}``); a server that rejects that
field with HTTP 400 is asked once more without it. The whole exchange runs
under one deadline (``MAKAD_CURATOR_TIMEOUT_MS``) on the event loop with
``httpx.AsyncClient``: nothing blocks, and a hung server costs the timeout, not
more. The answer is read as it arrives and given up once it passes ``MAX_ANSWER_BYTES``
(reason ``too_large``): a server sending without end costs neither the timeout nor
memory. Every failure becomes ``CuratorFailed`` with the trace's reason word.

Loading httpx and the CA bundle costs ~0.1-0.3 s of CPU: it happens once, in a
worker thread (``prepare``, started when the daemon has a curator configured),
never per call and never on the event loop.
"""

from __future__ import annotations

import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.to_thread
import msgspec

from makad.settings import CuratorSettings


class CuratorFailed(Exception):
    """The endpoint gave no usable completion; ``reason`` is the trace's word for why."""

    def __init__(self, reason: str, latency_ms: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.latency_ms = latency_ms


@dataclass(frozen=True, slots=True)
class Completion:
    content: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


class _Choice(msgspec.Struct):
    message: dict[str, Any]


class _Reply(msgspec.Struct):
    choices: list[_Choice]
    usage: dict[str, Any] | None = None


# An answer names at most 60 offered refs: a megabyte is ample room for prose around them.
MAX_ANSWER_BYTES: Final = 1 << 20

_tls: list[ssl.SSLContext] = []  # built once (see module doc)


def prepare() -> ssl.SSLContext:
    """Import httpx and build the TLS context every call shares (blocking: a worker thread's job)."""
    if not _tls:
        import certifi
        import httpx  # noqa: F401  (imported here so that the import is paid off the event loop)

        _tls.append(ssl.create_default_context(cafile=certifi.where()))
    return _tls[0]


def prepare_in_background() -> None:
    """Start ``prepare`` in a thread, so the first call finds it done."""
    threading.Thread(target=prepare, name="curator-prepare", daemon=True).start()


async def complete(config: CuratorSettings, messages: list[dict[str, str]]) -> Completion:
    """The model's answer to ``messages`` within ``config.timeout_ms`` (raises ``CuratorFailed``)."""
    started = time.perf_counter()

    def elapsed() -> float:
        return round((time.perf_counter() - started) * 1000, 3)

    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    body: dict[str, Any] = {
        "model": config.model,
        "messages": messages,
        "temperature": 0,
        "response_format": {"type": "json_object"},
    }
    timeout = config.timeout_ms / 1000
    deadline = anyio.current_time() + timeout
    try:
        with anyio.fail_at(deadline):
            tls = _tls[0] if _tls else await anyio.to_thread.run_sync(prepare, abandon_on_cancel=True)
    except TimeoutError as exc:
        raise CuratorFailed("timeout", elapsed()) from exc
    import httpx  # loaded by prepare

    try:
        with anyio.fail_at(deadline):
            async with httpx.AsyncClient(timeout=timeout, headers=headers, verify=tls) as client:
                url = f"{config.url}/chat/completions"
                status, content = await _post(client, url, body)
                if status == 400:  # JSON mode unsupported: ask in plain text
                    body.pop("response_format")
                    status, content = await _post(client, url, body)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise CuratorFailed("timeout", elapsed()) from exc
    except httpx.HTTPError as exc:
        raise CuratorFailed("unreachable", elapsed()) from exc
    if content is None:
        raise CuratorFailed("too_large", elapsed())
    if status != 200:
        raise CuratorFailed(f"http_{status}", elapsed())
    try:
        reply = msgspec.json.decode(content, type=_Reply)
        content = reply.choices[0].message.get("content")
    except (msgspec.DecodeError, msgspec.ValidationError, IndexError) as exc:
        raise CuratorFailed("unparseable", elapsed()) from exc
    if not isinstance(content, str) or not content.strip():
        raise CuratorFailed("empty", elapsed())
    usage = reply.usage or {}
    return Completion(
        content=content,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        latency_ms=elapsed(),
    )


async def _post(client: Any, url: str, body: dict[str, Any]) -> tuple[int, bytes | None]:
    """The status and body of one POST; the body ``None`` once it passes ``MAX_ANSWER_BYTES``
    (the rest is not read: the connection is closed)."""
    async with client.stream("POST", url, json=body) as response:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                return response.status_code, None
            chunks.append(chunk)
        return response.status_code, b"".join(chunks)


def _count(value: object) -> int:
    """A usage count the server reported; 0 (unknown) unless a whole number of tokens,
    from 0 to 100,000,000 — more than any model reads in one request (not ``true``, not
    10^30)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value if 0 <= value <= 100_000_000 else 0
