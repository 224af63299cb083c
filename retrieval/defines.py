"""Where a chunk *defines* an identifier rather than only mentions it.

Documentation defines a name in a few places whatever the generator: a definition-list
term (``term`` then ``:   definition`` in the Markdown the loaders write), the first cell
of a table row, a heading that is the name, and the title of a page that is the name
(``git-write-tree(1)``: :func:`named_by`). :func:`defined_terms` reads the places of a
chunk (its text and heading path) and returns the identifiers found there, as the index
terms :meth:`retrieval.analyzer.Analyzer.identifiers` gives for a query, so the hybrid
searcher can prefer the defining chunk when a query names an identifier.
"""

from __future__ import annotations

import re

from retrieval.analyzer import Analyzer

_DEFINITION = re.compile(r"^:[ \t]{1,4}\S")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]+\|?$")


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
