"""Choosing the graph backend by settings; the Neo4j driver is imported only when chosen."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.runtime import open_runtime
from graph.stores import open_graph_store
from graph.stores.local import LocalGraphStore
from lore.errors import BackendUnavailableError, ConfigurationError
from lore.settings import load_settings


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_default_graph_is_the_embedded_store(tmp_path: Path) -> None:
    runtime = open_runtime(load_settings(data_dir=tmp_path))
    try:
        assert isinstance(runtime.graph(), LocalGraphStore)
    finally:
        runtime.close()


def test_neo4j_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LORE_GRAPH__BACKEND", "neo4j")
    with pytest.raises(ValidationError, match="neo4j_uri"):
        load_settings(data_dir=tmp_path)
    monkeypatch.setenv("LORE_GRAPH__NEO4J_URI", "neo4j://graph.example:7687")
    monkeypatch.setenv("LORE_GRAPH__NEO4J_PASSWORD", "s3cret")
    monkeypatch.setenv("LORE_GRAPH__NEO4J_DATABASE", "lore")
    cfg = load_settings(data_dir=tmp_path).graph
    assert (cfg.backend, cfg.neo4j_uri, cfg.neo4j_database) == (
        "neo4j",
        "neo4j://graph.example:7687",
        "lore",
    )
    assert cfg.neo4j_password is not None and "s3cret" not in repr(cfg)


def test_an_unreachable_neo4j_is_a_transient_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The real driver against a port nothing listens on: no fake server involved."""
    monkeypatch.setenv("LORE_GRAPH__BACKEND", "neo4j")
    monkeypatch.setenv("LORE_GRAPH__NEO4J_URI", f"bolt://127.0.0.1:{closed_port()}")
    runtime = open_runtime(load_settings(data_dir=tmp_path))
    try:
        with pytest.raises(BackendUnavailableError, match="did not answer"):
            runtime.graph()
    finally:
        runtime.close()


def test_unknown_backend_and_bad_uri_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="local, neo4j"):
        open_graph_store("memgraph")
    with pytest.raises(ConfigurationError, match="scheme"):
        open_graph_store("neo4j", uri="ftp://nowhere", password="x")


def test_the_default_path_never_imports_the_driver() -> None:
    code = (
        "import sys, api.cli, app.runtime, graph.stores, graph.stores.local; "
        "sys.exit('neo4j' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
