"""Rerankers: score (query, passage) pairs jointly, behind one protocol.

Backends: a local sentence-transformers ``CrossEncoder`` (a model directory; nothing is
downloaded) and an HTTP client for the common ``/rerank`` APIs (text-embeddings-inference,
Cohere-style, Jina-style). Chosen by name, imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from typing import Protocol

from lore.errors import ConfigurationError


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
    try:
        target = BACKENDS[backend]
    except KeyError:
        raise ConfigurationError(
            f"unknown reranker backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    reranker: Reranker = getattr(import_module(module_name), class_name)(**options)
    return reranker
