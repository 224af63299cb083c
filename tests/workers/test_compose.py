"""docker-compose.yml: no Docker engine runs here, so its structure is checked instead."""

from __future__ import annotations

from typing import Any

import yaml

from tests.conftest import ROOT


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_services_healthchecks_and_volumes() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"api", "worker", "beat", "redis", "neo4j"}
    for name, service in services.items():
        assert service["healthcheck"]["test"], name
    for name in ("api", "worker", "beat"):
        assert "lore-data:/data" in services[name]["volumes"], name
        env = services[name]["environment"]
        assert env["LORE_DATA_DIR"] == "/data"
        assert env["LORE_BROKER__URL"].startswith("redis://redis:6379")
        assert env["LORE_LLM__BASE_URL"].startswith("${"), "the LLM endpoint comes from the env"
    assert set(compose["volumes"]) == {"lore-data", "neo4j-data"}


def test_commands_and_start_order() -> None:
    services = _compose()["services"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "workers.celery_app", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "workers.celery_app", "beat"]
    assert services["api"]["command"][:2] == ["lore", "serve"]
    for name in ("api", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["redis"]["condition"] == "service_healthy", name
    assert services["redis"]["command"][-4:] == ["--save", "", "--appendonly", "no"]
