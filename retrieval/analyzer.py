"""The keyword analyzer shared by every sparse scorer.

Technical text is full of identifiers that a plain ``str.split`` or a stemming
tokenizer destroys. Each identifier is indexed whole *and* in its parts, all
lower-cased::

    max_connections          -> max_connections, max, connections
    ERR_CONN_RESET           -> err_conn_reset, err, conn, reset
    TokenRefresher.rotate    -> tokenrefresher.rotate, tokenrefresher, token, refresher, rotate
    ledger-db.prod.internal  -> ledger-db.prod.internal, ledger-db, ledger, db, prod, internal
    HTTP 504                 -> http, 504

Plain words may be stemmed (Snowball English) and stopwords dropped; an identifier's
whole form is never stemmed or dropped, so an exact identifier query always finds it.
Queries go through the same analyzer as documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from retrieval.stopwords import ENGLISH_STOPWORDS

_TOKEN = re.compile(r"[0-9A-Za-z\u00C0-\uFFFF]+(?:[._\-/:@][0-9A-Za-z\u00C0-\uFFFF]+)*")
_OUTER_SEP = re.compile(r"[.\-/:@]")
_CAMEL = re.compile(r"[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_MAX_TOKEN_CHARS = 120
# snake_case, dotted.names, paths, host:port, user@host, camelCase / CamelCase inside a word
_CODE_LIKE = re.compile(r"[_./:@]|[a-z][A-Z]")
# upper-case codes with a number part: PAY-4012, INV-FEED-0917, E404
_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-?[0-9]{3,}")


@dataclass(frozen=True)
class AnalyzerConfig:
    """Analyzer options; recorded with an index so a change triggers a rebuild."""

    stemming: bool = True
    stopwords: bool = True

    def key(self) -> str:
        """A short string identifying this configuration."""
        return f"v1-stem{int(self.stemming)}-stop{int(self.stopwords)}"


@dataclass
class Analyzer:
    """Turns text into index terms (see the module docstring for the rules)."""

    config: AnalyzerConfig = field(default_factory=AnalyzerConfig)
    _stemmer: Any = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.config.stemming:
            import Stemmer

            self._stemmer = Stemmer.Stemmer("english")

    def tokens(self, text: str) -> list[str]:
        """All terms of ``text`` in order, with repeats (for term frequencies)."""
        out: list[str] = []
        for match in _TOKEN.finditer(text):
            out.extend(self._expand(match.group()))
        return out

    def query_terms(self, text: str) -> list[str]:
        """Distinct terms of a query, in first-seen order."""
        return list(dict.fromkeys(self.tokens(text)))

    def identifiers(self, text: str) -> tuple[list[str], float]:
        """The query's code-like identifiers as whole index terms, and their share of it.

        ``E_LEDGER_LOCK_TIMEOUT``, ``pool.idle_timeout_ms``, ``TokenRefresher``,
        ``/etc/app.toml`` and codes such as ``PAY-4012`` count; plain and hyphenated words
        (``read-only``, ``IL-10``) and bare numbers do not. The share is the fraction of
        the query's words (leaf terms) that sit inside those identifiers: 1.0 for a bare
        identifier lookup, small for a sentence that merely mentions one.
        """
        found: dict[str, None] = {}
        leaves = inside = 0
        for match in _TOKEN.finditer(text):
            raw = match.group()[:_MAX_TOKEN_CHARS]
            pieces = _split_identifier(raw)
            words = sum(
                1
                for piece, leaf in pieces
                if leaf and not (self.config.stopwords and piece in ENGLISH_STOPWORDS)
            )
            leaves += words
            if _CODE_LIKE.search(raw) or _ERROR_CODE.fullmatch(raw):
                found.setdefault(pieces[0][0], None)
                inside += words
        return list(found), (inside / leaves if leaves else 0.0)

    def _expand(self, raw: str) -> list[str]:
        out: list[str] = []
        for piece, is_leaf in _split_identifier(raw[:_MAX_TOKEN_CHARS]):
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
