"""`lore --version` and `lore --help` import nothing heavy (issue 32: a CLI that starts at once).

Each check runs in a fresh interpreter: the test process has imported everything.
"""

import json
import subprocess
import sys

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
