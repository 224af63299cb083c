"""``lore`` as a script uses it (issue 32): pipes, JSON errors, flags anywhere.

Real subprocesses with stdout and stderr piped (never a terminal) and, unlike the other
CLI tests, no ``COLUMNS``: what a shell pipeline or an agent sees.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, ROOT

LORE = [sys.executable, "-m", "api.cli"]


def lore(*args: str, cwd: Path = ROOT, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [*LORE, *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT), **env_extra},
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The production corpus ingested, flags given after the subcommand."""
    directory = tmp_path_factory.mktemp("scripting") / "data"
    done = lore(
        "ingest",
        str(CORPUS / "production"),
        "-q",
        "--data-dir",
        str(directory),
        "--meta",
        "env=production",
    )
    assert done.returncode == 0, done.stderr
    assert "ingest:" not in done.stderr  # -q after the subcommand is honoured
    # a summary line longer than 80 columns is printed whole into a pipe
    summary = [line for line in done.stdout.splitlines() if line.startswith("job ")]
    assert len(summary) == 1 and len(summary[0]) > 80 and "store:" in summary[0], done.stdout
    return directory


def test_errors_under_json_are_json(data: Path) -> None:
    plain = lore("show", "no/such/doc.md", "--data-dir", str(data))
    as_json = lore("show", "no/such/doc.md", "--data-dir", str(data), "--json")
    assert plain.returncode == as_json.returncode == 1
    assert plain.stderr.startswith("Error: no document")
    error = json.loads(as_json.stderr)["error"]
    assert error["type"] == "NotFoundError"
    assert error["message"].startswith("no document 'no/such/doc.md'")
    assert plain.stderr == f"Error: {error['message']}\n"
    bad = lore("search", "x", "--top-k", "0", "--json", "--data-dir", str(data))
    assert bad.returncode == 1
    assert json.loads(bad.stderr)["error"]["type"] == "InvalidRequestError"
    before = lore("--json", "--data-dir", str(data), "search", "x", "--filter", "colour=blue")
    assert before.returncode == 1
    assert json.loads(before.stderr)["error"]["type"] == "FilterError"


def test_reindex_speaks_json(data: Path) -> None:
    done = lore("reindex", "--json", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["sparse"] == counts["dense"] > 0


def test_reindex_logs_progress_for_each_index_into_a_pipe(data: Path) -> None:
    done = lore("reindex", "--data-dir", str(data), LORE_CLI__PROGRESS_INTERVAL_S="0.0001")
    assert done.returncode == 0, done.stderr
    for index in ("sparse", "dense"):
        lines = [x for x in done.stderr.splitlines() if x.startswith(f"{index}: ")]
        assert lines and "(100%)" in lines[-1], done.stderr


def test_graph_build_logs_progress_into_a_pipe_and_show_suggests_near_names(
    data: Path,
) -> None:
    built = lore("graph", "build", "--data-dir", str(data), LORE_CLI__PROGRESS_INTERVAL_S="0.0001")
    assert built.returncode == 0, built.stderr
    lines = built.stderr.splitlines()  # (ingest extracted the chunks already)
    reports = [line for line in lines if line.startswith("reports: ")]
    assert reports and "done in" in reports[-1], built.stderr
    assert "(100%)" in reports[-1]

    near = lore("graph", "show", "ledger db", "--data-dir", str(data))
    assert near.returncode == 1
    assert "run 'lore graph build' first" not in near.stderr
    assert "Did you mean: ledger-db" in near.stderr, near.stderr
    as_json = json.loads(
        lore("graph", "show", "ledger db", "--json", "--data-dir", str(data)).stderr
    )
    assert as_json["error"]["type"] == "NotFoundError"
    assert as_json["error"]["hint"].startswith("Did you mean: ledger-db")


def test_ingest_progress_has_a_total(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(4):
        (corpus / f"doc{i}.md").write_text(f"# Runbook {i}\n\nERR_DISK_{i} on db-{i}.\n")
    done = lore(
        "ingest", str(corpus), LORE_DATA_DIR=str(tmp_path / "d"), LORE_CLI__PROGRESS_INTERVAL_S="9"
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ingest: ")]
    assert lines[0].startswith("ingest: 0/4 (0%)"), done.stderr  # at once, with the total
    assert lines[-1].startswith("ingest: 4/4 (100%)") and "done in" in lines[-1]


def test_status_forgets_failed_documents_whose_file_is_gone(tmp_path: Path) -> None:
    env = {"LORE_DATA_DIR": str(tmp_path / "d")}
    real = tmp_path / "real.md"
    real.write_text("# Real\n\nERR_REAL_1 lives here.\n")
    typo = lore("ingest", str(real), str(tmp_path / "rael.md"), cwd=tmp_path, **env)
    assert typo.returncode == 3  # one failed: no such file
    failed = json.loads(lore("status", "--json", cwd=tmp_path, **env).stdout)["failed"]
    assert [f["id"] for f in failed] == [f"{tmp_path.name}/rael.md"]
    forgot = lore("status", "--forget-missing", "--json", cwd=tmp_path, **env)
    assert forgot.returncode == 0, forgot.stderr
    info = json.loads(forgot.stdout)
    assert info["forgotten"] == [f"{tmp_path.name}/rael.md"] and info["failed"] == []
    assert info["counts"]["documents_done"] == 1  # the real one stays
    assert "documents_failed" not in info["counts"]
    again = json.loads(lore("status", "--json", cwd=tmp_path, **env).stdout)
    assert again["failed"] == []
