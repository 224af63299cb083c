"""A local OpenAI-compatible TEST server (not a real model), for exercising our clients.

Serves ``POST /v1/embeddings`` with deterministic vectors derived from a hash of each
input's words (texts sharing words get similar vectors), the rerank APIs
``POST /rerank`` (text-embeddings-inference shape) and ``POST /v1/rerank`` (Cohere / Jina
shape), scoring a passage by how many of the query's words it contains, and
``POST /v1/chat/completions`` for our prompts (the task is the first line of the system
prompt): ``extract_graph`` gets the text's capitalized words and identifiers as entities,
chained by relations; ``summarize_community`` gets a report citing the first labels it
was shown. Failures and delays can be scripted (``fail_next(429)``, ``delay_next(2.0)``,
``chat_next("malformed", "timeout", ...)``, ``chat_poison("text")``) or drawn at random with a seed
(``chat_chaos(malformed=0.3)``) to test repair, re-prompts, retries, timeouts and error
mapping; with ``chat_quote("text")`` a reply quotes that text when its prompt holds it.
A chat request with ``stream: true`` is answered as server-sent events, a piece
of the reply every ``token_delay`` seconds, with a usage chunk when ``stream_options``
asks for one; ``refuse_stream`` / ``refuse_stream_options`` answer such requests 400 as
an endpoint that cannot stream does; ``serial = True`` serves one chat at a time (the
others wait before any byte is sent, as llama-cpp-python does); a stream whose client
went away stops and is counted in ``abandoned``. ``GET /v1/models`` lists one model (what
a probe asks). Usage is counted in whitespace-separated words, or by the ``count_tokens``
function given. Runs in a thread on a free port of 127.0.0.1; nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
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


_NAME = re.compile(
    r"`([^`\n]{2,60})`|\b([A-Z][\w-]*[A-Z0-9_-][\w-]*|[A-Z][a-z]{2,}(?: [A-Z][a-z]+)*)"
)
_LABEL = re.compile(r"^([ERCS]\d+)\b", re.MULTILINE)
CHAT_BEHAVIOURS = (
    "good",
    "fenced",
    "malformed",
    "invalid",
    "wrong_shape",
    "ungrounded",
    "uncited",
    "empty",
    "timeout",
    "stall",
    "429",
    "500",
)
# a real SmolLM2-135M reply to the extraction prompt: JSON, but not the asked-for object
WRONG_SHAPE = {"type": "json", "data": {"entities": [{"name": "ledger-db"}]}}
# the asked-for shape, with names copied from nowhere in the text (small models do this)
UNGROUNDED = {
    "entities": [{"name": "Acme Rocket", "type": "product"}, {"name": "Mars", "type": "place"}],
    "relations": [{"source": "Acme Rocket", "target": "Mars", "strength": 5}],
}
REPROMPT = "Your reply could not be used"  # how the client's re-prompt starts
# what a misbehaving reply makes of the good reply's JSON text
MISBEHAVIOURS: dict[str, Callable[[str], str]] = {
    # repairable: fences, prose, a trailing comma
    "fenced": lambda good: "Sure! Here it is:\n```json\n" + good[:-1] + ",}\n```\nDone.",
    "malformed": lambda _: "I could not find any entities worth listing, sorry.",  # no JSON
    "invalid": lambda _: json.dumps({"entities": [{"kind": "x"}], "title": None}),
    "wrong_shape": lambda _: json.dumps(WRONG_SHAPE),  # valid JSON, another top level
    "ungrounded": lambda _: json.dumps(UNGROUNDED),  # the right shape, names the text lacks
    # an answer of the right shape that cites none of its evidence
    "uncited": lambda _: json.dumps({"answer": "Here is what I know.", "cited": []}),
    "empty": lambda _: "",
}


def extraction_reply(user: str) -> dict[str, Any]:
    """A plausible extract_graph reply: names and identifiers of the text, chained."""
    text = user.split("Text:\n", 1)[-1].split("\n\nNames found in the text:", 1)[0]
    names: list[str] = []
    for match in _NAME.finditer(text):
        name = (match.group(1) or match.group(2)).strip()
        if name not in names and name not in {"The", "When", "Also", "This", "Text"}:
            names.append(name)
    names = names[:12]
    entities = [
        {"name": n, "type": "concept", "description": f"{n} as named in the text"} for n in names
    ]
    relations = [
        {"source": a, "target": b, "description": f"{a} appears with {b}", "strength": 6}
        for a, b in pairwise(names)
    ]
    return {"entities": entities, "relations": relations}


def report_reply(user: str) -> dict[str, Any]:
    """A plausible summarize_community reply citing the first labels shown."""
    labels = _LABEL.findall(user)
    first = {kind: [x for x in labels if x[0] == kind][:2] for kind in "ERCS"}
    names = [line.split(" | ")[1] for line in user.splitlines() if re.match(r"E\d+ \|", line)]
    return {
        "title": " and ".join(names[:2]) or "Community",
        "summary": f"A community of {len(names)} entities centred on {', '.join(names[:3])}.",
        "rating": 6.5,
        "rating_explanation": "scripted by the test server",
        "findings": [
            {
                "summary": f"{names[0] if names else 'It'} is central",
                "explanation": "Most relations involve it.",
                "entities": first["E"],
                "relations": first["R"],
                "chunks": first["C"] + first["S"] + ["C999"],  # C999 was never shown
            }
        ],
    }


def route_reply(user: str) -> dict[str, Any]:
    """Global for aggregate wording, else local."""
    question = user.split("\n", 1)[0].lower()
    broad = any(w in question for w in ("across", "all ", "every", "themes", "overall"))
    return {"decision": "global" if broad else "local", "reason": "scripted", "confidence": 0.9}


def map_reply(user: str) -> dict[str, Any]:
    """One key point per report shown (its title line), scored 70."""
    points = []
    for label, title in re.findall(r"^(R\d+):\n(.+)$", user, re.MULTILINE):
        points.append({"description": f"The reports say: {title}", "score": 70, "reports": [label]})
    return {"points": points}


def answer_reply(user: str) -> dict[str, Any]:
    """An answer citing the first two evidence numbers (and one that does not exist)."""
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", user, re.MULTILINE)][:2]
    marks = " ".join(f"[{n}]" for n in numbers)
    return {
        "answer": f"According to the evidence {marks} [99], here is the answer.",
        "cited": numbers,
    }


def quoting(task: str, reply: dict[str, Any], quoted: list[str]) -> dict[str, Any]:
    """``reply`` with the strings in ``quoted`` in its main text, as a model quotes its input."""
    if not quoted:
        return reply
    tail = " Quoting: " + " / ".join(quoted)
    if task == "extract_graph" and reply["entities"]:
        reply["entities"][0]["description"] += tail
    elif task == "summarize_community":
        reply["summary"] += tail
    elif task == "answer_global_map":
        for point in reply["points"]:
            point["description"] += tail
    elif task == "answer_question":
        reply["answer"] += tail
    elif task == "route_question":
        reply["reason"] += tail
    return reply


TASK_REPLIES = {
    "extract_graph": extraction_reply,
    "summarize_community": report_reply,
    "route_question": route_reply,
    "answer_global_map": map_reply,
    "answer_question": answer_reply,
}


class OpenAITestServer:
    """Start with ``with OpenAITestServer() as server: server.base_url``."""

    def __init__(self, dim: int = 32, count_tokens: Callable[[str], int] | None = None) -> None:
        self.dim = dim
        self.count_tokens = count_tokens or (lambda text: len(text.split()))
        self.failures: deque[int] = deque()
        self.delays: deque[float] = deque()
        self.chat_script: deque[str] = deque()
        self.chaos: dict[str, float] = {}
        self.rng = random.Random(0)
        self.timeout_sleep = 3.0
        self.requests: list[dict[str, Any]] = []
        self.chat_outcomes: list[str] = []
        self.poison: tuple[str, ...] = ()
        self.quote: tuple[str, ...] = ()
        # response_format types answered 500 naming it, as llama-cpp-python does json_schema
        self.refused_formats: set[str] = set()
        # streaming: seconds between pieces, refusals, one chat at a time, what was abandoned
        self.token_delay = 0.0
        self.stall_s = 2.0
        self.refuse_stream = False
        self.refuse_stream_options = False
        self.serial = False
        self._serial_lock = threading.Lock()
        self._open_lock = threading.Lock()
        self.open_chats = 0
        self.peak_open_chats = 0
        self.chat_spans: list[tuple[float, float, float]] = []  # arrived, started, ended
        self.abandoned = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "body": None})
                if server.failures:
                    self._send(server.failures.popleft(), {"error": {"message": "scripted"}})
                    return
                if self.path != "/v1/models":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                model = {"id": "test-model", "object": "model", "created": 0, "owned_by": "t"}
                self._send(200, {"object": "list", "data": [model]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body})
                if server.delays:
                    time.sleep(server.delays.popleft())
                if server.failures:
                    self._send(server.failures.popleft(), {"error": {"message": "scripted"}})
                    return
                if self.path == "/v1/chat/completions":
                    arrived = time.monotonic()
                    with server._open_lock:
                        server.open_chats += 1
                        server.peak_open_chats = max(server.peak_open_chats, server.open_chats)
                    try:
                        if server.serial:
                            with server._serial_lock:
                                started = time.monotonic()
                                self._chat(body)
                        else:
                            started = time.monotonic()
                            self._chat(body)
                    finally:
                        with server._open_lock:
                            server.open_chats -= 1
                            server.chat_spans.append((arrived, started, time.monotonic()))
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

            def _chat(self, body: dict[str, Any]) -> None:
                if body.get("stream") and server.refuse_stream:
                    message = "'stream' is not supported by this endpoint"
                    self._send(400, {"error": {"message": message}})
                    return
                if "stream_options" in body and server.refuse_stream_options:
                    message = "Unrecognized request argument supplied: stream_options"
                    self._send(400, {"error": {"message": message}})
                    return
                kind = (body.get("response_format") or {}).get("type")
                if kind in server.refused_formats:
                    message = f"response_format type {kind!r} is not supported"
                    self._send(500, {"error": {"message": message}})
                    return
                behaviour = server.next_chat_behaviour()
                if any(needle in json.dumps(body) for needle in server.poison):
                    behaviour = "malformed"
                server.chat_outcomes.append(behaviour)
                if behaviour in ("429", "500"):
                    self._send(int(behaviour), {"error": {"message": f"scripted {behaviour}"}})
                    return
                if behaviour == "timeout":
                    time.sleep(server.timeout_sleep)
                messages = body["messages"]
                task = messages[0]["content"].split("\n", 1)[0].removeprefix("TASK: ")
                # the question: the last user turn that is no re-prompt (earlier user
                # turns may be worked examples)
                user = [
                    m["content"]
                    for m in messages
                    if m["role"] == "user" and not m["content"].startswith(REPROMPT)
                ][-1]
                reply = TASK_REPLIES.get(task, report_reply)(user)
                reply = quoting(task, reply, [q for q in server.quote if q in user])
                content = json.dumps(reply)
                content = MISBEHAVIOURS.get(behaviour, str)(content)
                words = sum(server.count_tokens(m["content"]) for m in messages)
                answered = server.count_tokens(content)
                usage = {
                    "prompt_tokens": words,
                    "completion_tokens": answered,
                    "total_tokens": words + answered,
                }
                if body.get("stream"):
                    with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._stream(body, content, usage if with_usage else None, behaviour)
                    return
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": usage,
                    },
                )

            def _stream(
                self,
                body: dict[str, Any],
                content: str,
                usage: dict[str, int] | None,
                behaviour: str,
            ) -> None:
                def chunk(delta: dict[str, str], finish: str | None = None) -> dict[str, Any]:
                    return {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }

                pieces = [content[i : i + 8] for i in range(0, len(content), 8)]
                events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
                events += [chunk({"content": piece}) for piece in pieces]
                events.append(chunk({}, "stop"))
                if usage is not None:
                    last = {**chunk({}), "choices": [], "usage": usage}
                    events.append(last)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    for n, event in enumerate(events):
                        if n > 1:
                            time.sleep(server.token_delay)
                        if behaviour == "stall" and n == 3:
                            time.sleep(server.stall_s)
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    server.abandoned += 1  # the client closed the stream: stop generating

            def _send(self, status: int, payload: dict[str, Any] | list[Any]) -> None:
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

    def chat_next(self, *behaviours: str) -> None:
        """Script the next chat replies (see ``CHAT_BEHAVIOURS``); then back to chaos/good."""
        unknown = set(behaviours) - set(CHAT_BEHAVIOURS)
        if unknown:
            raise ValueError(f"unknown chat behaviours {sorted(unknown)}")
        self.chat_script.extend(behaviours)

    def chat_quote(self, *needles: str) -> None:
        """Quote each of these strings in the reply to a prompt that holds it."""
        self.quote = needles

    def chat_poison(self, *needles: str) -> None:
        """Always answer malformed when the request contains one of these strings."""
        self.poison = needles

    def chat_chaos(self, seed: int = 0, **rates: float) -> None:
        """Misbehave at random: e.g. ``chat_chaos(malformed=0.3)`` (seeded, repeatable)."""
        self.chaos = dict(rates)
        self.rng = random.Random(seed)

    def next_chat_behaviour(self) -> str:
        """What the next chat call does."""
        if self.chat_script:
            return self.chat_script.popleft()
        roll = self.rng.random()
        for behaviour, rate in sorted(self.chaos.items()):
            if roll < rate:
                return behaviour
            roll -= rate
        return "good"

    @property
    def chat_calls(self) -> int:
        """Chat completions answered so far."""
        return len(self.chat_outcomes)

    def __enter__(self) -> OpenAITestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
