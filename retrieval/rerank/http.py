"""HTTP rerankers: text-embeddings-inference, Cohere-style and Jina-style ``/rerank``.

* ``tei``:    ``POST {url}`` ``{"query", "texts"}`` → ``[{"index", "score"}, ...]``
* ``cohere``: ``POST {url}`` ``{"model", "query", "documents", "top_n"}`` →
  ``{"results": [{"index", "relevance_score"}, ...]}``
* ``jina``:   the same shape as Cohere's.

Connection errors, timeouts, 429 and 5xx are ``BackendUnavailableError``; any other
failure or a reply of the wrong shape is ``InvalidRequestError``. The search falls back
to the fused order with a warning either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from lore.errors import BackendUnavailableError, ConfigurationError, InvalidRequestError

STYLES = ("tei", "cohere", "jina")


class HttpReranker:
    """Client for one rerank endpoint."""

    def __init__(
        self,
        url: str,
        *,
        style: str = "tei",
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        if style not in STYLES:
            raise ConfigurationError(f"unknown rerank API style {style!r}; one of {STYLES}")
        if not url:
            raise ConfigurationError("the http reranker needs a url (LORE_RERANK__URL)")
        self._url, self._style, self._model = url, style, model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    @property
    def name(self) -> str:
        """Style and endpoint."""
        return f"{self._style}:{self._url}"

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order."""
        if not passages:
            return []
        body: dict[str, Any]
        if self._style == "tei":
            body = {"query": query, "texts": list(passages)}
        else:
            body = {"query": query, "documents": list(passages), "top_n": len(passages)}
            if self._model:
                body["model"] = self._model
        try:
            reply = self._client.post(self._url, json=body)
        except httpx.TransportError as exc:
            raise BackendUnavailableError(f"reranker unreachable: {exc}") from exc
        if reply.status_code == 429 or reply.status_code >= 500:
            raise BackendUnavailableError(f"reranker answered HTTP {reply.status_code}")
        if reply.status_code != 200:
            raise InvalidRequestError(f"reranker refused the request: HTTP {reply.status_code}")
        try:
            data = reply.json()
            items = data if self._style == "tei" else data["results"]
            key = "score" if self._style == "tei" else "relevance_score"
            scores = {int(item["index"]): float(item[key]) for item in items}
            return [scores[i] for i in range(len(passages))]
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequestError(f"reranker reply has an unexpected shape: {exc}") from exc
