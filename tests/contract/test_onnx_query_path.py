"""The ONNX Runtime query path embeds exactly like the PyTorch path the store was built with."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from app.runtime import Runtime
from lore import onnx_embed
from lore.embedders import LocalEmbedder
from lore.models import ChunkDraft
from lore.tokens import packaged_model_dir

AGREE = 0.9999


def test_onnx_vectors_match_pytorch_on_real_chunks(demo_runtime: Runtime) -> None:
    """Real demo chunks as ingest embeds them, through PyTorch and through ONNX Runtime.

    Queries, a few texts and batches all go through ONNX Runtime by default; PyTorch is the
    reference (and the fallback), so a store built either way needs no re-embedding.
    """
    store = demo_runtime.store
    rows = {row.row_id: row for row in store.index_rows(store.all_row_ids())}
    chunks = store.chunks_by_row_ids(list(rows))
    assert len(rows) > 20
    # The text ingest embedded: title and heading path, then the chunk.
    texts = {
        rid: ChunkDraft(c.ordinal, c.text, c.heading, 0).embed_text(c.title)
        for rid, c in chunks.items()
    }
    ordered = sorted(texts, key=lambda rid: len(texts[rid]))
    sample = ordered[:: max(1, len(ordered) // 40)] + ordered[-4:]  # longest: truncation
    embedder = LocalEmbedder(query_cache_size=0)
    assert embedder.query_runtime == "onnx"
    reference = LocalEmbedder(query_runtime="torch", batch_runtime="torch", query_cache_size=0)
    batch = [texts[rid] for rid in sample]
    by_torch = reference.embed_documents(batch)  # a batch: PyTorch
    by_onnx = embedder.embed_documents(batch)  # a batch: ONNX Runtime, bucketed by length
    assert np.min(np.sum(by_onnx * by_torch, axis=1)) >= AGREE
    stored = np.vstack([rows[rid].embedding for rid in sample])
    assert np.min(np.sum(by_onnx * stored, axis=1)) >= AGREE  # what ingest stored
    cosines = [float(embedder.embed_query(t) @ v) for t, v in zip(batch, by_torch, strict=True)]
    assert min(cosines) >= AGREE, min(cosines)
    few = embedder.embed_documents(batch[:3])  # a few: the query path's session
    assert np.min(np.sum(few * by_torch[:3], axis=1)) >= AGREE


def test_export_at_first_use_then_reuse(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    model_dir = packaged_model_dir()
    graph = onnx_embed.cached_graph(model_dir, tmp_path, 256)
    key = onnx_embed.cache_key(model_dir, 256)
    assert graph.parent == tmp_path and key[:24] in graph.name and graph.stat().st_size > 1e6
    assert [p.name for p in tmp_path.iterdir()] == [graph.name]  # no partial files left
    written = graph.stat().st_mtime_ns
    assert onnx_embed.cached_graph(model_dir, tmp_path, 256) == graph
    assert graph.stat().st_mtime_ns == written

    fresh = LocalEmbedder(onnx_cache_dir=tmp_path, query_cache_size=0)
    text = "PAY-5031: ledger database timeout after 30 s in payments-api"
    assert fresh.query_runtime == "onnx"
    assert float(fresh.embed_query(text) @ local_embedder.embed_query_torch(text)) >= AGREE
    assert graph.stat().st_mtime_ns == written


def test_checksum_covers_weights_and_export_settings(tmp_path: Path) -> None:
    for name, content in {"model.safetensors": b"w1", "config.json": b"{}"}.items():
        (tmp_path / name).write_bytes(content)
    first = onnx_embed.cache_key(tmp_path, 256)
    assert onnx_embed.cache_key(tmp_path, 256) == first
    assert onnx_embed.cache_key(tmp_path, 128) != first
    (tmp_path / "model.safetensors").write_bytes(b"w2")
    assert onnx_embed.cache_key(tmp_path, 256) != first


def test_only_mean_pooling_pipelines_are_exported(tmp_path: Path) -> None:
    onnx_embed.check_exportable(packaged_model_dir())
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "1_Pooling").mkdir()
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    with pytest.raises(onnx_embed.NotExportable, match="not mean pooling"):
        onnx_embed.check_exportable(tmp_path)


def test_failed_export_falls_back_to_pytorch_with_one_log_line(
    tmp_path: Path, local_embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    embedder = LocalEmbedder(onnx_cache_dir=blocker / "onnx", query_cache_size=0)
    text = "ledger database timeouts"
    with caplog.at_level(logging.WARNING, logger="lore.embedders"):
        first = embedder.embed_query(text)
        second = embedder.embed_query(text)
    warnings = [r for r in caplog.records if "ONNX Runtime query path unavailable" in r.message]
    assert len(warnings) == 1 and "PyTorch" in warnings[0].message
    assert embedder.query_runtime == "torch"
    assert np.allclose(first, local_embedder.embed_query_torch(text), atol=1e-6)
    assert np.array_equal(first, second)
    batch = embedder.embed_documents([f"{text} {i}" for i in range(12)])  # PyTorch, too
    assert batch.shape == (12, 384)
    assert float(batch[0] @ local_embedder.embed_query_torch(f"{text} 0")) >= AGREE


def test_torch_runtime_never_uses_onnx() -> None:
    assert LocalEmbedder(query_runtime="torch").query_runtime == "torch"
