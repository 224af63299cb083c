"""Chunk quality on an HTML tree: navigation and boilerplate, tiny chunks, retention.

The counting rules read only the stored chunks and the HTML pages, never which generator
made them, so the same rule holds on Sphinx, AsciiDoc, Texinfo or anything else:

- **boilerplate**: a chunk whose text (whitespace collapsed, case folded) is stored, word
  for word, for at least ``REPEATED_PAGES`` different pages (navigation bars, footers,
  "Previous topic / Next topic", copyright lines); or a chunk of which at least
  ``LINK_SHARE`` of the words are the text of links on its own page (tables of contents,
  previous/next/up bars, breadcrumbs, link lists), when it holds at least ``MIN_LINKS``
  links. A dense list of cross-references in real content counts too, so this is an
  upper bound on chrome. So does a chunk that meets the rule when the titles of the
  tree's pages count as link texts (``boilerplate_title_text``: DocBook's bars name the
  page, its chapter and its neighbours as plain text between "Prev" and "Next").
  Two classes of it are counted apart, as they are content by where they stand:
  a repeated chunk with unrepeated chunks of its own page both before and after it
  (``repeated_amid_content``: a section every page of a family includes, such as the
  options six git commands share; chrome opens or closes a page), and a link-dense
  chunk whose words outside code (fenced blocks and inline code left out) no longer
  meet the rule (``link_text_in_code``: a grammar or an example whose names link to
  their definitions), and one that no longer meets it once the links whose text is one
  API name are left out (``link_text_api``, by the converter's own test,
  :func:`ingest.html.names_api`: a member table whose declarations link their types).
  ``chrome_share`` is the share without those three classes.
- **tiny**: a chunk of fewer than ``TINY_WORDS`` words.
- **retention**: the text of every ``<pre>`` (line by line), ``<dt>`` and first table
  cell of a page — leaving out those that are wholly a link to another page, which is
  navigation, one that is another page's title (a navigation bar's "previous" and
  "next" drawn as text), and a listing's line numbers drawn apart from its code — is
  looked for in the page's stored chunks (their texts, titles and headings), comparing
  letters and digits only (Markdown decoration and whitespace do not count). The figure
  is the share of characters found.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup, Tag

from ingest.html import names_api

REPEATED_PAGES = 5
LINK_SHARE = 0.6
MIN_LINKS = 3
TINY_WORDS = 20
_WORD = re.compile(r"\w+")
_ALNUM = re.compile(r"[^0-9A-Za-z]+")
_CODE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,}).*?^[ \t]{0,3}\1[ \t]*$|`[^`\n]+`", re.M | re.S)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _alnum(text: str) -> str:
    return _ALNUM.sub("", text).lower()


def _amid(flags: list[bool]) -> int:
    """How many flagged items have an unflagged item both before and after them."""
    plain = [i for i, flagged in enumerate(flags) if not flagged]
    if not plain:
        return 0
    return sum(flags[plain[0] + 1 : plain[-1]])


def outside_code(text: str) -> str:
    """``text`` without its fenced code blocks and inline code spans."""
    return _CODE.sub(" ", text)


def _links_elsewhere(element: Tag, page_name: str) -> bool:
    text = element.get_text("", strip=True)
    linked = ""
    for anchor in element.find_all("a", href=True):
        target = str(anchor["href"]).split("#", maxsplit=1)[0]
        if target and not target.endswith(page_name):
            linked += anchor.get_text("", strip=True)
    return bool(text) and len(linked) >= len(text.strip("¶#"))


def _line_numbers(text: str) -> bool:
    """Whether ``text`` is nothing but a listing's line numbers (1, 2, 3 … one a line).

    A listing laid out as a table draws them in a ``<pre>`` of their own, in the row's
    first cell; the converter leaves them out, as it leaves out numbers inside a listing.
    """
    lines = text.split()
    return (
        len(lines) > 1
        and all(line.isdecimal() for line in lines)
        and all(int(b) == int(a) + 1 for a, b in pairwise(lines))
    )


_Parts = tuple[list[list[str]], list[str], list[list[str]], str]


def _page_parts(html: str, page_name: str) -> _Parts:
    """The page's link texts, retention's texts to look for, plain link texts, its title.

    Link texts come as word lists; plain ones are those that are no API name.
    """
    soup = BeautifulSoup(html, "html.parser")
    title = soup.find("title")
    anchors = soup.find_all("a", href=True)
    links = [_words(a.get_text(" ")) for a in anchors]
    plain = [_words(a.get_text(" ")) for a in anchors if not names_api(a.get_text())]
    wanted: list[str] = []
    for pre in soup.find_all("pre"):
        if not _line_numbers(pre.get_text("")):
            wanted.extend(line for line in pre.get_text("").splitlines() if line.strip())
    elements = list(soup.find_all("dt"))
    for row in soup.find_all("tr"):
        cell = row.find(["td", "th"])
        if isinstance(cell, Tag) and not _line_numbers(cell.get_text("")):
            elements.append(cell)
    for element in elements:
        if not _links_elsewhere(element, page_name):
            wanted.append(element.get_text(" "))
    named = title.get_text(" ") if isinstance(title, Tag) else ""
    return [w for w in links if w], wanted, [w for w in plain if w], named


def _link_share(
    chunk_words: list[str], *indexes: dict[str, list[tuple[str, ...]]]
) -> tuple[float, int]:
    """Share of the chunk's words covered by occurrences of the page's link texts.

    More indexes (:func:`_by_first`) add their phrases; the longest match at a word counts.
    """
    if not chunk_words:
        return 0.0, 0
    covered = [False] * len(chunk_words)
    found = 0
    for start, word in enumerate(chunk_words):
        longest = 0
        for by_first in indexes:
            for link in by_first.get(word, ()):
                if len(link) > longest and tuple(chunk_words[start : start + len(link)]) == link:
                    longest = len(link)
                    break
        if longest:
            found += 1
            for i in range(start, start + longest):
                covered[i] = True
    return sum(covered) / len(chunk_words), found


def _by_first(links: list[list[str]]) -> dict[str, list[tuple[str, ...]]]:
    """Link texts by their first word, longest first."""
    index: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for link in sorted({tuple(w) for w in links}, key=len, reverse=True):
        index[link[0]].append(link)
    return index


def chunk_figures(
    chunks: dict[str, list[str]],
    tree: Path,
    sample: int = 5,
    headings: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Boilerplate share, tiny share and retention over ``chunks`` (page → chunk texts).

    ``headings`` (page → its chunks' titles and heading paths) are stored too: the
    retention check finds a page's title or a heading there, not only in chunk texts.
    """
    normal = {page: [" ".join(t.lower().split()) for t in texts] for page, texts in chunks.items()}
    pages_of: dict[str, set[str]] = defaultdict(set)
    for page, texts in normal.items():
        for text in texts:
            pages_of[text].add(page)
    total = repeated = linky = titled = tiny = amid = in_code = api = 0
    examples: list[dict[str, str]] = []
    kept = wanted_chars = 0
    lost: Counter[str] = Counter()
    parts: dict[str, _Parts] = {}
    for page in sorted(chunks):
        file = tree / page
        html = file.read_text(encoding="utf-8", errors="replace") if file.exists() else ""
        parts[page] = _page_parts(html, file.name)
    titles = Counter(_alnum(found[3]) for found in parts.values())
    by_title = _by_first([_words(found[3]) for found in parts.values() if _words(found[3])])
    for page, texts in sorted(chunks.items()):
        links, wanted, plain, title = parts[page]
        own = _alnum(title)
        by_first, by_first_plain = _by_first(links), _by_first(plain)
        stored = _alnum(" ".join([*texts, *(headings or {}).get(page, [])]))
        flags: list[bool] = []
        for raw, text in zip(texts, normal[page], strict=True):
            total += 1
            words = _words(raw)
            tiny += len(words) < TINY_WORDS
            is_repeated = len(pages_of[text]) >= REPEATED_PAGES
            share, count = _link_share(words, by_first)
            is_linky = share >= LINK_SHARE and count >= MIN_LINKS
            repeated += is_repeated
            flags.append(is_repeated)
            linky += is_linky and not is_repeated
            if not (is_linky or is_repeated):
                titled_share, titled_count = _link_share(words, by_first, by_title)
                titled += titled_share >= LINK_SHARE and titled_count >= MIN_LINKS
            if is_linky and not is_repeated:
                prose_share, prose_count = _link_share(_words(outside_code(raw)), by_first)
                coded = not (prose_share >= LINK_SHARE and prose_count >= MIN_LINKS)
                in_code += coded
                plain_share, plain_count = _link_share(words, by_first_plain)
                api += not coded and not (plain_share >= LINK_SHARE and plain_count >= MIN_LINKS)
            if (is_repeated or is_linky) and len(examples) < sample:
                examples.append({"page": page, "text": raw[:160]})
        amid += _amid(flags)
        for item in wanted:
            key = _alnum(item)
            if not key or titles[key] > (key == own):
                continue  # another page's title: a reference to it (a navigation bar's)
            wanted_chars += len(key)
            if key in stored:
                kept += len(key)
            else:
                lost[page] += len(key)
    return {
        "chunks": total,
        "boilerplate_share": round((repeated + linky + titled) / max(total, 1), 4),
        "boilerplate_repeated": repeated,
        "boilerplate_link_text": linky,
        "boilerplate_title_text": titled,
        "repeated_amid_content": amid,
        "link_text_in_code": in_code,
        "link_text_api": api,
        "chrome_share": round(
            (repeated - amid + linky + titled - in_code - api) / max(total, 1), 4
        ),
        "boilerplate_examples": examples,
        "tiny_share": round(tiny / max(total, 1), 4),
        "retention": round(kept / max(wanted_chars, 1), 4),
        "retention_chars": wanted_chars,
        "retention_most_lost": lost.most_common(5),
        "rule": {
            "repeated_on_pages": REPEATED_PAGES,
            "link_share": LINK_SHARE,
            "min_links": MIN_LINKS,
            "tiny_words": TINY_WORDS,
        },
    }
