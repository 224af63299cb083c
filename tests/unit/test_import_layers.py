"""The import graph, read from the source: dependencies point one way, workers/ is Celery.

Layers, top to bottom: ``api`` → ``workers`` → ``app`` → ``ingest`` | ``retrieval`` →
``graph`` → ``lore``. A module may import its own package and any package below it;
``ingest`` and ``retrieval`` are siblings that do not import each other. Every import
counts, also one inside a function or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS: list[set[str]] = [
    {"api"},
    {"workers"},
    {"app"},
    {"ingest", "retrieval"},
    {"graph"},
    {"lore"},
]
PACKAGES = set().union(*LAYERS)
CELERY_MODULES = {
    "workers/__init__.py",
    "workers/celery_app.py",
    "workers/tasks.py",
    "workers/client.py",
    "workers/heartbeat.py",
}


def _level(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _sources() -> Iterator[tuple[str, Path]]:
    for package in sorted(PACKAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield package, path


def test_no_import_runs_up_or_sideways() -> None:
    wrong: list[str] = []
    for package, path in _sources():
        for line, module in _imports(path):
            target = module.split(".")[0]
            if target not in PACKAGES or target == package:
                continue
            if _level(target) <= _level(package):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_workers_holds_celery_alone() -> None:
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "workers").rglob("*.py")}
    assert modules == CELERY_MODULES
    for name in CELERY_MODULES - {"workers/__init__.py"}:
        imported = {m.split(".")[0] for _, m in _imports(ROOT / name)}
        # Celery, or its broker (the heartbeat of the worker processes is plain Redis)
        assert imported & {"celery", "workers", "redis"}, f"{name} is not Celery code"


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f() -> None:\n    from api.cli import main\n", encoding="utf-8")
    assert [m for _, m in _imports(probe)] == ["api.cli"]
    assert _level("api") < _level("lore")
