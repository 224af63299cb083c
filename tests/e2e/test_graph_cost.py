"""Cost before and during an LLM build, through ``lore`` against the local test server.

The OpenAI-compatible test server counts usage with the packaged model's word pieces,
the unit the dry run estimates in, so what is checked is the dry run's prediction of
the calls and their prompts (and, once replies are cached, their replies) — not how
close word pieces come to a real model's tokenizer.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lore.tokens import counter_for, packaged_model_dir
from tests.conftest import CORPUS
from tests.e2e.test_graph_lifecycle import lore, ok
from tests.openai_test_server import OpenAITestServer


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    counter = counter_for(packaged_model_dir())
    with OpenAITestServer(count_tokens=counter.count) as running:
        yield running


def within(estimate: int, counted: int, share: float = 0.10) -> bool:
    return abs(estimate - counted) <= share * counted


def dry_run_on_an_offline_graph(home: Path, data: Path, llm: dict[str, str]) -> dict[str, Any]:
    """A dry run without --reextract says the graph is the offline extractor's, and the cost."""
    honest: dict[str, Any] = json.loads(
        ok(lore(home, data, "graph", "build", "--dry-run", "--json", **llm))
    )
    assert honest["chunks"] == 0 and honest["stored_extractor"].startswith("offline")
    said = ok(lore(home, data, "graph", "build", "--dry-run", **llm))
    assert "extracted by 'offline" in said and "--reextract` would extract all" in said
    return honest


def test_dry_run_predicts_the_build_and_a_budget_stops_and_resumes(
    tmp_path: Path, server: OpenAITestServer
) -> None:
    home, data = tmp_path, tmp_path / "data"
    shutil.copytree(CORPUS / "production" / "payments-api", home / "docs")
    ok(lore(home, data, "ingest", "docs"))  # offline: no LLM configured yet
    offline = ok(lore(home, data, "graph", "build"))
    assert "LLM calls: 0" in offline
    graph_before = ok(lore(home, data, "graph", "export"))
    llm = {
        "LORE_LLM__BASE_URL": server.base_url,
        "LORE_LLM__MODEL": "test-model",
        "LORE_LLM__MAX_CONCURRENCY": "2",
        "LORE_GRAPH__REPORTS": "extractive",
    }

    # configuring an LLM keeps the offline graph and says how to redo it
    kept = lore(home, data, "graph", "build", **llm)
    assert kept.returncode == 0, kept.stderr
    assert "--reextract" in kept.stderr and server.chat_calls == 0
    assert ok(lore(home, data, "graph", "export")) == graph_before

    honest = dry_run_on_an_offline_graph(home, data, llm)

    first = json.loads(
        ok(lore(home, data, "graph", "build", "--dry-run", "--reextract", "--json", **llm))
    )
    assert first["chunks"] >= 6 and first["extraction_calls"] == first["chunks"]
    assert first["stored_extractor"] is None  # --reextract: that is what it counts
    assert honest["reextract_chunks"] == first["chunks"]
    assert honest["reextract_calls"] == first["extraction_calls"]
    assert 0 < honest["reextract_tokens"] <= first["total_tokens"]
    assert first["extraction_cache_hits"] == 0 and first["report_calls"] == 0
    assert server.chat_calls == 0  # a dry run sends nothing

    # a budget of about half the estimate stops the re-extraction cleanly (exit 4)
    budget = first["total_tokens"] // 2
    limited = {**llm, "LORE_LLM__BUDGET_TOKENS_PER_RUN": str(budget)}
    stopped = lore(home, data, "graph", "build", "--reextract", "--json", **limited)
    assert stopped.returncode == 4, stopped.stderr
    part = json.loads(stopped.stdout)
    assert part["budget_reached"] and 0 < part["extracted"] < first["chunks"]
    assert part["not_done"] == first["chunks"] - part["extracted"]
    assert "not extracted yet" in stopped.stderr
    spent = part["llm"]["prompt_tokens"] + part["llm"]["completion_tokens"]
    assert budget <= spent < budget + first["total_tokens"] * 2 / first["chunks"] * 2
    assert server.chat_calls == part["llm"]["calls"] == part["extracted"]

    # the dry run of the rest: what was done comes from the cache, replies are now known
    rest = json.loads(ok(lore(home, data, "graph", "build", "--dry-run", "--json", **llm)))
    assert rest["extraction_cache_hits"] == part["extracted"]
    assert rest["extraction_calls"] == part["not_done"]
    assert "mean of" in rest["completion_basis"][0]
    calls_before = server.chat_calls

    # the next build continues where the budget stopped it, as the dry run said
    done = json.loads(ok(lore(home, data, "graph", "build", "--json", **llm)))
    assert not done["budget_reached"] and done["extracted"] == first["chunks"]
    assert server.chat_calls - calls_before == rest["calls"] == done["llm"]["calls"]
    assert done["llm"]["cache_hits"] == part["extracted"]
    counted = done["llm"]["prompt_tokens"] + done["llm"]["completion_tokens"]
    print("dry run vs counted:", rest["total_tokens"], counted, "first estimate", first)
    assert within(rest["prompt_tokens"], done["llm"]["prompt_tokens"])
    assert within(rest["completion_tokens"], done["llm"]["completion_tokens"])
    assert within(rest["total_tokens"], counted)
    assert done["warnings"] == []  # the LLM extractor is now the graph's extractor
    again = lore(home, data, "graph", "build", **llm)
    assert again.returncode == 0 and "warning" not in again.stderr


def test_dry_run_prices_and_budget_verdict(tmp_path: Path, server: OpenAITestServer) -> None:
    home, data = tmp_path, tmp_path / "data"
    (home / "docs").mkdir()
    (home / "docs" / "a.md").write_text("# A\n\nThe kestrel-gateway rejects tokens with E_K9.\n")
    ok(lore(home, data, "ingest", "docs"))
    env = {
        "LORE_LLM__BASE_URL": server.base_url,
        "LORE_LLM__MODEL": "test-model",
        "LORE_LLM__PRICE_PROMPT_PER_MILLION": "1000",
        "LORE_LLM__PRICE_COMPLETION_PER_MILLION": "2000",
        "LORE_LLM__BUDGET_TOKENS_PER_RUN": "10",
    }
    text = ok(lore(home, data, "graph", "build", "--dry-run", "--reextract", **env))
    assert "chunks to extract: 1 — 1 LLM calls, 0 cache hits" in text
    assert "estimated cost:" in text and "the estimate is over it" in text
    estimate = json.loads(
        ok(lore(home, data, "graph", "build", "--dry-run", "--reextract", "--json", **env))
    )
    expected = estimate["prompt_tokens"] * 1000 / 1e6 + estimate["completion_tokens"] * 2000 / 1e6
    assert estimate["cost"] == pytest.approx(expected, abs=1e-4)
    assert server.chat_calls == 0


def test_an_llm_build_off_a_terminal_logs_progress_with_the_llm_counters(
    tmp_path: Path, server: OpenAITestServer
) -> None:
    home, data = tmp_path, tmp_path / "data"
    shutil.copytree(CORPUS / "production" / "payments-api", home / "docs")
    llm = {
        "LORE_LLM__BASE_URL": server.base_url,
        "LORE_LLM__MODEL": "test-model",
        "LORE_LLM__MAX_CONCURRENCY": "2",
        "LORE_GRAPH__REPORTS": "llm",
    }
    ingested = lore(home, data, "ingest", "docs", **llm)  # extraction by the LLM
    assert ingested.returncode == 0, ingested.stderr
    during = [x for x in ingested.stderr.splitlines() if x.startswith("extracting:")]
    assert len(during) >= 2, ingested.stderr
    assert "; LLM " in during[-1] and "tokens/s" in during[-1]
    built = lore(home, data, "graph", "build", "--reextract", **llm)
    assert built.returncode == 0, built.stderr
    lines = [x for x in built.stderr.splitlines() if x.startswith(("extracting:", "reports:"))]
    extracting = [x for x in lines if x.startswith("extracting:")]
    assert len(extracting) >= 2  # a line at the start of the work and one at its end
    assert "; LLM " in extracting[-1] and "tokens/s" in extracting[-1]
    assert any(x.startswith("reports:") and "; LLM " in x for x in lines)
    # graph refresh runs the same path, so it reports the same way
    (home / "docs" / "note.md").write_text("The `payments-api` now pages Ledger Oncall.\n")
    assert lore(home, data, "ingest", "docs/note.md", **llm).returncode == 0
    refreshed = lore(home, data, "graph", "refresh", **llm)
    assert refreshed.returncode == 0, refreshed.stderr
    lines = [x for x in refreshed.stderr.splitlines() if x.startswith("reports:")]
    assert lines and "; LLM " in lines[-1] and "(100%)" in lines[-1], refreshed.stderr


def test_the_dry_run_after_an_edit_prices_the_reports_the_build_rewrites(
    tmp_path: Path, server: OpenAITestServer
) -> None:
    home, data = tmp_path, tmp_path / "data"
    shutil.copytree(CORPUS / "production" / "payments-api", home / "docs")
    llm = {
        "LORE_LLM__BASE_URL": server.base_url,
        "LORE_LLM__MODEL": "test-model",
        "LORE_GRAPH__EXTRACTOR": "offline",
        "LORE_GRAPH__REPORTS": "llm",
    }
    ok(lore(home, data, "ingest", "docs", **llm))
    first = json.loads(ok(lore(home, data, "graph", "build", "--dry-run", "--json", **llm)))
    assert first["reprompts"] == 0 and "no re-prompts assumed" in first["reprompt_basis"][0]
    server.chat_next("invalid")  # one reply of the build is re-prompted
    built = json.loads(ok(lore(home, data, "graph", "build", "--json", **llm)))
    assert first["report_calls"] == built["reports_written"] > 0
    assert built["llm"]["reprompts"] == 1
    # one more document: the build's refresh rewrites the reports its change reaches
    shutil.copy(CORPUS / "production" / "ledger-db" / "runbook-failover.md", home / "docs")
    ok(lore(home, data, "ingest", "docs", **llm))
    again = json.loads(ok(lore(home, data, "graph", "build", "--dry-run", "--json", **llm)))
    # the re-prompt rate of the first build (1 in its calls) is priced in
    expected = again["report_calls"] / built["reports_written"]
    assert again["reprompts"] == pytest.approx(expected, abs=0.05)
    calls_before = server.chat_calls
    server.chat_next("invalid")
    rebuilt = json.loads(ok(lore(home, data, "graph", "build", "--json", **llm)))
    assert 0 < rebuilt["reports_written"] < built["reports_written"]
    # a cached reply to an unchanged prompt gives the same words: the report is re-covered
    stored = rebuilt["reports_written"] + rebuilt["reports_recovered"]
    assert again["communities"] == stored, (again, rebuilt)
    assert again["report_calls"] + again["report_cache_hits"] == stored
    assert server.chat_calls - calls_before == rebuilt["llm"]["calls"] == again["calls"] + 1
    counted = rebuilt["llm"]["prompt_tokens"] + rebuilt["llm"]["completion_tokens"]
    assert "mean of" in again["completion_basis"][-1]
    assert within(again["total_tokens"], counted), (again, rebuilt["llm"])
    # --rebuild prices every community of a fresh hierarchy
    fresh = lore(home, data, "graph", "build", "--dry-run", "--rebuild", "--json", **llm)
    assert json.loads(ok(fresh))["communities"] >= again["communities"]


def test_a_sampled_dry_run_prices_a_first_build_by_the_models_replies(
    tmp_path: Path, server: OpenAITestServer
) -> None:
    """``--sample N`` makes N of the calls first; the build finds their replies cached.

    Before any call, reply lengths are an assumption; the sample measures them on this
    corpus, so the estimate of a first build holds the way a later build's does.
    """
    home, data = tmp_path, tmp_path / "data"
    shutil.copytree(CORPUS / "production" / "payments-api", home / "docs")
    ok(lore(home, data, "ingest", "docs"))  # offline: no LLM configured yet
    llm = {
        "LORE_LLM__BASE_URL": server.base_url,
        "LORE_LLM__MODEL": "test-model",
        "LORE_GRAPH__REPORTS": "extractive",
    }
    args = ("graph", "build", "--reextract")
    guess = json.loads(ok(lore(home, data, *args, "--dry-run", "--json", **llm)))
    assert guess["sampled_calls"] == 0 and "assumed" in guess["completion_basis"][0]
    assert server.chat_calls == 0
    said = ok(lore(home, data, *args, "--dry-run", **llm))
    assert "--sample N measures them" in said and "nothing was changed or sent" in said

    sampled = json.loads(ok(lore(home, data, *args, "--dry-run", "--sample", "2", "--json", **llm)))
    assert sampled["sampled_calls"] == server.chat_calls == 2 and sampled["sampled_tokens"] > 0
    assert sampled["extraction_cache_hits"] == 2
    assert sampled["extraction_calls"] == guess["extraction_calls"] - 2
    assert "mean of 2 cached replies" in sampled["completion_basis"][0]
    again = json.loads(ok(lore(home, data, *args, "--dry-run", "--sample", "2", "--json", **llm)))
    assert again["sampled_calls"] == 0 and server.chat_calls == 2  # the model is known now

    done = json.loads(ok(lore(home, data, *args, "--json", **llm)))
    assert done["llm"]["cache_hits"] == 2 and done["llm"]["calls"] == sampled["calls"]
    counted = done["llm"]["prompt_tokens"] + done["llm"]["completion_tokens"]
    print("sampled dry run vs counted:", sampled["total_tokens"], counted, "guess", guess)
    assert within(sampled["completion_tokens"], done["llm"]["completion_tokens"])
    assert within(sampled["total_tokens"], counted)
    with pytest.raises(AssertionError):  # --sample without --dry-run is a usage error
        ok(lore(home, data, "graph", "build", "--sample", "2", **llm))
