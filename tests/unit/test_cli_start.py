"""`lore --version` and `lore --help` import nothing heavy (issue 32: a CLI that starts at once).

Each check runs in a fresh interpreter: the test process has imported everything.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Imported only by the commands that need them (the figures: bench/cli_start.py).
HEAVY = (
    "torch",
    "onnxruntime",
    "tantivy",
    "fastapi",
    "graspologic_native",
    "sentence_transformers",
    "transformers",
    "celery",
    "openai",
    "uvicorn",
    "numpy",
    "rich",
    "app.runtime",
)

PROBE = """
import json, sys
from api.cli import main
try:
    main({args!r})
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["graph", "--help"]])
def test_version_and_help_import_nothing_heavy(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "heavy": []}


# What only ingestion, questions or the graph build need: a search loads none of it.
NOT_FOR_A_SEARCH = (
    "bs4",
    "app.ingest",
    "app.steps",
    "ingest.loaders",
    "ingest.pipeline",
    "retrieval.ask",
    "retrieval.global_search",
    "graph.llm_reports",
    "lore.llm",
    "fastapi",
    "rich",
)

SEARCH_PROBE = """
import json, sys
from api.cli import main
try:
    main(["search", "HTTP 504", "--json"])
except SystemExit as exc:
    code = exc.code
from lore.tokens import counter_for
print(json.dumps({{
    "code": code,
    "loaded": [m for m in {modules!r} if m in sys.modules],
    "counters": counter_for.cache_info().currsize,
}}))
"""


def test_a_search_loads_nothing_only_ingestion_or_questions_need(tmp_path: Path) -> None:
    """`lore search` opens the searcher only: no loaders, asker, LLM client or word counter."""
    (tmp_path / "r.md").write_text("# Gateway\n\nOn HTTP 504 from payments-api, page on-call.\n")
    env = {**os.environ, "LORE_DATA_DIR": str(tmp_path / "data")}
    ingested = subprocess.run(
        [sys.executable, "-m", "api.cli", "-q", "ingest", str(tmp_path / "r.md")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ingested.returncode == 0, ingested.stderr
    done = subprocess.run(
        [sys.executable, "-c", SEARCH_PROBE.format(modules=NOT_FOR_A_SEARCH)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lines = done.stdout.strip().splitlines()
    found = json.loads("\n".join(lines[:-1]))
    assert found["results"][0]["source"].endswith("r.md")
    assert json.loads(lines[-1]) == {"code": 0, "loaded": [], "counters": 0}
