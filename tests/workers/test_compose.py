"""docker-compose.yml: no Docker engine runs here, so its structure is checked instead.

The stack must scale (``docker compose up --scale api=2 --scale worker=3``): PostgreSQL
is the store, nothing is shared on disk, no replica holds a fixed host port, Neo4j only
runs under its profile, and auth is on by default.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.conftest import ROOT

LORE_SERVICES = ("api", "worker", "beat")
DEFAULT_VALUE = re.compile(r"^\$\{(\w+):-(.*)\}$")


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def _default(value: str) -> str:
    """The value compose gives ``${VAR:-default}`` when VAR is unset (else ``value``)."""
    match = DEFAULT_VALUE.match(value)
    return match.group(2) if match else value


def _named_volumes(service: dict[str, Any]) -> set[str]:
    """The named volumes and host paths a service mounts (anonymous volumes left out)."""
    return {entry.split(":")[0] for entry in service.get("volumes", []) if ":" in entry}


def test_services_healthchecks_and_environment() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"api", "worker", "beat", "postgres", "redis", "neo4j"}
    for name, service in services.items():
        assert service["healthcheck"]["test"], name
        assert "container_name" not in service, f"{name}: a fixed name cannot scale"
    for name in LORE_SERVICES:
        env = services[name]["environment"]
        assert env["LORE_DATA_DIR"] == "/data"
        assert env["LORE_BROKER__URL"].startswith("redis://redis:6379")
        assert env["LORE_STORE__URL"].startswith("postgresql://lore:"), name
        assert env["LORE_STORE__URL"].endswith("@postgres:5432/lore"), name
        assert env["LORE_LLM__BASE_URL"].startswith("${"), "the LLM endpoint comes from the env"
        assert _default(env["LORE_AUTH__ENABLED"]) == "true", f"{name}: auth on by default"
        assert _default(env["LORE_GRAPH__BACKEND"]) == "local", name
    assert set(compose["volumes"]) == {"pg-data", "neo4j-data"}


def test_postgres_is_the_store() -> None:
    postgres = _compose()["services"]["postgres"]
    assert postgres["image"] == "postgres:15"
    assert postgres["volumes"] == ["pg-data:/var/lib/postgresql/data"]
    check = postgres["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL" and check[1].startswith("pg_isready"), check
    env = postgres["environment"]
    assert (env["POSTGRES_USER"], env["POSTGRES_DB"]) == ("lore", "lore")
    assert env["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-lorekeeper}"


def test_no_shared_filesystem() -> None:
    services = _compose()["services"]
    assert "volumes" not in services["worker"], "workers need no filesystem of their own"
    assert "volumes" not in services["beat"]
    api_volumes = services["api"]["volumes"]
    assert api_volumes == ["/data"], "each api replica: its own anonymous index directory"
    mounted = {name: _named_volumes(services[name]) for name in LORE_SERVICES}
    assert mounted == {"api": set(), "worker": set(), "beat": set()}


def test_ports_loopback_and_free_to_scale() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for port in service.get("ports", []):
            address, host, container = str(port).split(":")
            assert address == "127.0.0.1", f"{name}: {port} is not bound to loopback"
            assert container, port
            if name in ("api", "worker"):
                assert host == "" or "-" in host, f"{name}: {port} fixes one host port"
    assert services["api"]["ports"] == ["127.0.0.1::8080"]
    for name in ("postgres", "redis", "neo4j", "worker", "beat"):
        assert "ports" not in services[name], f"{name} is reached on the compose network only"


def test_neo4j_only_under_its_profile() -> None:
    services = _compose()["services"]
    assert services["neo4j"]["profiles"] == ["neo4j"]
    for name, service in services.items():
        if name == "neo4j":
            continue
        assert "profiles" not in service, f"{name} must start by default"
        assert "neo4j" not in service.get("depends_on", {}), f"{name} waits for Neo4j"


def test_commands_and_start_order() -> None:
    services = _compose()["services"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "workers.celery_app", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "workers.celery_app", "beat"]
    assert services["api"]["command"][:2] == ["lore", "serve"]
    for name in LORE_SERVICES:
        depends = services[name]["depends_on"]
        assert set(depends) == {"postgres", "redis"}, name
        for dependency in depends.values():
            assert dependency["condition"] == "service_healthy", name
    assert services["redis"]["command"][-4:] == ["--save", "", "--appendonly", "no"]
