"""The Cypher statements of the Neo4j GraphStore, in one place to review.

Every value is a parameter (``$ns`` is the store's namespace, present on every node and
``RELATED`` relationship and matched by every statement); labels, relationship types
and property names are constants, never built from input. Two rules keep these portable
beyond the servers they were tried on (the ArcadeDB stand-in accepts both mistakes,
Neo4j does not), each checked by a test: no statement reads (``MATCH``) after a
``CREATE`` without a ``WITH`` between them, and no key reaches a ``MERGE`` before Python
has refused a null or empty one (:func:`graph.stores.merging.checked_chunks`,
:func:`~graph.stores.merging.required_ids`). The model::

    (:LoreChunk {ns, id, document_id})
        -[:MENTIONS {name, type, description, occurrences}]->(:LoreEntity {ns, key})
    (:LoreEntity {ns, key})-[:RELATED {ns, chunk_id, weight, description}]->(:LoreEntity)
    (:LoreCommunity {ns, id, level, cluster, parent, members})
    (:LoreReport {ns, community_id, level, fingerprint, json})
    (:LoreTouched {ns, key})   (:LoreStale {ns, id})
    (:LoreMember {ns, community, key})   (:LoreMeta {ns, name, value})

A ``LoreMember`` per (community, member key) finds the communities holding an entity
through an index (``members`` is a list property, which no index serves); ``LoreMeta``
holds the upkeep's counters (communities, largest cluster number, drift bookkeeping).

One ``MENTIONS`` per (chunk, entity key) and one ``RELATED`` per (source, target, chunk),
stored from the smaller key to the larger: removing a chunk deletes exactly its own
relationships, and an entity is a ``LoreEntity`` with at least one ``MENTIONS`` left.
An entity node with no relationship at all is deleted (it may exist without mentions
while a relation still ends at it, as in the embedded store).
"""

from __future__ import annotations

from typing import Final

SCHEMA: Final = (
    "CREATE CONSTRAINT lore_entity_key IF NOT EXISTS "
    "FOR (e:LoreEntity) REQUIRE (e.ns, e.key) IS UNIQUE",
    "CREATE CONSTRAINT lore_chunk_id IF NOT EXISTS "
    "FOR (c:LoreChunk) REQUIRE (c.ns, c.id) IS UNIQUE",
    "CREATE CONSTRAINT lore_community_id IF NOT EXISTS "
    "FOR (c:LoreCommunity) REQUIRE (c.ns, c.id) IS UNIQUE",
    "CREATE CONSTRAINT lore_report_id IF NOT EXISTS "
    "FOR (r:LoreReport) REQUIRE (r.ns, r.community_id) IS UNIQUE",
    "CREATE CONSTRAINT lore_touched_key IF NOT EXISTS "
    "FOR (t:LoreTouched) REQUIRE (t.ns, t.key) IS UNIQUE",
    "CREATE CONSTRAINT lore_stale_id IF NOT EXISTS "
    "FOR (s:LoreStale) REQUIRE (s.ns, s.id) IS UNIQUE",
    "CREATE INDEX lore_related_chunk IF NOT EXISTS FOR ()-[r:RELATED]-() ON (r.ns, r.chunk_id)",
    "CREATE INDEX lore_community_parent IF NOT EXISTS FOR (c:LoreCommunity) ON (c.ns, c.parent)",
    "CREATE INDEX lore_member_key IF NOT EXISTS FOR (m:LoreMember) ON (m.ns, m.key)",
    "CREATE INDEX lore_chunk_document IF NOT EXISTS FOR (c:LoreChunk) ON (c.ns, c.document_id)",
    "CREATE INDEX lore_member_community IF NOT EXISTS FOR (m:LoreMember) ON (m.ns, m.community)",
    "CREATE INDEX lore_report_chunks IF NOT EXISTS FOR (r:LoreReport) ON (r.ns, r.level, r.chunks)",
    "CREATE CONSTRAINT lore_meta_name IF NOT EXISTS "
    "FOR (m:LoreMeta) REQUIRE (m.ns, m.name) IS UNIQUE",
)

# -- writes: a chunk's contributions ----------------------------------------------------

CHUNKS_OF_DOCUMENTS: Final = """
UNWIND $document_ids AS document_id
MATCH (c:LoreChunk {ns: $ns, document_id: document_id})
RETURN c.id AS id
"""

STORED_CHUNKS: Final = """
UNWIND $chunk_ids AS chunk_id
MATCH (c:LoreChunk {ns: $ns, id: chunk_id})
RETURN c.id AS id
"""

DELETE_MENTIONS: Final = """
UNWIND $chunk_ids AS chunk_id
MATCH (:LoreChunk {ns: $ns, id: chunk_id})-[m:MENTIONS]->(e:LoreEntity)
DELETE m
RETURN DISTINCT e.key AS key
"""

DELETE_RELATIONS: Final = """
UNWIND $chunk_ids AS chunk_id
MATCH (a)-[r:RELATED {ns: $ns, chunk_id: chunk_id}]->(b)
DELETE r
RETURN DISTINCT a.key AS source, b.key AS target
"""

DELETE_CHUNKS: Final = """
UNWIND $chunk_ids AS chunk_id
MATCH (c:LoreChunk {ns: $ns, id: chunk_id})
DETACH DELETE c
"""

MERGE_CHUNKS: Final = """
UNWIND $chunks AS row
MERGE (c:LoreChunk {ns: $ns, id: row.chunk_id})
SET c.document_id = row.document_id
"""

CREATE_MENTIONS: Final = """
UNWIND $rows AS row
MATCH (c:LoreChunk {ns: $ns, id: row.chunk_id})
MERGE (e:LoreEntity {ns: $ns, key: row.key})
CREATE (c)-[:MENTIONS {
    name: row.name, type: row.type, description: row.description, occurrences: row.count
}]->(e)
"""

CREATE_RELATIONS: Final = """
UNWIND $rows AS row
MERGE (a:LoreEntity {ns: $ns, key: row.source})
MERGE (b:LoreEntity {ns: $ns, key: row.target})
CREATE (a)-[:RELATED {
    ns: $ns, chunk_id: row.chunk_id, weight: row.weight, description: row.description
}]->(b)
"""

COUNT_UNMENTIONED: Final = """
UNWIND $keys AS key
MATCH (e:LoreEntity {ns: $ns, key: key})
WHERE NOT EXISTS { (:LoreChunk)-[:MENTIONS]->(e) }
RETURN count(e) AS gone
"""

DELETE_ORPHANS: Final = """
UNWIND $keys AS key
MATCH (e:LoreEntity {ns: $ns, key: key})
WHERE NOT EXISTS { (e)--() }
DELETE e
"""

TOUCH: Final = """
UNWIND $keys AS key
MERGE (:LoreTouched {ns: $ns, key: key})
"""

# -- reads: entities and relations -------------------------------------------------------

EXTRACTED_CHUNKS: Final = "MATCH (c:LoreChunk {ns: $ns}) RETURN c.id AS id"

ENTITY_MENTIONS: Final = """
UNWIND $keys AS key
MATCH (e:LoreEntity {ns: $ns, key: key})<-[m:MENTIONS]-(c:LoreChunk)
RETURN e.key AS key, c.id AS chunk_id, m.name AS name, m.type AS type,
       m.description AS description, m.occurrences AS occurrences
"""

INCIDENT_RELATIONS: Final = """
MATCH (:LoreEntity {ns: $ns, key: $key})-[r:RELATED]-(other:LoreEntity)
RETURN other.key AS other, r.weight AS weight
"""

RELATIONS_AMONG: Final = """
UNWIND $sources AS key
MATCH (a:LoreEntity {ns: $ns, key: key})-[r:RELATED]->(b:LoreEntity)
WHERE b.key IN $keys
RETURN a.key AS source, b.key AS target, r.chunk_id AS chunk_id,
       r.weight AS weight, r.description AS description
"""

ALL_RELATIONS: Final = """
MATCH (a:LoreEntity {ns: $ns})-[r:RELATED]->(b:LoreEntity)
RETURN a.key AS source, b.key AS target, r.chunk_id AS chunk_id,
       r.weight AS weight, r.description AS description
"""

ENTITY_KEYS: Final = """
MATCH (e:LoreEntity {ns: $ns})
WHERE EXISTS { (:LoreChunk)-[:MENTIONS]->(e) }
RETURN e.key AS key
"""

ENTITIES_OF_CHUNKS: Final = """
UNWIND $values AS chunk_id
MATCH (c:LoreChunk {ns: $ns, id: chunk_id})-[:MENTIONS]->(e:LoreEntity)
RETURN c.id AS k, e.key AS v
"""

MENTIONED_AS: Final = """
UNWIND $values AS chunk_id
MATCH (c:LoreChunk {ns: $ns, id: chunk_id})-[m:MENTIONS]->(e:LoreEntity)
WHERE m.type = $kind
RETURN c.id AS k, e.key AS key, m.name AS name
"""

CHUNKS_OF_ENTITIES: Final = """
UNWIND $values AS key
MATCH (e:LoreEntity {ns: $ns, key: key})<-[:MENTIONS]-(c:LoreChunk)
RETURN e.key AS k, c.id AS v
"""

COUNT_ENTITIES: Final = """
MATCH (e:LoreEntity {ns: $ns})
WHERE EXISTS { (:LoreChunk)-[:MENTIONS]->(e) }
RETURN count(e) AS n
"""

COUNT_RELATIONS: Final = """
MATCH (a:LoreEntity {ns: $ns})-[:RELATED]->(b:LoreEntity)
WITH DISTINCT a, b
RETURN count(*) AS n
"""

COUNT_COMMUNITIES: Final = "MATCH (c:LoreCommunity {ns: $ns}) RETURN count(c) AS n"

COUNT_CHUNKS: Final = "MATCH (c:LoreChunk {ns: $ns}) RETURN count(c) AS n"

# -- communities and reports (replace-all) ----------------------------------------------

DELETE_COMMUNITIES: Final = "MATCH (c:LoreCommunity {ns: $ns}) DETACH DELETE c"

CREATE_COMMUNITIES: Final = """
UNWIND $rows AS row
CREATE (c:LoreCommunity {ns: $ns, id: row.id})
SET c.level = row.level, c.cluster = row.cluster, c.parent = row.parent,
    c.members = row.members
"""

COMMUNITIES: Final = """
MATCH (c:LoreCommunity {ns: $ns})
WHERE $level IS NULL OR c.level = $level
RETURN c.id AS id, c.level AS level, c.cluster AS cluster, c.parent AS parent,
       c.members AS members
"""

# -- communities and reports, a few at a time (a report job: one community, its children) --

COMMUNITIES_BY_ID: Final = """
UNWIND $ids AS community_id
MATCH (c:LoreCommunity {ns: $ns, id: community_id})
RETURN c.id AS id, c.level AS level, c.cluster AS cluster, c.parent AS parent,
       c.members AS members
"""

CHILD_COMMUNITIES: Final = """
UNWIND $ids AS parent_id
MATCH (c:LoreCommunity {ns: $ns, parent: parent_id})
RETURN c.id AS id, c.level AS level, c.cluster AS cluster, c.parent AS parent,
       c.members AS members
"""

REPORTS_BY_ID: Final = """
UNWIND $ids AS community_id
MATCH (r:LoreReport {ns: $ns, community_id: community_id})
RETURN r.community_id AS community_id, r.level AS level, r.json AS json
"""

REPORTS: Final = """
MATCH (r:LoreReport {ns: $ns})
WHERE $level IS NULL OR r.level = $level
RETURN r.community_id AS community_id, r.level AS level, r.json AS json
"""

REPORT_IDS: Final = "MATCH (r:LoreReport {ns: $ns}) RETURN r.community_id AS id"

DELETE_REPORTS_OF: Final = """
UNWIND $ids AS community_id
MATCH (r:LoreReport {ns: $ns, community_id: community_id})
DETACH DELETE r
"""

# -- reports, a few at a time (put_reports) ----------------------------------------------

CURRENT_COMMUNITIES: Final = """
UNWIND $ids AS community_id
MATCH (c:LoreCommunity {ns: $ns, id: community_id})
RETURN c.id AS id
"""

# The write lock is taken (a property set and removed) before the report is read, as
# Neo4j's documentation advises against lost updates under read committed: from here to
# the commit no other transaction changes or deletes it, so what Python compares is what
# the write replaces. Ids come sorted, so two writers take their locks in the same order.
LOCK_REPORTS: Final = """
UNWIND $ids AS community_id
MATCH (r:LoreReport {ns: $ns, community_id: community_id})
SET r.lore_lock = true
REMOVE r.lore_lock
RETURN r.community_id AS community_id, r.json AS json
"""

PUT_REPORTS: Final = """
UNWIND $rows AS row
MERGE (r:LoreReport {ns: $ns, community_id: row.community_id})
SET r.level = row.level, r.fingerprint = row.fingerprint, r.json = row.json,
    r.chunks = row.chunks
"""

# -- the hierarchy by diff, members by key, counters ---------------------------------------

UPSERT_COMMUNITIES: Final = """
UNWIND $rows AS row
MERGE (c:LoreCommunity {ns: $ns, id: row.id})
SET c.level = row.level, c.cluster = row.cluster, c.parent = row.parent,
    c.members = row.members
"""

DELETE_COMMUNITIES_BY_ID: Final = """
UNWIND $ids AS community_id
MATCH (c:LoreCommunity {ns: $ns, id: community_id})
DETACH DELETE c
"""

DELETE_ALL_MEMBERS: Final = "MATCH (m:LoreMember {ns: $ns}) DELETE m"

MEMBERS_OF: Final = """
UNWIND $ids AS community_id
MATCH (m:LoreMember {ns: $ns, community: community_id})
RETURN m.community AS community, m.key AS key
"""

DELETE_MEMBER_ROWS: Final = """
UNWIND $rows AS row
MATCH (m:LoreMember {ns: $ns, community: row.community, key: row.key})
DELETE m
"""

CREATE_MEMBERS: Final = """
UNWIND $rows AS row
CREATE (:LoreMember {ns: $ns, community: row.community, key: row.key})
"""

COMMUNITIES_HOLDING: Final = """
UNWIND $keys AS key
MATCH (m:LoreMember {ns: $ns, key: key})
RETURN DISTINCT m.community AS id
"""

RELATIONS_FROM: Final = """
UNWIND $keys AS key
MATCH (a:LoreEntity {ns: $ns, key: key})-[r:RELATED]->(b:LoreEntity)
RETURN a.key AS source, b.key AS target, r.chunk_id AS chunk_id,
       r.weight AS weight, r.description AS description
"""

RELATIONS_TO: Final = """
UNWIND $keys AS key
MATCH (b:LoreEntity {ns: $ns, key: key})<-[r:RELATED]-(a:LoreEntity)
RETURN a.key AS source, b.key AS target, r.chunk_id AS chunk_id,
       r.weight AS weight, r.description AS description
"""

LARGEST_REPORTS: Final = """
MATCH (r:LoreReport {ns: $ns, level: $level})
WHERE r.chunks IS NOT NULL
RETURN r.community_id AS id, r.chunks AS chunks
ORDER BY r.chunks DESC
LIMIT $limit
"""

HIERARCHY_COUNTED: Final = """
MATCH (c:LoreCommunity {ns: $ns})
RETURN count(c) AS n, max(c.cluster) AS top
"""

META: Final = """
UNWIND $names AS name
MATCH (m:LoreMeta {ns: $ns, name: name})
RETURN m.name AS name, m.value AS value
"""

SET_META: Final = """
UNWIND $rows AS row
MERGE (m:LoreMeta {ns: $ns, name: row.name})
SET m.value = row.value
"""

# the generation of the communities and reports: bumped in every transaction writing them
BUMP_GENERATION: Final = """
MERGE (m:LoreMeta {ns: $ns, name: $name})
SET m.value = toString(coalesce(toInteger(m.value), 0) + 1)
"""

# -- staleness marks -----------------------------------------------------------------------

TOUCHED: Final = "MATCH (t:LoreTouched {ns: $ns}) RETURN t.key AS key"

CLEAR_TOUCHED: Final = """
UNWIND $keys AS key
MATCH (t:LoreTouched {ns: $ns, key: key})
DELETE t
"""

MARK_STALE: Final = """
UNWIND $ids AS community_id
MERGE (:LoreStale {ns: $ns, id: community_id})
"""

STALE: Final = "MATCH (s:LoreStale {ns: $ns}) RETURN s.id AS id"

CLEAR_STALE: Final = """
UNWIND $ids AS community_id
MATCH (s:LoreStale {ns: $ns, id: community_id})
DELETE s
"""

# -- dropping a namespace, a bounded batch per transaction --------------------------------

DROP_BATCH: Final = (
    "MATCH (n:LoreEntity {ns: $ns}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreChunk {ns: $ns}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreCommunity {ns: $ns}) WITH n LIMIT $batch "
    "DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreReport {ns: $ns}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreTouched {ns: $ns}) WITH n LIMIT $batch "
    "DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreStale {ns: $ns}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreMember {ns: $ns}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
    "MATCH (n:LoreMeta {ns: $ns}) WITH n LIMIT $batch DETACH DELETE n RETURN count(*) AS deleted",
)
