"""Issue 30: the tokenizer sees a long text in slices, with the same word pieces.

One 4.9 MB text ran ~34 minutes in-process: ``tokenizers`` is superlinear in one
input's length, and the chunker counted and cut the whole text at once (three times).
"""

from __future__ import annotations

import random

from lore.tokens import SLICE_CHARS, counter_for, cut_windows, packaged_model_dir, slices

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
    assert counter.windows(text, 200, 20) == cut_windows(text, whole.offsets, 200, 20)


def test_windows_open_and_close_between_words() -> None:
    """A long line cut into windows is never cut inside a word (one longer than a window aside)."""
    counter = counter_for(packaged_model_dir())
    line = " ".join(f"SDL_SCANCODE_KP_{i} = {i} ," for i in range(400))
    windows = counter.windows(line, 100, 20)
    assert len(windows) > 10
    at = 0
    for window in windows:
        start = line.index(window, max(0, at - len(window)))
        assert start == 0 or line[start - 1] == " ", window[:30]
        end = start + len(window)
        assert end == len(line) or line[end] == " ", window[-30:]
        assert counter.count(window) <= 100
        assert start > at or at == 0  # each window moves on
        at = start
    assert line.endswith(windows[-1])
    words = set(line.split())
    assert words == {word for window in windows for word in window.split()}
    # a word longer than a window is cut inside, once, and the text after it goes on
    word = "_".join(["a"] * 49)  # 97 word pieces
    text = "intro words here " + word + " and then the words after it"
    pieces = counter.windows(text, 40, 10)
    assert pieces[0] == "intro words here"
    assert pieces[-1].endswith("the words after it")
    assert all(counter.count(p) <= 40 for p in pieces)


def test_slices_cut_at_whitespace_and_cover_the_text() -> None:
    text = _text(12_000)
    parts = list(slices(text))
    assert "".join(p for _, p in parts) == text
    assert all(len(p) <= SLICE_CHARS for _, p in parts)
    assert all(p[-1].isspace() for _, p in parts[:-1])
    unbroken = "x" * (3 * SLICE_CHARS + 5)
    assert [len(p) for _, p in slices(unbroken)] == [SLICE_CHARS] * 3 + [5]
    assert list(slices("")) == [(0, "")]
