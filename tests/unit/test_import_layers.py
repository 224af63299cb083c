"""The import graph, read from the source: dependencies point one way, workers/ is Celery.

Layers, top to bottom: ``api`` → ``workers`` → ``app`` → ``ingest`` | ``retrieval`` →
``graph`` → ``lore``. A module may import its own package and any package below it;
``ingest`` and ``retrieval`` are siblings that do not import each other. Every import
counts, also one inside a function or under ``TYPE_CHECKING``. Within the layers, no
two modules import each other, directly or through others: the module-level import
graph has no cycle.
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


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path, packages: set[str]) -> dict[str, set[str]]:
    """Module → the modules of ``packages`` it imports (every import, relative ones too).

    ``from a.b import c`` names ``a.b.c`` when that is a module, else ``a.b``; importing
    a submodule is not counted as importing its package's ``__init__``.
    """
    paths = {
        _module_name(path, root): path
        for package in sorted(packages)
        for path in sorted((root / package).rglob("*.py"))
    }

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {module: set() for module in paths}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = (
                        module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    )
                    anchor = here[: len(here) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                    for alias in node.names
                ]
            for name in names:
                target = known(name)
                if target is not None and target != module:
                    graph[module].add(target)
    return graph


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules, the first repeated at the end), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            module, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                stack.pop()
                path.pop()
                on_path.discard(module)
                done.add(module)
            elif target in on_path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                stack.append((target, iter(sorted(graph[target]))))
                path.append(target)
                on_path.add(target)
    return None


def test_no_import_cycle_between_modules() -> None:
    cycle = _a_cycle(_import_graph(ROOT, PACKAGES))
    assert cycle is None, "modules importing each other: " + " → ".join(cycle or [])


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "a.py").write_text("from pkg.b import f\n", encoding="utf-8")
    (tmp_path / "pkg" / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.c import C\n"
        "def f() -> None: ...\n",
        encoding="utf-8",
    )
    (tmp_path / "pkg" / "c.py").write_text(
        "def g() -> None:\n    from . import a\n", encoding="utf-8"
    )
    graph = _import_graph(tmp_path, {"pkg"})
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.c"] == {"pkg.a"}
    assert _a_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    (tmp_path / "pkg" / "c.py").write_text("def g() -> None: ...\n", encoding="utf-8")
    assert _a_cycle(_import_graph(tmp_path, {"pkg"})) is None
