"""Shared fixtures: the real packaged embedding model, loaded once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime, open_runtime
from lore.embedders import LocalEmbedder
from lore.settings import Settings, load_settings
from tests import ops
from tests.real_llm import RealLLM, real_llm_from_environment, require_server

# Starlette's TestClient sends `Host: testserver`; the API answers loopback names only
# (api.security). Tests that check the Host guard pass `api={"allowed_hosts": ...}`.
os.environ.setdefault("LORE_API__ALLOWED_HOSTS", '["localhost", "127.0.0.1", "::1", "testserver"]')

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures"


def global_citations_ok(citations: list[dict[str, Any]]) -> bool:
    """Whether a global answer's citations are as ``ask`` gives them.

    Key points (reports) first, each citation with its sources; a passage (chunk) only
    for a page no report citation covers (``retrieval.ask.uncovered``).
    """
    reported = {s for c in citations if c["kind"] == "report" for s in c["sources"]}
    return (
        bool(citations)
        and citations[0]["kind"] == "report"
        and all(c["sources"] for c in citations)
        and all(c["report_id"] for c in citations if c["kind"] == "report")
        and all(reported.isdisjoint(c["sources"]) for c in citations if c["kind"] == "chunk")
    )


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    embedder = LocalEmbedder()
    embedder.embed_query("warm up")
    return embedder


def make_runtime(data_dir: Path, embedder: LocalEmbedder, **sections: dict[str, object]) -> Runtime:
    """A runtime on ``data_dir`` that shares the session's loaded model."""
    merged = load_settings(data_dir=data_dir).model_dump()
    for name, values in sections.items():
        merged[name] = {**merged[name], **values}
    return open_runtime(Settings.model_validate(merged), embedder)


@pytest.fixture(scope="session")
def demo_runtime(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Runtime]:
    """The demo corpus ingested in-process as ``make demo`` does, its graph left unbuilt."""
    data = tmp_path_factory.mktemp("demo") / "data"
    runtime = make_runtime(data, local_embedder)
    for env in ("production", "staging"):
        report = ops.ingest_paths(runtime, [CORPUS / env], {"env": env}, extract_graph=False)
        assert not report.failed, report.failed
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def demo_graph_runtime(
    tmp_path_factory: pytest.TempPathFactory, demo_runtime: Runtime, local_embedder: LocalEmbedder
) -> Iterator[Runtime]:
    """A copy of the demo store with its knowledge graph built (demo_runtime stays graphless)."""
    import sqlite3

    data = tmp_path_factory.mktemp("demo-graph") / "data"
    data.mkdir(parents=True)
    source = sqlite3.connect(demo_runtime.data_dir / "lore.sqlite3")
    target = sqlite3.connect(data / "lore.sqlite3")
    with target:
        source.backup(target)
    source.close()
    target.close()
    runtime = make_runtime(data, local_embedder)
    ops.build_graph(runtime)
    yield runtime
    runtime.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty database on the real PostgreSQL test server (tests/postgres_server.py)."""
    from tests.postgres_server import fresh_database

    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """``None`` (the embedded SQLite default) or a fresh PostgreSQL database URL."""
    if request.param == "sqlite":
        yield None
        return
    from tests.postgres_server import fresh_database

    with fresh_database() as url:
        yield url


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``real_llm`` test needs the model server: skipped without it (failed if required)."""
    if item.get_closest_marker("real_llm") is not None:
        require_server()


@pytest.fixture(scope="session")
def real_llm() -> RealLLM:
    """The real model server (``scripts/llm_server.py``), from ``TEST_LLM_*``."""
    return real_llm_from_environment()
