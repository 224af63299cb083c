"""The ``lore`` command as a user runs it: real subprocesses, a real uvicorn server."""

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import CORPUS, ROOT

LORE = [sys.executable, "-m", "api.cli"]


@contextmanager
def serving(
    data: Path, log_path: Path, *args: str, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """`lore serve` on a free port until the block ends; yields its base URL.

    ``env`` adds settings (``LORE_*``) to the server's environment.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    environ = {**os.environ, "LORE_DATA_DIR": str(data), **(env or {})}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*LORE, "serve", "--port", str(port), *args],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            else:
                pytest.fail(f"lore serve did not come up: {log_path.read_text()}")
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=120)


def lore(
    data: Path, *args: str, stdin: str | None = None, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LORE_DATA_DIR": str(data), "COLUMNS": "200", **env_extra}
    return subprocess.run(
        [*LORE, *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cli") / "data"
    first = lore(
        directory, "ingest", str(CORPUS / "production"), "--meta", "env=production", "--json"
    )
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["done"] > 20 and report["failed"] == []
    second = lore(directory, "ingest", str(CORPUS / "staging"), "--meta", "env=staging")
    assert second.returncode == 0, second.stderr
    assert "0 failed" in second.stdout
    return directory


def test_search_json_and_request_file(data: Path) -> None:
    seed = {
        "query_id": "seed-1",
        "search_text": "database connection timeouts",
        "top_k": 4,
        "hybrid_params": {"dense_weight": 0.6, "sparse_weight": 0.4, "rrf_k_constant": 60},
        "metadata_filter": {"env": "staging"},
    }
    done = lore(data, "search", "--request", "-", stdin=json.dumps(seed))
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    assert response["query_id"] == "seed-1"
    assert response["total_retrieved"] == len(response["results"]) == 4
    assert {r["metadata"]["env"] for r in response["results"]} == {"staging"}
    dense = lore(data, "search", "database connection timeouts", "--preset", "dense", "--json")
    assert dense.returncode == 0, dense.stderr
    ranks = [r["ranks"] for r in json.loads(dense.stdout)["results"]]
    assert ranks and all(r["sparse"] is None and r["dense"] for r in ranks), ranks
    bad = lore(data, "search", "x", "--preset", "bm25")
    assert bad.returncode == 1 and "'sparse'" in bad.stderr, bad.stderr


def test_table_output_filter_error_and_status(data: Path) -> None:
    table = lore(data, "search", "HTTP 504", "--top-k", "3", "--filter", "env=production")
    assert table.returncode == 0 and "3 results" in table.stdout
    bad = lore(data, "search", "x", "--filter", "colour=blue")
    assert bad.returncode != 0 and "unknown filter key 'colour'" in bad.stderr
    bad_k = lore(data, "search", "x", "--top-k", "0")
    assert bad_k.returncode != 0 and "top_k" in bad_k.stderr
    shaped = lore(
        data,
        "search",
        "HTTP 504",
        "--diversity",
        "0.3",
        "--min-relative-score",
        "0.5",
        "--json",
        LORE_RERANK__BACKEND="local",
        LORE_RERANK__MODEL="/nonexistent/cross-encoder",
    )
    assert shaped.returncode == 0, shaped.stderr
    body = json.loads(shaped.stdout)
    assert body["total_retrieved"] > 0 and body["reranker"] is None
    assert any("never downloaded" in w for w in body["warnings"])
    best = body["results"][0]["rrf_score"]
    assert all(r["rrf_score"] >= 0.5 * best for r in body["results"])
    status = json.loads(lore(data, "status", "--json").stdout)
    assert status["counts"]["chunks"] > 40 and status["failed"] == []


def test_delete_then_reindex(data: Path) -> None:
    first = json.loads(lore(data, "search", "HTTP 504", "--json").stdout)["results"][0]
    gone = lore(data, "delete", first["document_id"])
    assert gone.returncode == 0 and "deleted" in gone.stdout
    assert lore(data, "delete", first["document_id"]).returncode != 0  # not found: clear error
    rebuilt = lore(data, "reindex")
    assert rebuilt.returncode == 0, rebuilt.stderr
    after = json.loads(lore(data, "search", "HTTP 504", "--json", "--top-k", "50").stdout)
    assert first["document_id"] not in {r["document_id"] for r in after["results"]}


def test_bad_inputs_fail_with_reasons_and_the_batch_goes_on(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "good.md").write_text("# Good\n\nThe ERR_GOOD_ONE code is fine.\n")
    (inbox / "binary.md").write_bytes(b"\x89PNG\x00\x00")
    (inbox / "empty.txt").write_text("")
    (inbox / "huge.txt").write_text("word " * 30_000)
    (inbox / "bad.jsonl").write_text('{"id": "ok", "text": "fine record"}\n{oops\n')
    done = lore(
        tmp_path / "d", "ingest", str(inbox), "--json", LORE_INGEST__MAX_DOCUMENT_BYTES="100000"
    )
    assert done.returncode == 3, done.stderr  # partial: some documents failed
    report = json.loads(done.stdout)
    assert report["done"] == 2
    reasons = {Path(f["id"]).name: f["reason"] for f in report["failed"]}
    assert "binary" in reasons["binary.md"]
    assert "empty" in reasons["empty.txt"]
    assert "limit" in reasons["huge.txt"]
    assert "not valid JSON" in reasons["bad.jsonl:2"]


@pytest.fixture
def server(data: Path, tmp_path: Path) -> Iterator[str]:
    with serving(data, tmp_path / "serve.log") as base:
        yield base


def test_serve_answers_the_seed_contract(server: str) -> None:
    reply = httpx.post(
        f"{server}/v1/memory/query", timeout=60, json={"search_text": "token rotation", "top_k": 3}
    )
    assert reply.status_code == 200
    body = reply.json()
    assert body["total_retrieved"] == len(body["results"]) == 3
    assert httpx.post(f"{server}/v1/memory/query", json={"top_k": 3}).status_code == 422


def test_graph_commands(data: Path, tmp_path: Path) -> None:
    built = lore(data, "graph", "build")
    assert built.returncode == 0, built.stderr
    assert "entities" in built.stdout and "LLM calls: 0" in built.stdout
    shown = lore(data, "graph", "show", "E_LEDGER_LOCK_TIMEOUT", "--json")
    assert shown.returncode == 0, shown.stderr
    entity = json.loads(shown.stdout)
    assert entity["type"] == "error_code" and entity["chunk_ids"]
    assert lore(data, "graph", "show", "no-such-thing-here").returncode != 0
    levels = {c["level"] for c in json.loads(lore(data, "graph", "communities", "--json").stdout)}
    assert len(levels) >= 2
    listed = lore(data, "graph", "communities")
    assert listed.returncode == 0, listed.stderr
    assert "E_LEDGER_LOCK_TIMEOUT" in listed.stdout  # names as written, not lower-cased keys
    target = tmp_path / "g.graphml"
    assert (
        lore(data, "graph", "export", "--format", "graphml", "--output", str(target)).returncode
        == 0
    )
    assert "<graphml" in target.read_text()
    nodes = json.loads(lore(data, "graph", "export").stdout)["nodes"]
    assert any(node.get("type") == "metric" for node in nodes)


def test_graph_build_with_an_llm_reports_its_cost_and_quarantine(tmp_path: Path) -> None:
    from tests.openai_test_server import OpenAITestServer

    data = tmp_path / "data"
    missing = lore(data, "ingest", str(CORPUS / "staging" / "no-such-dir"))
    assert missing.returncode == 3 and "no such file or directory" in missing.stdout
    with OpenAITestServer() as server:
        server.chat_poison("payments-api.stg.quillfeather.internal")  # always malformed there
        env = {"LORE_LLM__BASE_URL": server.base_url, "LORE_LLM__MODEL": "test-model"}
        staged = lore(data, "ingest", str(CORPUS / "staging" / "payments-api"), **env)
        assert staged.returncode == 0, staged.stderr  # quarantined chunks don't fail documents
        extraction_calls = server.chat_calls
        held = json.loads(lore(data, "graph", "quarantined", "--json", **env).stdout)
        assert held and all("invalid reply" in h["reason"] for h in held)
        built = lore(data, "graph", "build", "--json", **env)
        assert built.returncode == 0, built.stderr
        report = json.loads(built.stdout)
        assert report["extractor"] == "llm" and report["report_writer"] == "llm"
        assert report["extracted"] == 0 and report["quarantined"] == 0  # done at ingest
        assert report["llm"]["calls"] == server.chat_calls - extraction_calls > 0
        again = lore(data, "graph", "build", **env)
        assert again.returncode == 0, again.stderr
        assert "LLM calls: 0" in again.stdout and " 0 quarantined" in again.stdout
        server.chat_poison()
        retried = lore(data, "graph", "build", "--retry-quarantined", **env)
        assert f"extracted {len(held)} chunks with the llm" in retried.stdout, retried.stdout
    assert lore(data, "graph", "quarantined").stdout.strip() == "no quarantined chunks"
