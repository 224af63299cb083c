"""A local cross-encoder (sentence-transformers ``CrossEncoder``) from a model directory.

Point ``LORE_RERANK__MODEL`` at a directory holding a cross-encoder (for example one
saved with ``CrossEncoder(...).save(path)`` on a machine with network access, such as
``cross-encoder/ms-marco-MiniLM-L-6-v2``). Nothing is fetched at run time: a missing
directory is a ``ConfigurationError``, which the search turns into a warning.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lore.errors import ConfigurationError


class LocalCrossEncoder:
    """Loads lazily, on the first rerank."""

    def __init__(self, model: str, max_length: int = 512, batch_size: int = 32) -> None:
        self._model_ref = model
        self._max_length = max_length
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The model path."""
        return f"cross-encoder:{self._model_ref}"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                path = Path(self._model_ref).expanduser()
                if not (path / "config.json").is_file():
                    raise ConfigurationError(
                        f"reranker model {self._model_ref!r} is not a local model directory "
                        "(models are never downloaded at run time)"
                    )
                from sentence_transformers import CrossEncoder
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                self._model = CrossEncoder(
                    str(path), device="cpu", max_length=self._max_length, local_files_only=True
                )
        return self._model

    def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """Joint scores for (query, passage) pairs."""
        if not passages:
            return []
        scores = self._load().predict(
            [(query, passage) for passage in passages],
            batch_size=self._batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [float(score) for score in scores]
