"""Asking with an LLM (the local TEST server): routing, map step, grounded answer, fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore.embedders import LocalEmbedder
from retrieval.ask_contract import AskRequest
from tests import ops
from tests.conftest import CORPUS, make_runtime
from tests.openai_test_server import OpenAITestServer


@pytest.mark.slow
def test_the_llm_routes_maps_and_answers_with_valid_citations(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    with OpenAITestServer() as server:
        llm = {"base_url": server.base_url, "model": "test-model", "backoff_s": 0.01}
        rt = make_runtime(tmp_path / "data", local_embedder, llm=llm)
        ops.ingest_paths(rt, [CORPUS / "staging"], {"env": "staging"})
        ops.build_graph(rt)

        local = rt.queries().ask_sync(AskRequest(question="What does PAY-5031 mean?"))
        assert local.route.classifier == "llm" and local.mode == "local"
        assert not local.extractive and local.answer.startswith("According to the evidence [1]")
        assert "[99]" not in local.answer  # a number it was never given is dropped
        assert [c.id for c in local.citations] == [1, 2] and local.citations[0].sources

        tasks_before = len(server.chat_outcomes)
        broad = rt.queries().ask_sync(
            AskRequest(question="What themes recur across all the runbooks?")
        )
        assert broad.mode == "global" and not broad.extractive
        assert broad.details.mapper == "llm" and broad.citations
        assert all(c.kind == "report" and c.report_id for c in broad.citations)
        assert len(server.chat_outcomes) > tasks_before + 2  # route, map batch(es), answer

        server.chat_next("malformed", "malformed", "malformed", "malformed")
        not_cached = AskRequest(question="What does PAY-5031 mean in staging?")
        degraded = rt.queries().ask_sync(not_cached)
        assert "LLM router unavailable" in " ".join(degraded.route.reasons)
        assert degraded.extractive and "LLM answer unavailable" in degraded.answer
        assert degraded.citations  # still answered, from the evidence itself

        # an answer citing none of its evidence is re-prompted, then not served
        server.chat_next("good", "uncited", "uncited")
        unsourced = rt.queries().ask_sync(
            AskRequest(question="What does PAY-5031 mean for payments in staging?")
        )
        assert unsourced.mode == "local" and unsourced.extractive
        assert "cites none of the evidence" in unsourced.answer and unsourced.citations
        server.chat_next("good", "uncited")  # the re-prompt's answer cites [1] [2]
        recovered = rt.queries().ask_sync(
            AskRequest(question="What does PAY-5031 mean for payments?")
        )
        assert not recovered.extractive and [c.id for c in recovered.citations] == [1, 2]
        rt.close()
