"""The keyword analyzer shared by every sparse scorer.

Technical text is full of identifiers that a plain ``str.split`` or a stemming
tokenizer destroys. Each identifier is indexed whole *and* in its parts, all
lower-cased::

    max_connections          -> max_connections, max, connections
    ERR_CONN_RESET           -> err_conn_reset, err, conn, reset
    TokenRefresher.rotate    -> tokenrefresher.rotate, tokenrefresher, token, refresher, rotate
    ledger-db.prod.internal  -> ledger-db.prod.internal, ledger-db, ledger, db, prod, internal
    HTTP 504                 -> http, 504
    --max-count              -> --max-count, max-count, max, count
    __getattr__              -> __getattr__, getattr

A command-line flag keeps its dashes and a Python-style ``__name__`` its underscores in
its whole form (``--limit`` is not the word "limit"), and is indexed in its parts too.

Plain words may be stemmed (Snowball English) and stopwords dropped; an identifier's
whole form is never stemmed or dropped, so an exact identifier query always finds it.
Queries go through the same analyzer as documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any

from lore.identifiers import MAX_TOKEN_CHARS as _MAX_TOKEN_CHARS
from lore.identifiers import TOKEN as _TOKEN
from lore.identifiers import identifier_kind, pasted_name
from retrieval.stopwords import ENGLISH_STOPWORDS

_OUTER_SEP = re.compile(r"[.\-/:@]")
_CAMEL = re.compile(r"[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_EXPANDED_MAX = 200_000  # distinct tokens an analyzer remembers the terms of


@dataclass(frozen=True)
class AnalyzerConfig:
    """Analyzer options; recorded with an index so a change triggers a rebuild."""

    stemming: bool = True
    stopwords: bool = True

    def key(self) -> str:
        """A short string identifying this configuration."""
        return f"v2-stem{int(self.stemming)}-stop{int(self.stopwords)}"


@dataclass
class Analyzer:
    """Turns text into index terms (see the module docstring for the rules)."""

    config: AnalyzerConfig = field(default_factory=AnalyzerConfig)
    _stemmer: Any = field(init=False, default=None, repr=False)
    # token as written → its terms: a corpus repeats its vocabulary, so most tokens of a
    # text were expanded before (bounded: emptied when full)
    _expanded: dict[str, tuple[str, ...]] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.config.stemming:
            import Stemmer

            self._stemmer = Stemmer.Stemmer("english")

    def tokens(self, text: str) -> list[str]:
        """All terms of ``text`` in order, with repeats (for term frequencies)."""
        found = _TOKEN.findall(text)
        parts = list(map(self._expanded.get, found))  # most tokens were seen before
        if None in parts:
            parts = [
                p if p is not None else self._expand(r) for p, r in zip(parts, found, strict=True)
            ]
        return list(chain.from_iterable(parts))  # type: ignore[arg-type]

    def query_terms(self, text: str) -> list[str]:
        """Distinct terms of a query, in first-seen order."""
        return list(dict.fromkeys(self.tokens(text)))

    def identifiers(self, text: str) -> tuple[list[str], float]:
        """The query's code-like identifiers as whole index terms, and their share of it.

        What counts is :func:`identifier_kind`'s one definition: ``E_LEDGER_LOCK_TIMEOUT``,
        ``pool.idle_timeout_ms``, ``TokenRefresher``, ``/etc/app.toml``, codes such as
        ``PAY-4012``, ``E11000`` or ``0x8007000E``, numbers of three or more digits,
        versions, ``--flags`` and ``name()`` calls; plain and hyphenated words
        (``read-only``, ``IL-10``) do not — unless the whole query is that one token and it
        is no ordinary word (:func:`pasted_name`: ``export-subst``, ``PYTHONPATH``,
        ``macOS``), which a user pasted to look it up. Each comes back as the
        term the index holds for it (the whole token, or a one-word call as analyzed). The
        share is the fraction of the query's words (leaf terms) that sit inside those
        identifiers: 1.0 for a bare identifier lookup, small for a sentence that merely
        mentions one.
        """
        found: dict[str, None] = {}
        leaves = inside = 0
        alone = _TOKEN.fullmatch(text.strip())
        if alone and pasted_name(alone.group()) and not identifier_kind(alone.group()):
            terms = self._expand(alone.group()[:_MAX_TOKEN_CHARS])
            return list(terms[:1]), 1.0
        for match in _TOKEN.finditer(text):
            raw = match.group()[:_MAX_TOKEN_CHARS]
            pieces = _split_identifier(raw)
            words = sum(
                1
                for piece, leaf in pieces
                if leaf and not (self.config.stopwords and piece in ENGLISH_STOPWORDS)
            )
            leaves += words
            before = text[max(0, match.start() - 2) : match.start()]
            if identifier_kind(raw, before, text[match.end() : match.end() + 1]):
                terms = self._expand(raw)
                if terms:
                    found.setdefault(terms[0], None)
                    inside += max(words, 1)
        return list(found), (inside / leaves if leaves else 0.0)

    def _expand(self, raw: str) -> tuple[str, ...]:
        raw = raw[:_MAX_TOKEN_CHARS]  # all the terms depend on
        terms = self._expanded.get(raw)
        if terms is None:
            terms = tuple(self._expand_now(raw))
            if len(self._expanded) >= _EXPANDED_MAX:
                self._expanded.clear()
            self._expanded[raw] = terms
        return terms

    def _expand_now(self, raw: str) -> list[str]:
        out: list[str] = []
        for piece, is_leaf in _split_identifier(raw):
            if not is_leaf:
                out.append(piece)
            elif not (self.config.stopwords and piece in ENGLISH_STOPWORDS):
                out.append(self._stem(piece))
        return out

    def _stem(self, word: str) -> str:
        if self._stemmer is None or not word.isalpha():
            return word
        return str(self._stemmer.stemWord(word))


@lru_cache(maxsize=200_000)
def _split_identifier(raw: str) -> tuple[tuple[str, bool], ...]:
    """Return (piece, is_leaf) pairs, lower-cased and de-duplicated, the whole first.

    A leaf is a piece that cannot be split further (a plain word or number); leaves may be
    stemmed or dropped as stopwords, compound pieces never are.
    """
    if raw.isalnum() and (
        not raw.isascii()
        or raw.isdigit()
        or (raw.isalpha() and (raw.islower() or raw.isupper() or raw[1:].islower()))
    ):  # one plain word or number, the common case: no piece to find
        return ((raw.lower(), True),)
    return _pieces(raw)


def _pieces(raw: str) -> tuple[tuple[str, bool], ...]:
    """:func:`_split_identifier` by its general rules (any token)."""
    core = raw.lstrip("-").strip("_")
    if core and core != raw:
        of_core = _split_identifier(core)  # --max-count, __init__: the whole, then the core's
        return ((raw.lower(), False), *of_core)
    pieces: dict[str, bool] = {}

    def add(piece: str, leaf: bool) -> None:
        key = piece.lower()
        if key and key not in pieces:
            pieces[key] = leaf

    def leaves_of(segment: str) -> list[str]:
        return _CAMEL.findall(segment) if segment.isascii() else [segment]

    outer_parts = [p for p in _OUTER_SEP.split(raw) if p]
    inner_parts = [i for o in outer_parts for i in o.split("_") if i]
    leaves = [leaf for i in inner_parts for leaf in leaves_of(i)]
    if len(leaves) <= 1:
        return ((raw.lower(), True),)
    add(raw, False)
    for outer in outer_parts:
        add(outer, len(leaves_of(outer)) <= 1 and "_" not in outer)
        for inner in outer.split("_"):
            if inner:
                add(inner, len(leaves_of(inner)) <= 1)
    for leaf in leaves:
        add(leaf, True)
    return tuple(pieces.items())


def analyze_all(analyzer: Analyzer, texts: Iterable[str]) -> list[list[str]]:
    """Analyze many texts (a convenience for engines that build in bulk)."""
    return [analyzer.tokens(text) for text in texts]
