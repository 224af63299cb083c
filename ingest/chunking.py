"""Token-aware chunking that follows the document's structure.

The text is cut into sections at Markdown headings; each section into blocks
(paragraphs, fenced code and tables, never split inside a fence or a table unless it
alone is too big); blocks are packed greedily into chunks of at most ``size`` word
pieces, and a block that fits is never cut across two chunks. A paragraph that is too
big is cut at sentence ends (:func:`lore.sentences.cut_points`); a fence or a table
that is too big is cut between lines (rows), each piece re-wrapped in its fence or
under its table's header row, so every piece still reads as code or as a table; one
huge line or sentence is cut into overlapping token windows, between words
(:func:`lore.tokens.cut_windows`). A new chunk within a
section starts with the tail of the previous one (up to ``overlap`` word pieces of
whole sentences). Each chunk carries its heading path (``Runbook > Mitigation``), which
the indexes and the embedder also see.

Chunks keep their subject: a definition-list entry (``term`` then ``:   definition``, as
``ingest.html`` writes ``<dl>``) too long for one chunk repeats its term at the top of
every following chunk, so "you must set this…" still says what. A piece of a section
too small to stand alone (under ``_TINY`` word pieces, what is left after cutting a long
section) joins the chunk before it when both fit; sections themselves stay apart, each
chunk under its own heading. A chunk without a letter or digit (a lone rule) joins its
neighbour across sections.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from lore.models import ChunkDraft
from lore.sentences import cut_points, split_sentences, structured
from lore.tokens import WordPieceCounter

_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S.*)$")
# a fence at any indent: one inside a list item or a definition is still code, and a
# definition may open with one (":   ```", as ingest.html writes a <dd> starting with <pre>)
_FENCE = re.compile(r"^(?:[ \t]*|:[ \t]+)(`{3,}|~{3,})")
_TABLE_ROW = re.compile(r"^[ \t]*\|")
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$")
# a paragraph indented under a definition, as ingest.html writes it
_CONTINUED = re.compile(r"^ {4}\S")
_MIN_BUDGET = 32
_TINY = 24
_DEFINITION = re.compile(r"^:[ \t]{1,4}\S")
_WORDY = re.compile(r"[^\W_]")


@dataclass(frozen=True, slots=True)
class _Unit:
    text: str
    tokens: int
    block: int
    joiner: str = " "
    subject: str = ""
    lead: bool = False  # opens its block (a definition's first piece holds its names)


def sections(text: str) -> list[tuple[str, list[str]]]:
    """Split into (heading path, blocks); code fences stay whole blocks."""
    out: list[tuple[str, list[str]]] = []
    path: list[tuple[int, str]] = []
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None

    def flush_block() -> None:
        if current and "".join(current).strip():
            blocks.append("\n".join(current).strip("\n"))
        current.clear()

    def flush_section() -> None:
        flush_block()
        if blocks:
            out.append((" > ".join(title for _, title in path), list(blocks)))
        blocks.clear()

    for line in text.splitlines():
        fence_match = _FENCE.match(line)
        if fence is not None:
            current.append(line)
            closes = (
                fence_match is not None
                and fence_match.group(1)[0] == fence[0]
                and len(fence_match.group(1)) >= len(fence)
                and not line.strip()[len(fence_match.group(1)) :].strip()
            )
            if closes:
                fence = None
                flush_block()
            continue
        if fence_match:
            if not line.startswith(":"):  # a definition's code stays with its term
                flush_block()
            fence = fence_match.group(1)
            current.append(line)
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_section()
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, heading.group(2).strip(" \t#")))
            continue
        if not line.strip():
            flush_block()
        else:
            current.append(line)
    flush_section()
    return out


def chunk_text(
    text: str,
    counter: WordPieceCounter,
    *,
    size: int,
    overlap: int,
    title: str = "",
    max_model_tokens: int = 256,
) -> list[ChunkDraft]:
    """Cut ``text`` into chunks (see the module docstring)."""
    drafts: list[ChunkDraft] = []
    for heading, blocks in sections(text):
        context = " / ".join(part for part in (title, heading) if part)
        # The embedder sees "context\ntext" plus [CLS] and [SEP]: keep it inside the window.
        room = max_model_tokens - 2 - (counter.count(context) + 1 if context else 0)
        budget = max(_MIN_BUDGET, min(size, room))
        units = _units(blocks, counter, budget, min(overlap, budget // 2))
        for piece in _pack(units, budget, min(overlap, budget // 2)):
            drafts.append(
                ChunkDraft(
                    ordinal=len(drafts),
                    text=piece,
                    heading=heading,
                    token_count=counter.count(piece),
                )
            )

    def fits(draft: ChunkDraft) -> int:
        context = " / ".join(part for part in (title, draft.heading) if part)
        return min(size, max_model_tokens - 2 - (counter.count(context) + 1 if context else 0))

    return _merge_tiny(drafts, counter, fits)


def _merge_tiny(
    drafts: list[ChunkDraft], counter: WordPieceCounter, room: Callable[[ChunkDraft], int]
) -> list[ChunkDraft]:
    """Join a chunk too small to stand alone to the one before it in the same section.

    A chunk with no letter or digit at all (a rule, a lone bracket) says nothing by
    itself: it joins its neighbour whatever the section, the one after it when it opens
    the document.
    """
    out: list[ChunkDraft] = []
    pending: ChunkDraft | None = None
    for next_draft in drafts:
        draft = next_draft
        if pending is not None:
            joined = _joined(pending, draft, counter, room)
            if joined is None:
                out.append(pending)  # too big to join (a long rule of symbols): stands alone
            draft, pending = joined or draft, None
        bare = not _WORDY.search(draft.text)
        if out and draft.token_count < _TINY and (bare or out[-1].heading == draft.heading):
            joined = _joined(out[-1], draft, counter, room)
            if joined is not None:
                out[-1] = joined
                continue
        if bare and not out:
            pending = draft
            continue
        out.append(draft)
    if pending is not None:
        out.append(pending)
    return [replace(draft, ordinal=n) for n, draft in enumerate(out)]


def _joined(
    first: ChunkDraft,
    second: ChunkDraft,
    counter: WordPieceCounter,
    room: Callable[[ChunkDraft], int],
) -> ChunkDraft | None:
    """``first`` then ``second`` as one chunk under the heading of the one with words."""
    keep = first if _WORDY.search(first.text) else second
    text = f"{first.text}\n\n{second.text}"
    tokens = counter.count(text)
    if tokens > room(keep):
        return None
    return replace(keep, text=text, token_count=tokens)


def _units(blocks: list[str], counter: WordPieceCounter, budget: int, overlap: int) -> list[_Unit]:
    units: list[_Unit] = []
    subject = ""
    for number, raw in enumerate(blocks):
        lines = raw.splitlines()
        block, opens = raw, False
        if len(lines) > 1 and _DEFINITION.match(lines[1]) and not _DEFINITION.match(lines[0]):
            # the entry's other names ("-3", "--3way" above "--no-3way"): one-line blocks
            # just before it join it, so no chunk parts them from their definition
            names = [lines[0].strip()]
            while units and _term_line(units[-1], number - len(names)):
                names.insert(0, units.pop().text.strip())
            subject, opens = ", ".join(names), True
            if counter.count(subject) * 4 > budget:  # too many names to repeat: the last
                subject = names[-1]
            block = "\n\n".join([*names[:-1], raw])
        elif not raw[:1].isspace() and not _DEFINITION.match(raw):
            subject = ""
        start = len(units)
        units.extend(_cut(block, number, counter, budget, overlap))
        if opens and len(units) > start:
            units[start] = replace(units[start], lead=True)
        if subject and counter.count(subject) * 4 <= budget:
            units[start:] = [replace(unit, subject=subject) for unit in units[start:]]
    return units


def _cut(
    block: str, number: int, counter: WordPieceCounter, budget: int, overlap: int
) -> list[_Unit]:
    """A block as units that each fit: whole, by lines of code or a table, else pieces."""
    tokens = counter.count(block)
    if tokens <= budget:
        return [_Unit(block, tokens, number)]
    if (frame := _frame(block)) is not None:
        head, body, tail = frame
        return _line_pieces(head, body, tail, counter, budget, overlap, number)
    # a list's items (a table's rows, fields, a definition's lines) stay one per line;
    # prose sentences join with a space as they stood
    joiner = "\n" if structured(block) else " "
    units: list[_Unit] = []
    for part in cut_points(block):
        if not part.strip():
            continue
        pieces = [part] if counter.count(part) <= budget else split_sentences(part)
        for index, piece in enumerate(pieces):
            piece_tokens = counter.count(piece)
            glue = joiner if index == 0 else " "
            if piece_tokens <= budget:
                units.append(_Unit(piece, piece_tokens, number, glue))
                continue
            for window in counter.windows(piece, budget, overlap):
                units.append(_Unit(window, counter.count(window), number))
    return units


def _term_line(unit: _Unit, block: int) -> bool:
    """Whether ``unit`` is block number ``block`` whole and reads as a term: one short line."""
    text = unit.text
    return (
        unit.block == block
        and "\n" not in text
        and len(text) <= 80
        and not unit.subject
        and not text.rstrip().endswith((".", ":", ";"))
        and not _DEFINITION.match(text)
    )


def _frame(block: str) -> tuple[list[str], list[str], list[str]] | None:
    """(lines repeated on top, lines to share out, lines repeated below) of code or a table."""
    lines = block.splitlines()
    if _FENCE.match(block):
        closed = len(lines) > 1 and _FENCE.match(lines[-1]) is not None
        return lines[:1], lines[1:-1] if closed else lines[1:], lines[-1:] if closed else []
    if len(lines) > 1 and all(_TABLE_ROW.match(line) for line in lines):
        header = 2 if _TABLE_RULE.match(lines[1]) else 1
        return lines[:header], lines[header:], []
    return None


def _line_pieces(
    head: list[str],
    body: list[str],
    tail: list[str],
    counter: WordPieceCounter,
    budget: int,
    overlap: int,
    number: int,
) -> list[_Unit]:
    """Share ``body`` lines out into pieces that each fit with ``head`` and ``tail``."""
    frame_tokens = counter.count("\n".join(head + tail))
    if frame_tokens * 2 > budget:  # a frame this big leaves no room: plain lines
        head, tail, frame_tokens = [], [], 0
    room = budget - frame_tokens
    units: list[_Unit] = []
    piece: list[str] = []
    used = 0

    def flush() -> None:
        if piece:
            text = "\n".join(head + piece + tail)
            units.append(_Unit(text, counter.count(text), number, "\n"))
        piece.clear()

    for line in body:
        tokens = counter.count(line)
        if tokens > room:
            flush()
            used = 0
            for window in counter.windows(line, budget, overlap):
                units.append(_Unit(window, counter.count(window), number, "\n"))
            continue
        if piece and used + tokens > room:
            flush()
            used = 0
        piece.append(line)
        used += tokens
    flush()
    return [unit for unit in units if unit.text.strip()]


def _pack(units: list[_Unit], budget: int, overlap: int) -> list[str]:
    chunks: list[str] = []
    current: list[_Unit] = []
    used = 0
    for unit in units:
        if current and used + unit.tokens + 1 > budget:
            chunks.append(_join(current))
            tail: list[_Unit] = []
            tail_tokens = 0
            for previous in reversed(current):
                if tail_tokens + previous.tokens > overlap:
                    break
                tail.insert(0, previous)
                tail_tokens += previous.tokens
            if unit.subject:  # overlap from another definition would sit under this term
                while tail and tail[0].subject != unit.subject:
                    tail_tokens -= tail.pop(0).tokens
            if tail_tokens + unit.tokens + 1 > budget:
                tail, tail_tokens = [], 0
            if unit.subject and not unit.lead and not any(u.lead for u in tail):
                # the entry's names over its continued text (its first piece holds them)
                line = _Unit(unit.subject, len(unit.subject.split()) + 1, -1 - unit.block, "\n")
                if tail_tokens + line.tokens + unit.tokens + 2 <= budget:
                    tail = [line, *tail]
                    tail_tokens += line.tokens
            current, used = tail, tail_tokens
        current.append(unit)
        used += unit.tokens + 1
    if current:
        chunks.append(_join(current))
    return chunks


def _join(units: list[_Unit]) -> str:
    parts: list[str] = []
    for index, unit in enumerate(units):
        text = unit.text
        if index and units[index - 1].block < 0 and _CONTINUED.match(text):
            # a definition's later paragraph under its repeated term: it opens the
            # description again (":   …"), or it would read as an indented code block
            parts.append("\n")
            text = ":   " + text[4:]
        elif index and units[index - 1].block == unit.block:
            parts.append(unit.joiner)
        elif index:
            parts.append("\n\n")
        parts.append(text)
    return "".join(parts)
