"""``lore ask`` end to end on the demo corpus, and the README's example questions."""

import asyncio
import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from api.cli import main
from app.runtime import Runtime
from retrieval.ask_contract import AskRequest
from retrieval.router import RouteContext, RouteDecision
from retrieval.view_snapshot import ViewSnapshots
from tests.conftest import CORPUS, ROOT, global_citations_ok
from tests.e2e.test_cli import lore

README_EXAMPLE = re.compile(r'^lore ask "([^"]+)"([^#\n]*)#\s*(local|global)\s*$', re.MULTILINE)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ask-cli") / "data"
    for env in ("production", "staging"):
        done = lore(directory, "ingest", str(CORPUS / env), "--meta", f"env={env}")
        assert done.returncode == 0, done.stderr
    built = lore(directory, "graph", "build")
    assert built.returncode == 0 and "communities" in built.stdout, built.stderr
    return directory


def test_lore_ask_local_and_global_json(data: Path) -> None:
    local = lore(data, "ask", "What does E_LEDGER_LOCK_TIMEOUT mean?", "--json")
    assert local.returncode == 0, local.stderr
    body = json.loads(local.stdout)
    assert body["mode"] == "local" and body["extractive"]
    assert body["citations"][0]["kind"] == "chunk"
    assert "E_LEDGER_LOCK_TIMEOUT" in body["answer"]
    glob = lore(
        data, "ask", "What recurring root causes show up across the incident postmortems?", "--json"
    )
    assert glob.returncode == 0, glob.stderr
    body = json.loads(glob.stdout)
    assert body["mode"] == "global" and body["route"]["scores"]["global"] > 0
    assert global_citations_ok(body["citations"]), body["citations"]
    details = body["details"]
    assert body["context_tokens"] == (
        details["map_tokens"] + details["reduce_tokens"] + details["local_tokens"]
    )


def test_lore_ask_forced_mode_text_output_and_bad_flags(data: Path) -> None:
    forced = lore(data, "ask", "What does PAY-5031 mean?", "--mode", "global")
    assert forced.returncode == 0, forced.stderr
    assert "route: global" in forced.stdout and "mode=global forced by the caller" in forced.stdout
    assert "[1]" in forced.stdout and "context tokens:" in forced.stdout
    bad = lore(data, "ask", "x", "--filter", "colour=blue")
    assert bad.returncode != 0 and "unknown filter key 'colour'" in bad.stderr


def test_readme_examples_route_as_documented(demo_graph_runtime: Runtime) -> None:
    examples = README_EXAMPLE.findall((ROOT / "docs" / "concepts" / "asking.md").read_text())
    auto = [(q, kind) for q, flags, kind in examples if "--mode" not in flags]
    assert len(auto) >= 2 and {kind for _, kind in auto} == {"local", "global"}
    asker = demo_graph_runtime.asker()
    for question, kind in auto:
        route = asyncio.run(asker.route(question, "auto", has_filters=False))
        assert route.decision == kind, (question, route.reasons)


def test_demo_questions_route_with_the_graph(demo_graph_runtime: Runtime) -> None:
    fixtures = ROOT / "tests" / "fixtures"
    labelled = json.loads((fixtures / "router_questions.json").read_text())["questions"]
    labelled += json.loads((fixtures / "demo_questions.json").read_text())
    asker = demo_graph_runtime.asker()
    right = sum(
        asyncio.run(asker.route(q["question"], "auto", has_filters=False)).decision == q["kind"]
        for q in labelled
    )
    assert right / len(labelled) >= 0.9


def test_auto_ask_routes_on_its_local_search(demo_graph_runtime: Runtime) -> None:
    """auto: the local search runs first, the router weighs it, a local answer uses it."""
    asker = demo_graph_runtime.asker()
    request = AskRequest(question="E_LEDGER_LOCK_TIMEOUT")  # pasted
    response = demo_graph_runtime.queries().ask_sync(request)  # catches the indexes up first
    assert response.mode == "local"
    corpus = ("one chunk holds", "keyword and vector search agree")
    assert any(r.startswith(corpus) for r in response.route.reasons), response.route.reasons
    searched = asyncio.run(asker.searcher.search(asker.local_request(request)))
    cited = {c for citation in response.citations for c in citation.chunk_ids}
    assert cited and cited <= {r.chunk_id for r in searched.results}
    # the bench's and tests' route() searches by itself; a forced mode searches nothing first
    routed = asyncio.run(asker.route(request.question, "auto", has_filters=False))
    assert routed.reasons == response.route.reasons
    forced = demo_graph_runtime.queries().ask_sync(
        AskRequest(question=request.question, mode="local")
    )
    assert not any(r.startswith(corpus) for r in forced.route.reasons)
    assert forced.route.classifier == "caller" and forced.route.scores == {}


def test_a_forced_mode_asks_no_classifier(demo_graph_runtime: Runtime) -> None:
    """The caller decided: an LLM classifier would cost a call whose answer is discarded."""
    asker = demo_graph_runtime.asker()
    asked: list[str] = []

    class Counting:
        name = "counting"

        async def classify(self, question: str, context: RouteContext) -> RouteDecision:
            asked.append(question)
            return RouteDecision(decision="local", classifier=self.name)

    try:
        asker.classifier, kept = Counting(), asker.classifier
        for mode in ("global", "local"):
            routed = asyncio.run(asker.route("Which services fail most often?", mode, False))
            assert routed.decision == mode and routed.reasons == [
                f"mode={mode} forced by the caller"
            ]
        assert asked == []
        asyncio.run(asker.route("Which services fail most often?", "auto", False))
        assert asked == ["Which services fail most often?"]
    finally:
        asker.classifier = kept
    # the collection's title terms come from the store's titles
    assert all(0.5 <= share <= 1.0 for share in asker.collection().values())


def test_a_second_lore_ask_reads_the_view_the_first_kept(data: Path) -> None:
    """Each ``lore ask`` is a new process: the second loads the view the first wrote."""
    question = "What recurring root causes show up across the incident postmortems?"
    snapshot = data / "views" / "global.pickle"
    snapshot.unlink(missing_ok=True)
    first = lore(data, "ask", question, "--mode", "global", "--json")
    assert first.returncode == 0, first.stderr
    assert snapshot.is_file()
    written = snapshot.stat().st_mtime_ns
    second = lore(data, "ask", question, "--mode", "global", "--json")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert snapshot.stat().st_mtime_ns == written  # read, not written again


def test_lore_ask_prints_its_answer_before_it_writes_the_view_s_snapshot(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write (a second at 10k reports) may end after the answer is out, not before."""
    snapshot = data / "views" / "global.pickle"
    snapshot.unlink(missing_ok=True)  # so this process reads the view whole and writes it
    printed_before: list[bytes] = []
    save = ViewSnapshots.save

    def watched_save(self: ViewSnapshots, *args: Any, **kwargs: Any) -> Any:
        # a write that ends only once the answer is out (or after 10 s without it)
        out = sys.stdout.buffer
        assert isinstance(out, io.BytesIO)  # click's runner captures into one
        deadline = time.monotonic() + 10
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        printed_before.append(out.getvalue())
        return save(self, *args, **kwargs)

    monkeypatch.setattr(ViewSnapshots, "save", watched_save)
    question = "What recurring root causes show up across the incident postmortems?"
    result = CliRunner().invoke(
        main,
        ["--data-dir", str(data), "ask", question, "--mode", "global", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert snapshot.is_file()
    assert len(printed_before) == 1
    assert json.loads(printed_before[0])["mode"] == "global"  # the whole answer was out
