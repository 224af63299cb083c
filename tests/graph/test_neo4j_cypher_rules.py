"""Rules that keep the Neo4j backend portable, checked in Python, without any server.

CI runs the Neo4j contract on the ArcadeDB Bolt stand-in, which accepts two things Neo4j
refuses: a ``MATCH`` right after an updating clause (Neo4j wants a ``WITH`` between),
and a ``MERGE`` on a null key (ArcadeDB creates a node). These tests make a pass there
mean a pass on Neo4j: every statement is read for the first, and the key checks that
run before any ``MERGE`` are exercised for the second.

A third rule is about cost, not acceptance: a pattern starts from the node its key
finds. Neo4j's planner starts from an indexed node wherever it stands in the pattern;
ArcadeDB's starts from the first node, so ``(c:LoreChunk)-[:MENTIONS]->(e:LoreEntity
{ns: $ns, key: key})`` visited every chunk for each key (a graph build of 1,000
documents spent 330 of its 360 s there; anchored, 3 s).
"""

import re

import pytest

from graph.models import ChunkMentions, CommunityReport, EntityMention, RelationMention
from graph.stores import neo4j_cypher as q
from graph.stores.merging import checked_chunks, required_ids
from lore.errors import InvalidRequestError

CLAUSE = re.compile(
    r"\b(OPTIONAL\s+MATCH|MATCH|CREATE|MERGE|SET|DELETE|REMOVE|WITH|UNWIND|RETURN|CALL)\b"
)
UPDATING = {"CREATE", "MERGE", "SET", "DELETE", "REMOVE"}
READING = {"MATCH", "OPTIONAL MATCH"}


def statements() -> dict[str, str]:
    """Every Cypher statement of the backend, by constant name (tuples numbered)."""
    found: dict[str, str] = {}
    for name, value in vars(q).items():
        if name.isupper() and isinstance(value, str):
            found[name] = value
        elif name.isupper() and isinstance(value, tuple):
            found.update({f"{name}[{i}]": v for i, v in enumerate(value)})
    return found


def read_after_update(statement: str) -> list[str]:
    """The reading clauses that follow an updating clause with no ``WITH`` between."""
    if re.match(r"\s*CREATE\s+(CONSTRAINT|INDEX)\b", statement):
        return []  # schema commands, not queries
    problems, updated = [], False
    for match in CLAUSE.finditer(statement):
        clause = " ".join(match.group(1).split())
        if clause == "WITH":
            updated = False
        elif clause in UPDATING:
            updated = True
        elif clause in READING and updated:
            problems.append(statement[match.start() : match.start() + 40])
    return problems


def test_the_checker_sees_a_missing_with() -> None:
    assert read_after_update("CREATE (a:X) MATCH (b:Y) RETURN a, b")
    assert read_after_update("MERGE (a:X {k: 1})\nSET a.v = 2\nOPTIONAL   MATCH (b) RETURN b")
    assert not read_after_update("CREATE (a:X) WITH a MATCH (b:Y) RETURN a, b")
    assert not read_after_update("MATCH (a) MERGE (b {k: a.k}) CREATE (a)-[:R]->(b)")


def test_no_statement_reads_after_writing_without_with() -> None:
    found = statements()
    assert len(found) > 30 and "CREATE_MENTIONS" in found and "DROP_BATCH[0]" in found
    offending = {name: p for name, text in found.items() if (p := read_after_update(text))}
    assert offending == {}


PATTERN_END = re.compile(
    r"\b(OPTIONAL\s+MATCH|MATCH|CREATE|MERGE|SET|DELETE|REMOVE|WITH|UNWIND|RETURN|CALL|WHERE)\b"
)
NODE = re.compile(r"\(([^()]*)\)")


def unanchored(statement: str) -> list[str]:
    """The ``MATCH`` patterns whose first node is not the one their properties find.

    A pattern where some node carries properties (an index lookup) must start with such
    a node; one where only a relationship carries them (``-[r:RELATED {ns, chunk_id}]-``,
    a relationship index) is left alone.
    """
    problems = []
    for match in re.finditer(r"\bMATCH\b", statement):
        rest = statement[match.end() :]
        end = PATTERN_END.search(rest)
        pattern = rest[: end.start() if end else len(rest)]
        nodes = NODE.findall(pattern)
        if nodes and "{" not in nodes[0] and any("{" in node for node in nodes[1:]):
            problems.append(" ".join(pattern.split()))
    return problems


def test_the_anchor_checker_sees_a_pattern_starting_from_an_unkeyed_node() -> None:
    assert unanchored("UNWIND $k AS k MATCH (c:C)-[:M]->(e:E {ns: $ns, key: k}) RETURN c")
    assert not unanchored("UNWIND $k AS k MATCH (e:E {ns: $ns, key: k})<-[:M]-(c:C) RETURN c")
    assert not unanchored("MATCH (a)-[r:R {ns: $ns, chunk_id: $c}]->(b) RETURN a")
    assert not unanchored("MATCH (e:E {ns: $ns}) WHERE EXISTS { (:C)-[:M]->(e) } RETURN e")


def test_every_match_starts_from_the_node_its_key_finds() -> None:
    offending = {name: p for name, text in statements().items() if (p := unanchored(text))}
    assert offending == {}


# Every statement with a MERGE, and what keeps a null or empty key out of it.
MERGE_GUARDS = {
    "MERGE_CHUNKS": "checked_chunks: chunk and document ids",
    "CREATE_MENTIONS": "checked_chunks: entity keys",
    "CREATE_RELATIONS": "checked_chunks: relation ends",
    "TOUCH": "keys of checked mentions, or keys already stored",
    "MARK_STALE": "required_ids: community ids",
    "PUT_REPORTS": "checked_reports: community ids",
    "UPSERT_COMMUNITIES": "required_ids: community ids",
    "SET_META": "required_ids: meta names",
    "BUMP_GENERATION": "a constant name of the store's own (_GENERATION_META)",
}


def test_every_merge_statement_has_a_guard() -> None:
    merging = {name for name, text in statements().items() if re.search(r"\bMERGE\b", text)}
    assert merging == set(MERGE_GUARDS)


@pytest.mark.parametrize("bad", [None, "", "   ", 7])
def test_required_ids_refuses_null_blank_and_non_strings(bad: object) -> None:
    with pytest.raises(InvalidRequestError, match="a community id must be a non-empty string"):
        required_ids(["0-1", bad], "a community id")
    assert required_ids(["1-2", "0-1", "1-2"], "x") == ["0-1", "1-2"]


def _chunk(
    chunk_id: object = "c1",
    document_id: object = "d1",
    names: tuple[object, ...] = ("a-svc",),
    ends: tuple[object, object] = ("a-svc", "b-svc"),
) -> ChunkMentions:
    return ChunkMentions(
        chunk_id,  # type: ignore[arg-type]  # wrong types on purpose: what a caller might send
        document_id,  # type: ignore[arg-type]
        [EntityMention(n, "service", "", 1) for n in names],  # type: ignore[arg-type]
        [RelationMention(ends[0], ends[1], 1.0, "")],  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        (_chunk(chunk_id=None), "a chunk id"),
        (_chunk(chunk_id=""), "a chunk id"),
        (_chunk(document_id=None), "document id of chunk 'c1'"),
        (_chunk(names=(None,)), "has no key"),
        (_chunk(names=("  ",)), "has no key"),
        (_chunk(names=("()",)), "has no key"),
        (_chunk(ends=("a-svc", None)), "has no key"),
        (_chunk(ends=("'.'", "a-svc")), "has no key"),
    ],
)
def test_checked_chunks_refuses_what_would_reach_merge_as_null_or_empty(
    chunk: ChunkMentions, message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        checked_chunks([_chunk(chunk_id="c0"), chunk])


def test_checked_chunks_keeps_the_last_of_a_repeated_id_in_id_order() -> None:
    first, second = _chunk(names=("x-svc",)), _chunk(names=("y-svc",))
    assert checked_chunks([_chunk(chunk_id="c9"), first, second]) == [second, _chunk("c9")]


def test_the_neo4j_store_checks_before_it_talks_to_the_server() -> None:
    """A store with no driver at all: reaching the server would be an AttributeError."""
    pytest.importorskip("neo4j")
    from graph.stores.neo4j import Neo4jGraphStore

    unconnected = object.__new__(Neo4jGraphStore)
    with pytest.raises(InvalidRequestError, match="has no key"):
        unconnected.put_chunks([_chunk(names=("()",))])
    with pytest.raises(InvalidRequestError, match="has no key"):
        unconnected.put_chunk("c1", "d1", [EntityMention("", "service", "")], [])
    with pytest.raises(InvalidRequestError, match="community id"):
        unconnected.mark_stale([""])
    blank = CommunityReport("", 0, "t", "s", (), 0.0, "fp")
    with pytest.raises(InvalidRequestError, match="community id"):
        unconnected.put_reports([blank])
