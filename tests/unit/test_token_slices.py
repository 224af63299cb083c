"""Issue 30: the tokenizer sees a long text in slices, with the same word pieces.

One 4.9 MB text ran ~34 minutes in-process: ``tokenizers`` is superlinear in one
input's length, and the chunker counted and cut the whole text at once (three times).
"""

from __future__ import annotations

import random

from lore.tokens import SLICE_CHARS, counter_for, packaged_model_dir, slices

WORDS = ["payments-api", "ERR_504", "ledger", "Über", "naïve", "x" * 60, "日本語", "a.b.c", "\n\n"]


def _text(n: int) -> str:
    rnd = random.Random(3)
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def test_sliced_counts_and_windows_equal_whole_text_ones() -> None:
    counter = counter_for(packaged_model_dir())
    text = _text(12_000)
    assert len(text) > 5 * SLICE_CHARS
    whole = counter._tok.encode(text, add_special_tokens=False)
    assert counter.count(text) == len(whole.ids)
    offsets = whole.offsets
    expected = []
    for start in range(0, len(offsets), 180):
        window = offsets[start : start + 200]
        expected.append(text[window[0][0] : window[-1][1]])
        if start + 200 >= len(offsets):
            break
    assert counter.windows(text, 200, 20) == expected


def test_slices_cut_at_whitespace_and_cover_the_text() -> None:
    text = _text(12_000)
    parts = list(slices(text))
    assert "".join(p for _, p in parts) == text
    assert all(len(p) <= SLICE_CHARS for _, p in parts)
    assert all(p[-1].isspace() for _, p in parts[:-1])
    unbroken = "x" * (3 * SLICE_CHARS + 5)
    assert [len(p) for _, p in slices(unbroken)] == [SLICE_CHARS] * 3 + [5]
    assert list(slices("")) == [(0, "")]
