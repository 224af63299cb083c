"""The Neo4j server the tests run against, read from ``NEO4J_*``; skipped without one.

``NEO4J_URI`` points at a real Neo4j, or at the ArcadeDB Bolt stand-in for Neo4j that
``scripts/arcadedb_server.py`` starts (``.ci/run`` does, so CI always runs these tests).
The stand-in sets ``NEO4J_STAND_IN``; test ids then say ``neo4j-arcadedb-stand-in``
instead of ``neo4j``, so a report never passes ArcadeDB off as Neo4j.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

SKIP_REASON = (
    "NEO4J_URI not set (no Neo4j server here; "
    "`python -m scripts.arcadedb_server run -- pytest …` starts the ArcadeDB Bolt stand-in)"
)


@dataclass(frozen=True)
class Neo4jServer:
    """Where the server answers, and what it is."""

    uri: str
    user: str
    password: str
    database: str | None
    stand_in: str | None

    def store_options(self, namespace: str) -> dict[str, Any]:
        """Keyword arguments of ``Neo4jGraphStore`` for one namespace."""
        return {
            "uri": self.uri,
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "namespace": namespace,
        }

    def lore_env(self, namespace: str) -> dict[str, str]:
        """``LORE_GRAPH__*`` settings choosing this server as the graph backend."""
        env = {
            "LORE_GRAPH__BACKEND": "neo4j",
            "LORE_GRAPH__NEO4J_URI": self.uri,
            "LORE_GRAPH__NEO4J_USER": self.user,
            "LORE_GRAPH__NEO4J_PASSWORD": self.password,
            "LORE_GRAPH__NEO4J_NAMESPACE": namespace,
        }
        if self.database:
            env["LORE_GRAPH__NEO4J_DATABASE"] = self.database
        return env


def server_id() -> str:
    """The test id of the Neo4j run: ``neo4j``, or ``neo4j-arcadedb-stand-in``."""
    return "neo4j-arcadedb-stand-in" if os.environ.get("NEO4J_STAND_IN") else "neo4j"


def neo4j_param() -> Any:
    """The ``neo4j`` entry of a backend parametrisation, marked and honestly named."""
    return pytest.param("neo4j", marks=pytest.mark.neo4j, id=server_id())


def neo4j_server() -> Neo4jServer:
    """The configured server; skips the test (with the reason) when there is none."""
    uri = os.environ.get("NEO4J_URI")
    if not uri:
        pytest.skip(SKIP_REASON)
    return Neo4jServer(
        uri=uri,
        user=os.environ.get("NEO4J_USER", "neo4j"),
        password=os.environ.get("NEO4J_PASSWORD", ""),
        database=os.environ.get("NEO4J_DATABASE") or None,
        stand_in=os.environ.get("NEO4J_STAND_IN") or None,
    )


def fresh_namespace(prefix: str) -> str:
    """A namespace no other test or run uses."""
    return f"{prefix}-{uuid.uuid4().hex}"
