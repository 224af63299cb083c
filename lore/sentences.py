"""One sentence splitter for the whole service: reports, answers, extractor and chunker.

Text in the wild is hard-wrapped Markdown, plain transcripts and flattened records, so
splitting at every line break cuts sentences in half ("…down in a 3-member cluster,
it"). :func:`segments` first reads the text's *blocks*: a paragraph's soft-wrapped
lines are joined with spaces; a list item (``-``, ``*``, ``+``, ``1.``, ``1)``) with
its continuation lines is one block; a heading, a table row, a field line
(``Severity: critical``) and a fenced or indented code block each stand alone. Prose
blocks and list items are then cut at sentence ends: ``.``, ``!`` or ``?`` (and any
closing quote or bracket) followed by space and something that can open a sentence —
but not after an abbreviation ("e.g.", "Dr.") or a lone initial ("Albert S. Rogell").

:func:`is_whole` tells a whole sentence from a fragment (a chunk cut mid-sentence
starts lower-case or ends without a full stop), so callers that show sentences to a
reader can keep whole ones only.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

# field: a label ("Severity"); value: the sentence its line goes on with
Kind = Literal["prose", "item", "heading", "table", "field", "value", "code"]

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")
_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+(?=\S)")
_DEFINITION_MARK = re.compile(r"^:[ \t]+(?=\S)")  # a definition's description, under its term
# what opens a block of its own, so a less indented line is no paragraph's lazy continuation
_BLOCK_START = re.compile(
    r"^[ \t]*(?:[-*+•][ \t]|\d{1,3}[.)][ \t]|:[ \t]|#{1,6}[ \t]|\||`{3,}|~{3,})"
)
_TABLE = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_TABLE_RULE = re.compile(r"^[ \t|:\-]+$")
# "Severity: critical", "**Impact**: ...", "Summary -" at line start: a field, not prose
_FIELD = re.compile(
    r"^[ \t]*(?:\*\*|__)?([A-Z][\w/'-]*(?: [\w/'-]+){0,3}?)"
    r"(?:(?:\*\*|__)?[ \t]*:|:(?:\*\*|__))(?:[ \t]+|$)"
)
_FILE_HEADER = re.compile(
    r"^[ \t]*(\S.{0,150}?\.(?:txt|md|markdown|rst|html?|pdf|docx?|json|ya?ml|csv|log))"
    r"(?:[ \t]+\.\./)?(?:[ \t]{2,}|[ \t]*$)"
)
_QUOTE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+")
_RULE = re.compile(r"^[ \t]*(?:[-*_][ \t]*){3,}$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_END = re.compile(
    r"[.!?…]+[\"'\u201d\u2019)\]*_`]*(?=\s+[\"'\u201c\u2018(\[*_`]*[A-Z0-9\u00c0-\u024f])"
)
ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "vs",
        "cf",
        "al",
        "approx",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "jr",
        "sr",
        "inc",
        "ltd",
        "co",
        "corp",
        "no",
        "fig",
        "eq",
        "vol",
        "pp",
        "ch",
        "sec",
        "dept",
        "est",
        "min",
        "max",
        "avg",
        "resp",
        "incl",
    ]
)
_TERMINAL = re.compile(r"[.!?…:][\"'\u201d\u2019)\]*_`]*$")
_OPENING = re.compile(r"^[\"'\u201c\u2018(\[*_`]*[A-Z0-9\u00c0-\u024f$/@#~<`]")


@dataclass(frozen=True, slots=True)
class Segment:
    """One sentence (or a heading, table row, field line, code block) and its kind."""

    text: str
    kind: Kind


def blocks(text: str) -> list[Segment]:
    """The text's blocks, soft-wrapped lines joined (see the module docstring)."""
    reader = _BlockReader()
    for raw in _FRONT_MATTER.sub("", text.replace("\r\n", "\n")).split("\n"):
        reader.read(_QUOTE.sub("", raw))
    reader.flush()
    if reader.code:
        reader.out.append(Segment("\n".join(reader.code).strip("\n"), "code"))
    return [s for s in reader.out if s.text]


class _BlockReader:
    """Line-by-line state of :func:`blocks`: the open paragraph, item or fence.

    ``containers`` are the content columns of the list items and definitions (``:   …``)
    a line may belong to, innermost last. As in CommonMark, a line indented to an open
    container's column is read without that indentation: a paragraph indented under a
    definition or an item goes on with it (prose, not an indented code block), and a
    fence indented there is a fence; only four more columns make indented code.
    """

    def __init__(self) -> None:
        self.out: list[Segment] = []
        self.lines: list[str] = []
        self.kind: Kind = "prose"
        self.fence: str | None = None
        self.code: list[str] = []
        self.containers: list[int] = []
        self.dedented = False

    def flush(self) -> None:
        for piece in _unwrap(self.lines):
            self.out.append(Segment(piece, self.kind))
        self.lines.clear()
        self.kind = "prose"

    def read(self, line: str) -> None:
        line = self._within(line)
        opening = _FENCE.match(line)
        if self.fence is not None:
            self._in_fence(line, opening)
        elif opening:
            self.flush()
            self.fence = opening.group(1)
        elif not line.strip() or _RULE.match(line):
            self.flush()
        elif not self._layout(line):
            self._text(line)

    def _within(self, line: str) -> str:
        """``line`` without the indentation of the containers it belongs to (see above)."""
        if not line.strip():
            return line
        indent = len(line) - len(line.lstrip(" "))
        if self.fence is None:
            lazy = bool(self.lines) and not _BLOCK_START.match(line)  # a paragraph goes on
            while self.containers and indent < self.containers[-1] and not lazy:
                self.containers.pop()
        offset = self.containers[-1] if self.containers else 0
        cut = min(offset, indent)
        self.dedented = cut > 0
        line = line[cut:]
        if self.fence is None:
            marker = _ITEM.match(line) or _DEFINITION_MARK.match(line)
            if marker:
                self.containers.append(cut + len(marker.group()))
                if line[:1] == ":" and _FENCE.match(line[marker.end() :]):
                    return line[marker.end() :]  # ":   ```": a description opening with code
        return line

    def _in_fence(self, line: str, opening: re.Match[str] | None) -> None:
        assert self.fence is not None
        if opening and opening.group(1)[0] == self.fence[0] and not line.strip(" `~\t"):
            self.out.append(Segment("\n".join(self.code).strip("\n"), "code"))
            self.code.clear()
            self.fence = None
        else:
            self.code.append(line)

    def _layout(self, line: str) -> bool:
        """Headings, table rows and indented code: blocks of their own."""
        heading = _HEADING.match(line)
        if heading:
            self.flush()
            if heading.group(1).strip():
                self.out.append(Segment(heading.group(1).strip(), "heading"))
            return True
        if _TABLE.match(line):
            self.flush()
            if not _TABLE_RULE.match(line):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                self.out.append(Segment(" | ".join(c for c in cells if c), "table"))
            return True
        if line.startswith(("    ", "\t")) and not self.lines and self.kind == "prose":
            self.out.append(Segment(line.strip(), "code"))  # an indented code line
            return True
        return False

    def _text(self, line: str) -> None:
        """List items, fields, file headers and prose lines."""
        item = _ITEM.match(line)
        if item:
            self.flush()
            self.kind = "item"
            rest = line[item.end() :]
            label = _FIELD.match(rest)
            if label:  # "- **Severity:** warning"
                self.out.append(Segment(label.group(1), "field"))
                rest = rest[label.end() :]
            self.lines.append(rest)
            return
        header = _FILE_HEADER.match(line)
        if header and not self.lines:  # "notes-part3.txt  …": an export's file header
            self.out.append(Segment(header.group(1), "field"))
            line = line[header.end() :]
            if not line.strip():
                return
        field = _FIELD.match(line)
        indented_item = self.kind == "item" and (line[:1].isspace() or self.dedented)
        if field and not indented_item and "://" not in line[:12]:
            self.flush()  # "Label: value" -- the label stands alone, the value reads as prose
            self.out.append(Segment(field.group(1), "field"))
            self.kind = "value"
            self.lines.append(line[field.end() :])
            return
        self.lines.append(line)


def _unwrap(lines: list[str]) -> list[str]:
    """Join soft-wrapped lines; keep apart lines that are records of their own.

    A line is continued by the next when it ends with a full stop (the splitter cuts
    there anyway), when the next starts in lower case, or when it is nearly as long as
    the paragraph's longest line (a wrap). A short line without a stop followed by a
    capitalised one is a line of its own: a title over its description, a record field.
    """
    stripped = [" ".join(line.split()) for line in lines if line.strip()]
    if not stripped:
        return []
    width = max(len(line) for line in stripped)
    pieces = [stripped[0]]
    for previous, line in itertools.pairwise(stripped):
        wraps = (
            _TERMINAL.search(previous) is not None
            or not line[:1].isupper()
            or len(previous) >= 0.6 * width
        )
        if wraps:
            pieces[-1] += " " + line
        else:
            pieces.append(line)
    return pieces


def split_sentences(text: str) -> list[str]:
    """Sentences of one prose block (no line structure left to read)."""
    out: list[str] = []
    start = 0
    for match in _END.finditer(text):
        end = match.end()
        if _abbreviation_before(text, match.start()):
            continue
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _abbreviation_before(text: str, dot: int) -> bool:
    if text[dot] != ".":
        return False
    word = re.search(r"([A-Za-z][A-Za-z.]*)$", text[:dot])
    if word is None:
        return False
    token = word.group(1)
    if len(token) == 1 and token.isupper():
        return True  # an initial: "Albert S. Rogell"
    return token.lower().rstrip(".") in ABBREVIATIONS


def segments(text: str) -> list[Segment]:
    """Sentences of prose blocks and list items; other blocks whole, in text order."""
    out: list[Segment] = []
    for block in blocks(text):
        if block.kind in ("prose", "item", "value"):
            parts = split_sentences(block.text)
            out.extend(
                Segment(
                    s,
                    "value"
                    if block.kind == "value" and i == 0
                    else ("prose" if block.kind == "value" else block.kind),
                )
                for i, s in enumerate(parts)
            )
        else:
            out.append(block)
    return out


def sentences(text: str) -> list[str]:
    """The sentences a reader would see: prose, list items, headings, fields and rows."""
    return [s.text for s in segments(text) if s.kind != "code"]


def is_whole(sentence: str) -> bool:
    """True for a sentence that starts like one and ends with a full stop (or ``:``)."""
    clean = sentence.strip()
    return bool(_OPENING.match(clean)) and bool(_TERMINAL.search(clean))


def statements(text: str, *, min_chars: int = 20) -> list[str]:
    """Prose lines and items that stand alone though no stop ends them (records, notes).

    The fallback of a text with no whole sentence ("payments-api returns HTTP 504").
    """
    return [
        s.text
        for s in segments(text)
        if s.kind in ("prose", "item", "value")
        and len(s.text) >= min_chars
        and s.text[:1].isalnum()
    ]


def whole_sentences(text: str, *, min_chars: int = 20) -> list[str]:
    """Prose and list sentences of ``text`` that are whole (see :func:`is_whole`).

    A list item counts as whole when it starts like a sentence, even without a stop; a
    field's value ("Note: check the logs.") when it ends like one — its label opened it.
    """
    out = []
    for segment in segments(text):
        if segment.kind not in ("prose", "item", "value") or len(segment.text) < min_chars:
            continue
        if (
            is_whole(segment.text)
            or (segment.kind == "item" and _OPENING.match(segment.text) is not None)
            or (segment.kind == "value" and _TERMINAL.search(segment.text) is not None)
        ):
            out.append(segment.text)
    return out


def cut_points(block: str) -> list[str]:
    """Pieces to cut an oversized block at, text kept: sentences of prose, else lines.

    For the chunker: a prose paragraph (soft-wrapped lines joined) is cut at sentence
    ends; a block holding list items, table rows or fields keeps its line structure.
    """
    lines = [line for line in block.split("\n") if line.strip()]
    if structured(block):
        return lines
    return split_sentences(" ".join(block.split()))


_DEFINITION_LINE = re.compile(r"^:[ \t]{1,4}\S")


def structured(block: str) -> bool:
    """Whether a block holds list items, table rows, fields, headings or quoted lines."""
    return any(
        _ITEM.match(line)
        or _TABLE.match(line)
        or _FIELD.match(line)
        or _HEADING.match(line)
        or line.lstrip().startswith(">")  # a quotation's lines keep their markers
        or _DEFINITION_LINE.match(line) is not None  # a definition (":   …") under its term
        for line in block.split("\n")
        if line.strip()
    )
