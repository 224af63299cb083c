"""Document titles as a gazetteer: find the documents a piece of text names.

A corpus whose documents have titles and mention each other (encyclopedia pages, runbooks
naming services, tickets naming components) is a graph in disguise: the page titled
"Ermengarde of Tours" is *the* page about the entity another page calls "Ermengarde of
Tours". This module finds those names in a question or in an extracted entity name.

Names are compared as word tuples (see :func:`name_tokens`), so case, accents,
punctuation, possessives and a plural ending do not matter ("Lothair Ii's" finds "Lothair II",
"Ryan Adams" finds "Ryan Adams" whatever the entity key made of it). A title is also
known by its head without a trailing qualifier ("Atomised (film)" -> "Atomised") and,
when that is at least two words, by the part before its first comma ("Beatrice I,
Countess of Burgundy" -> "Beatrice I").
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from graph.models import fold_accents
from retrieval.stopwords import ENGLISH_STOPWORDS

_WORD = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s\b")
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")
MAX_WORDS = 16

Form = tuple[str, ...]


def _fold(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def name_tokens(text: str) -> Form:
    """Words of ``text``: case and accents folded, possessive dropped, plural folded.

    Folded as entity keys are (``graph.models.entity_key``), so the key "georges mely"
    of "Georges Méliès" finds the page titled "Georges Méliès".
    """
    words = _WORD.findall(_POSSESSIVE.sub("", fold_accents(text)))
    return tuple(_fold(w) for w in words)


def title_forms(title: str) -> set[Form]:
    """The word tuples a title is known by (see the module docstring)."""
    forms = {name_tokens(title)}
    bare = _QUALIFIER.sub("", title)
    forms.add(name_tokens(bare))
    head = name_tokens(bare.split(",", 1)[0])
    if len(head) >= 2:
        forms.add(head)
    return {f for f in forms if f and len(f) <= MAX_WORDS and not set(f) <= ENGLISH_STOPWORDS}


@dataclass(frozen=True)
class TitleMatch:
    """A title form found in a text: where (word offset) and the chunks it titles."""

    form: Form
    start: int
    chunks: tuple[str, ...]


@dataclass(frozen=True)
class TitleIndex:
    """Title forms of the stored documents, each with the ids of the chunks it titles.

    ``position`` is a chunk's place in its document (0 for the first chunk).
    """

    chunks: Mapping[Form, tuple[str, ...]]
    position: Mapping[str, int] = field(default_factory=dict)
    longest: int = 0

    @classmethod
    def build(cls, titled_chunks: Iterable[tuple[str, str, str]]) -> TitleIndex:
        """Index ``(chunk id, document id, title)`` triples, each document's in order."""
        chunks: dict[Form, dict[str, None]] = defaultdict(dict)
        position: dict[str, int] = {}
        seen: dict[str, int] = defaultdict(int)
        for chunk_id, document_id, title in titled_chunks:
            position[chunk_id] = seen[document_id]
            seen[document_id] += 1
            for form in title_forms(title):
                chunks[form][chunk_id] = None
        return cls(
            {form: tuple(found) for form, found in chunks.items()},
            position,
            max((len(form) for form in chunks), default=0),
        )

    def __len__(self) -> int:
        return len(self.chunks)

    def find(self, text: str, part_min_words: int = 1) -> list[TitleMatch]:
        """Titles named in ``text``: longest first, never overlapping, in text order.

        A title shorter than ``part_min_words`` words is found only when it is the whole
        text: in an entity name, "King Norodom Suramarit" names the page "Norodom
        Suramarit", but "Holy Roman Empire" does not name the page "Empire".
        """
        words = name_tokens(text)
        taken = [False] * len(words)
        found: list[TitleMatch] = []
        for size in range(min(self.longest, len(words)), 0, -1):
            if size < part_min_words and size < len(words):
                break
            for start in range(len(words) - size + 1):
                if any(taken[start : start + size]):
                    continue
                form = words[start : start + size]
                chunks = self.chunks.get(form)
                if chunks is not None:
                    found.append(TitleMatch(form, start, chunks))
                    taken[start : start + size] = [True] * size
        return sorted(found, key=lambda m: m.start)
