"""The LLM reply cache on both engines: latest replies first, a replaced reply kept once."""

import sqlite3
from pathlib import Path

from lore.llm import ReplyCache, forget_replies
from tests.tables import tables_at


def test_replies_come_back_latest_first_per_model_and_task(
    store_url: str | None, tmp_path: Path
) -> None:
    cache = ReplyCache(tables_at(store_url, tmp_path / "llm-cache.sqlite3"))
    assert cache.replies("m", "extract") == [] and cache.get("k0") is None
    for i in range(5):
        cache.put(f"k{i}", "m", "extract", f"reply {i}")
    cache.put("other-task", "m", "summarize", "a summary")
    cache.put("other-model", "n", "extract", "from n")
    cache.put("k1", "m", "extract", "reply 1 again")  # replaced, not repeated
    assert cache.get("k1") == "reply 1 again"
    assert cache.replies("m", "extract", limit=3) == ["reply 4", "reply 3", "reply 2"]
    assert cache.replies("m", "extract") == [
        "reply 4",
        "reply 3",
        "reply 2",
        "reply 1 again",
        "reply 0",
    ]
    assert cache.replies("m", "summarize") == ["a summary"]
    assert cache.replies("n", "extract") == ["from n"]
    cache.close()


def test_a_cache_from_before_reply_ids_keeps_its_order(tmp_path: Path) -> None:
    """SQLite-only by nature: older caches were ordered by SQLite's rowid."""
    path = tmp_path / "llm-cache.sqlite3"
    old = sqlite3.connect(path)
    with old:
        old.execute(
            "CREATE TABLE llm_replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
            "task TEXT NOT NULL, reply TEXT NOT NULL)"
        )
        old.executemany(
            "INSERT INTO llm_replies VALUES (?, 'm', 't', ?)",
            [("zz", "first"), ("aa", "second"), ("mm", "third")],
        )
    old.close()
    cache = ReplyCache(path)
    assert cache.replies("m", "t") == ["third", "second", "first"]
    cache.put("new", "m", "t", "fourth")
    assert cache.replies("m", "t", limit=2) == ["fourth", "third"]
    cache.close()
    again = ReplyCache(path)  # opening a numbered cache again changes nothing
    assert again.replies("m", "t") == ["fourth", "third", "second", "first"]
    again.close()


def test_replies_are_forgotten_by_the_chunks_and_the_reports_their_prompts_held(
    store_url: str | None, tmp_path: Path
) -> None:
    cache = ReplyCache(tables_at(store_url, tmp_path / "llm-cache.sqlite3"))
    cache.put("extract", "m", "extract_graph", "x", chunk_ids=["c1"])
    cache.put("report", "m", "summarize_community", "r", chunk_ids=["c1", "c2"], report_ids=["1-0"])
    cache.put("map", "m", "answer_global_map", "p", report_ids=["0-1", "0-2"])
    cache.put("answer", "m", "answer_question", "a", chunk_ids=["c3"], report_ids=["0-2"])
    assert cache.reports_held() == {"0-1", "0-2", "1-0"}
    assert cache.forget_chunks(["c2"]) == 1  # the report's reply, and its report mapping
    assert cache.get("report") is None and cache.get("extract") == "x"
    assert cache.reports_held() == {"0-1", "0-2"}
    assert cache.forget_reports(["0-2", "9-9"]) == 2
    assert cache.get("map") is None and cache.get("answer") is None
    assert cache.reports_held() == set() and cache.get("extract") == "x"
    assert cache.forget_chunks(["c3"]) == 0  # the answer went already
    cache.close()


def test_forget_replies_drops_by_key_and_never_creates_a_cache(tmp_path: Path) -> None:
    where = tmp_path / "llm-cache.sqlite3"
    forget_replies(where, ["c1"], ["0-1"])
    assert not where.exists()  # no cache, nothing to forget: no file made
    cache = ReplyCache(where)
    cache.put("map", "m", "answer_global_map", "p", report_ids=["0-1"])
    cache.put("kept", "m", "answer_global_map", "q", report_ids=["0-2"])
    cache.put("extract", "m", "extract_graph", "x", chunk_ids=["c1"])
    cache.close()
    forget_replies(where, ["c1"], ["0-1", "0-1"])  # a refresh's gone communities, a delete's chunks
    again = ReplyCache(where)
    assert again.get("map") is None and again.get("extract") is None
    assert again.get("kept") == "q" and again.reports_held() == {"0-2"}
    again.close()
