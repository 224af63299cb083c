"""The service as an operator runs it: keys from the CLI, `lore serve --auth`, schemathesis."""

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import CORPUS, ROOT
from tests.e2e.test_cli import lore, serving


def test_keys_confine_each_caller_to_its_namespace(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for space, folder in (("team-a", "payments-api"), ("team-b", "search-indexer")):
        done = lore(data, "--namespace", space, "ingest", str(CORPUS / "staging" / folder))
        assert done.returncode == 0, done.stderr
    created = lore(data, "keys", "create", "--namespace", "team-a", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    assert key.startswith("lk_") and key not in (data / "keys.sqlite3").read_bytes().decode(
        "latin-1"
    )  # stored hashed
    with serving(data, tmp_path / "serve.log", "--auth") as base:
        query = {"search_text": "timeouts and errors", "top_k": 10}
        assert httpx.post(f"{base}/v1/memory/query", json=query).status_code == 401
        own = httpx.post(
            f"{base}/v1/memory/query",
            json=query,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert own.status_code == 200, own.text
        sources = {r["source"] for r in own.json()["results"]}
        assert sources and all("payments-api" in s for s in sources)
        other = httpx.post(
            f"{base}/v1/memory/query?namespace=team-b",
            json=query,
            headers={"Authorization": f"Bearer {key}"},
        )
        assert other.status_code == 404
    listed = json.loads(lore(data, "keys", "list", "--json").stdout)
    assert [k["namespaces"] for k in listed] == [["team-a"]] and "key" not in listed[0]


def test_schemathesis_finds_no_server_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert lore(data, "ingest", str(CORPUS / "staging" / "payments-api")).returncode == 0
    assert lore(data, "graph", "build").returncode == 0
    with serving(data, tmp_path / "serve.log") as base:
        warm = httpx.post(f"{base}/v1/ask", json={"question": "What is PAY-5031?"}, timeout=300)
        assert warm.status_code == 200, warm.text  # the model loads once, before the clock
        run = subprocess.run(
            [
                str(Path(sys.executable).parent / "schemathesis"),
                "run",
                f"{base}/openapi.json",
                "--checks",
                "not_a_server_error",
                "--max-examples",
                "10",
                "--seed",
                "1",
                "--request-timeout",
                "120",
                "--suppress-health-check=filter_too_much",  # ids with '/' are hard to generate
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert run.returncode == 0, run.stdout[-3000:]
    generated = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert generated and generated.group(1) == generated.group(2), run.stdout[-2000:]
    assert ROOT.exists()
