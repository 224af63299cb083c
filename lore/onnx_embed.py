"""The local model as an ONNX Runtime graph: exported here on first use, cached, loaded once.

PyTorch pays a large per-operator overhead for one short sequence; ONNX Runtime runs the
same weights in roughly half the time for a query. The graph is exported on this machine
from the model directory the PyTorch path reads (``torch.onnx.export``, nothing is
downloaded), with mean pooling and L2 normalisation inside it, and written to a cache
directory under a name derived from a checksum of the source files and the export
settings, so a changed model or exporter never reuses a stale graph. Tokenisation uses the
model's own ``tokenizer.json`` through ``tokenizers`` with the same truncation as
sentence-transformers, so vectors match the PyTorch path (a contract test checks cosine
>= 0.9999 on real chunks) and a store needs no re-embedding.

Only models whose sentence-transformers pipeline is Transformer -> mean Pooling
(-> Normalize) are exported; anything else stays on PyTorch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lore.errors import PermanentError

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]

# Bump when the exported graph changes shape or semantics (inputs, pooling, opset).
EXPORT_VERSION = 1
OPSET = 17
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "sentence_embedding"
_HASHED_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "config.json",
    "modules.json",
    "1_Pooling/config.json",
    "tokenizer.json",
)

_sessions: dict[tuple[str, int, str], Any] = {}
_sessions_lock = threading.Lock()


class NotExportable(PermanentError):
    """The model's pipeline is not Transformer + mean pooling: it stays on PyTorch."""


def default_cache_dir() -> Path:
    """The user's cache directory for exported graphs."""
    return Path.home() / ".cache" / "lorekeeper" / "onnx"


def check_exportable(model_dir: Path) -> None:
    """Raise :class:`NotExportable` unless the pipeline is Transformer -> mean pooling."""
    if not (model_dir / "tokenizer.json").is_file():
        raise NotExportable(f"{model_dir} has no tokenizer.json")
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        raise NotExportable(f"{model_dir} has no modules.json")
    kinds = [m["type"].rsplit(".", 1)[-1] for m in json.loads(modules_file.read_text())]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise NotExportable(f"pipeline {kinds} is not Transformer -> Pooling (-> Normalize)")
    pooling_dir = next(
        m["path"] for m in json.loads(modules_file.read_text()) if m["type"].endswith("Pooling")
    )
    pooling = json.loads((model_dir / pooling_dir / "config.json").read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True)
    if modes != ["pooling_mode_mean_tokens"]:
        raise NotExportable(f"pooling {modes} is not mean pooling")


def cache_key(model_dir: Path, max_seq_length: int) -> str:
    """Checksum of the source files and the export settings (names the cached graph)."""
    digest = hashlib.sha256()
    settings = {
        "export_version": EXPORT_VERSION,
        "opset": OPSET,
        "torch": metadata.version("torch"),
        "max_seq_length": max_seq_length,
    }
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for name in _HASHED_FILES:
        path = model_dir / name
        if path.is_file():
            digest.update(name.encode())
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def export(model_dir: Path, target: Path, max_seq_length: int) -> None:
    """Write the encoder in ``model_dir`` + mean pooling + normalisation to ONNX at ``target``.

    The encoder is loaded afresh with eager attention (the graph ONNX Runtime's attention
    fusion recognises); the weights are the same files the PyTorch path reads.
    """
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    class _Pooled(torch.nn.Module):
        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            tokens = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    sample = torch.ones((2, min(16, max_seq_length)), dtype=torch.int64)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    axes = {0: "batch", 1: "sequence"}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            encoder = AutoModel.from_pretrained(
                str(model_dir), attn_implementation="eager", local_files_only=True
            )
            # The TorchScript exporter is deprecated but exports this encoder in seconds and
            # needs no onnxscript; its deprecation and tracer warnings are expected here.
            torch.onnx.export(
                _Pooled(encoder).eval(),
                (sample, sample),
                str(partial),
                dynamo=False,
                opset_version=OPSET,
                input_names=list(INPUTS),
                output_names=[OUTPUT],
                dynamic_axes={INPUTS[0]: axes, INPUTS[1]: axes, OUTPUT: {0: "batch"}},
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def open_session(path: Path, threads: int, optimization: str = "all") -> Any:
    """One ONNX Runtime session per (graph, threads, optimisation level) per process.

    ``optimization`` is ``"basic"``, ``"extended"`` or ``"all"`` (ONNX Runtime's graph
    optimisation levels; the benchmark compares them).
    """
    import onnxruntime as ort

    levels = {
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    key = (str(path), threads, optimization)
    with _sessions_lock:
        session = _sessions.get(key)
        if session is None:
            options = ort.SessionOptions()
            # Explicit threads: the caller decides how many cores a query may take. With
            # more than one, the pool's threads spin between the graph's ~100 operators:
            # woken from sleep each time, a second thread bought nothing (SciFact claim,
            # quiet 2-core machine: 1 thread 5.3 ms, 2 sleeping 5.3 ms, 2 spinning 3.2 ms,
            # CPU per query 5.4 / 6.5 / 6.2 ms). One thread has no pool to spin.
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = levels[optimization]
            spin = "1" if threads > 1 else "0"
            options.add_session_config_entry("session.intra_op.allow_spinning", spin)
            options.log_severity_level = 3
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            _sessions[key] = session
    return session


class OnnxEncoder:
    """Tokenizer + ONNX Runtime session: texts in, unit-length float32 vectors out."""

    def __init__(self, session: Any, tokenizer_file: Path, max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        self._session = session
        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.no_padding()
        self._tok.enable_truncation(max_seq_length)
        self.dimension = int(session.get_outputs()[0].shape[-1])

    def encode(self, texts: list[str]) -> Matrix:
        """Embed ``texts`` as one padded batch (sort by length first for long lists)."""
        encodings = self._tok.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        (out,) = self._session.run([OUTPUT], {INPUTS[0]: ids, INPUTS[1]: mask})
        return np.asarray(out, dtype=np.float32)

    def encode_bucketed(self, texts: list[str], batch_size: int) -> Matrix:
        """Embed many texts in batches of similar length (less padding), in input order."""
        lengths = [len(e.ids) for e in self._tok.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = self.encode([texts[i] for i in rows])
        return out


def cached_graph(model_dir: Path, cache_dir: Path, max_seq_length: int) -> Path:
    """Path of the exported graph for ``model_dir``, exporting it first if it is missing."""
    check_exportable(model_dir)
    path = cache_dir / f"encoder-{cache_key(model_dir, max_seq_length)[:24]}.onnx"
    if not path.is_file():
        log.info("exporting %s to ONNX at %s (once per model and exporter)", model_dir, path)
        export(model_dir, path, max_seq_length)
    return path


def load_encoder(
    model_dir: Path, cache_dir: Path, max_seq_length: int, threads: int
) -> OnnxEncoder:
    """The cached graph for ``model_dir`` (exported first if missing), ready to run.

    A process that finds the graph in the cache never imports torch.
    """
    path = cached_graph(model_dir, cache_dir, max_seq_length)
    try:
        session = open_session(path, threads)
    except Exception:
        # A damaged cache file: export again once; a second failure propagates.
        log.warning("cached ONNX graph %s does not load; exporting it again", path)
        path.unlink(missing_ok=True)
        export(model_dir, path, max_seq_length)
        session = open_session(path, threads)
    return OnnxEncoder(session, model_dir / "tokenizer.json", max_seq_length)
