"""Where a chunk *defines* an identifier rather than only mentions it.

Documentation defines a name in a few places whatever the generator: a definition-list
term (``term`` then ``:   definition`` in the Markdown the loaders write), the first cell
of a table row, a heading that is the name, and the title of a page that is the name
(``git-write-tree(1)``: :func:`named_by`). :func:`defined_terms` reads the places of a
chunk (its text and heading path) and returns the identifiers found there, as the index
terms :meth:`retrieval.analyzer.Analyzer.identifiers` gives for a query, so the hybrid
searcher can prefer the defining chunk when a query names an identifier.

A qualified name (``CharSequenceUtils.toCharArray``, ``pool.idle_timeout_ms``) is mostly
defined without its qualifier: an API reference's class page has a heading ``toCharArray``,
a settings page a ``[pool]`` section whose table's first cells are ``idle_timeout_ms``.
:func:`defines_member` says a chunk defines one when a defining place names the member
and the page title or the headings above it name the qualifier.
"""

from __future__ import annotations

import re

from retrieval.analyzer import Analyzer

_DEFINITION = re.compile(r"^:[ \t]{1,4}\S")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]+\|?$")
_OPENING_NAME = re.compile(r"\s*([^\W\d][\w$]*)")
_WORD = re.compile(r"[^\W\d][\w$.:#-]*")
_QUALIFIERS = re.compile(r"\.|::|#")
_QUALIFIED = re.compile(r"[^\W\d][\w$]*(?:(?:\.|::|#)[^\W\d][\w$]*)+")


def defining_spans(text: str, heading: str) -> list[str]:
    """The texts in defining places: the last heading, definition terms, first cells."""
    spans = [heading.rsplit(" > ", maxsplit=1)[-1]] if heading else []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#"):
            spans.append(stripped.lstrip("#"))
        elif stripped.startswith("|") and not _TABLE_RULE.match(stripped):
            spans.append(stripped.strip("|").split("|")[0].replace("\\", ""))
        elif (
            stripped
            and index + 1 < len(lines)
            and _DEFINITION.match(lines[index + 1])
            and not _DEFINITION.match(line)
        ):
            spans.append(stripped)
    return spans


def named_by(analyzer: Analyzer, title: str, wanted: set[str]) -> bool:
    """Whether a page's title is one of the ``wanted`` identifiers (and a little more).

    ``git-write-tree(1)``, ``os.path — Common pathname manipulations``: the title's first
    identifier is the identifier, so the page is its own definition.
    """
    found = analyzer.identifiers(title.replace("`", " "))[0]
    return bool(found) and found[0] in wanted


def defined_terms(analyzer: Analyzer, text: str, heading: str) -> set[str]:
    """The identifiers (as index terms) the chunk defines."""
    found: set[str] = set()
    for span in defining_spans(text, heading):
        found.update(analyzer.identifiers(span.replace("`", " "))[0])
    return found


def qualified(identifier: str) -> tuple[str, str] | None:
    """(the qualifier's last part, the member) of a qualified name, lower-cased; else None.

    ``charsequenceutils.tochararray`` → ``("charsequenceutils", "tochararray")``,
    ``threadutils.threadpredicate.test`` → ``("threadpredicate", "test")``; a version, a
    path or a file name (``3.11.2``, ``/etc/app.toml``) is no qualified name.
    """
    if not _QUALIFIED.fullmatch(identifier):
        return None
    parts = _QUALIFIERS.split(identifier.lower())
    return parts[-2], parts[-1]


def defines_member(title: str, text: str, heading: str, qualifier: str, member: str) -> bool:
    """Whether the chunk defines ``member`` where its page or headings name ``qualifier``.

    A defining place (:func:`defining_spans`) must open with the member's name (a heading
    ``toCharArray``, a term ``join(path, *paths)``; not an option ``--depth``), and the
    page title or a heading above the chunk's own must hold the qualifier as a word or a
    qualified word's part (``CharSequenceUtils (… API)``, ``ThreadUtils.ThreadPredicate``;
    not a piece of ``git-pack-objects(1)``).
    """
    if not any(
        (first := _OPENING_NAME.match(span.replace("`", " "))) and first.group(1).lower() == member
        for span in defining_spans(text, heading)
    ):
        return False
    above = heading.rsplit(" > ", maxsplit=1)[0] if " > " in heading else ""
    words = _WORD.findall(f"{title}\n{above}".lower())
    return any(qualifier in _QUALIFIERS.split(word) for word in words)
