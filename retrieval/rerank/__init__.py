"""Rerankers: score (query, passage) pairs jointly, behind one protocol.

Backends: a local sentence-transformers ``CrossEncoder`` (a model directory; nothing is
downloaded) and an HTTP client for the common ``/rerank`` APIs (text-embeddings-inference,
Cohere-style, Jina-style). Chosen by name, imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lore.backends import resolve_backend


class Reranker(Protocol):
    """Scores passages for a query; higher is more relevant."""

    @property
    def name(self) -> str:
        """What the response reports as the reranker."""
        ...

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in the passages' order."""
        ...


BACKENDS = {
    "local": "retrieval.rerank.cross_encoder:LocalCrossEncoder",
    "http": "retrieval.rerank.http:HttpReranker",
}


def open_reranker(backend: str, **options: object) -> Reranker:
    """Build the named backend (no model is loaded until the first call)."""
    reranker: Reranker = resolve_backend(BACKENDS, backend, "reranker backend")(**options)
    return reranker
