"""Issue 31: forgetting is total.

A deleted document's unique sentence is in no table (read through the APIs) and in no
file of the data directory: SQLite deletes with ``secure_delete`` and the WAL is
checkpointed; job records drop staged text; LLM replies whose prompts held its chunks go.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.llm import ReplyCache
from lore.models import SourceDocument
from lore.settings import load_settings
from retrieval.ask_contract import AskRequest
from tests import ops
from tests.conftest import make_runtime
from tests.openai_test_server import OpenAITestServer

SENTENCE = "The quokka ledger of Zanzibar overflowed at dawn on the ninth"


def _files_holding(data: Path, needle: bytes) -> list[str]:
    return [str(p) for p in data.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_deleted_documents_sentence_is_in_no_file(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path)
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    needle = SENTENCE.encode()
    with TestClient(app) as client:
        for doc_id, text in (
            ("keep.md", "# Keep\n\nThe payments ledger is fine. E_KEEP_ME stays."),
            ("secret.md", f"# Secret\n\n{SENTENCE}. Call E_SECRET_CODE now."),
        ):
            body = {"id": doc_id, "text": text, "wait": True}
            assert client.post("/v1/documents", json=body).json()["state"] == "done"
        assert _files_holding(tmp_path, needle)  # the sentence is stored somewhere first
        assert client.delete("/v1/documents/secret.md").status_code == 200
        hits = client.post("/v1/memory/query", json={"search_text": SENTENCE, "top_k": 5})
        assert all(SENTENCE not in r["text"] for r in hits.json()["results"])
        assert client.get("/v1/documents/secret.md").status_code == 404
        assert _files_holding(tmp_path, needle) == []
        assert _files_holding(tmp_path, b"E_SECRET_CODE") == []


def test_replies_whose_prompts_held_a_deleted_chunk_are_forgotten(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "llm-cache.sqlite3")
    cache.put("k1", "m", "extract_graph", f'{{"about": "{SENTENCE}"}}', chunk_ids=["c1"])
    cache.put("k2", "m", "extract_graph", '{"about": "other"}', chunk_ids=["c2"])
    cache.put("k3", "m", "route_question", '{"route": "local"}')
    cache.put("k4", "m", "answer_global_map", SENTENCE, report_ids=["0-1"])
    cache.put("k5", "m", "answer_global_map", "other", report_ids=["0-2"])
    assert cache.forget_chunks(["c1", "c9"]) == 1
    assert cache.get("k1") is None and cache.get("k2") is not None and cache.get("k3")
    assert cache.reports_held() == {"0-1", "0-2"}  # prompts that held reports, not chunks
    assert cache.forget_reports(["0-1"]) == 1  # its report was rewritten or removed
    assert cache.get("k4") is None and cache.get("k5") == "other"
    assert cache.reports_held() == {"0-2"}
    cache.database.checkpoint()  # type: ignore[attr-defined]
    cache.close()
    assert _files_holding(tmp_path, SENTENCE.encode()) == []


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_deleted_document_leaves_no_llm_reply_behind(
    tmp_path: Path, local_embedder: LocalEmbedder, how: str
) -> None:
    """After an LLM graph build and LLM asks, no cached reply still quotes a deleted text.

    The test server quotes the sentence in every reply whose prompt held it (extraction,
    community reports, map step, answer): each such reply must go with the document, or
    with the version a replacement removed.
    """
    data = tmp_path / "data"
    needle = SENTENCE.encode()
    with OpenAITestServer() as server:
        server.chat_quote(SENTENCE)
        llm = {"base_url": server.base_url, "model": "test-model", "backoff_s": 0.01}
        rt = make_runtime(data, local_embedder, llm=llm)
        keep = [
            SourceDocument(
                f"keep-{i}.md",
                f"keep-{i}.md",
                f"# Keep {i}\n\nThe Payments Gateway talks to Ledger Service {i}. "
                "Restart Ledger Service when Payments Gateway stalls.",
                "",
                {},
            )
            for i in range(3)
        ]
        secret = SourceDocument(
            "secret.md",
            "secret.md",
            f"# Secret\n\n{SENTENCE}. Quokka Ledger talks to Zanzibar Harbour and "
            "Payments Gateway. Call E_SECRET_CODE now.",
            "",
            {},
        )
        report = ops.ingest(rt, [*keep, secret])
        assert not report.failed, report.failed
        built, _ = ops.build_graph(rt)
        assert built.extractor == "llm" and built.report_writer == "llm", built
        local = rt.queries().ask_sync(AskRequest(question="What does Quokka Ledger do at dawn?"))
        assert local.route.classifier == "llm" and not local.extractive
        broad = rt.queries().ask_sync(
            AskRequest(question="What themes recur across all the runbooks?")
        )
        assert broad.mode == "global" and broad.details.mapper == "llm"
        rt.asker().global_searcher.wait_for_snapshot()  # written by a thread of its own
        snapshot = data / "views" / "global.pickle"  # the view a new process would read
        assert needle in snapshot.read_bytes()
        tasks = {"extract_graph", "summarize_community", "answer_global_map", "answer_question"}
        cache = ReplyCache(data / "llm-cache.sqlite3")
        with cache._read() as db:
            quoting = {
                str(r[0])
                for r in db.execute(
                    "SELECT task FROM llm_replies WHERE reply LIKE ?", (f"%{SENTENCE}%",)
                )
            }
        assert quoting == tasks, quoting  # every kind of reply held the sentence first
        with cache._read() as db:  # a global question maps to reports, not the corpus
            mapped = db.execute(
                "SELECT COUNT(*) FROM llm_reply_chunks s JOIN llm_replies r ON r.key = s.key "
                "WHERE r.task = 'answer_global_map'"
            ).fetchone()[0]
            by_report = db.execute(
                "SELECT COUNT(*) FROM llm_reply_reports s JOIN llm_replies r ON r.key = s.key "
                "WHERE r.task = 'answer_global_map'"
            ).fetchone()[0]
        assert mapped == 0 and by_report > 0
        if how == "deleted":
            ops.delete(rt, "secret.md")
        else:
            changed = "# Secret\n\nQuokka Ledger talks to Payments Gateway only. E_NEW_CODE."
            again = ops.ingest(rt, [SourceDocument("secret.md", "secret.md", changed, "", {})])
            assert again.done == ["secret.md"], again
        with cache._read() as db:
            left = db.execute(
                "SELECT task, reply FROM llm_replies WHERE reply LIKE ?", (f"%{SENTENCE}%",)
            ).fetchall()
        cache.close()
        assert left == []
        rt.close()
    assert _files_holding(data, needle) == []
    assert _files_holding(data, b"E_SECRET_CODE") == []
