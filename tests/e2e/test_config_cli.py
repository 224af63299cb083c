"""Configuration as a user meets it: `lore init`, `lore config`, typos, extras, progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from api.settings_docs import REFERENCE_END, REFERENCE_START, settings_reference
from lore.settings import Settings
from tests.conftest import ROOT

LORE = [sys.executable, "-m", "api.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LORE_")}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def lore(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LORE, *args],
        check=False,
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_typo_in_a_variable_stops_the_command(tmp_path: Path) -> None:
    run = lore(tmp_path, "status", LORE_LLM__BASEURL="http://127.0.0.1:9/v1")
    assert run.returncode != 0
    assert "LORE_LLM__BASEURL" in run.stderr and "LORE_LLM__BASE_URL" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / ".lore").exists()


def test_init_then_config_round_trip(tmp_path: Path) -> None:
    assert lore(tmp_path, "init").returncode == 0
    assert (tmp_path / "lore.toml").is_file()
    again = lore(tmp_path, "init")
    assert again.returncode != 0 and "--force" in again.stderr
    shown = json.loads(lore(tmp_path, "config", "--json").stdout)
    assert shown["config_file"] == "lore.toml"
    rows = shown["settings"]
    assert {row["source"] for row in rows.values()} == {"default"}
    assert rows["search.rrf_k"]["value"] == 60 and rows["llm.base_url"]["value"] is None

    text = (tmp_path / "lore.toml").read_text()
    text = text.replace('# model = "gpt-4o-mini"', 'model = "qwen2.5:7b"')
    (tmp_path / "lore.toml").write_text(text)
    shown = json.loads(
        lore(
            tmp_path,
            "config",
            "--json",
            LORE_SEARCH__RRF_K="30",
            LORE_LLM__API_KEY="sk-very-secret",
        ).stdout
    )["settings"]
    assert shown["llm.model"] == {"value": "qwen2.5:7b", "source": "file lore.toml"}
    assert shown["search.rrf_k"] == {"value": 30, "source": "env LORE_SEARCH__RRF_K"}
    assert shown["llm.api_key"]["value"] == "**********"
    table = lore(tmp_path, "config", LORE_LLM__API_KEY="sk-very-secret")
    assert table.returncode == 0 and "sk-very-secret" not in table.stdout + table.stderr


def test_a_typo_in_the_file_names_the_closest_key(tmp_path: Path) -> None:
    (tmp_path / "lore.toml").write_text('[llm]\nbase_ur = "http://x/v1"\n')
    run = lore(tmp_path, "config")
    assert run.returncode != 0 and "llm.base_url" in run.stderr


def test_missing_extra_is_one_line(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['neo4j'] = None; from api.cli import main; main()"
    (tmp_path / "a.md").write_text("# A\n\nERR_X fires on host db-1 when the Ledger stalls.\n")
    run = subprocess.run(
        [sys.executable, "-c", hide, "ingest", "a.md"],
        check=False,
        cwd=tmp_path,
        env=clean_env(
            LORE_DATA_DIR=str(tmp_path / "data"),
            LORE_GRAPH__BACKEND="neo4j",
            LORE_GRAPH__NEO4J_URI="bolt://127.0.0.1:1",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "pip install 'lorekeeper[neo4j]'" in run.stderr
    errors = [line for line in run.stderr.splitlines() if not line.startswith("ingest: ")]
    assert "Traceback" not in run.stderr and len(errors) == 1  # progress lines aside


def test_progress_lines_off_a_terminal(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"doc{i}.md").write_text(
            f"# Runbook {i}\n\nWhen ERR_DISK_{i} fires on host db-{i}, the Payments service "
            f"stalls. Restart the Ledger worker and check `max_connections`.\n"
        )
    env = {"LORE_DATA_DIR": str(tmp_path / "data"), "LORE_CLI__PROGRESS_INTERVAL_S": "0.000001"}
    run = lore(tmp_path, "ingest", str(corpus), **env)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("ingest: ")]
    assert lines and lines[0].startswith("ingest: 0/6 (0%), ") and lines[0].endswith("/s")
    assert lines[-1].startswith("ingest: 6/6 (100%)") and "done in" in lines[-1]

    for i in range(6):
        (corpus / f"doc{i}.md").write_text(f"# Runbook {i}\n\nNow ERR_DISK_{i + 10} only.\n")
    quiet = lore(tmp_path, "--quiet", "ingest", str(corpus), **env)
    assert quiet.returncode == 0 and "ingest:" not in quiet.stderr
    (corpus / "doc0.md").write_text("# Runbook 0\n\nThen ERR_DISK_99.\n")
    as_json = lore(tmp_path, "ingest", "--json", str(corpus), **env)
    assert "ingest:" not in as_json.stderr
    json.loads(as_json.stdout)


def test_docs_settings_reference_is_generated() -> None:
    readme = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    start = readme.index(REFERENCE_START)
    end = readme.index(REFERENCE_END) + len(REFERENCE_END)
    assert readme[start:end] == settings_reference(Settings), (
        "docs/configuration.md settings reference is stale: run `lore config --reference`"
    )
