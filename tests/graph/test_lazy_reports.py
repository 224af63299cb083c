"""Lazy LLM reports (``graph.reports = lazy``) against the local OpenAI TEST server."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from graph.lazy_reports import LAZY_METHOD
from lore.embedders import LocalEmbedder
from lore.errors import ConfigurationError
from retrieval.ask_contract import AskRequest
from tests import ops
from tests.conftest import CORPUS, make_runtime
from tests.openai_test_server import OpenAITestServer

QUESTION = "What themes recur across all the runbooks?"


def watch_report_rows(database: Path) -> None:
    """Log every insert, update and delete of a stored report row (SQLite triggers)."""
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE report_row_writes (op TEXT NOT NULL, community_id TEXT NOT NULL)")
        for op, row in (("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old")):
            db.execute(
                f"CREATE TRIGGER report_row_{op.lower()} AFTER {op} ON community_reports "
                f"BEGIN INSERT INTO report_row_writes VALUES ('{op}', {row}.community_id); END"
            )


def report_row_writes(database: Path) -> list[tuple[str, str]]:
    """The report rows written since :func:`watch_report_rows`; stops watching."""
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT op, community_id FROM report_row_writes").fetchall()
        for op in ("insert", "update", "delete"):
            db.execute(f"DROP TRIGGER report_row_{op}")
        db.execute("DROP TABLE report_row_writes")
    return sorted((str(op), str(cid)) for op, cid in rows)


@pytest.mark.slow
def test_reports_are_summarised_on_first_read_then_kept_and_made_lazy_again_by_a_change(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS / "staging", corpus)
    with OpenAITestServer() as server:
        llm = {"base_url": server.base_url, "model": "test-model", "backoff_s": 0.01}
        rt = make_runtime(
            tmp_path / "data",
            local_embedder,
            llm=llm,
            graph={"extractor": "offline", "reports": "lazy"},
            ask={"llm": "off"},  # only the report writer talks to the model here
        )
        ops.ingest_paths(rt, [corpus], {"env": "staging"})
        ops.build_graph(rt)
        reports = rt.graph().reports()
        assert reports and all(r.method == LAZY_METHOD for r in reports)
        assert server.chat_calls == 0  # the build cost no LLM call at all

        watch_report_rows(tmp_path / "data" / "lore.sqlite3")
        first = rt.queries().ask_sync(AskRequest(question=QUESTION, mode="global"))
        calls = server.chat_calls
        upgraded = {
            r.community_id: r.fingerprint for r in rt.graph().reports() if r.method == "llm"
        }
        assert first.mode == "global" and first.citations
        assert 0 < len(upgraded) == calls < len(reports)  # one call per report read, no more
        # the upgrade wrote the rewritten rows, each once, in place; no other row was touched
        writes = report_row_writes(tmp_path / "data" / "lore.sqlite3")
        assert writes == sorted(("UPDATE", c) for c in upgraded)
        others = [r for r in rt.graph().reports() if r.community_id not in upgraded]
        assert others == [r for r in reports if r.community_id not in upgraded]
        cited = {c.report_id for c in first.citations if c.kind == "report"}
        assert cited <= {r.community_id for r in rt.graph().reports()}

        rt.queries().ask_sync(AskRequest(question=QUESTION, mode="global"))
        assert server.chat_calls == calls  # read again: kept, not paid for twice

        edited = sorted(corpus.rglob("*.md"))[0]
        edited.write_text(edited.read_text() + "\n\nThe ledger primary now fails over in 30 s.\n")
        ops.ingest_paths(rt, [corpus], {"env": "staging"})
        ops.build_graph(rt)
        after = {r.community_id: r for r in rt.graph().reports()}
        unchanged = {c for c, fp in upgraded.items() if c in after and after[c].fingerprint == fp}
        assert {c for c, r in after.items() if r.method == "llm"} == unchanged
        assert unchanged  # communities the edit did not touch keep their LLM report
        rewritten = [c for c in upgraded if c in after and c not in unchanged]
        assert rewritten and all(after[c].method == LAZY_METHOD for c in rewritten)
        rt.close()


def test_lazy_reports_without_an_llm_is_a_clear_configuration_error(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path / "data", local_embedder, graph={"reports": "lazy"})
    with pytest.raises(ConfigurationError, match=r"graph\.reports is 'lazy' but no LLM"):
        ops.build_graph(rt)
    rt.close()
