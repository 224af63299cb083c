"""HTML pages to Markdown, so the chunker sees headings, code blocks and tables.

The conversion is markdownify's (a maintained HTML → Markdown converter on top of
BeautifulSoup). Before it runs, what is not content goes: scripts, styles, forms,
buttons (a listing's "copy"), ``<nav>``, ARIA navigation/banner/search regions, and page-level
``<header>``/``<footer>`` (those inside an ``<article>`` or ``<main>`` stay). A page with a
single ``<main>`` is reduced to it. What comes out: ATX headings (``## Owners``),
``<pre>`` as fenced code kept byte for byte (indentation included, the language taken
from a ``language-*`` class; a ``<code>`` listing right after another in one ``<pre>``
on lines of its own; line numbers drawn as elements of their own go, and a listing drawn
one element per line, each opening with its number, becomes one), lists as
``-``/``1.`` lists (a list whose items hold headings lays out sections, and gives plain
blocks), tables as Markdown tables with ``|`` in cells escaped (a row without text
goes). Links keep their text;
images go. Nothing is escaped for Markdown's sake (``snake_case`` must stay searchable
as written).

Navigation that generators draw without saying so (previous/next/up bars as tables in a
plain ``<div>``, tables of contents, breadcrumbs, link lists in side panels) is found by
what it *is*, not by a generator's class names: a block whose visible text is mostly
link text (:func:`link_density` at least ``_NAV_DENSITY``, with at least two links) is
navigation. An ``<aside>`` goes at page level, like a page's header and footer; inside
the main content (``<article>``, ``<main>``, ``role="main"``) it is judged by its links
like any block, so footnotes and a HOWTO's abstract (Sphinx writes both as ``<aside>``)
stay and a side panel of links goes. A link whose whole text is code
(``<a><code>json.dumps()</code></a>``) or that stands inside code (a signature's linked
types) counts as text, since it names an API; a permalink (an in-page link whose text
is a lone symbol such as ``¶``) is dropped, and so is a horizontal rule that opens or
closes the body (it divided the page from the navigation that went). Blocks repeated on
many pages of one ingest (copyright footers, "last updated" lines) are removed afterwards by
:mod:`ingest.boilerplate`, which sees the whole tree.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.element import NavigableString, PageElement
from markdownify import MarkdownConverter

from lore.identifiers import TOKEN, identifier_kind

_DROP = ("script", "style", "noscript", "template", "svg", "nav", "form", "iframe", "button")
_DROP_ROLES = {"navigation", "banner", "contentinfo", "search", "complementary"}
_PAGE_CHROME = ("header", "footer")
_LANGUAGE = re.compile(r"^(?:language|lang)-([\w+#.-]+)$")
_BLANK_RUNS = re.compile(r"\n{3,}")
_FIRST_H1 = re.compile(r"^#[ \t]+([^\n]*)", re.MULTILINE)
_FENCE_RUN = re.compile(r"`{3,}")
# a thematic break (<hr>) at either end of the body divides the page from chrome now gone
_RULE = re.compile(r"[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*")
_META = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_REFRESH = re.compile(r"""http-equiv\s*=\s*["']?refresh\b""", re.IGNORECASE)
_CONTENT = re.compile(r"""\bcontent\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
_DELAY_URL = re.compile(r"""^\s*(\d+(?:\.\d*)?)\s*[;,]\s*(?:url\s*=\s*)?["']?([^"'\s]+)""", re.I)
REDIRECT_DELAY_S = 2.0
_NAV_DENSITY = 0.6
_EDGE_DENSITY = 0.3
_NAV_BLOCKS = ("div", "table", "tr", "ul", "ol", "dl", "p", "section", "header", "footer", "aside")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PROSE_WORDS = 8
_CONTENT_ONLY = ("pre", "code", "h1", "h2", "h3", "h4", "h5", "h6")
_CODE_ONLY = ("pre", "code")
INDEX_SHARE = 2 / 3  # a page this much link text is an index: API names' links count too
_INDEX_ENTRIES = ("dt", "li")  # an index's entries, blocks of their own there
_NUMBERED_LINES = 3  # a listing's line numbers: at least this many, on this share of lines
_NUMBERED_SHARE = 0.8
_LINE_NUMBER = re.compile(r"^\s*\d+\s*$")
_LINES = ("div", "span")  # a line drawn as an element (not a paragraph, item or table row)


class _Converter(MarkdownConverter):
    """markdownify with fences that survive backticks inside the code."""

    def convert_pre(self, el: Any, text: str, parent_tags: Any) -> str:
        """A fenced block, longer than any backtick run inside, text verbatim."""
        if not text.strip():
            return ""
        longest = max((len(run) for run in _FENCE_RUN.findall(text)), default=2)
        fence = "`" * (longest + 1)
        language = _language(el) or ""
        return f"\n\n{fence}{language}\n{text.strip(chr(10))}\n{fence}\n\n"


def _language(el: Tag) -> str | None:
    for node in (el, el.find("code")):
        if isinstance(node, Tag):
            for cls in node.get("class") or []:
                found = _LANGUAGE.match(str(cls))
                if found:
                    return found.group(1)
    return None


def _gone(tag: Tag) -> bool:
    """Whether ``tag`` was decomposed (removed) by an earlier pass.

    bs4's ``Tag.decomposed`` reads ``_decomposed`` through ``Tag.__getattr__`` on a live
    tag, which searches its whole subtree for a child tag of that name: thousands of
    checks per page made it a third of the link-block pass. ``decompose()`` sets the
    attribute on the tag itself, so the instance dictionary answers.
    """
    return bool(vars(tag).get("_decomposed", False))


def html_to_markdown(html: str) -> tuple[str, str]:
    """Convert a page; returns (title, Markdown body)."""
    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag else ""
    _strip_chrome(soup)
    mains = soup.find_all("main")
    root: Tag = mains[0] if len(mains) == 1 else (soup.body or soup)
    _drop_permalinks(root)
    _drop_link_blocks(root)
    _unlist_sections(root)
    _drop_empty_rows(root)
    _escape_cell_pipes(root)
    converter = _Converter(
        heading_style="ATX",
        bullets="-",
        strip=["a", "img"],
        escape_asterisks=False,
        escape_underscores=False,
        escape_misc=False,
        strip_pre=None,
        table_infer_header=True,
    )
    body = converter.convert_soup(root)
    body = _BLANK_RUNS.sub("\n\n", "\n".join(line.rstrip() for line in body.splitlines()))
    body = _without_edge_rules(body)
    if not title:
        first = _FIRST_H1.search(body)
        title = first.group(1).strip(" \t#") if first else ""
    return title, body


def _without_edge_rules(body: str) -> str:
    """``body`` without the rules (and blank lines) that open or close it (linear time)."""
    lines = body.split("\n")
    start, end = 0, len(lines)
    while start < end and (not lines[start].strip() or _RULE.fullmatch(lines[start])):
        start += 1
    while end > start and (not lines[end - 1].strip() or _RULE.fullmatch(lines[end - 1])):
        end -= 1
    return "\n".join(lines[start:end])


def redirect_target(html: str) -> str | None:
    """Where a page sends its reader at once by a meta refresh, or None.

    ``<meta http-equiv="refresh" content="0; url=…">``, within ``REDIRECT_DELAY_S``.
    Generators write such stubs for moved pages and for anchors (Texinfo's one page per
    index entry, Hugo's aliases, Sphinx and MkDocs redirect plugins); a browser never
    shows their text. A refresh without a URL reloads the page itself: not a redirect.
    """
    end = html.lower().find("</head>")
    for tag in _META.findall(html[: end if end >= 0 else 8192]):
        if not _REFRESH.search(tag):
            continue
        content = _CONTENT.search(tag)
        value = next((g for g in content.groups() if g is not None), "") if content else ""
        found = _DELAY_URL.match(value)
        if found and float(found.group(1)) <= REDIRECT_DELAY_S:
            return found.group(2)
    return None


def _strip_chrome(soup: BeautifulSoup) -> None:
    for tag in soup(["head", *_DROP]):
        tag.decompose()
    _listings_in_tables(soup)
    for pre in soup.find_all("pre"):
        _drop_line_numbers(pre)
    _listings_of_lines(soup)
    for pre in soup.find_all("pre"):  # listings side by side (ES module and CommonJS)
        for code in pre.find_all("code", recursive=False)[1:]:
            before = code.previous_sibling  # right after another: not a grammar's tokens
            if (
                isinstance(before, Tag)
                and before.name == "code"
                and not before.get_text().endswith("\n")
            ):
                code.insert_before("\n")
    for tag in soup.find_all(role=True):
        if not _gone(tag) and str(tag.get("role", "")).lower() in _DROP_ROLES:
            tag.decompose()
    for tag in soup.find_all(_PAGE_CHROME):
        if not _gone(tag) and tag.find_parent(["article", "main"]) is None:
            tag.decompose()
    for tag in soup.find_all("aside"):
        if not _gone(tag) and not _in_main(tag):
            tag.decompose()


def _drop_line_numbers(pre: Tag) -> None:
    """Remove the line numbers a listing draws as elements of their own.

    Javadoc's source pages, Pygments' and Hugo's inline line numbers: an element holding
    only a number opens each line, and the numbers run on by one. Kept, they would be
    words of the code (a query for ``504`` would find line 504 of every listing). A number
    the code itself starts a line with is no element of its own, and a listing whose
    numbered elements are not most of its lines or do not count up is left whole.
    """
    found: list[Tag] = []
    last = "\n"
    stack: list[PageElement] = list(reversed(list(pre.children)))
    while stack:
        node = stack.pop()
        if isinstance(node, Tag):
            text = node.get_text()
            if last == "\n" and text.strip().isdecimal() and node.find(True) is None:
                found.append(node)
                last = text[-1]
            else:
                stack.extend(reversed(list(node.children)))
        elif isinstance(node, NavigableString) and str(node):
            last = str(node)[-1]
    if len(found) < _NUMBERED_LINES:
        return
    numbers = [int(tag.get_text()) for tag in found]
    lines = pre.get_text().count("\n") + 1
    counting = all(b == a + 1 for a, b in pairwise(numbers))
    if counting and len(found) >= _NUMBERED_SHARE * lines:
        for tag in found:
            tag.decompose()


def _listings_in_tables(soup: BeautifulSoup) -> None:
    """A listing laid out as a table, its line numbers in a cell beside it, is its code.

    Pygments' and Hugo's ``linenos=table``, gtk-doc's listings: one row, a cell whose
    ``<pre>`` holds nothing but the numbers, one a line, counting up by one, and a cell
    holding the code's ``<pre>``. Read as a table, the code would become one cell of one
    line. The numbers' cell goes; a table left with one ``<pre>`` a row, alone in its
    cell, becomes those listings.
    """
    for pre in soup.find_all("pre"):
        cell = pre.find_parent(["td", "th"])
        if _gone(pre) or cell is None or cell.get_text().strip() != pre.get_text().strip():
            continue
        lines = pre.get_text().split()
        if not lines or not all(line.isdecimal() for line in lines):
            continue
        numbers = [int(line) for line in lines]
        if not all(b == a + 1 for a, b in pairwise(numbers)):
            continue
        row = cell.find_parent("tr")
        if row is None or not any(
            other is not cell and other.find("pre") is not None
            for other in row.find_all(["td", "th"], recursive=False)
        ):
            continue
        table = row.find_parent("table")
        cell.decompose()
        if table is None:
            continue
        rows = table.find_all("tr")
        listings: list[Tag] = []
        for each in rows:
            cells = each.find_all(["td", "th"], recursive=False)
            code = cells[0].find("pre") if len(cells) == 1 else None
            if code is None or cells[0].get_text().strip() != code.get_text().strip():
                break
            listings.append(code)
        else:
            if listings:
                for code in listings:
                    table.insert_before(code.extract())
                table.decompose()


def _listings_of_lines(soup: BeautifulSoup) -> None:
    """Listings drawn one element per line, each opening with its number, become ``<pre>``.

    Doxygen's source pages draw a file as a ``<div>`` of line ``<div>``s, each opening
    with an element that holds the line's number; read as paragraphs, every line would be
    a block of prose with its number glued to its code (``358extern …``). Found by the
    shape alone, as :func:`_drop_line_numbers` finds numbers in a ``<pre>``: at least
    ``_NUMBERED_LINES`` child ``<div>``s or ``<span>``s (a paragraph, list item or table
    row with a number is a step or a ranked row, not a line), ``_NUMBERED_SHARE`` of them
    opening with a number element, the numbers counting up by one. The numbers go; the
    lines' text stays, verbatim, as one listing.
    """
    holders: dict[int, tuple[Tag, list[tuple[Tag, Tag]]]] = {}
    for text in soup.find_all(string=_LINE_NUMBER):
        number = text.parent  # the outermost element that holds the number alone
        while (
            isinstance(number, Tag)
            and isinstance(number.parent, Tag)
            and len(number.parent.find_all(True, recursive=False)) == 1
            and number.parent.get_text().strip() == text.strip()
        ):
            number = number.parent
        if not isinstance(number, Tag) or number.get_text().strip() != text.strip():
            continue
        line, holder = number.parent, number.parent.parent if number.parent else None
        if not isinstance(line, Tag) or not isinstance(holder, Tag) or line.name not in _LINES:
            continue
        if _first_text(line) is text:
            holders.setdefault(id(holder), (holder, []))[1].append((line, number))
    for holder, found in holders.values():
        lines = holder.find_all(True, recursive=False)
        numbers = [int(number.get_text()) for _, number in found]  # the number alone
        counting = all(b == a + 1 for a, b in pairwise(numbers))
        if len(found) < _NUMBERED_LINES or len(found) < _NUMBERED_SHARE * len(lines):
            continue
        if not counting or holder.name == "pre" or holder.find_parent("pre") is not None:
            continue
        place = {id(line): index for index, line in enumerate(lines)}  # (Tag == is by value)
        first, last = place[id(found[0][0])], place[id(found[-1][0])]
        for _, number in found:
            number.decompose()
        listing = soup.new_tag("pre")  # from the first numbered line to the last
        listing.string = "\n".join(line.get_text().rstrip("\n") for line in lines[first : last + 1])
        holder.replace_with(listing)


def _first_text(tag: Tag) -> NavigableString | None:
    """The first string with visible characters inside ``tag``."""
    for node in tag.descendants:
        if isinstance(node, NavigableString) and node.strip():
            return node
    return None


def _in_main(tag: Tag) -> bool:
    """Whether ``tag`` stands inside the page's main content."""
    return (
        tag.find_parent(["article", "main"]) is not None
        or tag.find_parent(attrs={"role": "main"}) is not None
    )


def _drop_permalinks(root: Tag) -> None:
    """In-page links whose text is a lone symbol (``¶``, ``#``): anchors, not content."""
    for link in root.find_all("a", href=True):
        text = link.get_text().strip()
        in_page = str(link.get("href", "")).startswith("#")
        if in_page and len(text) <= 2 and not any(ch.isalnum() for ch in text):
            link.decompose()


def link_density(block: Tag, chars: dict[int, int]) -> tuple[float, int]:
    """(share of the block's visible characters that are link text, number of links).

    A link whose whole text is code (an API reference in prose) counts as ordinary text,
    and so does a link inside code (a signature whose member and types link to their
    pages: ``<code><a>trim</a>(<a>String</a> s)</code>``) or one whose text is one API
    name (:func:`names_api`: a declaration's ``SDL_AudioSpec``); one whose code comes
    with a title (a table of contents entry) is link text. ``chars``: the page's
    :func:`link_chars`, read once for all its blocks.
    """
    total = len("".join(block.get_text().split()))
    if total == 0:
        return 0.0, 0
    counted = [n for n in (chars.get(id(link), 0) for link in block.find_all("a")) if n]
    return sum(counted) / total, len(counted)


def link_chars(root: Tag) -> tuple[dict[int, int], bool]:
    """Each link's count of link-text characters (0: it names an API); whether an index.

    Visible characters are counted (see :func:`link_density`). A page whose text is at
    least ``INDEX_SHARE`` link text, counting every link, is an index (a generated API
    index, a table of contents): there an API name's link is navigation like any other,
    and counts.
    """
    links = root.find_all("a")
    raw = {id(link): len("".join(link.get_text().split())) for link in links}
    if sum(raw.values()) >= INDEX_SHARE * len("".join(root.get_text().split())) > 0:
        return raw, True
    out: dict[int, int] = {}
    for link in links:
        chars = raw[id(link)]
        code = sum(len("".join(c.get_text().split())) for c in link.find_all(_CONTENT_ONLY))
        api = (
            (code and code >= chars)
            or link.find_parent(_CODE_ONLY) is not None
            or names_api(link.get_text())
        )
        out[id(link)] = 0 if api else chars
    return out, False


def names_api(text: str) -> bool:
    """Whether a link's text is one name of an API (``SDL_AudioSpec``, ``getBytes()``).

    The one definition of an identifier (:func:`lore.identifiers.identifier_kind`), less
    versions and bare numbers (a list of releases is navigation): a declaration whose
    member and types link to their pages names them, as code does, even where no
    ``<code>`` marks it (Doxygen's member tables).
    """
    stripped = text.strip()
    name = TOKEN.fullmatch(stripped.removesuffix("()"))
    if name is None:
        return False
    after = "(" if stripped.endswith("()") else ""
    return identifier_kind(name.group(), "", after) not in (None, "version", "number")


def _drop_link_blocks(root: Tag) -> None:
    """Remove blocks that are mostly links: navigation bars, tables of contents, crumbs.

        Walked from the outside in, so the largest such block goes at once; a block that holds
        code or a heading is never navigation, nor is one that opens a section under a heading
    (a "See also" list). At the page's edges (before its first heading,
        after its last heading, code or paragraph of prose) a lower share of link text is
        enough: a previous/next bar there carries the neighbours' titles as plain text. The
        block right under the heading of a ``<section>`` is that section's text, not the
        page's edge: an API page's last member opens with its signature, whose name and
        types are links.
    """
    order: dict[int, int] = {}
    content: list[int] = []
    for index, tag in enumerate(t for t in root.descendants if isinstance(t, Tag)):
        order[id(tag)] = index
        if (
            tag.name in _HEADINGS
            or tag.name == "pre"
            or (tag.name == "p" and len(tag.get_text().split()) >= _PROSE_WORDS)
        ):
            content.append(index)
    first_heading = min((order[id(h)] for h in root.find_all(_HEADINGS)), default=len(order))
    chars, index = link_chars(root)
    for block in root.find_all(_NAV_BLOCKS + (_INDEX_ENTRIES if index else ())):
        if _gone(block) or block.find(["pre", *_HEADINGS]) or _titled(block, root):
            continue
        density, links = link_density(block, chars)
        if links < 2:
            continue
        start = order.get(id(block), 0)
        inner = block.find_all(True)
        end = order.get(id(inner[-1]), start) if inner else start
        edge = start < first_heading or not (content and content[-1] > end)
        if edge and _opens_section(block):
            edge = False  # a section's own first block (the last member's signature)
        edge = edge or index  # an index is navigation through and through
        if density >= (_EDGE_DENSITY if edge else _NAV_DENSITY):
            block.decompose()


def _opens_section(block: Tag) -> bool:
    """Whether the block comes right after the heading of its ``<section>``/``<article>``."""
    before = block.find_previous_sibling(True)
    return (
        isinstance(before, Tag)
        and before.name in _HEADINGS
        and block.parent is not None
        and block.parent.name in ("section", "article")
    )


def _titled(block: Tag, root: Tag) -> bool:
    """Whether the block is all a section under a heading holds ("See also": content)."""
    return _beside(block, root, before=True) in _HEADINGS and _beside(
        block, root, before=False
    ) in ("", *_HEADINGS)


def _beside(block: Tag, root: Tag, *, before: bool) -> str:
    """The name of the nearest element before (after) the block, climbing out of wrappers."""
    node: Tag | None = block
    while node is not None and node is not root:
        near = node.find_previous_sibling(True) if before else node.find_next_sibling(True)
        if isinstance(near, Tag):
            return str(near.name)
        node = node.parent
    return ""


def _unlist_sections(root: Tag) -> None:
    """Lists whose items hold headings lay out sections: they become plain blocks.

    An API reference (Javadoc's member details) puts each section in a list item; written
    as a list, its heading would be an indented ``  - ### spin`` that no chunker takes
    for a heading, and the member's text would lose its subject. A list with no heading
    in it stays a list.
    """
    done: set[int] = set()
    for heading in root.find_all(_HEADINGS):
        for holder in heading.parents:
            if holder is root:
                break
            if holder.name in ("ul", "ol") and id(holder) not in done:
                done.add(id(holder))
                holder.name = "div"
                for item in holder.find_all("li", recursive=False):
                    item.name = "div"


def _drop_empty_rows(root: Tag) -> None:
    """Table rows without text (spacers between a member table's entries) say nothing."""
    for row in root.find_all("tr"):
        if not _gone(row) and not row.get_text().strip():
            row.decompose()


def _escape_cell_pipes(root: Tag) -> None:
    for cell in root.find_all(["td", "th"]):
        for text in cell.find_all(string=True):
            if isinstance(text, NavigableString) and "|" in text:
                text.replace_with(text.replace("|", "\\|"))
