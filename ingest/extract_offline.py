"""Offline entity and relation extraction for technical text: no model, deterministic.

Entities are what an operator would look up: identifiers (error codes, HTTP statuses,
config keys, function and metric names, hostnames, paths, ``CamelCase`` and
``camelCase`` names, kebab-case names marked as code) and capitalised names ("Incident
Commander", "Lothair II"). The text is read through the shared splitter
(:mod:`lore.sentences`), so the kind of each line is known and precision comes from
where a word stands rather than from a list of one corpus's words:

- a field label (``Severity: critical``), a table row, a heading or a code block never
  yields a *name* — title case there is layout, not evidence; identifiers count
  everywhere, in the chunk's own heading (and an outer heading that is one identifier);
- a capitalised word opening a sentence or list item is not a name on its own, and a
  capitalised word the same chunk's prose also writes in lower case (a word of its own,
  outside code, paths and commands) is an ordinary word; so is a
  lone capitalised word ("Output", "Actually") that its whole *document* writes in lower
  case more often than capitalised inside a sentence (:func:`document_words`), while a
  name the document capitalises ("Windows", "Python") stays one;
- template and placeholder spans (``{{ $labels.x }}``, ``<image-name>``, ``${VAR}``) and
  abbreviations ("e.g.") are markup, not entities;
- a type comes from the token's shape (metric suffix, call parentheses, dotted key,
  path, host — whose last label has letters, so ``4.2.1`` is a section number and no
  entity; a letter minus a number, ``n-1`` or ``N-2``, is arithmetic, in code or not)
  and use (``$NAME`` or ``NAME=`` is an ``env_var``, not an error code; an
  upper-case constant is an ``error_code`` only when numbered like ``PAY-5031``, named
  with an error part like ``ERR_CONN_RESET``, or used among words of errors — ``SHA-1``
  and ``UTF-16`` are not) or stays generic: ``identifier`` for code-like words, ``name``
  for names; a capitalised word with a file's extension (``Node.js``, ``Python.h``) is a
  ``name``, not a ``Class.method`` function;
- a code block's own names (an example's variables and helpers: ``foo_instance``,
  ``do_bar()``) count only when the chunk's prose names them too; what is a thing of its
  own wherever it stands (an error code, an HTTP status, a metric, a path, a host, an
  environment variable, a kebab-case name such as a command's ``openshift-storage``)
  counts in code as well;
- a kebab-case compound of function words (``built-in``, ``one-by-one``), with an
  English prefix (``non-linear``) or, unless marked as code, of words its document's
  prose also writes on their own (``four-digit``, ``gdb-like``) or of two common words
  of general English (``top-level``, ``eye-pleasing``: wordfreq's packaged frequencies)
  is English, a heading marks its words as code only when it is one identifier, and a
  clause after a colon or dash opens like a sentence (a definition list's description).

Each entity gets the first sentence it appears in as description. Relations link
entities of one sentence; their weight counts the sentences that pair them in the chunk.
The chunk's title (an entity of its own) and heading identifiers relate to everything
the chunk mentions.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from graph.models import EntityMention, RelationMention, entity_key
from lore.sentences import Segment, segments

VERSION = "26"  # bump on any change to what is extracted: stored graphs are then redone
_HTTP = re.compile(r"\bHTTP[ /]?([1-5]\d\d)\b")
_TOKEN = re.compile(r"(?<![\w/.$-])[/~]?[A-Za-z0-9][\w.\-/:]*[A-Za-z0-9_]")
# a word (hyphenated parts stay one: "Built-in", "Jean-Luc"), or any other character
_WORD = re.compile(r"[^\W\d_][\w'\u2019.]*(?:-[^\W\d_][\w'\u2019.]*)*|\S")
_HOST = re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+){1,}\.[a-z][a-z0-9-]*[a-z]$")
# a capitalised name and a file extension: not Class.method
_NAMED_FILE = re.compile(
    r"[A-Z][A-Za-z0-9]*\.(?:js|mjs|cjs|jsx|ts|tsx|py|rb|rs|php|pl|sh|java|kt|swift|c|h|cpp"
    r"|md|txt|json|ya?ml|toml|xml|html?|css|cfg|ini|conf|csv|exe|dll|so)"
)
_NUMBERED = re.compile(r"^\d+(?:\.\d+)+\.?$")  # 4.2.1: a section or version number
# n-1, N-2, x-10, 3-d: a letter and a number joined by a hyphen are an expression
_LETTER_AND_NUMBER = re.compile(r"^(?:[A-Za-z]-\d+|\d+-[A-Za-z])$")
_ERROR = re.compile(r"^(?:[A-Z][A-Z0-9]*[_-])+[A-Z0-9]+$|^[A-Z]{2,}-?\d{3,}$")
_NUMBERED_CODE = re.compile(r"^[A-Z]{2,}-?\d{3,}$")  # PAY-5031, ORA-00060: a numbered code
# what makes an upper-case constant an error code: a part of its name or a word beside it
_ERROR_PART = re.compile(r"(?:^|[_-])(?:E?ERR|ERROR|FAIL|FAILED|FAILURE|EXC|EXCEPTION)(?:[_-]|$)")
_ERROR_WORDS = re.compile(
    r"\b(?:errors?|exceptions?|fail(?:s|ed|ure)?|raised?|errno|exit (?:code|status))\b",
    re.IGNORECASE,
)
_MARKUP = re.compile(
    r"\{\{.*?\}\}|\{%.*?%\}|\$\{[^}]*\}|\$\(|<[^<>\s][^<>]*>|\]\([^)]*\)"
    r"|\[[A-Z][A-Za-z ]{0,30}\](?!\()|\([A-Z][a-z]+\)"  # [MUSIC], (Laughter): directions
)
_CODE_SPAN = re.compile(r"`([^`]+)`")
_MANUAL_SECTION = re.compile(r"\([1-9][a-z]{0,3}\)")  # git-log(1), crontab(5), printf(3p)
_ONE_IDENTIFIER = re.compile(r"`?[\w.\-/:]+`?(?:\(\d*\))?")
# English prefixes: "non-linear", "re-read", "pre-built" are words, not names with a short part
_PREFIXES = frozenset({"non", "re", "pre", "co", "sub", "un", "anti", "semi", "self", "multi"})
# what a code block names that is a thing of its own even when no prose names it
_HOST_SUFFIXES = frozenset(
    {
        *("com", "org", "net", "edu", "gov", "mil", "int", "info", "biz", "io", "dev", "app"),
        *("cloud", "site", "online", "tech", "local", "localdomain", "internal", "intranet"),
        *("lan", "corp", "home", "private", "arpa", "test", "example", "invalid", "svc"),
    }
)
_CODE_KINDS = frozenset({"error_code", "http_status", "env_var", "metric", "hostname", "path"})
_CLAUSE_OPENERS = frozenset({":", ";", "\u2014", "\u2013", "|"})
_INITIAL = re.compile(r"[A-Z]\.")  # "Eric S. Raymond", or the end of "written in C."
_CONNECTORS = {
    *("of", "the", "de", "del", "der", "du", "von", "van", "zu", "la", "le", "da", "di", "dos"),
    *("bin", "ibn", "mac"),
}
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "we",
        "you",
        "they",
        "he",
        "she",
        "i",
        "our",
        "your",
        "their",
        "my",
        "his",
        "her",
        "and",
        "or",
        "but",
        "if",
        "then",
        "when",
        "while",
        "where",
        "what",
        "which",
        "who",
        "why",
        "how",
        "all",
        "any",
        "each",
        "every",
        "some",
        "no",
        "not",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "as",
        "of",
        "into",
        "onto",
        "over",
        "under",
        "after",
        "before",
        "during",
        "since",
        "until",
        "via",
        "per",
        "do",
        "does",
        "did",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "can",
        "could",
        "should",
        "would",
        "will",
        "may",
        "must",
        "also",
        "only",
        "please",
        "see",
        "use",
        # the rest of English's closed classes: conjunctions, prepositions, pronouns and
        # determiners (grammar, not any corpus's words)
        *("although", "though", "once", "unless", "because", "whether", "than", "so"),
        *("there", "here", "about", "out", "up", "off", "down", "between", "without"),
        *("within", "through", "upon", "against", "both", "either", "neither", "such"),
        *("other", "another", "same", "more", "most", "less", "many", "much", "few"),
        *("us", "him", "them", "me", "has", "have", "had", "shall", "might", "yet"),
    ]
)
_METRIC_SUFFIX = ("_seconds", "_total", "_bytes", "_count", "_ratio", "_ms", "_bucket", "_sum")


@dataclass(frozen=True, slots=True)
class DocumentWords:
    """What a whole document says of its words, for the extraction of each of its chunks.

    ``lower``: the words its prose writes in lower case; ``ordinary``: those it writes in
    lower case more often than capitalised inside a sentence; ``recurring``: the
    kebab-case words its prose writes more than once (a term, not a one-off compound);
    ``named``: the words it capitalises inside a sentence more than once ("on Windows"
    again and again); ``numbered``: the capitalised words it follows by a number more
    often than not, by different numbers (:func:`_labels_parts`: "see Section 6.5",
    "Section 4.2", the label of a document's numbered parts, while "Python 3.11" beside
    "Python" alone is a name);
    ``arguments``: the snake_case names its code passes or declares as a call's
    arguments (``gpointer user_data);``, ``f (new_val)``, ``run(args, capture_output=True)``),
    parameters, not settings;
    ``read``: whether a document was read at all (not
    :data:`NO_DOCUMENT_WORDS`). Built from the document alone (:func:`document_words`),
    so a chunk's extraction never depends on which other documents are ingested or
    extracted with it.
    """

    lower: frozenset[str] = frozenset()
    ordinary: frozenset[str] = frozenset()
    recurring: frozenset[str] = frozenset()  # kebab-case words its prose writes twice or more
    named: frozenset[str] = frozenset()
    numbered: frozenset[str] = frozenset()
    arguments: frozenset[str] = frozenset()
    read: bool = False


NO_DOCUMENT_WORDS = DocumentWords()
# a word, or a token joined by ``-./:`` (``rook-ceph``, ``os.path``: no word of its own)
_CASED_WORD = re.compile(r"[^\W\d_][\w'\u2019]*(?:[-./:]\w[\w'\u2019]*)*|[,;(]")
# a capitalised word, and the number after it if any ("Section 6.5", "Appendix B.4")
_LABEL_NUMBER = re.compile(
    r"(?<![\w.\-/])([A-Z][a-z]+)\b(?![\-./'\u2019]\w)(?:\s+(\d[\d.]*|[A-Z]\.\d[\d.]*))?"
)


# a call or a declaration and its arguments: "g_file_read (GFile *file, …)", "f(x, y=1)"
_CALL = re.compile(r"[A-Za-z_][\w.]*[ \t]*\(([^()]*)\)")
# the name an argument ends with, before its default: "gpointer user_data", "dir_fd=None"
_ARGUMENT = re.compile(r"([a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9])\s*(?:\[\s*\])?\s*(?:=[^=].*)?$", re.S)


def _arguments(code: str) -> Iterable[str]:
    """The snake_case names ``code`` passes or declares as arguments of a call."""
    for call in _CALL.finditer(code):
        for raw in call.group(1).split(","):
            piece = raw.strip()
            if piece.startswith("*"):
                continue  # "gboolean (*can_mount) (…)": a function pointer's own name
            found = _ARGUMENT.search(piece)
            if found and piece[found.start() - 1 : found.start()] not in ("'", '"'):
                yield found.group(1)  # not a quoted string's end: "set('work_mem')"


def document_words(texts: Iterable[str]) -> DocumentWords:
    """The :class:`DocumentWords` of a document given as its texts (its chunks, in order).

    Code blocks are left out: a command's ``python`` says nothing of the prose's
    "Python". A capitalised word counts as *inside a sentence* when the word before it
    is lower case or a comma ("runs on Windows", "input, Output"); a sentence's or
    heading's first word is capitalised by grammar and counts for neither side.
    """
    lower: Counter[str] = Counter()
    inside: Counter[str] = Counter()
    kebab: Counter[str] = Counter()
    capital: Counter[str] = Counter()
    numbers: defaultdict[str, list[str]] = defaultdict(list)
    arguments: set[str] = set()
    for text in texts:
        for segment in segments(text):
            if segment.kind == "code":
                arguments.update(_arguments(segment.text))
                continue
            for span in _CODE_SPAN.findall(segment.text):
                arguments.update(_arguments(span))
            prose = _CODE_SPAN.sub(" ; ", segment.text)
            for match in _LABEL_NUMBER.finditer(prose):
                label = match.group(1).lower()
                capital[label] += 1
                if match.group(2):
                    numbers[label].append(match.group(2).rstrip("."))
            before = ""
            for match in _CASED_WORD.finditer(prose):
                word = match.group()
                if word.isalpha() and word.islower() and len(word) >= 2:
                    lower[word] += 1
                elif "-" in word and word.islower():
                    kebab[word] += 1
                elif word[:1].isupper() and word[1:].islower() and _mid_sentence(before):
                    inside[word.lower()] += 1
                before = word
    return DocumentWords(
        frozenset(lower),
        frozenset(w for w, n in lower.items() if n > inside[w]),
        frozenset(w for w, n in kebab.items() if n > 1),
        frozenset(w for w, n in inside.items() if n > 1),
        frozenset(w for w, found in numbers.items() if _labels_parts(found, capital[w])),
        frozenset(arguments),
        read=True,
    )


def _labels_parts(numbers: Sequence[str], written: int) -> bool:
    """Whether a word written ``written`` times, ``numbers`` of them numbered, is a label.

    A label numbers the parts of a document ("Section 6.5", "Section 4.2"): it is
    followed by a number more often than not, and by different numbers. A name with a
    version ("Python 3.11" again and again) repeats its number, or stands alone too;
    one numbered mention ("Created using Sphinx 5.3.0") says nothing either way.
    """
    return len(numbers) > 1 and 2 * len(numbers) > written and 2 * len(set(numbers)) > len(numbers)


def _mid_sentence(before: str) -> bool:
    """Whether a word after ``before`` stands inside a sentence (after a lower-case word)."""
    return before in (",", "(") or (before.isalpha() and before.islower())


def classify(
    token: str, sentence: str, *, code: bool = False, words: DocumentWords = NO_DOCUMENT_WORDS
) -> str | None:
    """The entity type of an identifier-looking token, or None for ordinary words.

    ``code`` says the token is marked as code (backticks, a code block, a heading or a
    title), which is the evidence a kebab-case word is a name rather than a compound;
    ``words`` are its document's (:func:`document_words`).
    """
    bare = token.rstrip("()")
    if _NUMBERED.match(bare):
        return None  # a section number names no concept; it is no host either
    if _LETTER_AND_NUMBER.match(bare):
        return None  # "n-1", "x(i-10)", "the first N-1 terms": arithmetic, in code or not
    if bare.startswith(("/", "~/")) and "/" in bare[1:] and len(bare) > 3:
        return "path"
    if _ERROR.match(bare):
        return _upper_case_kind(bare, sentence)
    if _HOST.match(bare) and _host_suffix(bare):
        return "hostname"
    if "_" in bare and "." not in bare and bare.islower() and bare.endswith(_METRIC_SUFFIX):
        return "metric"
    if _NAMED_FILE.fullmatch(bare) and not token.endswith("()"):
        return "name"  # Node.js, Chart.js, Setup.py: a file, or a product named after one
    if (
        re.fullmatch(r"[A-Z][A-Za-z0-9]*\.[a-z_][A-Za-z0-9_]*", bare)
        or (token.endswith("()") and len(bare) > 1)
        or (
            "_" in bare
            and bare.islower()
            and re.search(rf"{re.escape(bare)}(?:\(|\s\(\))", sentence)
        )
    ):
        return "function"  # "name ()": a C API's own heading, as GNU style spaces a call
    if re.fullmatch(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]{2,})+", bare) and "_" in bare:
        return "config_key"
    if re.fullmatch(r"[a-z][a-z0-9]*(?:\.[a-z0-9_]{2,}){2,}", bare) or (
        "_" in bare and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]", bare)
    ):
        kind = "config_key" if bare.islower() else "identifier"
        return "parameter" if bare in words.arguments else kind  # what a call is given
    if re.fullmatch(r"[A-Z]?[a-z0-9]+(?:[A-Z]+[a-z0-9]*)+", bare) and re.search(
        r"[a-z][A-Z]|[A-Z]{2}[a-z]", bare
    ):
        return "identifier"  # CamelCase / camelCase: KubeHpaMaxedOut, etcdMembersDown
    if re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+", bare) and (
        code or _not_a_compound(bare, words)
    ):
        return (
            "service"
            if re.search(rf"{re.escape(bare)}`? (?:service|api)\b", sentence)
            else ("identifier")
        )
    return None


def _upper_case_kind(bare: str, sentence: str) -> str:
    """An upper-case code's type: set in an environment, raised as an error, or neither."""
    if _ENV_USE.search(_env_context(bare, sentence)):
        return "env_var"  # $GIT_DIR, GIT_DIR=…: set in an environment, not raised
    return "error_code" if _error_like(bare, sentence) else "identifier"


_ENV_USE = re.compile(r"^\$|^\$\{|=|\benvironment\b|\bexport\b|\benv\b", re.IGNORECASE)


def _env_context(bare: str, sentence: str) -> str:
    """The characters around the token's first use: ``$NAME``, ``NAME=``, "environment"."""
    at = sentence.find(bare)
    if at < 0:
        return ""
    before = sentence[max(0, at - 2) : at].strip()
    after = sentence[at + len(bare) : at + len(bare) + 1]
    near = sentence[max(0, at - 40) : at + len(bare) + 40]
    words = " ".join(re.findall(r"\b(?:environment|export|env)\b", near, re.IGNORECASE))
    return f"{before[-1:]}{after}{' ' + words if words else ''}".strip()


def _host_suffix(name: str) -> bool:
    """Whether a dotted name ends like a host's.

    A country code, a generic top-level domain or a private suffix (``.internal``,
    ``.local``); ``sound.effects.echo`` and ``trailer.see.command`` are module paths and
    keys, not hosts.
    """
    last = name.rsplit(".", 1)[-1]
    return len(last) == 2 or last in _HOST_SUFFIXES


def _error_like(bare: str, sentence: str) -> bool:
    """Whether an upper-case code is an error code, not any constant (``SHA-1``, ``UTF_8``).

    A numbered code (``PAY-5031``, ``ORA-00060``) is; an upper-case constant is when its
    name has an error part (``ERR_CONN_RESET``, ``E_FAIL``) or the words around its first
    use speak of errors ("raises", "exit code", "failed").
    """
    if _NUMBERED_CODE.match(bare) or _ERROR_PART.search(bare):
        return True
    at = sentence.find(bare)
    return at >= 0 and bool(_ERROR_WORDS.search(sentence[max(0, at - 60) : at + len(bare) + 60]))


def _not_a_compound(word: str, words: DocumentWords = NO_DOCUMENT_WORDS) -> bool:
    """A kebab-case word that is no English compound ("split-brain", "built-in").

    A digit, three or more parts, or a short part ("api", "db", "k8s") says it is a name;
    a part that is a function word ("in", "by", "to") says it is a compound
    ("built-in", "one-by-one", "up-to-date"), and so do two parts that the document's
    prose both writes as words of their own, joined just once in it ("four-digit",
    "gdb-like"; ``git-clean``, which a page names again and again, stays a name); two
    parts that are both common words of general English (:func:`_common_english`) make an
    English compound however often the prose writes it ("eye-pleasing", "top-level",
    "read-only", while ``db-host`` names something; three parts, ``trust-exit-code``, name
    an option more often than not). Marked as code, any of them is a name
    (:func:`classify`, where a letter joined to a number, ``k-1``, is an expression
    wherever it stands).
    """
    parts = word.split("-")
    if any(part in _FUNCTION_WORDS for part in parts) or parts[0] in _PREFIXES:
        return False
    if len(parts) == 2 and all(map(_common_english, parts)):
        return False  # "eye-pleasing", "top-level": common English words, however often
    if len(parts) == 2 and word not in words.recurring and all(p in words.lower for p in parts):
        return False  # two words of the prose, once: a compound; a term recurs or has 3 parts
    return any(ch.isdigit() for ch in word) or len(parts) >= 3 or min(map(len, parts)) <= 3


# Zipf frequency (log10 of uses per billion words) above which a word is common English:
# 3, once per million words, is the floor of wordfreq's "small" list; a part of three
# letters or fewer must be far more common (30 per million words), since abbreviations
# that name things ("api", "db", "url", "cli") are short and fairly frequent too
COMMON_ZIPF = 3.0
COMMON_SHORT_ZIPF = 4.5
PLAIN_SHORT_ZIPF = 5.0  # a word of 4 letters or fewer this common is no acronym


@functools.cache
def _english_frequencies() -> dict[str, float]:
    """Word frequencies of general English (wordfreq's packaged "small" list; no download)."""
    from wordfreq import get_frequency_dict  # imported on first use: 0.4 s

    return get_frequency_dict("en", "small")


def _common_english(word: str) -> bool:
    """Whether a lower-case word is a common word of general English (not a corpus's name)."""
    frequency = _english_frequencies().get(word, 0.0) if word.isalpha() else 0.0
    if frequency <= 0.0 or len(word) < 2:  # "x-1", "k-means": a variable, not a word
        return False
    zipf = math.log10(frequency) + 9.0
    return zipf >= (COMMON_SHORT_ZIPF if len(word) <= 3 else COMMON_ZIPF)


def extract(
    text: str, title: str = "", heading: str = "", words: DocumentWords = NO_DOCUMENT_WORDS
) -> tuple[list[EntityMention], list[RelationMention]]:
    """Entities and co-occurrence relations of one chunk (deterministic order).

    ``words`` are what its whole document says of its words (:func:`document_words`);
    without them the chunk alone is the evidence.
    """
    counts: Counter[str] = Counter()
    first: dict[str, tuple[str, str, str]] = {}  # key -> (name, type, sentence)
    pairs: Counter[tuple[str, str]] = Counter()
    pair_sentence: dict[tuple[str, str], str] = {}
    parts = segments(text)
    lowered = _lower_words(text, parts)
    prose = {
        key for seg in parts if seg.kind != "code" for key in _entities_in(seg, lowered, words)
    }
    for segment in parts:
        found = _entities_in(segment, lowered, words)
        if segment.kind == "code":  # an example's own names are no concepts of the corpus
            found = {k: v for k, v in found.items() if k in prose or _names_a_thing(*v)}
        for key, (name, kind) in found.items():
            counts[key] += 1
            first.setdefault(key, (name, kind, segment.text))
        keys = sorted(found)
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                pairs[(a, b)] += 1
                pair_sentence.setdefault((a, b), segment.text)
    anchors: list[str] = []
    for part in _naming_headings(heading):
        # a heading that is one identifier marks it as code; words of a longer heading
        # are prose ("Using dot-notation" names no dot-notation entity)
        code = bool(_ONE_IDENTIFIER.fullmatch(part))
        for key, (name, kind) in _identifiers(part, code=code, words=words).items():
            counts[key] += 1
            first.setdefault(key, (name, kind, part))
            anchors.append(key)
    if title.strip():
        # The document's title is an entity of every chunk, linked to what the chunk
        # mentions: "Teutberga" -- "Lothair II" connects a question about one to the other.
        key = entity_key(title)
        counts[key] += 1
        first.setdefault(key, (title.strip(), "title", _clip(_first_sentence(text))))
        anchors.append(key)
    for key in dict.fromkeys(anchors):
        for other in sorted(k for k in counts if k != key):
            pair = (key, other) if key < other else (other, key)
            pairs[pair] += 1
            pair_sentence.setdefault(pair, f"mentioned in {title.strip() or heading}")
    entities = [
        EntityMention(" ".join(first[k][0].split()), first[k][1], _clip(first[k][2]), counts[k])
        for k in sorted(counts)
    ]
    relations = [
        RelationMention(first[a][0], first[b][0], float(n), _clip(pair_sentence[(a, b)]))
        for (a, b), n in sorted(pairs.items())
    ]
    return entities, relations


def _names_a_thing(name: str, kind: str) -> bool:
    """Whether a name a code block holds (and no prose) is a thing of the corpus.

    An error code, status, metric, path, host or environment variable is; so is a
    kebab-case name (``openshift-storage``, ``must-gather``: no program's variable can be
    spelled so, it is a command's argument naming a namespace, tool or service). A
    ``snake_case``, ``camelCase`` or dotted word there is the example's own variable.
    """
    return kind in _CODE_KINDS or ("-" in name and "_" not in name and "." not in name)


def _naming_headings(heading: str) -> list[str]:
    """The heading parts whose identifiers are mentions of this chunk.

    The chunk's own section heading always; an outer heading only when it *is* one
    identifier ("# KubeHpaMaxedOut"): an outer heading's words otherwise describe the
    whole document and would make its identifiers seem to cover every chunk.
    """
    parts = [p.strip() for p in heading.split(" > ") if p.strip()]
    if not parts:
        return []
    outer = [p for p in parts[:-1] if _ONE_IDENTIFIER.fullmatch(p)]
    return [*outer, parts[-1]]


def _first_sentence(text: str) -> str:
    for segment in segments(text):
        if segment.kind in ("prose", "item", "value"):
            return segment.text
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class ChunkWords:
    """The words one chunk writes in lower case (so a capitalised one may be ordinary).

    ``prose``: as words of its prose, as in :func:`document_words` (not in code blocks or
    spans, not as a token's part: ``profile-opt``, ``python.exe``, ``/usr/bin/python``);
    ``anywhere``: in any of its text, commands and options included.
    """

    prose: frozenset[str]
    anywhere: frozenset[str]


def _lower_words(text: str, parts: Iterable[Segment]) -> ChunkWords:
    """The :class:`ChunkWords` of a chunk's text, given with its segments."""
    lower: set[str] = set()
    for segment in parts:
        if segment.kind == "code":
            continue
        for match in _CASED_WORD.finditer(_CODE_SPAN.sub(" ; ", segment.text)):
            word = match.group()
            if (
                len(word) >= 2
                and word.islower()
                and re.fullmatch(r"[^\W\d_]+(?:['\u2019]\w+)?", word)
            ):
                lower.add(word)
    anywhere = frozenset(re.findall(r"\b[a-z][a-z'\u2019]+\b", text))
    return ChunkWords(frozenset(lower), anywhere)


def _entities_in(
    segment: Segment, lowered: ChunkWords, words: DocumentWords
) -> dict[str, tuple[str, str]]:
    if segment.kind == "field":
        return {}  # a label ("Severity", "Comments") is layout
    code = segment.kind == "code"
    found = _identifiers(segment.text, code=code, words=words)
    if segment.kind in ("prose", "item", "value"):
        text = _MARKUP.sub(" , ", _CODE_SPAN.sub(" , ", segment.text))
        for name in _names(text, lowered, words):
            found.setdefault(entity_key(name), (name, "name"))
    return found


def _identifiers(
    text: str, *, code: bool, words: DocumentWords = NO_DOCUMENT_WORDS
) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for match in _HTTP.finditer(text):
        name = f"HTTP {match.group(1)}"
        found.setdefault(entity_key(name), (name, "http_status"))
    marked = {m.group(1).strip() for m in _CODE_SPAN.finditer(text)}
    clean = _MARKUP.sub(" ", text)
    for match in _TOKEN.finditer(clean):
        token = match.group().rstrip(".:")
        # a manual page's reference, ``git-for-each-ref(1)``: a command's name, not English
        manual = _MANUAL_SECTION.match(clean, match.end()) is not None
        is_code = code or manual or token in marked or f"{token}()" in marked
        kind = classify(token, clean, code=is_code, words=words)
        if kind is not None and len(token) >= 3:
            found.setdefault(entity_key(token), (token.rstrip("()"), kind))
    return found


def _names(
    sentence: str, lowered: ChunkWords, here: DocumentWords = NO_DOCUMENT_WORDS
) -> list[str]:
    """Runs of capitalised words ("Lothair II", "Boso the Elder").

    The opening word of a sentence is capitalised by grammar, so it counts only inside a
    longer run and only when it is not a function word or a word the chunk writes in
    lower case anywhere, even in a command or an option (``--enable-x``: "Enable C-level
    …"), or its whole document, ``here``, mostly does ("Surely Python raises …", while
    "Git" opening a sentence of a page that runs ``git`` stays). A capitalised word
    inside a sentence was capitalised on purpose: it is ordinary only when the chunk's
    prose writes it in lower case ("Profile Guided Optimization" beside ``profile-opt``
    stays whole); the same holds for a lone capitalised word, which is also no name when
    its document mostly writes it in lower case (an upper-case word there, ``PATH`` or
    ``DEBUG``, is a constant's name, not "path"). Punctuation opening a sentence
    ("(Lacking …", "“Extending …") does not move its first word, and a word glued to a
    slash is part of a path ("Tools/demo/redemo.py"), and a word with an underscore
    inside is an identifier that ends the run ("Uint32 SDL_GetWindowID" names no one
    thing). A hyphenated word is one word ("Kroah-Hartman"); one ending in a lower-case
    part is an adjective whose name part ends the run ("JSON-based" → JSON). A clause
    after a colon or a dash opens like a sentence ("--stat : Show the …", a definition
    list's term and its description read as one line). A lone word its document uses
    to number its parts ("see Section 6.5": ``here.numbered``) and a run of ordinary
    words set in capitals ("BACK TO BASICS", a man page's "SPECIFYING REVISIONS") are
    labels, not names. A capital and a full stop before an ordinary word end a sentence,
    not an initial's name ("written in C. Specifically, …"; "Eric S. Raymond" stays).
    """
    out: list[str] = []
    run: list[str] = []
    run_start = 0

    def close() -> None:
        while run and (
            run[-1] in _CONNECTORS or (run[-1].lower() in _FUNCTION_WORDS and run[-1] != "I")
        ):
            run.pop()  # "B. You", "Maildir They": a pronoun ends no name ("Charles I" may)
        if run:
            last = re.sub(r"['\u2019]s$", "", run[-1].rstrip(".")).rstrip("'\u2019_")
            words = [*(w.rstrip("_") for w in run[:-1]), last]  # 'Expect', _Async APIs_
            opening = run_start == 0  # words[0] opens the sentence: capitalised by grammar
            if opening and len(words) > 1 and words[0].lower() in here.ordinary:
                words, opening = words[1:], False  # a word of the document's prose
            while words and (
                _ordinary(words[0], lowered, opening) or (run_start == 0 and len(words) == 1)
            ):
                words, opening = words[1:], False
            if run_start == 0 and len(words) > 2 and words[1] in _CONNECTORS:
                words = words[1:]  # "Review the Grafana …": an imperative, not "X the Elder"
            while words and words[0].lower() in _CONNECTORS:
                words = words[1:]
            if (len(words) >= 2 and not _shouted_label(words)) or (
                len(words) == 1
                and len(words[0]) >= 4
                and not _ordinary(words[0], lowered)
                and not _shouting(words[0])
                and (words[0].isupper() or words[0].lower() not in here.ordinary)
                and not _common_word_once(words[0], here)
                and words[0].lower() not in here.numbered
            ):
                out.append(" ".join(words))
        run.clear()

    opening = 0  # where the current clause opens: the sentence, or after a colon or dash
    for index, match in enumerate(_WORD.finditer(sentence)):
        word = match.group()
        if word in _CLAUSE_OPENERS:
            close()
            opening = index + 1
            continue
        if index == opening and not word[0].isalnum():
            opening += 1  # "(Lacking …", "“Extending …": the sentence opens after it
            continue
        if "_" in word.strip("_") or (
            word[1:].islower() and _in_path(sentence, match.start(), match.end())
        ):
            close()  # an identifier ("SDL_GetWindowID") or a path's part: no name's word
            continue
        word, adjective = _name_part(word)
        if (
            word
            and word[0].isupper()
            and word[0].isalpha()
            and not (index == opening and len(word) == 1)
        ):
            if (
                run
                and _INITIAL.fullmatch(run[-1])
                and (word.lower() in here.ordinary or _ordinary(word, lowered))
            ):
                close()  # "written in C. Specifically, …": the initial ended a sentence
                opening = index
            if not run:
                run_start = 0 if index == opening else index
            run.append(word)
            if (word.endswith(".") and len(word) > 3) or adjective:
                close()
        elif run and word in _CONNECTORS:
            run.append(word)
        else:
            close()
    close()
    return out


def _name_part(word: str) -> tuple[str, bool]:
    """The name part of a hyphenated word, and whether the word is an adjective.

    "JSON-based", "Unix-like": the name before the lower-case suffix, if any
    ("Kroah-Hartman" is all name).
    """
    parts = word.split("-")
    if len(parts) > 1 and parts[-1][:1].islower():
        return "-".join(itertools.takewhile(lambda part: not part[:1].islower(), parts)), True
    return word, False


def _common_word_once(word: str, here: DocumentWords) -> bool:
    """Whether a lone capitalised word is a common English word its document names once.

    "Helped", "Currently", "Problems": a word of general English (:func:`_common_english`)
    capitalised inside a sentence at most once in the whole document is more likely a
    quoted label or a title's word than a name; a name ("Windows", "Python") is written
    so again and again. Without its document (``here`` not read) nothing is said.
    """
    bare = word.lower()
    return here.read and word[1:].islower() and bare not in here.named and _common_english(bare)


def _ordinary(word: str, lowered: ChunkWords, opening: bool = False) -> bool:
    """Whether a capitalised word is an ordinary word of the chunk (see :func:`_names`)."""
    bare = word.rstrip(".").lower()
    if re.search(r"['\u2019](?:ve|re|ll|d|m|s|t)$", bare) and bare[:1] == "i":
        return True  # "I've", "I'm": a pronoun, capitalised by grammar
    lower = lowered.anywhere if opening else lowered.prose
    return bare in _FUNCTION_WORDS or (bare in lower and (not word.isupper() or bare.isalpha()))


def _in_path(sentence: str, start: int, end: int) -> bool:
    """Whether the word at ``start:end`` is part of a path ("Tools/demo/x.py", "$HOME/.git").

    A slash-joined token with a lower-case or dotted part is a path; "Mozilla/Netscape"
    (capitalised parts) is a choice between two names.
    """
    if "/" not in sentence[max(0, start - 1) : end + 1]:
        return False
    left = sentence.rfind(" ", 0, start) + 1
    right = sentence.find(" ", end)
    token = sentence[left : len(sentence) if right < 0 else right].rstrip(".,;:!?)\"'")
    return any(part[:1].islower() or "." in part for part in token.split("/") if part)


def _shouted_label(words: Sequence[str]) -> bool:
    """Whether a run of words is common English set in capitals ("BACK TO BASICS").

    Capitals over ordinary words mark a label (an admonition's kind, a man page's
    "SEE ALSO"), not a name; an acronym among them ("DEBIAN POLICY", "NFS SERVER") is
    no ordinary word, and the run stays.
    """
    return all(w.isupper() and w.isalpha() for w in words) and all(
        w.lower() in _FUNCTION_WORDS or _plain_word(w.lower()) for w in words
    )


def _plain_word(word: str) -> bool:
    """A common English word that is no acronym: a short one must be very common.

    "http", "html" and "raid" are common in general English text as acronyms; "back",
    "case" and "see" are far more so.
    """
    if len(word) > 4:
        return _common_english(word)
    frequency = _english_frequencies().get(word, 0.0)
    return frequency > 0.0 and math.log10(frequency) + 9.0 >= PLAIN_SHORT_ZIPF


def _shouting(word: str) -> bool:
    """An all-capitals word without digits of 6+ letters: a header or a placeholder."""
    return word.isupper() and word.isalpha() and len(word) >= 6


def _clip(sentence: str, limit: int = 240) -> str:
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
