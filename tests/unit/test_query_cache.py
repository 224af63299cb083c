"""The bounded query-embedding cache: least recently used out, copies handed back."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from app.builders import build_embedder
from lore.embedders import LocalEmbedder, Matrix, QueryCache
from lore.settings import Settings, load_settings


def test_lru_evicts_the_least_recently_used() -> None:
    computed: list[str] = []

    def compute(text: str) -> Matrix:
        computed.append(text)
        return np.full(3, float(len(computed)), dtype=np.float32)

    cache = QueryCache(2)
    a = cache.get_or_compute("a", compute)
    cache.get_or_compute("b", compute)
    assert np.array_equal(cache.get_or_compute("a", compute), a)  # hit; "a" now most recent
    cache.get_or_compute("c", compute)  # evicts "b"
    assert len(cache) == 2 and computed == ["a", "b", "c"]
    cache.get_or_compute("a", compute)
    cache.get_or_compute("b", compute)
    assert computed == ["a", "b", "c", "b"]

    handed = cache.get_or_compute("b", compute)
    handed[:] = -1  # a caller scribbling on its vector does not change the cache
    assert float(cache.get_or_compute("b", compute)[0]) == 4.0


def test_size_zero_turns_the_cache_off() -> None:
    calls: list[str] = []
    cache = QueryCache(0)
    for _ in range(3):
        cache.get_or_compute("q", lambda t: calls.append(t) or np.zeros(2, dtype=np.float32))
    assert len(calls) == 3 and len(cache) == 0


def test_local_embedder_remembers_repeated_queries(local_embedder: LocalEmbedder) -> None:
    embedder = LocalEmbedder(query_cache_size=2)
    first = embedder.embed_query("how do services handle database timeouts?")
    assert len(embedder.query_cache) == 1
    again = embedder.embed_query("how do services handle database timeouts?")
    assert np.array_equal(first, again) and len(embedder.query_cache) == 1
    embedder.embed_query("PAY-5031")
    embedder.embed_query("checkout-web")
    assert len(embedder.query_cache) == 2


def test_settings_reach_the_embedder(tmp_path: Path) -> None:
    merged = load_settings(data_dir=tmp_path).model_dump()
    merged["embedding"].update(query_cache_size=7, query_runtime="torch", query_threads=1)
    embedder = build_embedder(Settings.model_validate(merged))
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.query_cache.size == 7 and embedder.query_runtime == "torch"
    assert embedder.query_threads == 1


def test_query_threads_never_exceed_the_cores() -> None:
    cores = os.cpu_count() or 1
    assert LocalEmbedder(query_threads=cores + 5).query_threads == cores
    assert LocalEmbedder().query_threads == min(2, cores)
