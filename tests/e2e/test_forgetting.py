"""Issue 31: forgetting is total.

A deleted document's unique sentence is in no table (read through the APIs) and in no
file of the data directory: SQLite deletes with ``secure_delete`` and the WAL is
checkpointed; job records drop staged text; LLM replies whose prompts held its chunks go.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.llm import ReplyCache
from lore.settings import load_settings

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
    assert cache.forget_chunks(["c1", "c9"]) == 1
    assert cache.get("k1") is None and cache.get("k2") is not None and cache.get("k3")
    cache.database.checkpoint()  # type: ignore[attr-defined]
    cache.close()
    assert _files_holding(tmp_path, SENTENCE.encode()) == []
