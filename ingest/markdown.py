"""What a Markdown renderer never shows, taken out of a Markdown body before chunking.

A reader of a rendered page never sees HTML comments (authoring notes, lint and
formatter directives, metadata blocks such as ``<!-- YAML added: v1.2 -->``), link
reference definitions (``[label]: https://… "title"``, often a page's whole last
screen), or empty anchors (``<a id="x"></a>``); a reference link (``[text][label]``,
``[text][]``, a bare ``[label]``) shows its text. Indexed as written they become chunks
of URLs and markup that win searches for the words in them, as navigation chrome does
on HTML pages (:mod:`ingest.html` keeps a link's text and drops comments the same way).

The rules are CommonMark's: a definition starts a line (at most three spaces in), not
inside a paragraph, and its destination is one token (``[Note]: see below`` is text);
a footnote (``[^1]: …``) is content and stays; a reference link is text only when its
label is defined in the document (labels match case-insensitively, whitespace
collapsed). Fenced code blocks and code spans are left byte for byte, so an example of
any of these stays in its example. An unclosed comment is left as written. Only fences
are tracked: an indented code block keeps its definitions (four spaces in is code for
the definition rule too), but a comment inside one goes.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DEFINITION = re.compile(
    r" {0,3}\[(?!\^)((?:\\.|[^\[\]\\])+)\]:[ \t]*(?:<[^<>\n]*>|\S+)"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*"
)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
_EMPTY_ANCHOR = re.compile(r"<a\s+(?:id|name)\s*=\s*(?:\"[^\"]*\"|'[^']*')\s*>\s*</a>", re.I)
# a link's text, over lines but not across a blank one; code spans may hold brackets
_TEXT = r"((?:`[^`]*`|\\.|[^\[\]`\\\n]|\n(?![ \t]*\n))+)"
Replace = Callable[[re.Match[str]], str]
# [text][label], [text][] or [label]; a label right after "]" is part of a full reference
_REFERENCE = re.compile(rf"(?<!\])!?\[{_TEXT}\](?:\[{_TEXT}?\]|(?![(\[:]))")


def rendered_markdown(body: str) -> str:
    """``body`` without what its rendering hides (see the module docstring)."""
    blocks = _blocks(body)
    found = {i: _definitions(text.split("\n")) for i, (code, text) in enumerate(blocks) if not code}
    labels = {_label(match.group(1)) for defined in found.values() for _, match in defined}
    shown = "\n".join(
        text if code else _prose(text, {line for line, _ in found[i]}, labels)
        for i, (code, text) in enumerate(blocks)
    )
    return re.sub(r"\n{3,}", "\n\n", shown).strip("\n") if shown != body else body


def _blocks(body: str) -> list[tuple[bool, str]]:
    """``body`` as runs of lines: ``(True, a fenced code block)`` or ``(False, the rest)``."""
    blocks: list[tuple[bool, list[str]]] = []
    fence: str | None = None
    for line in body.split("\n"):
        marker = _FENCE.match(line)
        if fence is None and marker:
            fence = marker.group(1)
            blocks.append((True, [line]))
            continue
        if fence is not None:
            blocks[-1][1].append(line)
            if (
                marker
                and marker.group(1)[0] == fence[0]
                and len(marker.group(1)) >= len(fence)
                and not line.strip().strip(fence[0])
            ):
                fence = None
            continue
        if not blocks or blocks[-1][0]:
            blocks.append((False, []))
        blocks[-1][1].append(line)
    return [(code, "\n".join(lines)) for code, lines in blocks]


def _definitions(lines: list[str]) -> list[tuple[int, re.Match[str]]]:
    """Each link reference definition, with its line: one that starts a block or follows one."""
    found: list[tuple[int, re.Match[str]]] = []
    previous_blank = True
    for i, line in enumerate(lines):
        if (match := _DEFINITION.fullmatch(line)) and (
            previous_blank or (found and found[-1][0] == i - 1)
        ):
            found.append((i, match))
        previous_blank = not line.strip()
    return found


def _label(text: str) -> str:
    return " ".join(text.casefold().split())


def _prose(text: str, dropped: set[int], labels: set[str]) -> str:
    """A run of lines outside fenced code, its hidden parts (``dropped`` lines) taken out."""
    text = "\n".join(line for i, line in enumerate(text.split("\n")) if i not in dropped)
    # no comment opened after the last close is closed: only the text before it is searched
    closed = text.rfind("-->") + 3 if "-->" in text else 0
    text = _outside_code(text[:closed], _COMMENT, lambda match: "") + text[closed:]
    text = _outside_code(text, _EMPTY_ANCHOR, lambda match: "")
    if not labels:
        return text

    def reference(match: re.Match[str]) -> str:
        label = match.group(2) or match.group(1)
        return match.group(1) if _label(label) in labels else match.group()

    return _outside_code(text, _REFERENCE, reference)


def _outside_code(text: str, pattern: re.Pattern[str], replace: Replace) -> str:
    """``pattern``'s matches replaced, except those starting inside a code span."""
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]
    starts = [start for start, _ in spans]

    def outside(match: re.Match[str]) -> str:
        at = bisect_right(starts, match.start()) - 1
        if at >= 0 and match.start() < spans[at][1]:
            return match.group()
        return replace(match)

    return pattern.sub(outside, text)
