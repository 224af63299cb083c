"""The store on PostgreSQL shared by several "hosts", each with its own local index dir.

Two runtimes on one ``store.url`` and two data directories stand for two API replicas:
what one ingests or deletes, the other serves, its BM25/HNSW replicas rebuilt from the
shared store when empty and then caught up from the shared change log; the graph, jobs
and the other components' tables are shared too, and each host keeps only its index
directories and its global view snapshot. Namespaces get schemas of their own.
"""

from __future__ import annotations

from pathlib import Path

from app.builders import store_exists, store_schema
from app.namespaces import Namespaces, namespace_settings
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import Settings, load_settings
from retrieval.contract import QueryRequest
from retrieval.index_set import MARKER
from tests import ops
from tests.conftest import make_runtime


def _found(runtime: Runtime, text: str) -> list[str]:
    hits = runtime.queries().query_sync(QueryRequest(search_text=text, top_k=5)).results
    return [hit.document_id for hit in hits]


def test_two_hosts_share_the_store_and_keep_local_indexes(
    tmp_path: Path, postgres_url: str, local_embedder: LocalEmbedder
) -> None:
    host_a = make_runtime(tmp_path / "a", local_embedder, store={"url": postgres_url})
    host_b = make_runtime(tmp_path / "b", local_embedder, store={"url": postgres_url})
    report = ops.ingest(
        host_a,
        [
            SourceDocument("k", "k.md", "kangaroo ERR_KANGAROO_JUMP text", "", {}),
            SourceDocument("w", "w.md", "wombat ERR_WOMBAT_DIG text", "", {}),
        ],
        extract_graph=False,
    )
    assert sorted(report.done) == ["k", "w"]
    assert _found(host_b, "ERR_KANGAROO_JUMP")[0] == "k"  # B's empty indexes rebuilt
    ops.ingest(host_b, [SourceDocument("p", "p.md", "platypus ERR_PLATYPUS_SWIM", "", {})])
    assert _found(host_a, "ERR_PLATYPUS_SWIM")[0] == "p"  # A caught up incrementally
    ops.delete(host_a, "k")
    assert "k" not in _found(host_b, "ERR_KANGAROO_JUMP kangaroo")  # the delete reached B
    store_id = host_a.store.get_meta("store_id")
    for host in ("a", "b"):
        assert (tmp_path / host / MARKER).read_text().strip() == store_id
    assert host_b.indexes.catch_up() == {"sparse": 0, "dense": 0}
    host_a.close()
    host_b.close()
    # a third host that never saw the store: opens it and serves the same documents
    host_c = make_runtime(tmp_path / "c", local_embedder, store={"url": postgres_url})
    assert _found(host_c, "ERR_WOMBAT_DIG")[0] == "w"
    host_c.close()


def _pg_settings(data_dir: Path, url: str) -> Settings:
    merged = load_settings(data_dir=data_dir).model_dump()
    merged["store"] = {**merged["store"], "url": url}
    return Settings.model_validate(merged)


def test_namespaces_get_their_own_schemas(
    tmp_path: Path, postgres_url: str, local_embedder: LocalEmbedder
) -> None:
    settings = _pg_settings(tmp_path, postgres_url)
    schemas = {store_schema(namespace_settings(settings, n)) for n in ("default", "a-b", "a_b")}
    assert len(schemas) == 3  # "a-b" and "a_b" do not share tables
    assert not store_exists(settings)
    spaces = Namespaces(settings, local_embedder)
    team = spaces.runtime("team-a")
    ops.ingest(
        team, [SourceDocument("t", "t.md", "echidna ERR_TEAM_ONLY", "", {})], extract_graph=False
    )
    assert _found(team, "ERR_TEAM_ONLY") == ["t"]
    assert _found(spaces.runtime("default"), "ERR_TEAM_ONLY echidna") == []
    assert spaces.exists("team-a") and not spaces.exists("nobody")
    spaces.close()
    # another host (another data directory) lists and opens the same namespaces
    other = Namespaces(_pg_settings(tmp_path / "other", postgres_url), local_embedder)
    assert other.existing() == ["default", "team-a"] and other.exists("team-a")
    assert _found(other.runtime("team-a"), "ERR_TEAM_ONLY") == ["t"]
    other.close()


def test_cli_reads_the_postgresql_store(
    tmp_path: Path, postgres_url: str, local_embedder: LocalEmbedder
) -> None:
    from click.testing import CliRunner

    from api.cli import main

    env = {"LORE_STORE__URL": postgres_url}
    args = ["--data-dir", str(tmp_path / "cli"), "status", "--json"]
    missing = CliRunner().invoke(main, args, env=env)
    assert missing.exit_code == 1 and "schema lore_lore does not exist" in missing.output
    assert "postgres@127.0.0.1" in missing.output
    writer = make_runtime(tmp_path / "writer", local_embedder, store={"url": postgres_url})
    ops.ingest(
        writer, [SourceDocument("q", "q.md", "quokka ERR_QUOKKA", "", {})], extract_graph=False
    )
    writer.close()
    found = CliRunner().invoke(main, args, env=env)
    assert found.exit_code == 0, found.output
    assert '"documents_done": 1' in found.output


def test_a_delete_on_one_host_reaches_the_view_snapshot_another_host_keeps(
    tmp_path: Path, postgres_url: str, local_embedder: LocalEmbedder
) -> None:
    """Each host keeps the global view on its own disk; a delete elsewhere still reaches it."""
    import asyncio
    import functools

    from app.orphans import forget_stale_view
    from retrieval.ask_contract import AskRequest
    from retrieval.view_snapshot import FILE_NAME

    host_a = make_runtime(tmp_path / "a", local_embedder, store={"url": postgres_url})
    host_b = make_runtime(tmp_path / "b", local_embedder, store={"url": postgres_url})
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus" / "production"
    assert ops.ingest_paths(host_a, [corpus]).failed == []
    ops.build_graph(host_a)
    ask = AskRequest(question="How do the services handle database timeouts?", mode="global")

    def answer(host: Runtime) -> str:
        text = asyncio.run(host.queries().ask(ask)).answer
        host.queries().asker.global_searcher.wait_for_snapshot()
        return text

    answer(host_b)
    b_file = tmp_path / "b" / "views" / FILE_NAME
    held = b_file.read_bytes()
    victim, gone = ops.most_cited(host_b)
    assert any(c.encode() in held for c in gone)

    deleted = ops.delete(host_a, victim)
    assert deleted.graph.as_dict()["reports_refreshed"] > 0
    assert b_file.read_bytes() == held  # host B's disk: the delete on A cannot reach it
    # B's periodic sweep (lore serve, lore mcp) notices, global question or not
    views = functools.partial(forget_stale_view, host_b.graph, host_b.data_dir)
    assert views() is True and not b_file.exists()
    assert views() is False  # nothing left to remove
    answer(host_b)  # B's next global question writes its patched view back
    assert not any(c.encode() in b_file.read_bytes() for c in gone)
    assert views() is False  # the new file is as current as the count
    host_a.close()
    host_b.close()
