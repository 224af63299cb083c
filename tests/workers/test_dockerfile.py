"""The Dockerfile's install steps: their order and pins, and a replay in a clean virtualenv.

No Docker engine runs here. The first tests read the Dockerfile; the ``install`` test
replays its ``RUN pip`` lines (``scripts/dockerfile_install.py``) into a fresh virtualenv
with wheels from this machine's disk (about two minutes, no network).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from scripts.dockerfile_install import (
    TORCH_CPU_INDEX,
    Instruction,
    instructions,
    is_pip_install,
    local_command,
    replay,
)
from tests.conftest import ROOT

SOURCE_DIRS = {"lore", "graph", "ingest", "retrieval", "app", "workers", "api"}


def _steps() -> list[Instruction]:
    return instructions(ROOT / "Dockerfile")


def _torch_spec() -> str:
    match = re.search(r"^TORCH_SPEC \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "the Makefile pins torch in TORCH_SPEC"
    return match.group(1)


def _pip_steps(steps: list[Instruction]) -> list[int]:
    """Where the ``RUN pip install`` steps are, in order."""
    return [i for i, step in enumerate(steps) if is_pip_install(step)]


def _first_source_copy(steps: list[Instruction]) -> int:
    copies = [
        i
        for i, step in enumerate(steps)
        if step.keyword == "COPY" and set(step.args.split()[:-1]) & SOURCE_DIRS
    ]
    assert copies, "the Dockerfile copies the source"
    return copies[0]


def test_torch_pinned_like_the_makefile_before_the_source() -> None:
    steps = _steps()
    pips = _pip_steps(steps)
    torch = steps[pips[0]].args
    assert torch == f"pip install --index-url {TORCH_CPU_INDEX} {_torch_spec()}"
    assert local_command(torch) == f"pip install {_torch_spec()}", "same pin on local disk"
    assert pips[0] < _first_source_copy(steps)
    assert pips[0] < min(i for i, step in enumerate(steps) if step.keyword == "COPY")


def test_dependencies_cached_before_the_source_then_no_deps() -> None:
    steps = _steps()
    pips = _pip_steps(steps)
    assert len(pips) == 3, [steps[i].args for i in pips]
    copy_pyproject = steps.index(Instruction("COPY", "pyproject.toml ./"))
    first_source = _first_source_copy(steps)
    assert pips[0] < copy_pyproject < pips[1] < first_source < pips[2]
    copied = {word for step in steps if step.keyword == "COPY" for word in step.args.split()[:-1]}
    assert copied >= SOURCE_DIRS | {"pyproject.toml", "README.md"}
    last_copy = max(i for i, step in enumerate(steps) if step.keyword == "COPY")
    assert last_copy < pips[2]
    assert steps[pips[2]].args == "pip install --no-deps ."


def test_dependency_step_installs_core_and_service_extras(tmp_path: Path) -> None:
    steps = _steps()
    command = steps[_pip_steps(steps)[1]].args
    write_requirements = command.split(" && ")[0]
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    subprocess.run(["bash", "-ec", write_requirements], cwd=tmp_path, check=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    expected = [*project["dependencies"], *extras["neo4j"], *extras["mcp"]]
    assert (tmp_path / "requirements.txt").read_text().splitlines() == expected
    assert "pip install -r requirements.txt" in command


def test_runs_as_an_unprivileged_user() -> None:
    steps = _steps()
    users = [step.args for step in steps if step.keyword == "USER"]
    assert users == ["lore"]
    assert any("useradd" in step.args and "lore" in step.args for step in steps)
    last_run = max(i for i, step in enumerate(steps) if step.keyword == "RUN")
    assert steps.index(Instruction("USER", "lore")) > last_run
    assert Instruction("ENV", "LORE_DATA_DIR=/data") in steps


@pytest.mark.install
def test_install_steps_in_a_clean_virtualenv(tmp_path: Path) -> None:
    seconds = replay(tmp_path)
    assert seconds < 600
    site = list((tmp_path / "venv" / "lib").glob("python3.*/site-packages"))
    assert len(site) == 1
    installed = {path.name for path in site[0].iterdir()}
    assert installed >= SOURCE_DIRS, "the package itself is installed, not only its source"
    version = _torch_spec().removeprefix("torch==")
    assert any(name.startswith(f"torch-{version}") for name in installed), "the pinned torch"
