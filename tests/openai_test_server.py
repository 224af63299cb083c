"""A local OpenAI-compatible TEST server (not a real model), for exercising our clients.

Serves ``POST /v1/embeddings`` with deterministic vectors derived from a hash of each
input's words (texts sharing words get similar vectors), and the rerank APIs
``POST /rerank`` (text-embeddings-inference shape) and ``POST /v1/rerank`` (Cohere / Jina
shape), scoring a passage by how many of the query's words it contains. Failures and
delays can be scripted (``fail_next(429)``, ``delay_next(2.0)``) to test retries,
timeouts and error mapping. Runs in a thread on a free
port of 127.0.0.1; nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


def fake_vector(text: str, dim: int) -> list[float]:
    """Sum of per-word pseudo-random vectors, normalised: deterministic and word-sensitive."""
    total = np.zeros(dim, dtype=np.float64)
    for word in text.lower().split() or [""]:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
        total += np.random.default_rng(seed).normal(size=dim)
    norm = float(np.linalg.norm(total)) or 1.0
    return [float(x) for x in total / norm]


def overlap(query: str, passage: str) -> float:
    """Share of the query's words found in the passage (a stand-in relevance score)."""
    words = set(query.lower().split())
    return len(words & set(passage.lower().split())) / max(1, len(words))


class OpenAITestServer:
    """Start with ``with OpenAITestServer() as server: server.base_url``."""

    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.failures: deque[int] = deque()
        self.delays: deque[float] = deque()
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body})
                if server.delays:
                    time.sleep(server.delays.popleft())
                if server.failures:
                    self._send(server.failures.popleft(), {"error": {"message": "scripted"}})
                    return
                if self.path == "/rerank":
                    texts = body.get("texts") or body.get("documents") or []
                    scores = [overlap(body["query"], t) for t in texts]
                    self._send(200, [{"index": i, "score": s} for i, s in enumerate(scores)])
                    return
                if self.path == "/v1/rerank":
                    texts = body.get("documents") or body.get("texts") or []
                    scores = [overlap(body["query"], t) for t in texts]
                    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
                    results = [{"index": i, "relevance_score": scores[i]} for i in ranked]
                    self._send(200, {"results": results[: body.get("top_n") or len(results)]})
                    return
                if self.path != "/v1/embeddings":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                dim = int(body.get("dimensions") or server.dim)
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}
                    for i, t in enumerate(inputs)
                ]
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (a timeout test): nothing to answer

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The ``/v1`` base URL to give an OpenAI client."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def root_url(self) -> str:
        """The server's root URL (for the rerank routes)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def delay_next(self, *seconds: float) -> None:
        """Sleep this long before answering the next requests."""
        self.delays.extend(seconds)

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these HTTP statuses."""
        self.failures.extend(statuses)

    def __enter__(self) -> OpenAITestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
