"""Extraction against a real model server: validity, repairs, quarantine, retries, speed.

Runs N chunks of the demo corpus through the LLM extraction path (the project's
``LLMClient`` and extraction prompt) against an OpenAI-compatible server, behind the
logging proxy of ``bench/llm_proxy.py`` so what reached the server is counted too
(requests, abandoned calls, the peak in flight). Prints JSON::

    python -m scripts.llm_server run -- .venv/bin/python -m bench.llm_real --chunks 8

Two parts:

* ``first_reply``: each chunk's prompt sent once, directly, in each response format
  (plain ``json_object``; llama.cpp's ``json_object`` + ``schema``; OpenAI's
  ``json_schema``): HTTP status, whether the reply validates as sent, after repair, or
  not at all, whether it carries the required keys, and whether an entity it names occurs
  in the chunk text. This is the model's behaviour, free of any client policy.
* ``client``: the same chunks through ``LLMClient.ask`` as the extractor uses it, for each
  response format the client can send and concurrency 1 and 4: calls, retries, repaired,
  re-prompted, quarantined, empty extractions, chunks with an entity found in the text,
  tokens/s, wall time, and the proxy's counts. Each run has a deadline; what the server
  still computes after the client gave up is measured as the time until it answers
  ``GET /models`` again (llama-cpp-python serves that only between completions).

The client runs use ``llm.structured_output`` values: ``json_object`` (plain JSON mode) and
``auto`` (what a user gets by default: the client learns on its first calls which schema
form the endpoint honours; ``form_settled`` names it). ``valid_first_try`` counts chunks
whose first reply validated with no repair and no re-prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench.llm_proxy import proxied
from ingest.chunking import chunk_text
from ingest.extract_llm import LLMExtractor, candidates, to_mentions
from ingest.extraction import ChunkInput
from lore.errors import LLMReplyError, TransientError
from lore.llm import LLMClient, parse_reply, response_format
from lore.prompts import extract_graph
from lore.settings import GraphSettings
from lore.tokens import counter_for, packaged_model_dir

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
REQUIRED = ("entities", "relations")


def demo_chunks(n: int, skip: int = 0) -> list[ChunkInput]:
    """``n`` chunks of the demo corpus's Markdown files, shortest files first, after ``skip``."""
    counter = counter_for(packaged_model_dir())
    files = sorted(CORPUS.rglob("*.md"), key=lambda p: (len(p.read_text()), str(p)))
    chunks: list[ChunkInput] = []
    for path in files:
        doc = path.relative_to(CORPUS).as_posix()
        title = path.stem
        for draft in chunk_text(path.read_text(), counter, size=200, overlap=32, title=title):
            chunks.append(ChunkInput(f"{doc}#{draft.ordinal}", doc, draft.text, title))
            if len(chunks) == skip + n:
                return chunks[skip:]
    return chunks[skip:]


def response_formats() -> dict[str, dict[str, Any] | None]:
    """The ways to ask for JSON, by name, as the client sends each (``lore.llm``)."""
    return {
        form: response_format(form, extract_graph.TASK, extract_graph.Reply)
        for form in ("json_object", "json_object_schema", "json_schema")
    }


def _post(url: str, body: dict[str, Any], timeout_s: float) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {"error": exc.read().decode(errors="replace")[:300]}


def grounded(names: list[str], text: str) -> bool:
    """Whether at least one of ``names`` occurs in ``text`` (case-insensitive)."""
    lowered = text.lower()
    return any(n.strip() and n.strip().lower() in lowered for n in names)


def judge(content: str, text: str) -> dict[str, bool]:
    """What one reply is: valid as sent, valid after repair, shaped right, grounded."""
    try:
        raw = json.loads(content)
    except ValueError:
        raw = None
    shaped = isinstance(raw, dict) and set(raw) == set(REQUIRED)
    try:
        reply, repaired = parse_reply(content, extract_graph.Reply)
    except ValueError:
        return {"valid": False, "repaired": False, "shaped": shaped, "grounded": False}
    names = [e.name for e in reply.entities]
    return {
        "valid": not repaired,
        "repaired": repaired,
        "shaped": shaped,
        "grounded": grounded(names, text),
        "empty": not reply.entities,
    }


def first_reply(
    url: str, model: str, chunks: list[ChunkInput], max_tokens: int, timeout_s: float
) -> dict[str, Any]:
    """Each chunk's prompt once per response format, straight to the server."""
    types = GraphSettings().entity_types
    out: dict[str, Any] = {}
    for form, sent_format in response_formats().items():
        counts: dict[str, Any] = {"replies": 0, "http_errors": {}, "completion_tokens": 0}
        started = time.monotonic()
        for chunk in chunks:
            # as the extractor renders it (with the offline extractor's names)
            prompt = extract_graph.render(
                chunk.text, chunk.title, types, chunk.chunk_id, candidates(chunk)
            )
            body = {
                "model": model,
                "messages": prompt.messages(),
                "max_tokens": min(max_tokens, prompt.max_tokens or max_tokens),  # as the client
                "temperature": 0.0,
                "response_format": sent_format,
            }
            status, answer = _post(f"{url}/chat/completions", body, timeout_s)
            if status != 200:
                counts["http_errors"][str(status)] = counts["http_errors"].get(str(status), 0) + 1
                continue
            counts["replies"] += 1
            counts["completion_tokens"] += int(answer["usage"]["completion_tokens"])
            content = answer["choices"][0]["message"]["content"] or ""
            for key, value in judge(content, chunk.text).items():
                counts[key] = counts.get(key, 0) + int(value)
        wall = time.monotonic() - started
        counts["wall_s"] = round(wall, 1)
        counts["tokens_per_s"] = round(counts["completion_tokens"] / wall, 1) if wall else None
        out[form] = counts
    return out


async def _extract(
    client: LLMClient, extractor: LLMExtractor, chunks: list[ChunkInput], deadline_s: float
) -> tuple[dict[str, int], bool]:
    """The extractor's per-chunk path (ask, then mentions or quarantine), with a deadline."""
    counts = {"extracted": 0, "quarantined": 0, "empty": 0, "grounded": 0}

    async def one(chunk: ChunkInput) -> None:
        try:
            reply = await client.ask(extractor.prompt(chunk))
        except (LLMReplyError, TransientError):
            counts["quarantined"] += 1
            return
        counts["extracted"] += 1
        mentions = to_mentions(reply, chunk.text)
        counts["empty"] += not mentions.entities
        # a kept mention's name is written in the text (the extractor respells or drops)
        counts["grounded"] += bool(mentions.entities)

    async with client.connected():
        try:
            await asyncio.wait_for(asyncio.gather(*(one(c) for c in chunks)), deadline_s)
        except TimeoutError:
            return counts, False
    return counts, True


def server_idle_after(url: str, limit_s: float = 900) -> float:
    """Seconds until the server answers ``GET /models`` (it waits for running completions)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=limit_s):
            pass
    except (urllib.error.URLError, OSError):
        return limit_s
    return round(time.monotonic() - started, 1)


def client_run(
    url: str,
    model: str,
    chunks: list[ChunkInput],
    form: str,
    concurrency: int,
    args: Any,
    *,
    hints: bool = True,
) -> dict[str, Any]:
    """One configuration through the client, behind the counting proxy."""
    options: dict[str, Any] = {"structured_output": form}
    with proxied(url) as (via, proxy):
        client = LLMClient(
            base_url=via,
            model=model,
            timeout_s=args.timeout,
            first_token_timeout_s=args.timeout,
            max_concurrency=concurrency,
            max_retries=args.retries,
            max_tokens=args.max_tokens,
            **options,
        )
        extractor = LLMExtractor(client, GraphSettings().entity_types, name_hints=hints)
        started = time.monotonic()
        counts, finished = asyncio.run(_extract(client, extractor, chunks, args.deadline))
        wall = time.monotonic() - started
        busy_after = server_idle_after(url)
        stats = client.stats.as_dict()
        return {
            "finished": finished,
            "wall_s": round(wall, 1),
            "server_busy_after_s": busy_after,
            **counts,
            "calls": stats["calls"],
            "retries": stats["retries"],
            "timeouts": stats.get("timeouts"),
            "usage_estimated": stats.get("usage_estimated"),
            "form_settled": client.structured_output,
            "concurrency_settled": client.gate.limit,
            "peak_in_flight": client.gate.peak_in_flight,
            "repaired": stats["repaired"],
            "reprompted": stats["reprompts"],
            "valid_first_try": max(0, len(chunks) - stats["reprompts"] - stats["repaired"])
            if finished
            else None,
            "completion_tokens": stats["completion_tokens"],
            "tokens_per_s": round(stats["completion_tokens"] / wall, 1) if wall else None,
            "server": proxy.trace.summary(),
        }


def main() -> None:
    """Command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_real", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("TEST_LLM_URL"))
    parser.add_argument("--model", default=os.environ.get("TEST_LLM_MODEL", "smollm2"))
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument(
        "--skip", type=int, default=0, help="start after this many chunks (a held-out slice)"
    )
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument(
        "--forms", default="json_object,auto", help="llm.structured_output values to run"
    )
    parser.add_argument("--max-tokens", type=int, default=2000, help="the client's default")
    parser.add_argument("--timeout", type=float, default=120.0, help="the client's default")
    parser.add_argument("--retries", type=int, default=5, help="the client's default")
    parser.add_argument("--deadline", type=float, default=900.0, help="per client run, s")
    parser.add_argument("--skip-first-reply", action="store_true")
    parser.add_argument(
        "--hints",
        default="on",
        help="on,off: run the client with and without the offline extractor's names listed",
    )
    args = parser.parse_args()
    if not args.url:
        parser.error("no server: --url or TEST_LLM_URL (scripts/llm_server.py sets it)")
    chunks = demo_chunks(args.chunks, args.skip)
    forms = args.forms.split(",")
    result: dict[str, Any] = {
        "server": os.environ.get("TEST_LLM_SERVER", args.url),
        "model": args.model,
        "chunks": len(chunks),
        "skipped_chunks": args.skip,
        "settings": {k: getattr(args, k) for k in ("max_tokens", "timeout", "retries")},
    }
    if not args.skip_first_reply:
        result["first_reply"] = first_reply(
            args.url, args.model, chunks, args.max_tokens, args.timeout * 10
        )
    runs: dict[str, Any] = {}
    for hints in args.hints.split(","):
        for form in forms:
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                name = f"{form}/c{concurrency}" + ("" if hints == "on" else "/no-hints")
                runs[name] = client_run(
                    args.url, args.model, chunks, form, concurrency, args, hints=hints == "on"
                )
    result["client"] = runs
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
