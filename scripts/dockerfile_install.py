"""Replay the Dockerfile's install steps in a clean virtualenv, without Docker.

No Docker engine runs on our machines, so this reads the ``Dockerfile``, and in a fresh
directory standing for the image's ``WORKDIR`` it performs, in order, every ``COPY`` (from
the repository, caches left out) and every ``RUN`` that calls ``pip install`` (run by
``bash`` with the new virtualenv first on ``PATH``). Other ``RUN`` steps (``useradd``)
need root and are skipped. The one translation: ``--index-url`` of the PyTorch CPU index
is dropped, because here pip takes the same pinned wheel from local disk. Afterwards the
installed package, not the copied source, must import ``lore``, ``api`` and ``workers``::

    python -m scripts.dockerfile_install [WORK_DIR]     # prints the seconds it took
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
IMPORT_CHECK = "import lore, api, workers"
INDEX_URL = re.compile(r"\s--index-url[= ](\S+)")


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case) and its argument text."""

    keyword: str
    args: str


def instructions(dockerfile: Path) -> list[Instruction]:
    """The Dockerfile's instructions in order, continuation lines joined, comments dropped."""
    found: list[Instruction] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        found.append(Instruction(keyword.upper(), args.strip()))
        pending = ""
    return found


def is_pip_install(step: Instruction) -> bool:
    """Whether a step is a ``RUN`` that calls ``pip install``."""
    return step.keyword == "RUN" and "pip install" in step.args


def local_command(command: str) -> str:
    """A ``RUN`` command as this machine runs it: the PyTorch CPU index left to local disk."""
    for url in INDEX_URL.findall(command):
        if url != TORCH_CPU_INDEX:
            raise ValueError(f"an index other than the PyTorch CPU index: {url}")
    return INDEX_URL.sub("", command)


def _copy(args: str, repo: Path, app: Path) -> None:
    *sources, target = shlex.split(args)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for source in sources:
        src = repo / source
        dest = app / target
        if src.is_dir():
            shutil.copytree(src, dest, ignore=ignore, dirs_exist_ok=True)
        else:
            dest = dest / src.name if target.endswith("/") or dest.is_dir() else dest
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)


def replay(work: Path, repo: Path = ROOT) -> float:
    """Build ``work/venv`` by the Dockerfile's steps, check the imports; the seconds it took."""
    started = time.monotonic()
    env_dir, app = work / "venv", work / "app"
    app.mkdir(parents=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    env["VIRTUAL_ENV"] = str(env_dir)
    for step in instructions(repo / "Dockerfile"):
        if step.keyword == "COPY":
            _copy(step.args, repo, app)
        elif is_pip_install(step):
            subprocess.run(["bash", "-ec", local_command(step.args)], cwd=app, env=env, check=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-c", IMPORT_CHECK], cwd=work, env=env, check=True)
    return time.monotonic() - started


def main() -> None:
    """Replay into the directory given (or a temporary one) and print the time taken."""
    if len(sys.argv) > 1:
        seconds = replay(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            seconds = replay(Path(tmp))
    print(f"Dockerfile install steps replayed in {seconds:.0f} s; {IMPORT_CHECK!r} passed")


if __name__ == "__main__":
    main()
