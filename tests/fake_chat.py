"""A scripted OpenAI-compatible chat-completions server on loopback, for the curator and the
A/B runner's answering model: it answers as a test scripts it and records what it was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (request path, decoded JSON body) -> (HTTP status, reply: a JSON value, raw text, or an
# iterator of byte chunks sent as they come, the body ending when the connection closes)
Script = Callable[[str, dict[str, Any]], tuple[int, Any]]


def completion(content: str, prompt_tokens: int = 321, completion_tokens: int = 12) -> dict[str, Any]:
    """A chat completion whose message says ``content``."""
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


class FakeChat:
    """The server's record: every request's path, body and Authorization header."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()


@contextmanager
def serving(chat: FakeChat) -> Iterator[str]:
    """Serve ``chat`` on a loopback port; yields its base URL (``http://127.0.0.1:<port>``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with chat.lock:
                chat.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
            status, reply = chat.script(self.path, body)
            if isinstance(reply, Iterator):
                self._stream(status, reply)
                return
            data = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a scripted hang)

        def _stream(self, status: int, chunks: Iterable[bytes]) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
