"""Issue 30: no server binds a non-loopback address with auth off unless told to.

``lore serve`` and ``lore mcp --transport http`` refuse it (exit 2, naming the way
out); the image and the compose stack, which bind 0.0.0.0, pass the same check with
their own environment, and allow the Host names their clients send.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from api.cli import _check_exposure, main
from lore.settings import Settings, load_settings
from scripts.dockerfile_install import instructions
from tests.conftest import ROOT

DEFAULT_VALUE = re.compile(r"^\$\{(\w+):-(.*)\}$")


@pytest.mark.parametrize(
    "command",
    [["serve", "--host", "0.0.0.0"], ["mcp", "--transport", "http", "--host", "192.168.1.5"]],
)
def test_a_public_bind_without_auth_is_refused(tmp_path: Path, command: list[str]) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), *command])
    assert result.exit_code == 2, result.output
    assert "--allow-unauthenticated" in result.output and "auth" in result.output
    assert not (tmp_path / "data").exists(), "refused before anything was created"


def test_loopback_auth_or_an_explicit_opt_in_pass(tmp_path: Path) -> None:
    off = load_settings(data_dir=tmp_path)
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        _check_exposure(off, host, allow_unauthenticated=False)
    _check_exposure(off, "0.0.0.0", allow_unauthenticated=True)
    _check_exposure(load_settings(data_dir=tmp_path, auth={"enabled": True}), "0.0.0.0", False)
    opted = load_settings(data_dir=tmp_path, api={"allow_unauthenticated": True})
    _check_exposure(opted, "0.0.0.0", allow_unauthenticated=False)


def _settings_from_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tmp: Path) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LORE_DATA_DIR", str(tmp))
    return load_settings()


def test_the_image_serves_on_0000_with_auth_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = instructions(ROOT / "Dockerfile")
    env: dict[str, str] = {}
    for step in steps:
        if step.keyword == "ENV":
            for word in shlex.split(step.args):
                name, _, value = word.partition("=")
                env[name] = value
    command = json.loads(next(s.args for s in steps if s.keyword == "CMD"))
    host = command[command.index("--host") + 1]
    assert command[:2] == ["lore", "serve"] and host == "0.0.0.0"
    monkeypatch.delenv("LORE_API__ALLOWED_HOSTS", raising=False)
    settings = _settings_from_env(monkeypatch, env, tmp_path)
    _check_exposure(settings, host, allow_unauthenticated=False)
    assert "localhost" in settings.api.allowed_hosts


def test_compose_api_passes_and_allows_its_host_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    api = compose["services"]["api"]
    env: dict[str, str] = {}
    for name, value in api["environment"].items():
        match = DEFAULT_VALUE.match(str(value))
        env[name] = match.group(2) if match else str(value)
    env.pop("LORE_DATA_DIR")
    for name in [n for n in env if not n.startswith(("LORE_AUTH", "LORE_API"))]:
        env.pop(name)
    monkeypatch.delenv("LORE_API__ALLOWED_HOSTS", raising=False)
    settings = _settings_from_env(monkeypatch, env, tmp_path)
    command = api["command"]
    _check_exposure(settings, command[command.index("--host") + 1], False)
    hosts = set(settings.api.allowed_hosts)
    assert {"localhost", "127.0.0.1", "api"} <= hosts  # healthcheck, published port, peers
    assert "localhost:8080" in " ".join(api["healthcheck"]["test"])
