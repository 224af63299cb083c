"""HTML pages to Markdown, so the chunker sees headings, code blocks and tables.

The conversion is markdownify's (a maintained HTML → Markdown converter on top of
BeautifulSoup). Before it runs, what is not content goes: scripts, styles, forms,
``<nav>`` and ``<aside>``, ARIA navigation/banner/search regions, and page-level
``<header>``/``<footer>`` (those inside an ``<article>`` or ``<main>`` stay). A page with a
single ``<main>`` is reduced to it. What comes out: ATX headings (``## Owners``),
``<pre>`` as fenced code kept byte for byte (indentation included, the language taken
from a ``language-*`` class), lists as ``-``/``1.`` lists, tables as Markdown tables with
``|`` in cells escaped. Links keep their text; images go. Nothing is escaped for
Markdown's sake (``snake_case`` must stay searchable as written).
"""

from __future__ import annotations

import re
from typing import Any

from bs4 import BeautifulSoup, Tag
from bs4.element import NavigableString
from markdownify import MarkdownConverter

_DROP = ("script", "style", "noscript", "template", "svg", "nav", "aside", "form", "iframe")
_DROP_ROLES = {"navigation", "banner", "contentinfo", "search", "complementary"}
_PAGE_CHROME = ("header", "footer")
_LANGUAGE = re.compile(r"^(?:language|lang)-([\w+#.-]+)$")
_BLANK_RUNS = re.compile(r"\n{3,}")
_FIRST_H1 = re.compile(r"^#[ \t]+([^\n]*)", re.MULTILINE)
_FENCE_RUN = re.compile(r"`{3,}")


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


def html_to_markdown(html: str) -> tuple[str, str]:
    """Convert a page; returns (title, Markdown body)."""
    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag else ""
    _strip_chrome(soup)
    mains = soup.find_all("main")
    root: Tag = mains[0] if len(mains) == 1 else (soup.body or soup)
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
    body = body.strip("\n")
    if not title:
        first = _FIRST_H1.search(body)
        title = first.group(1).strip(" \t#") if first else ""
    return title, body


def _strip_chrome(soup: BeautifulSoup) -> None:
    for tag in soup(["head", *_DROP]):
        tag.decompose()
    for tag in soup.find_all(role=True):
        if not tag.decomposed and str(tag.get("role", "")).lower() in _DROP_ROLES:
            tag.decompose()
    for tag in soup.find_all(_PAGE_CHROME):
        if not tag.decomposed and tag.find_parent(["article", "main"]) is None:
            tag.decompose()


def _escape_cell_pipes(root: Tag) -> None:
    for cell in root.find_all(["td", "th"]):
        for text in cell.find_all(string=True):
            if isinstance(text, NavigableString) and "|" in text:
                text.replace_with(text.replace("|", "\\|"))
