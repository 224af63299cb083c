"""Acceptance of the LLM path: a graph build against the TEST server with 30% malformed replies."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore.embedders import LocalEmbedder
from tests import ops
from tests.conftest import CORPUS, make_runtime
from tests.openai_test_server import OpenAITestServer


@pytest.mark.slow
def test_every_chunk_ends_extracted_or_quarantined_and_a_rerun_costs_nothing(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    with OpenAITestServer() as server:
        server.chat_chaos(seed=7, malformed=0.3)
        llm = {"base_url": server.base_url, "model": "test-model", "backoff_s": 0.01}
        rt = make_runtime(tmp_path / "data", local_embedder, llm=llm)
        ops.ingest_paths(rt, [CORPUS / "staging"], {"env": "staging"}, extract_graph=False)
        chunk_ids = {c for _, c, _ in rt.store.chunk_refs()}

        report, communities = ops.build_graph(rt)
        graph = rt.graph()
        held = {q.chunk_id: q for q in rt.quarantine().entries()}
        assert report.extractor == "llm" and report.report_writer == "llm"
        assert report.extracted + report.quarantined == len(chunk_ids)
        assert graph.extracted_chunks() | set(held) == chunk_ids
        assert not graph.extracted_chunks() & set(held)
        assert report.quarantined == len(held) >= 1  # 30% twice in a row happens
        assert all(
            "invalid reply after repair and one re-prompt" in q.reason for q in held.values()
        )
        assert report.llm.reprompts > report.quarantined  # most re-prompts rescued the chunk
        assert report.llm.calls == server.chat_calls and report.llm.prompt_tokens > 0

        reports = graph.reports()
        assert communities > 0 and len(reports) == communities
        by_llm = [r for r in reports if r.method == "llm"]
        assert len(by_llm) >= len(reports) // 2
        assert all(
            r.method.startswith("extractive (LLM failed") for r in reports if r not in by_llm
        )
        cited = {c for r in reports for f in r.findings for c in f.chunks}
        assert cited and cited <= chunk_ids  # labels the model was never shown are dropped
        entities = {e for r in by_llm for f in r.findings for e in f.entities}
        assert entities and all(graph.entity(e) is not None for e in entities)

        calls = server.chat_calls
        again, _ = ops.build_graph(rt)
        assert server.chat_calls == calls  # a second run makes zero LLM calls
        assert again.extracted == 0 and again.llm.calls == 0 and again.reports_written == 0

        server.chat_chaos(seed=1)  # the endpoint behaves now
        retried, _ = ops.build_graph(rt, retry_quarantined=True)
        assert retried.extracted == len(held) and retried.quarantined == 0
        assert graph.extracted_chunks() == chunk_ids and rt.quarantine().entries() == []
        rt.close()
