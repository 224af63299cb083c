"""Record what the real model answers to our real prompts, as fixtures for fast unit tests.

Run against the model server (``scripts/llm_server.py``)::

    python -m scripts.llm_server run -- .venv/bin/python -m scripts.record_llm_replies

1. ``lore`` (the CLI, as a user runs it) ingests a few short demo documents with the
   LLM extractor, builds the graph with LLM reports and asks a global and a local
   question, through a recording proxy: every chat call and its reply is kept, exactly
   as the current client sent it (``response_format={"type": "json_object"}``).
2. Each distinct first-turn prompt is sent again, directly, with the schema forms:
   llama.cpp's ``{"type": "json_object", "schema": …}`` and the OpenAI form
   ``{"type": "json_schema", "json_schema": {…}}`` (llama-cpp-python answers it with an
   HTTP 500, recorded as such).

Each exchange becomes ``tests/fixtures/llm_replies/<task>/<hash>-<form>[-turn2].json``
with the task, the form, the model and server, the prompt hash (``lore.llm.prompt_key``
of the first turn), the request (messages, max_tokens, temperature, response_format)
and the answer (HTTP status, content, finish_reason, usage, seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import import_module
from pathlib import Path
from typing import Any

from lore.llm import REPROMPT, ChatPrompt, prompt_key, response_format

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "llm_replies"
DOCS = (
    "production/payments-api/incident-2024-06-refund-duplicates.txt",
    "production/inventory-sync/incident-2024-05-publisher-feed.txt",
)
QUESTIONS = (
    ("global", "How do the services handle database timeouts?"),
    ("auto", "What does PAY-5031 mean?"),
)


def _post(url: str, body: dict[str, Any], timeout_s: float) -> tuple[int, dict[str, Any], float]:
    """POST JSON; (status, JSON body or {"error": text}, seconds)."""
    started = time.monotonic()
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        answer = json.loads(raw)
    except ValueError:
        answer = {"error": raw.decode(errors="replace")}
    return status, answer, time.monotonic() - started


@contextmanager
def recording_proxy(upstream: str, exchanges: list[dict[str, Any]]) -> Iterator[str]:
    """An HTTP proxy to ``upstream`` (a ``/v1`` URL) that appends each chat call it forwards."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.removeprefix("/v1")
            try:
                with urllib.request.urlopen(upstream + path, timeout=60) as response:
                    self._reply(response.status, response.read())
            except urllib.error.HTTPError as exc:
                self._reply(exc.code, exc.read())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body.get("stream"):
                self._reply(501, b'{"error": "the recorder does not relay streams"}')
                return
            status, answer, seconds = _post(upstream + self.path.removeprefix("/v1"), body, 900)
            exchanges.append({"request": body, "status": status, "answer": answer, "s": seconds})
            self._reply(status, json.dumps(answer).encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        thread.join()


def run_lore(proxy: str, model: str, workdir: Path) -> list[str]:
    """Ingest, build and ask with ``lore`` against ``proxy``; the commands' outputs."""
    corpus = workdir / "docs"
    for doc in DOCS:
        target = corpus / doc
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "examples" / "corpus" / doc, target)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LORE_DATA_DIR": str(workdir / "data"),
        "LORE_LLM__BASE_URL": proxy,
        "LORE_LLM__MODEL": model,
        "LORE_LLM__MAX_CONCURRENCY": "1",  # one at a time: the server serves one anyway
        "LORE_LLM__TIMEOUT_S": "900",
    }
    commands = [["ingest", "docs"], ["graph", "build"]]
    commands += [["ask", "--mode", mode, question] for mode, question in QUESTIONS]
    outputs = []
    for args in commands:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "api.cli", *args],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.monotonic() - started
        outputs.append(f"$ lore {' '.join(args)}  # exit {done.returncode}, {took:.0f} s\n")
        outputs.append(done.stdout + done.stderr)
        print(outputs[-2] + outputs[-1], file=sys.stderr, flush=True)
    return outputs


def task_of(messages: list[dict[str, str]]) -> str:
    """The task named on the system prompt's first line (``TASK: name``)."""
    first = messages[0]["content"].splitlines()[0]
    return first.removeprefix("TASK:").strip()


def reply_model(task: str) -> Any:
    """The pydantic model a task's reply must validate against."""
    return import_module(f"lore.prompts.{task}").Reply


def first_turn(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], int]:
    """The messages of the prompt's first turn, and which turn ``messages`` is (1, 2, …).

    A first turn is the system message, the worked examples (user/assistant pairs) and the
    question; each re-prompt adds the model's reply and a user turn starting
    :data:`REPROMPT`.
    """
    reprompts = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "user" and m["content"].startswith(REPROMPT)
    ]
    first = messages[: reprompts[0] - 1] if reprompts else messages
    return first, len(reprompts) + 1


def first_turn_prompt(model_messages: list[dict[str, str]]) -> ChatPrompt[Any]:
    """The :class:`ChatPrompt` of a request's first turn (system, examples, question)."""
    messages, _ = first_turn(model_messages)
    task = task_of(messages)
    turns = messages[1:-1]
    examples = tuple(
        (turns[i]["content"], turns[i + 1]["content"]) for i in range(0, len(turns) - 1, 2)
    )
    return ChatPrompt(
        task, messages[0]["content"], messages[-1]["content"], reply_model(task), examples=examples
    )


def first_turn_hash(model: str, messages: list[dict[str, str]]) -> str:
    """``lore.llm.prompt_key`` of the first turn (the cache key of the prompt)."""
    return prompt_key(model, first_turn_prompt(messages))


def forms(task: str) -> dict[str, dict[str, Any] | None]:
    """The schema-carrying response formats to try besides plain json_object, as sent."""
    return {
        form: response_format(form, task, reply_model(task))
        for form in ("json_object_schema", "json_schema")
    }


def fixture(
    model: str, server: str, form: str, request: dict[str, Any], status: int, answer: Any, s: float
) -> dict[str, Any]:
    """One fixture record."""
    messages = request["messages"]
    choice = (answer.get("choices") or [{}])[0] if status == 200 else {}
    return {
        "task": task_of(messages),
        "form": form,
        "model": model,
        "server": server,
        "prompt_hash": first_turn_hash(model, messages),
        "turn": first_turn(messages)[1],
        "request": {
            k: request.get(k) for k in ("messages", "max_tokens", "temperature", "response_format")
        },
        "status": status,
        "content": (choice.get("message") or {}).get("content"),
        "finish_reason": choice.get("finish_reason"),
        "usage": answer.get("usage") if status == 200 else None,
        "error": None if status == 200 else answer,
        "seconds": round(s, 1),
    }


def save(record: dict[str, Any], out: Path) -> Path:
    """Write one record under ``out/<task>/``."""
    turn = f"-turn{record['turn']}" if record["turn"] > 1 else ""
    name = f"{record['prompt_hash'][:16]}-{record['form']}{turn}.json"
    path: Path = out / str(record["task"]) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def chunk_prompts(n: int) -> list[dict[str, Any]]:
    """Requests as the client sends them for the first ``n`` chunks of :data:`DOCS`."""
    from ingest.chunking import chunk_text
    from ingest.extract_llm import candidates
    from ingest.extraction import ChunkInput
    from lore.prompts import extract_graph
    from lore.settings import GraphSettings, LLMSettings
    from lore.tokens import counter_for, packaged_model_dir

    counter = counter_for(packaged_model_dir())
    llm, types = LLMSettings(), GraphSettings().entity_types
    requests = []
    for doc in DOCS:
        path = ROOT / "examples" / "corpus" / doc
        for draft in chunk_text(path.read_text(), counter, size=200, overlap=32, title=path.stem):
            chunk = ChunkInput(f"{doc}#{draft.ordinal}", doc, draft.text, path.stem)
            prompt = extract_graph.render(draft.text, path.stem, types, "", candidates(chunk))
            requests.append(
                {
                    "messages": prompt.messages(),
                    "max_tokens": min(llm.max_tokens, prompt.max_tokens or llm.max_tokens),
                    "temperature": llm.temperature,
                    "response_format": {"type": "json_object"},
                }
            )
    return requests[:n]


def main() -> int:
    """Record (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m scripts.record_llm_replies")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lore-record-llm"))
    parser.add_argument("--per-task", type=int, default=3, help="prompts per task to re-send")
    parser.add_argument(
        "--chunks-only",
        type=int,
        default=0,
        help="skip the lore run: send the extraction prompts of N chunks in every form",
    )
    args = parser.parse_args()
    url = os.environ["TEST_LLM_URL"]
    model = os.environ.get("TEST_LLM_MODEL", "smollm2-135m-instruct")
    server = os.environ.get("TEST_LLM_SERVER", url)
    shutil.rmtree(args.workdir, ignore_errors=True)
    exchanges: list[dict[str, Any]] = []
    if args.chunks_only:
        for request in chunk_prompts(args.chunks_only):
            status, answer, s = _post(url + "/chat/completions", {"model": model, **request}, 900)
            exchanges.append({"request": request, "status": status, "answer": answer, "s": s})
    else:
        with recording_proxy(url, exchanges) as proxy:
            log = run_lore(proxy, model, args.workdir)
        (args.workdir / "lore.log").write_text("".join(log))
    chat = [e for e in exchanges if "messages" in e["request"]]
    for e in chat:
        record = fixture(
            model, server, "json_object", e["request"], e["status"], e["answer"], e["s"]
        )
        print(save(record, args.out), file=sys.stderr)
    per_task: dict[str, int] = {}
    for e in chat:
        messages = e["request"]["messages"]
        task = task_of(messages)
        if first_turn(messages)[1] != 1 or per_task.get(task, 0) >= args.per_task:
            continue
        per_task[task] = per_task.get(task, 0) + 1
        for form, sent_format in forms(task).items():
            request = {"model": model, **e["request"], "response_format": sent_format}
            status, answer, s = _post(url + "/chat/completions", request, 900)
            record = fixture(model, server, form, request, status, answer, s)
            print(save(record, args.out), record["status"], f"{s:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
