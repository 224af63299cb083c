"""Offline entity and relation extraction for technical text: no model, deterministic.

Entities are what an operator would look up: identifiers (error codes, HTTP statuses,
config keys, function and metric names, hostnames, paths), service names (kebab-case
words like ``payments-api``) and capitalized multi-word names ("Incident Commander",
"Payments Database"). Each gets a type guessed from its shape and context, and the
first sentence it appears in as description. Relations link entities that occur in the
same sentence; their weight counts the sentences that pair them within the chunk.
"""

from __future__ import annotations

import re
from collections import Counter

from graph.models import EntityMention, RelationMention, entity_key

VERSION = "2"  # bump on any change to what is extracted: stored graphs are then redone
# A full stop after a lone capital is an initial ("Albert S. Rogell"), not a sentence end.
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)\s+|\n{2,}|\n(?=\s*(?:[-*]|\d+\.)\s)")
_HTTP = re.compile(r"\bHTTP[ /]?([1-5]\d\d)\b")
_TOKEN = re.compile(r"(?<![\w/.-])[/~]?[A-Za-z0-9][\w.\-/:]*[A-Za-z0-9_]")
_WORD = re.compile(r"[^\W\d_][\w'\u2019.]*|\S")
_HOST = re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+){2,}$")
_ERROR = re.compile(r"^(?:[A-Z][A-Z0-9]*[_-])+[A-Z0-9]+$|^[A-Z]{2,}-?\d{3,}$")
_CONNECTORS = {
    *("of", "the", "de", "del", "der", "du", "von", "van", "zu", "la", "le", "da", "di", "dos"),
    *("bin", "ibn", "mac"),
}
_METRIC_SUFFIX = ("_seconds", "_total", "_bytes", "_count", "_ratio", "_ms", "_lag_seconds")
_STOP_CAPS = {
    "The",
    "This",
    "That",
    "When",
    "If",
    "Use",
    "For",
    "See",
    "Do",
    "Not",
    "After",
    "Before",
    "Open",
    "Check",
    "Record",
    "Escalate",
    "Shed",
    "What",
    "How",
    "Why",
}


def classify(token: str, sentence: str) -> str | None:
    """The entity type of an identifier-looking token, or None for ordinary words."""
    bare = token.rstrip("()")
    if bare.startswith(("/", "~/")) and "/" in bare[1:]:
        return "path"
    if _ERROR.match(bare):
        return "error_code"
    if _HOST.match(bare):
        return "hostname"
    if "_" in bare and "." not in bare and bare.islower() and bare.endswith(_METRIC_SUFFIX):
        return "metric"
    if (
        re.fullmatch(r"[A-Z][A-Za-z0-9]*\.[a-z_][A-Za-z0-9_]*", bare)
        or token.endswith("()")
        or ("_" in bare and bare.islower() and f"{bare}(" in sentence)
    ):
        return "function"
    if re.fullmatch(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+", bare) or ("_" in bare and bare.islower()):
        return "config_key"
    if re.fullmatch(r"(?:[A-Z][a-z0-9]+){2,}", bare):
        return "class"
    if re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+", bare):
        return "service"
    return None


def extract(text: str, title: str = "") -> tuple[list[EntityMention], list[RelationMention]]:
    """Entities and co-occurrence relations of one chunk (deterministic order)."""
    counts: Counter[str] = Counter()
    first: dict[str, tuple[str, str, str]] = {}  # key -> (name, type, sentence)
    pairs: Counter[tuple[str, str]] = Counter()
    pair_sentence: dict[tuple[str, str], str] = {}
    for sentence in _sentences(text):
        found = _entities_in(sentence)
        for key, (name, kind) in found.items():
            counts[key] += 1
            first.setdefault(key, (name, kind, sentence))
        keys = sorted(found)
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                pairs[(a, b)] += 1
                pair_sentence.setdefault((a, b), sentence)
    if title.strip():
        # The document's title is an entity of every chunk, linked to what the chunk
        # mentions: "Teutberga" -- "Lothair II" connects a question about one to the other.
        key = entity_key(title)
        counts[key] += 1
        first.setdefault(key, (title.strip(), "title", _clip(text.strip().split("\n")[0])))
        for other in sorted(k for k in counts if k != key):
            pair = (key, other) if key < other else (other, key)
            pairs[pair] += 1
            pair_sentence.setdefault(pair, f"mentioned in {title.strip()}")
    entities = [
        EntityMention(first[k][0], first[k][1], _clip(first[k][2]), counts[k])
        for k in sorted(counts)
    ]
    relations = [
        RelationMention(first[a][0], first[b][0], float(n), _clip(pair_sentence[(a, b)]))
        for (a, b), n in sorted(pairs.items())
    ]
    return entities, relations


def _sentences(text: str) -> list[str]:
    parts = (" ".join(part.split()) for part in _SENTENCE.split(text))
    return [part for part in parts if part]


def _entities_in(sentence: str) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for match in _HTTP.finditer(sentence):
        name = f"HTTP {match.group(1)}"
        found.setdefault(entity_key(name), (name, "http_status"))
    for match in _TOKEN.finditer(sentence):
        token = match.group().rstrip(".:")
        kind = classify(token, sentence)
        if kind is not None and len(token) >= 3:
            found.setdefault(entity_key(token), (token.rstrip("()"), kind))
    for name, _ in _names(sentence):
        found.setdefault(entity_key(name), (name, "name"))
    return found


def _names(sentence: str) -> list[tuple[str, bool]]:
    """Runs of capitalized words ("Lothair II", "Boso the Elder").

    A lone capitalized word counts too, unless it starts the sentence.
    """
    out: list[tuple[str, bool]] = []
    run: list[str] = []
    run_start = 0

    def close() -> None:
        while run and run[-1] in _CONNECTORS:
            run.pop()
        if run:
            words = [*run[:-1], re.sub(r"['\u2019]s$", "", run[-1].rstrip("."))]
            if run_start == 0 and words[0] in _STOP_CAPS:
                words = words[1:]
            if len(words) >= 2 or (words and run_start > 0 and len(words[0]) >= 4):
                out.append((" ".join(words), run_start == 0))
        run.clear()

    for index, match in enumerate(_WORD.finditer(sentence)):
        word = match.group()
        if word[0].isupper() and word[0].isalpha():
            if not run:
                run_start = index
            run.append(word)
            if word.endswith(".") and len(word) > 3:
                close()
        elif run and word in _CONNECTORS:
            run.append(word)
        else:
            close()
    close()
    return out


def _clip(sentence: str, limit: int = 240) -> str:
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
