"""Blocks repeated on many pages of one ingest: footers, banners, licence lines.

A documentation tree repeats its chrome on every page ("© Copyright 2001-2026 …",
"Last updated 2024-05-31", "Part of the git(1) suite"), and no markup says so. What
gives it away is repetition: :class:`RepeatedBlocks` counts, over the pages of one
ingest, on how many pages each paragraph-level block of the converted Markdown occurs,
compared case-folded, whitespace collapsed, dates and times masked (a build stamp must
not hide a repeat; other numbers count, so "New in version 3.9" is not chrome). A block
on at least ``min_pages`` pages and on at least ``min_share`` of them is chrome where
chrome stands — in the run of such blocks that opens or closes a page (a banner, a
footer of several lines); the same block amid the page's content is content ("Note" or
"See also" titles, "New in version 3.7.", an FAQ's "Yes." repeat on many pages of a
small tree):
:meth:`RepeatedBlocks.strip` keeps it on the first page that holds it (nothing is lost
from the corpus) and removes it elsewhere.

A navigation table repeats its *shape* rather than its text: DocBook's header row names
the page and its chapter between "Prev" and "Next", its footer the pages before and
after. So a table among the first or last ``EDGE_BLOCKS`` blocks of a page is also
counted by its skeleton (:func:`skeleton`): the cells that most edge tables of its shape
agree on ("Prev", "Home") kept, the others masked (a title of one page). A skeleton
found on as many pages as a repeated block is chrome where chrome stands, as above,
when a masked cell names what the edge tables of other pages name too (each page's
title stands in its own header and its neighbours' footers); a table of content at a
page's edge holds values of its own, and stays.

Headings and code fences are never counted: a section named "SYNOPSIS" on every manual
page or the same example on two pages is structure and content. A table counts like a
paragraph (Doxygen draws its "SDL 2.0" title bar as a one-cell table on every page); as
any block, it is chrome only in the run that opens or closes a page.

Page titles carry the same kind of chrome: "Logging HOWTO — Python 3.11.2
documentation", "Installing | MyProject", "Accumulation (GNU Octave (version 7.3.0))". A
title part (split at a spaced dash, bar or middle dot, a colon after a word as in
Doxygen's "SDL: SDL_audio.h File Reference", or a spaced bracketed tail) that ends or
opens the titles of that many pages is the site's name:
:meth:`RepeatedBlocks.title` leaves it out, so titles — and the graph entities and
report titles made of them — name the page. A whole title that at least ``min_pages``
pages share ("Source code" on every source listing of a Javadoc tree, "Index" on each
letter of a Sphinx index) names no page (:meth:`RepeatedBlocks.shared`): the loader
names each such page by its first heading or its file name, with the shared title after.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^#{1,6}[ \t]")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d|\d\d?:\d\d(?::\d\d)?")  # dates and times
# a spaced dash, bar, middle dot or "::", or a colon after a word ("SDL: SDL_audio.h")
_TITLE_SEPARATOR = re.compile(r"\s+(?:[\u2014\u2013|\u00b7]|-{1,2}|::)\s+|(?<=\w):\s+")
# "Accumulation (GNU Octave (version 7.3.0))": a spaced, bracketed tail (one level nested)
_TITLE_BRACKETED = re.compile(r"^(.*\S)\s+(\((?:[^()]|\([^()]*\))*\))\s*$")
_TITLE_MAX = 300  # longer "titles" are not read for a bracketed tail (the pattern backtracks)
EDGE_BLOCKS = 3  # tables among a page's first and last this many blocks count by skeleton
_CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a cell's own pipes are escaped (ingest.html)
_TABLE_RULE = re.compile(r"^\|?(?:\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*$")
_VARIABLE = "\x00"  # a cell whose text varies from page to page, in a skeleton
DOMINANT = 0.8  # a cell is fixed where this share of the edge tables of its shape agree


def blocks(markdown: str) -> list[tuple[str, bool]]:
    """(block text, may be chrome) for each blank-line separated block, fences whole."""
    out: list[tuple[str, bool]] = []
    current: list[str] = []
    fence: str | None = None

    def flush(countable: bool = True) -> None:
        if current:
            text = "\n".join(current)
            first = text.lstrip()
            plain = not _HEADING.match(first)
            out.append((text, countable and plain and bool(text.strip())))
        current.clear()

    for line in markdown.split("\n"):
        match = _FENCE.match(line)
        if fence is not None:
            current.append(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
                flush(countable=False)
            continue
        if match:
            flush()
            fence = match.group(1)
            current.append(line)
        elif not line.strip():
            flush()
            out.append(("", False))
        else:
            current.append(line)
    flush(countable=fence is None)
    return out


def _bracketed(title: str) -> re.Match[str] | None:
    return _TITLE_BRACKETED.match(title) if len(title) <= _TITLE_MAX else None


def _affix(part: str) -> str:
    return " ".join(part.split()).casefold()


def table_cells(block: str) -> list[list[str]] | None:
    """A Markdown table block's rows of cell texts (normalised), or None: no table."""
    lines = [line.strip() for line in block.strip().split("\n")]
    if not lines or not all(line.startswith("|") for line in lines):
        return None
    rows = []
    for line in lines:
        if _TABLE_RULE.match(line):
            continue
        cells = _CELL_SPLIT.split(line.strip().strip("|"))
        rows.append([_affix(cell) for cell in cells])
    return rows


def _edges(parts: list[tuple[str, bool]]) -> list[str]:
    """The countable blocks among the first and last ``EDGE_BLOCKS`` filled ones."""
    filled = [text for text, countable in parts if text.strip() and countable]
    if len(filled) <= 2 * EDGE_BLOCKS:
        return filled
    return [*filled[:EDGE_BLOCKS], *filled[-EDGE_BLOCKS:]]


def skeleton(rows: list[list[str]], fixed: dict[tuple[int, ...], list[str | None]]) -> str | None:
    """A table's key by its shape and its fixed cells (None: it has none, or only those).

    ``fixed`` holds, per shape, the text most edge tables of that shape agree on in each
    cell (None: they do not agree) — "Prev", "Next", "Home"; the other cells vary from
    page to page (the page's title, its chapter's, or nothing) and are masked. A fixed
    cell left empty counts as filled (the first page has no "Prev"); one holding another
    text keeps it, so its table is counted only with tables like it.
    """
    shape = tuple(len(row) for row in rows)
    known = fixed.get(shape)
    if known is None or not any(known):
        return None
    cells = [cell for row in rows for cell in row]
    kept = [
        _VARIABLE if agreed is None else cell or agreed
        for cell, agreed in zip(cells, known, strict=True)
    ]
    if _VARIABLE not in kept:
        return None  # wholly fixed: its fingerprint counts it
    return "skeleton:" + fingerprint(repr((shape, kept)))


def fingerprint(block: str) -> str:
    """A block's identity for counting: case-folded, dates masked, spaces collapsed."""
    folded = _STAMP.sub("0", " ".join(block.split()).casefold())
    return hashlib.blake2b(folded.encode(), digest_size=12).hexdigest()


@dataclass
class RepeatedBlocks:
    """Counts blocks over the pages of one ingest and strips the repeated ones."""

    min_pages: int = 3
    min_share: float = 0.3
    pages: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    affixes: Counter[tuple[str, str]] = field(default_factory=Counter)
    _cells: Counter[str] = field(default_factory=Counter)  # pages whose edge tables hold each
    _edge_tables: list[list[list[list[str]]]] = field(default_factory=list)  # per page
    _skeletons: Counter[str] | None = None  # counted from the above when first needed
    _fixed: dict[tuple[int, ...], list[str | None]] = field(default_factory=dict)
    _kept: set[str] = field(default_factory=set)

    def add(self, markdown: str, title: str = "") -> None:
        """Count one page's blocks (each at most once per page) and its title's ends."""
        self.pages += 1
        found = blocks(markdown)
        self.counts.update({fingerprint(text) for text, countable in found if countable})
        tables = [rows for rows in map(table_cells, _edges(found)) if rows]
        self._cells.update({cell for rows in tables for row in rows for cell in row if cell})
        self._edge_tables.append(tables)
        self._skeletons = None
        parts = _TITLE_SEPARATOR.split(title.strip())
        if len(parts) > 1:
            ends = {("suffix", _affix(parts[-1])), ("prefix", _affix(parts[0]))}
            self.affixes.update(ends)
        bracketed = _bracketed(title.strip())
        if bracketed:
            self.affixes[("bracketed", _affix(bracketed.group(2)))] += 1
        if title.strip():
            self.affixes[("whole", _affix(title))] += 1

    def shared(self, title: str) -> bool:
        """Whether at least ``min_pages`` pages bear exactly this title: it names none."""
        return bool(title.strip()) and self.affixes.get(("whole", _affix(title)), 0) >= (
            self.min_pages
        )

    def title(self, title: str) -> str:
        """``title`` without the site's name at either end (see the module docstring)."""
        text = title.strip()
        bracketed = _bracketed(text)
        if bracketed and self._repeated(("bracketed", _affix(bracketed.group(2)))):
            return bracketed.group(1)
        parts = _TITLE_SEPARATOR.split(text)
        if len(parts) < 2:
            return title
        cuts = list(_TITLE_SEPARATOR.finditer(text))
        if self._repeated(("suffix", _affix(parts[-1]))):
            kept = text[: cuts[-1].start()]
        elif self._repeated(("prefix", _affix(parts[0]))):
            kept = text[cuts[0].end() :]
        else:
            return title
        return kept.strip() or title

    def _repeated(self, affix: tuple[str, str]) -> bool:
        seen = self.affixes.get(affix, 0)
        return seen >= self.min_pages and seen >= self.min_share * self.pages

    def is_chrome(self, key: str) -> bool:
        """Whether a block with this fingerprint repeats enough to be chrome."""
        return self._often(self.counts.get(key, 0))

    def _often(self, seen: int) -> bool:
        """Whether ``seen`` pages are enough for a repeat: ``min_pages`` and ``min_share``."""
        return seen >= self.min_pages and seen >= self.min_share * self.pages

    def _shapes(self) -> tuple[dict[tuple[int, ...], list[str | None]], Counter[str]]:
        """Per table shape its fixed cells (:func:`skeleton`); pages per skeleton.

        Counted from the edge tables of every page added, once, when first needed.
        """
        if self._skeletons is None:
            texts: dict[tuple[int, ...], list[Counter[str]]] = {}
            tables: Counter[tuple[int, ...]] = Counter()
            for page in self._edge_tables:
                for rows in page:
                    shape = tuple(len(row) for row in rows)
                    tables[shape] += 1
                    slots = texts.setdefault(shape, [Counter() for _ in range(sum(shape))])
                    for slot, cell in zip(slots, (c for row in rows for c in row), strict=True):
                        slot[cell] += 1
            self._fixed = {
                shape: [
                    text if text and seen >= DOMINANT * tables[shape] else None
                    for text, seen in (slot.most_common(1)[0] for slot in slots)
                ]
                for shape, slots in texts.items()
            }
            counted: Counter[str] = Counter()
            for page in self._edge_tables:
                counted.update({key for rows in page if (key := self._skeleton(rows))})
            self._skeletons = counted
        return self._fixed, self._skeletons

    def chrome_key(self, text: str) -> str | None:
        """The key a chrome block is kept once by: its fingerprint or skeleton (None: content)."""
        key = fingerprint(text)
        if self.is_chrome(key):
            return key
        rows = table_cells(text)
        if rows is None:
            return None
        counted = self._shapes()[1]
        shape = self._skeleton(rows)
        return shape if shape is not None and self._often(counted.get(shape, 0)) else None

    def _skeleton(self, rows: list[list[str]]) -> str | None:
        """:func:`skeleton`, for a table that names what other pages' edge tables name.

        A navigation table's varying cells are titles, and each title stands in the
        tables of several pages (a page's own header, its neighbours' footers); a table
        of content at a page's edge holds its own values.
        """
        known = self._fixed.get(tuple(len(row) for row in rows))
        if known is None:
            return None
        cells = [cell for row in rows for cell in row]
        if not any(
            cell and agreed is None and self._cells.get(cell, 0) >= 2
            for cell, agreed in zip(cells, known, strict=True)
        ):
            return None
        return skeleton(rows, self._fixed)

    def _edge_runs(self, parts: list[tuple[str, bool]]) -> set[int]:
        """Indexes of the chrome blocks in the runs that open and close the page."""
        filled = [i for i, (text, _) in enumerate(parts) if text.strip()]
        out: set[int] = set()
        for order in (filled, filled[::-1]):
            for index in order:
                text, countable = parts[index]
                if not (countable and self.chrome_key(text) is not None):
                    break
                out.add(index)
        return out

    def strip(self, markdown: str) -> str:
        """The page without its chrome blocks, except those seen here first."""
        kept: list[str] = []
        parts = blocks(markdown)
        edges = self._edge_runs(parts)
        for index, (text, countable) in enumerate(parts):
            if countable and index in edges:
                key = self.chrome_key(text)
                if key is not None:
                    if key in self._kept:
                        continue
                    self._kept.add(key)
            kept.append(text)
        body = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))
        return body.strip("\n")
