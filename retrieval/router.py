"""The query router: local search, global search over community reports, or both.

A question that names something specific — a quoted string, an identifier
(``PAY-5031``, ``pool.idle_timeout_ms``, ``HTTP 504``), a metadata filter, a named entity,
a single event ("why did …", "what happened when …"), one item ("which function returns
…", :func:`which_form`), a task stated as a sentence ("Draw random samples from a normal
distribution", :func:`task_statement`) — is answered best by the few chunks that hold it
(local). A question about the corpus as a whole — aggregate wording
("all", "across", "overall", "recurring", "main themes", "compare …"), an enumeration
over a plural ("which services …", "do any guests …"), a list of several things,
entities that cover much of the corpus — needs the community reports (global).

In ``auto`` mode the router also reads what *this* corpus holds (:func:`local_cues`,
from the local search the answer would read, ``RouteContext.local``): one chunk holding
every term of the question (a pasted term the corpus has), keyword and vector search
agreeing on a concentrated answer, or the same evidence spread over many documents (or
no keyword match at all); a name or word in the titles of most documents
(``RouteContext.collection``: "Python" in Python's manual) is the collection's subject,
not one thing in it. Without a search (text only) a question naming nothing specific
leans global; with one, what the corpus holds decides.

Each cue adds a weight to one side; the reasons list every cue that fired with its
weight, so a caller can see why. :class:`HeuristicRouteClassifier` is the offline
classifier; an LLM classifier implements the same :class:`RouteClassifier` protocol.
:func:`choose_route` applies a caller's forced mode and falls back to local when the
graph has no reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from graph.models import entity_key
from retrieval.analyzer import Analyzer
from retrieval.contract import QueryResult

Decision = Literal["local", "global", "both"]
Mode = Literal["auto", "local", "global"]

QUOTED = 3.0
IDENTIFIER = 2.0
IDENTIFIER_CAP = 4.0
FILTER = 2.0
NAME = 1.5
NAME_CAP = 3.0
RARE_ENTITY = 1.0
ENTITY_CAP = 2.0
SPECIFIC_FORM = 1.5
SINGLE_ITEM = 1.5
TASK = 1.0
DATE = 1.5
AGGREGATE = 1.5
AGGREGATE_CAP = 4.5
COMPARE = 1.5
ENUMERATION = 2.0
GENERIC_PLURAL = 1.0
BROAD_ENTITY = 1.0
NOTHING_SPECIFIC = 1.0
STRONG = 2.5
BROAD_SHARE = 0.15
# what the local search found (RouteContext.local); weighed only when it was searched
HELD = 2.0
HELD_PER_TERM = 0.5
HELD_DEPTH = 3
CONCENTRATED_ANSWER = 1.0
AGREE_DEPTH = 2
CONCENTRATED = 0.5
SPREAD_OUT = 1.0
SPREAD = 0.85
MIN_RESULTS = 4
MANY_THINGS = 1.5
MANY_ITEMS = 3
SUBJECT_SHARE = 0.5

_QUOTED = re.compile(r"\"([^\"]{2,})\"|“([^”]{2,})”|`([^`]+)`|(?<!\w)'([^']{2,})'(?!\w)")
_HTTP_STATUS = re.compile(r"\b(?:HTTP|status)\s?[1-5][0-9]{2}\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_][\w'\u2019.\-]*")
_ACRONYM = re.compile(r"[A-Z0-9]{1,5}s?|[A-Z][a-z]?[A-Z]{1,3}")  # VR, AI, IoT, TLS, APIs
_NAME_JOINERS = {"of", "de", "del", "der", "van", "von", "la", "le", "da", "di", "du"}
_NOT_NAMES = {"i", "i'm", "i've", "i'd", "ok"}
_AGGREGATE = re.compile(
    r"\b(all|every|each|across|overall|in general|generally|typically|usually|commonly|"
    r"common|most|frequently|often|recurring|recur|repeatedly|consistently|trends?|themes?|"
    r"patterns?|topics?|summari[sz]e|summary|overview|landscape|broad|broader|broadly|main|"
    r"whole|entire|collectively|various|range of|kinds? of|types? of)\b",
    re.IGNORECASE,
)
# "every night", "each time": a schedule, not a quantifier over the corpus
_SCHEDULE = re.compile(
    r"\b(every|each)\s+(night|day|week|month|year|hour|minute|second|morning|evening|time|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d+)\b",
    re.IGNORECASE,
)
_COMPARE = re.compile(
    r"\b(compar\w*|contrast\w*|differ|differs|difference|differences|versus|vs\.?|similarit\w+)\b",
    re.IGNORECASE,
)
# "which/what/how many" and the four words after it (see which_form)
_WHICH = re.compile(
    r"\b(which|what|how many)\s+([\w\-']+)(?:\s+([\w\-']+))?(?:\s+([\w\-']+))?"
    r"(?:\s+([\w\-']+))?",
    re.IGNORECASE,
)
# a word that opens a verb's object: after "which command helps" (me), "what causes" (the)
_OBJECT_START = {
    "the", "a", "an", "me", "us", "you", "him", "her", "them", "it", "my", "your", "our",
    "their", "its", "this", "that", "these", "those",
}  # fmt: skip
# after "which hook runs", "which command shows": a preposition or a clause opens what
# the verb does (after a noun and its plural head, "which config files", a verb follows)
_AFTER_VERB = {
    "after", "before", "with", "to", "into", "onto", "on", "at", "by", "from", "over",
    "when", "while", "if", "what", "which", "how", "where", "whether", "up", "out", "off",
}  # fmt: skip
_SINGULAR_VERBS = {"is", "was", "does", "did", "has", "sets"}
# a question's first word: not a task ("how do I", "is there", "can Git")
_QUESTION_WORDS = {
    "what", "which", "how", "why", "when", "where", "who", "whom", "whose", "whether", "is",
    "are", "was", "were", "do", "does", "did", "can", "could", "should", "would", "will",
    "may", "might", "must", "has", "have", "had", "shall", "am",
}  # fmt: skip
# verbs asking for an account rather than for a task done: "describe the main failure
# modes", "give me an overview", "list the providers"; their other words decide
_ACCOUNT_VERBS = {
    "tell", "describe", "explain", "summarize", "summarise", "list", "give", "show",
    "outline", "compare", "contrast", "name", "enumerate", "discuss", "overview", "survey",
    "characterize", "characterise", "review",
}  # fmt: skip
TASK_WORDS = 3
# "which options does the clone command accept": the plural is one thing's, asked of it
_ASKED_OF = {"do", "does", "did", "can", "could", "will", "would", "should", "must", "may"}
# "the most recent", "my most frequent": a superlative, not "most" of the corpus
_SUPERLATIVE = re.compile(r"\b(the|my|your|our|its|their|his|her|a|an)\s+most\b", re.I)
_PLURAL_SUBJECT = re.compile(
    r"\b(do|does|are|were|have|any|the|most|many|several|multiple|other|different)\s+"
    r"(?:[a-z\-]+\s+)?([a-z\-]{3,}s)\b",
    re.IGNORECASE,
)
_SPECIFIC_FORM = re.compile(
    r"^\s*(why (did|was|were|is|does)\b|what (happened|caused|triggered|led to|went wrong|broke)\b|"
    r"when (did|was|were|is|does)\b|where (is|was|were|did|does|do)\b|"
    r"who (is|was|were|did|owns|wrote|directed)\b|how (is|was|does|did) (the|a|an)\b|"
    r"(show|give|find|get|tell) me (the|a)\b|"
    r"what (does|do|did) .{1,80} mean\b|how (do|can|should) (i|we|you)\b|"
    r"what is the (value|default|limit|timeout|name|date|cause|command)\b)",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|(on|in) (jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b"
    r"(\s+\d{1,2}\b)?)",
    re.IGNORECASE,
)
_SPECIFIC_KEY = re.compile(r"[\-_./\d ]")
# "a, b and c", "a, b, or c": a list of three or more things joined by commas
_LIST = re.compile(r"[^,;:?!.]+(?:,\s*[^,;:?!.]+)+,?\s+(?:and|or)\s+[^,;:?!.]+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_STANDALONE = re.compile(r"(?<![\w\-./:@$])[^\W\d_]+(?:['\u2019]s)?(?![\w\-./:@(])")
_NOT_PLURAL = re.compile(r"(ss|us|is|ous|news|series|status|always|perhaps|its)$")
_AUXILIARIES = {"does", "was", "has", "yes", "less", "unless", "whereas", "sometimes"}


class RouteDecision(BaseModel):
    """Where a question goes and why."""

    decision: Decision
    reasons: list[str] = Field(default_factory=list, description="the cues that fired, weighed")
    scores: dict[str, float] = Field(
        default_factory=dict, description="summed cue weights per side ('local', 'global')"
    )
    classifier: str = Field("heuristic", description="what decided")


@dataclass(frozen=True)
class RouteContext:
    """What the router knows besides the question.

    ``entities`` are graph entities named in the question with the share of extracted
    chunks that mention each (empty without a graph); ``has_filters`` says the caller
    narrowed the search by metadata; ``local`` holds the local hybrid search's results
    for the question, best first (empty when it was not searched: text-only routing);
    ``collection`` maps the terms that stand in the titles of many of the corpus's
    documents to that share (:func:`collection_terms`: "python" in Python's manual).
    """

    has_filters: bool = False
    entities: Sequence[tuple[str, float]] = ()
    graph_ready: bool = False
    local: Sequence[QueryResult] = ()
    collection: Mapping[str, float] = field(default_factory=dict)


class RouteClassifier(Protocol):
    """Decides local, global or both for a question (offline heuristics or an LLM)."""

    name: str

    async def classify(self, question: str, context: RouteContext) -> RouteDecision:
        """The decision with its reasons and scores."""
        ...


@dataclass(frozen=True)
class Cue:
    """One feature that fired: which side it pulls, its weight, and why."""

    side: Literal["local", "global"]
    weight: float
    reason: str


@dataclass
class HeuristicRouteClassifier:
    """The offline router: weighted cues (see the module docstring)."""

    analyzer: Analyzer
    both_margin: float = 1.0
    name: str = field(default="heuristic", init=False)

    async def classify(self, question: str, context: RouteContext) -> RouteDecision:
        """Score the question's cues and decide."""
        return self.decide(question, context)

    def decide(self, question: str, context: RouteContext) -> RouteDecision:
        """Synchronous form of :meth:`classify` (pure)."""
        cues = route_cues(question, context, self.analyzer)
        return decide(cues, self.both_margin)


def decide(cues: Sequence[Cue], both_margin: float = 1.0) -> RouteDecision:
    """Sum the cues per side; the heavier side wins, ties go local (the cheaper path).

    When both sides are strong and within ``both_margin`` of each other the answer
    needs both the specific chunks and the corpus-wide view: ``both``.
    """
    local = round(sum(c.weight for c in cues if c.side == "local"), 3)
    glob = round(sum(c.weight for c in cues if c.side == "global"), 3)
    if local >= STRONG and glob >= STRONG and abs(local - glob) < both_margin:
        decision: Decision = "both"
    elif glob > local:
        decision = "global"
    else:
        decision = "local"
    reasons = [f"{c.reason} (+{c.weight:g} {c.side})" for c in cues]
    if not cues:
        reasons.append("no cue fired; local search is the default")
    return RouteDecision(
        decision=decision, reasons=reasons, scores={"local": local, "global": glob}
    )


def route_cues(question: str, context: RouteContext, analyzer: Analyzer) -> list[Cue]:
    """Every cue of the question, local ones first."""
    cues: list[Cue] = []
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(question)]
    if quoted:
        cues.append(Cue("local", QUOTED, f"quoted string {quoted[0]!r}"))
    # the analyzer's one definition of an identifier (lore.identifiers.identifier_kind),
    # the same the exact-match vote uses; an HTTP status is shown with its prefix
    statuses = [m.group().upper() for m in _HTTP_STATUS.finditer(question)]
    shown = {status[-3:] for status in statuses}
    identifiers = statuses + [i for i in analyzer.identifiers(question)[0] if i not in shown]
    if identifiers:
        weight = min(IDENTIFIER_CAP, IDENTIFIER * len(identifiers))
        cues.append(Cue("local", weight, f"identifiers {', '.join(identifiers[:4])}"))
    if context.has_filters:
        cues.append(Cue("local", FILTER, "metadata filter narrows the corpus"))
    names, rare, broad = _corpus_names(question, context, analyzer, identifiers)
    if names:
        weight = min(NAME_CAP, NAME * len(names))
        cues.append(Cue("local", weight, f"named entities {', '.join(names[:4])}"))
    if rare:
        weight = min(ENTITY_CAP, RARE_ENTITY * len(rare))
        cues.append(Cue("local", weight, f"specific graph entities {', '.join(rare[:4])}"))
    which, task = which_form(question), task_statement(question)
    form = _SPECIFIC_FORM.search(question)
    if form:
        cues.append(Cue("local", SPECIFIC_FORM, f"asks about one thing ({form.group().strip()!r})"))
    else:
        if which and which[0] == "single":
            cues.append(Cue("local", SINGLE_ITEM, f"asks for one item ({which[1]!r})"))
        if task:
            cues.append(Cue("local", TASK, f"states a task, not a question ({task!r})"))
    date = _DATE.search(question)
    if date:
        cues.append(Cue("local", DATE, f"a specific date ({date.group()!r})"))
    searched = local_cues(question, context.local, analyzer)
    cues.extend(c for c in searched if c.side == "local")
    # in a task ("find out which functions take the most time") the wh-clause is part of
    # the task, not a question over the corpus
    cues.extend(_global_cues(question, broad, None if task else which))
    cues.extend(c for c in searched if c.side == "global")
    specific = quoted or identifiers or context.has_filters or names or rare
    if not specific and not context.local:  # searched: what the corpus holds decides
        cues.append(
            Cue("global", NOTHING_SPECIFIC, "names nothing specific (no quote, id, name, filter)")
        )
    return cues


def _corpus_names(
    question: str, context: RouteContext, analyzer: Analyzer, identifiers: Sequence[str]
) -> tuple[list[str], list[str], dict[str, str]]:
    """The question's names, its specific graph entities, and what names the collection.

    A name the graph finds in much of the corpus, or a word in the titles of most of its
    documents ("Python" in Python's manual), is the collection's subject, not one thing in
    it: it leaves the names for the broad side (key → why).
    """
    shares = dict(context.entities)
    broad = subject_words(question, context.collection, analyzer)
    names = []
    for name in named_entities(question):
        key = entity_key(_POSSESSIVE.sub("", name))
        if shares.get(key, 0.0) >= BROAD_SHARE:
            broad[key] = f"in {shares[key]:.0%} of extracted chunks"
        elif name.lower() not in identifiers and _POSSESSIVE.sub("", name) not in broad:
            names.append(name)
    # a plain lower-case word ("database", "key") matching an entity says little: offline
    # extraction turns capitalised sentence starts into entities; names with a hyphen,
    # digit, dot, underscore or several words ("auth-gateway", "ledger-db") are specific
    named = [(key, share) for key, share in context.entities if _SPECIFIC_KEY.search(key)]
    rare = [key for key, share in named if share < BROAD_SHARE]
    for key, share in named:
        if share >= BROAD_SHARE:
            broad.setdefault(key, f"in {share:.0%} of extracted chunks")
    return names, rare, broad


def _global_cues(
    question: str, broad: Mapping[str, str], which: tuple[str, str] | None
) -> list[Cue]:
    cues: list[Cue] = []
    plain = _SUPERLATIVE.sub(" ", _SCHEDULE.sub(" ", question))
    words = list(dict.fromkeys(m.group(1).lower() for m in _AGGREGATE.finditer(plain)))
    if words:
        weight = min(AGGREGATE_CAP, AGGREGATE * len(words))
        cues.append(Cue("global", weight, f"aggregate wording {', '.join(words[:4])}"))
    compare = _COMPARE.search(question)
    if compare:
        cues.append(Cue("global", COMPARE, f"comparison ({compare.group()!r})"))
    if which and which[0] == "plural":
        cues.append(Cue("global", ENUMERATION, f"asks for a list over a plural ({which[1]!r})"))
    else:
        plural = _plural_match(_PLURAL_SUBJECT, question)
        if plural:
            cues.append(
                Cue("global", GENERIC_PLURAL, f"speaks of a plural in general ({plural!r})")
            )
    items = list_items(question)
    if items >= MANY_ITEMS:
        cues.append(Cue("global", MANY_THINGS, f"about several things (a list of {items})"))
    if broad:
        key, why = next(iter(broad.items()))
        cues.append(
            Cue("global", BROAD_ENTITY, f"entities that cover much of the corpus: {key} ({why})")
        )
    return cues


def list_items(question: str) -> int:
    """How many things the longest comma list of the question names ("a, b and c": 3).

    A list of names ("both movies, Naked Tango and Algiers") is about those named
    things, not about many: a list whose later items start with a capital counts 0.
    """
    most = 0
    for match in _LIST.finditer(question):
        pieces = [p.strip() for p in match.group().split(",") if p.strip()]
        oxford = re.match(r"(?:and|or)\s", pieces[-1], re.IGNORECASE)  # "a, b, and c"
        later = [*pieces[1:-1], *re.split(r"\s(?:and|or)\s", pieces[-1], flags=re.IGNORECASE)]
        items = [re.sub(r"^(?:and|or)\s+", "", item, flags=re.IGNORECASE) for item in later]
        if any(item[:1].isupper() for item in items):
            continue
        most = max(most, len(pieces) if oxford else len(pieces) + 1)  # else "b and c"
    return most


def local_cues(question: str, results: Sequence[QueryResult], analyzer: Analyzer) -> list[Cue]:
    """What the local search's results say about the question (none when not searched).

    Local, when the corpus has one place for it:

    - **held**: a result among the first ``HELD_DEPTH`` holds every term of the question
      (its analyzed words, identifiers whole) — the corpus names what the question
      names; worth ``HELD_PER_TERM`` a term up to ``HELD``, as one chunk holding many of
      the question's words is stronger evidence than one holding a single word;
    - **concentrated**: keyword and vector search both rank one chunk within their first
      ``AGREE_DEPTH`` and its document holds more than ``CONCENTRATED`` of the results.

    Global, when it is spread over the corpus (neither of the above):

    - **spread**: the results come from about as many documents as there are results
      (a share of at least ``SPREAD``) and both engines rank every one of them: the
      same evidence stands in many places. Results only one engine found show
      uncertainty (a paraphrase the words miss), not breadth, and count for neither;
    - **absent**: keyword search matches none of the question's words anywhere.
    """
    if not results:
        return []
    cues: list[Cue] = []
    terms = set(analyzer.query_terms(question))
    holder = next(
        (
            r
            for r in results[:HELD_DEPTH]
            if terms and terms <= set(analyzer.tokens(f"{r.title}\n{r.heading}\n{r.text}"))
        ),
        None,
    )
    if holder is not None:
        weight = min(HELD, HELD_PER_TERM * len(terms))
        cues.append(
            Cue(
                "local",
                weight,
                f"one chunk holds all {len(terms)} terms of the question ({_place(holder)})",
            )
        )
    documents = [r.document_id for r in results]
    best = min(results, key=_agreement)
    depth = _agreement(best)
    same = documents.count(best.document_id)
    if depth <= AGREE_DEPTH and same / len(documents) > CONCENTRATED:
        cues.append(
            Cue(
                "local",
                CONCENTRATED_ANSWER,
                f"keyword and vector search agree on {_place(best)} (a chunk in both first "
                f"{depth}; {same} of {len(documents)} results)",
            )
        )
    if holder is not None or depth <= AGREE_DEPTH or len(documents) < MIN_RESULTS:
        return cues
    spread = len(set(documents))
    if all(r.ranks.sparse is None for r in results):
        cues.append(Cue("global", SPREAD_OUT, "keyword search matches none of its words"))
    elif spread / len(documents) >= SPREAD and all(
        r.ranks.sparse is not None and r.ranks.dense is not None for r in results
    ):
        cues.append(
            Cue(
                "global",
                SPREAD_OUT,
                f"spread over the corpus: {len(documents)} results from {spread} documents, "
                f"each found by both engines, none in both first {AGREE_DEPTH}",
            )
        )
    return cues


def collection_terms(titles: Sequence[str], analyzer: Analyzer) -> dict[str, float]:
    """Word terms that stand in the titles of at least ``SUBJECT_SHARE`` of the documents.

    The collection's own subject: "python" and "documentation" title every page of
    Python's manual ("… — Python 3.11.2 documentation"), "git" most of git's
    ("git-log(1)"). Numbers and punctuation do not count. Term → share of titles.
    """
    if not titles:
        return {}
    counts: dict[str, int] = {}
    for title in titles:
        for term in set(analyzer.tokens(title)):
            if term.isalpha():
                counts[term] = counts.get(term, 0) + 1
    return {
        term: round(n / len(titles), 3)
        for term, n in sorted(counts.items())
        if n / len(titles) >= SUBJECT_SHARE
    }


def subject_words(
    question: str, collection: Mapping[str, float], analyzer: Analyzer
) -> dict[str, str]:
    """Words of the question that name the collection's subject (see ``collection``).

    Only standalone words count, not the pieces of an identifier such as ``git-commit``.
    Word → why ("in the titles of 74% of documents").
    """
    found: dict[str, str] = {}
    for match in _STANDALONE.finditer(question):
        word = _POSSESSIVE.sub("", match.group())
        terms = analyzer.query_terms(word)
        if terms and all(t in collection for t in terms):
            share = min(collection[t] for t in terms)
            found.setdefault(word, f"in the titles of {share:.0%} of documents")
    return found


def _agreement(result: QueryResult) -> int:
    """The depth within which both keyword and vector search rank this result."""
    ranks = (result.ranks.sparse, result.ranks.dense)
    return max(r if r is not None else 1_000_000 for r in ranks)


def _place(result: QueryResult) -> str:
    return result.title or result.source.rsplit("/", 1)[-1] or result.document_id


def which_form(question: str) -> tuple[Literal["plural", "single"], str] | None:
    """Whether the question asks which things (a list) or which one thing, and its words.

    The head noun is the first word after "which", "what" or "how many", or the second
    when the first modifies it ("which config files"). A word ending in -s is that plural
    noun unless what follows opens a verb's object: in "which command helps me" and "what
    option controls the size", "helps" and "controls" are verbs of a singular subject; so
    are "runs" and "shows" before a preposition or a clause ("which hook runs after").
    ``("plural", "Which tools")``; ``("single", "Which command helps")``; None when the
    question asks neither: a verb right after the question word ("what causes the"), a
    plural before "of"/"for" and a name, or a plural asked of one thing ("how many
    replicas does auth-gateway run", "which options does the clone command accept").
    """
    for match in _WHICH.finditer(question):
        wh, *after = match.groups()
        words = [w for w in after if w]
        for index, word in enumerate(words[:2]):
            following = words[index + 1] if index + 1 < len(words) else ""
            verb_next = following.lower() in _OBJECT_START
            if index == 1 and not _plural_looking(words[0]):  # a noun, then its verb?
                verb_next = verb_next or following.lower() in _AFTER_VERB
                if verb_next and _plural_looking(word):
                    return "single", " ".join([wh, *words[:2]])
            if verb_next and _plural_looking(word):
                break
            if _plural_looking(word):
                named = words[index + 2] if index + 2 < len(words) else ""
                if following.lower() in ("of", "for") and named[:1].isupper():
                    break  # "which members of Congress": one group, named
                if following.lower() in _ASKED_OF:
                    break  # "how many replicas does auth-gateway run": one thing's
                return "plural", " ".join([wh, *words[: index + 1]])
            if index == 0 and following.lower() in _SINGULAR_VERBS and len(word) >= 3:
                return "single", " ".join([wh, word, following])
    return None


def task_statement(question: str) -> str | None:
    """The first words of a request stating a task to do, or None.

    "Draw random samples from a normal distribution", "Delete the files git does not
    track": a sentence, not a question (no question mark, no question word first), of
    at least :data:`TASK_WORDS` words, that does not ask for an account ("describe …",
    "list …", "give me an overview …"). Such a request is one task, done in one place of
    the corpus, as "how do I …" is; a request for an account is routed by its other words.
    """
    text = question.strip()
    words = _WORD.findall(text)
    if text.endswith("?") or len(words) < TASK_WORDS:
        return None
    first = words[0].lower()
    if not words[0].isalpha() or first in _QUESTION_WORDS or first in _ACCOUNT_VERBS:
        return None
    return " ".join(words[:3])


def _plural_looking(word: str) -> bool:
    """A lower-case word of four letters or more ending in -s that is not a known non-plural."""
    lowered = word.lower()
    return (
        len(word) >= 4
        and word[0].islower()
        and lowered.endswith("s")
        and lowered not in _AUXILIARIES
        and not _NOT_PLURAL.search(lowered)
    )


def _plural_match(pattern: re.Pattern[str], question: str) -> str | None:
    for match in pattern.finditer(question):
        if _plural_looking(match.group(2)):
            return match.group().strip()
    return None


def named_entities(question: str) -> list[str]:
    """Capitalised names inside the question (not its first word, not acronyms).

    ``When did Lothair II's mother die?`` → ``["Lothair II's"]``; ``Are VR and IoT
    trends?`` → ``[]`` (acronyms name topics, not things).
    """
    words = [(m.group(), m.start()) for m in _WORD.finditer(question)]
    names: list[str] = []
    current: list[str] = []
    for index, (word, start) in enumerate(words):
        clean = word.rstrip(".,;:!?")
        sentence_start = index == 0 or question[:start].rstrip().endswith((".", "?", "!", ":"))
        capital = clean[:1].isupper() and not _ACRONYM.fullmatch(clean)
        starts = capital and not sentence_start and clean.lower() not in _NOT_NAMES
        if starts or (current and clean.lower() in _NAME_JOINERS):
            current.append(clean)
        else:
            _close(current, names)
            current = []
            continue
        if word != clean:  # punctuation ends a name
            _close(current, names)
            current = []
    _close(current, names)
    return list(dict.fromkeys(names))


def _close(current: list[str], names: list[str]) -> None:
    while current and current[-1].lower() in _NAME_JOINERS:
        current.pop()
    if current:
        names.append(" ".join(current))


def choose_route(mode: Mode, classified: RouteDecision, context: RouteContext) -> RouteDecision:
    """Apply a forced mode, then fall back to local when there are no reports."""
    decision = classified
    if mode != "auto":
        decision = classified.model_copy(
            update={
                "decision": mode,
                "reasons": [f"mode={mode} forced by the caller", *classified.reasons],
            }
        )
    if decision.decision != "local" and not context.graph_ready:
        decision = decision.model_copy(
            update={
                "decision": "local",
                "reasons": [
                    *decision.reasons,
                    f"would route {decision.decision}, but the graph has no community "
                    "reports (run 'lore graph build'); answering locally",
                ],
            }
        )
    return decision
