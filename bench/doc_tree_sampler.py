"""Draw pasted identifiers from an HTML documentation tree, with the pages that define them.

    python -m bench.doc_tree_sampler --tree /usr/share/doc/git-doc --seed 27 --n 48
        --out bench/data/doc_trees/git/identifiers.jsonl [--under library --under howto]

Where a page *defines* something is read from the HTML alone, the same way for every
generator: the term of a definition list (``<dt>``), the first cell of a table row, or a
heading. Each such element is turned into the identifier a user would paste (see
:func:`identifier_of`); elements with no identifier (plain words, section numbers) are
left out, and so is an element that is wholly a link to another page (an index entry
points at a definition, it is not one). ``f`` and ``f()`` name the same thing. The
gold of an identifier is every page where it stands in one of those places; one standing
in more than ``--max-pages`` pages (``-v``, ``OPTIONS``) names nothing in particular and
is not drawn.

The draw is seeded and stratified: the candidates of each kind (``dt``, ``cell``,
``heading``) are sorted, shuffled with ``random.Random(seed)``, and taken in turn, one of
each kind after the other (a kind that ran out is passed over), until ``--n`` are drawn. One JSON
object per line: ``{"id", "query", "kind", "gold", "element"}``; gold paths are relative
to the tree.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from bs4 import BeautifulSoup, Tag

KINDS = ("dt", "cell", "heading")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PERMALINKS = "¶#§🔗"
_TOKEN = re.compile(
    r"--?[A-Za-z0-9][\w-]*"  # options: -m, --replace-all
    r"|\$?[A-Za-z_0-9][\w.:/$-]*(?:\(\w{0,2}\))?"  # names, dotted paths, codes, calls, man(1)
)
_SECTION_NUMBER = re.compile(r"^(?:[A-Z]|\d+)(?:\.\d+)*\.?$")
_LOWER_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_MAN_SECTION = re.compile(r"\(\d\w?\)$")
_HUMP = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]{2}")
_NO = re.compile(r"\[no-\]")


def is_identifier(token: str, kind: str = "dt") -> bool:
    """Whether ``token`` is something a user pastes rather than a word of prose.

    An option (``-x``, ``--long``), a call (``name()``), or a name holding what no English
    word holds: one of ``_ . : / $``; digits and letters in one piece (``E11000``,
    ``p4merge``; at least three characters); a capital after a small letter
    (``colorMoved``) or two capitals before two small letters (``OSError``); capitals and
    digits joined by ``-`` (``ORA-00060``); small words joined by ``-`` (``git-config``).
    A word of four or more capitals (``PYTHONPATH``) counts in a definition list or a
    table, not in a heading, where it is a man page's section name (``OPTIONS``).
    Section numbers and capitalised hyphenated prose (``Multi-Threaded``) are not.
    """
    if len(token) < 2 or len(token) > 80 or _SECTION_NUMBER.match(token):
        return False
    if token.startswith("-"):
        return True
    if token.endswith("()"):
        return len(token) > 4 or token[0] == "_"
    core = token.strip(".:/-")
    if not core:
        return False
    if any(ch in core for ch in "_.:/$"):
        return any(ch.isalpha() for ch in core)
    parts = [p for p in core.split("-") if p]
    if len(parts) > 1:
        if all(p.isupper() or p.isdigit() for p in parts):
            return any(p.isdigit() for p in parts) and any(p.isalpha() for p in parts)
        if all(p.islower() or p.isdigit() for p in parts):
            return any(p.isalpha() for p in parts)
    for part in parts:
        if len(part) >= 3 and any(c.isdigit() for c in part) and any(c.isalpha() for c in part):
            return True
        if _HUMP.search(part):
            return True
    return kind != "heading" and len(core) >= 4 and core.isalpha() and core.isupper()


def identifier_of(text: str, kind: str = "dt") -> str | None:
    """The identifier an element's text names, as a user would paste it, or None.

    The first identifier-like token of the text wins; a call keeps ``()`` and drops its
    arguments (``os.open(path, flags)`` → ``os.open()``; in a definition list a small-letter
    name before `` (`` too: ``y = sum (x)`` → ``sum()``), an option drops its value
    (``--format=<fmt>`` → ``--format``), a man-page section goes (``git-log(1)``).
    """
    clean = " ".join(_NO.sub("", text.replace("\u200b", "")).split()).strip(_PERMALINKS + " ")
    for match in _TOKEN.finditer(clean):
        token = match.group(0)
        after = clean[match.end() : match.end() + 1]
        if _MAN_SECTION.search(token):
            token = _MAN_SECTION.sub("", token)
        elif token.endswith(")") and "(" in token:
            token = token[: token.index("(")] + "()"
        elif (after == "(" and not token.startswith("-")) or (
            kind == "dt"
            and clean[match.end() : match.end() + 2] == " ("
            and _LOWER_NAME.match(token)  # Texinfo's "y = sum (x)"
        ):
            token += "()"
        token = token.rstrip(".,:;")
        if token.startswith("-"):
            token = token.split("=")[0]
        if is_identifier(token, kind):
            return token
    return None


def _links_elsewhere(element: Tag, page: str) -> bool:
    """True when all the element's text sits inside links to other pages."""
    text = element.get_text("", strip=True)
    linked = ""
    for anchor in element.find_all("a", href=True):
        href = str(anchor["href"])
        target = href.split("#", maxsplit=1)[0]
        if target and not target.endswith(Path(page).name):
            linked += anchor.get_text("", strip=True)
    return bool(text) and len(linked) >= len(text.strip(_PERMALINKS))


def _elements(soup: BeautifulSoup) -> Iterator[tuple[str, Tag]]:
    for dt in soup.find_all("dt"):
        yield "dt", dt
    for row in soup.find_all("tr"):
        cell = row.find(["td", "th"])
        if isinstance(cell, Tag):
            yield "cell", cell
    for heading in soup.find_all(_HEADINGS):
        yield "heading", heading


def gold_key(ident: str) -> str:
    """What two identifiers share when they name the same thing (``f`` and ``f()``)."""
    return ident[:-2] if ident.endswith("()") else ident


Found = dict[str, dict[str, set[str]]]
Forms = dict[str, dict[str, str]]


def definitions(tree: Path, under: list[str]) -> tuple[Found, Forms]:
    """Gold key → kind → pages (relative paths) where it stands in a defining place.

    Also gold key → kind → the identifier as first written in an element of that kind.
    """
    found: Found = defaultdict(lambda: defaultdict(set))
    forms: Forms = defaultdict(dict)
    for file in sorted(tree.rglob("*.html")):
        page = file.relative_to(tree).as_posix()
        if under and not any(page.startswith(prefix.rstrip("/") + "/") for prefix in under):
            continue
        soup = BeautifulSoup(file.read_text(encoding="utf-8", errors="replace"), "html.parser")
        for kind, element in _elements(soup):
            if _links_elsewhere(element, page):
                continue
            ident = identifier_of(element.get_text(""), kind)
            if ident:
                found[gold_key(ident)][kind].add(page)
                forms[gold_key(ident)].setdefault(kind, ident)
    return found, forms


def draw(found: Found, forms: Forms, seed: int, n: int, max_pages: int) -> list[dict[str, object]]:
    """The seeded, stratified draw described in the module docstring."""
    rng = random.Random(seed)
    pools: dict[str, list[str]] = {}
    for kind in KINDS:
        pool = sorted(
            ident
            for ident, kinds in found.items()
            if kind in kinds and len(set().union(*kinds.values())) <= max_pages
        )
        rng.shuffle(pool)
        pools[kind] = pool
    taken: dict[str, str] = {}
    while len(taken) < n and any(pools.values()):
        for kind in KINDS:
            while pools[kind] and len(taken) < n:
                ident = pools[kind].pop()
                if ident not in taken:
                    taken[ident] = kind
                    break
    rows: list[dict[str, object]] = []
    for number, (ident, kind) in enumerate(taken.items(), 1):
        kinds = found[ident]
        rows.append(
            {
                "id": f"id{number:02d}",
                "query": forms[ident][kind],
                "kind": kind,
                "gold": sorted(set().union(*kinds.values())),
                "element": {k: sorted(v) for k, v in sorted(kinds.items())},
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    """Write the draw as JSON Lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--max-pages", type=int, default=5)
    parser.add_argument("--under", action="append", default=[], help="only pages under this")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    found, forms = definitions(args.tree, args.under)
    rows = draw(found, forms, args.seed, args.n, args.max_pages)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    by_kind = {k: sum(r["kind"] == k for r in rows) for k in KINDS}
    print(json.dumps({"candidates": len(found), "drawn": len(rows), "by_kind": by_kind}))


if __name__ == "__main__":
    main()
