"""The global view kept on disk: a new process reads it instead of every report.

Each test copies the demo graph into a data directory of its own, and opens runtimes on
it as new processes would (each its own connection, nothing cached). What a runtime
read is counted as SQL statements on its graph store's connection; what it answered is
compared with a runtime that has no snapshot to read (the file removed).
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from graph.stores.local import LocalGraphStore
from lore.embedders import LocalEmbedder
from retrieval.ask_contract import AskRequest
from retrieval.view_snapshot import FILE_NAME, ViewSnapshots
from tests import ops
from tests.conftest import make_runtime

QUESTION = "How do the services handle database timeouts?"
WHOLE = (
    "SELECT report, level, community_id FROM community_reports",
    "SELECT id, level, cluster, parent, members FROM communities",
)


def _copy(source: Path, target: Path) -> None:
    """A consistent copy of an SQLite file (the backup API), as a backup tool makes one."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()


@pytest.fixture
def data_dir(tmp_path: Path, demo_graph_runtime: Runtime) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    _copy(demo_graph_runtime.data_dir / "lore.sqlite3", data / "lore.sqlite3")
    return data


@pytest.fixture
def opened(local_embedder: LocalEmbedder) -> Iterator[list[Runtime]]:
    runtimes: list[Runtime] = []
    yield runtimes
    for runtime in runtimes:
        runtime.close()


def _ask(
    runtimes: list[Runtime], data: Path, embedder: LocalEmbedder, *, snapshot: bool = True
) -> tuple[str, int]:
    """(the answer, whole reads of the view) of a new runtime's first global question."""
    if not snapshot:
        shutil.rmtree(data / "views", ignore_errors=True)
    runtime = make_runtime(data, embedder)
    runtimes.append(runtime)
    seen: list[str] = []
    runtime.graph().database._db.set_trace_callback(seen.append)  # type: ignore[attr-defined]
    answer = asyncio.run(runtime.queries().ask(AskRequest(question=QUESTION, mode="global")))
    runtime.queries().asker.global_searcher.wait_for_snapshot()  # written by a thread
    runtime.graph().database._db.set_trace_callback(None)  # type: ignore[attr-defined]
    whole = sum(1 for s in seen if s.strip().startswith(WHOLE) and "WHERE" not in s)
    return answer.answer, whole


def test_a_new_process_answers_from_the_snapshot_as_from_the_store(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    first, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 2  # the reports and the communities: no snapshot yet
    assert (data_dir / "views" / FILE_NAME).is_file()
    second, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 0  # read from the snapshot
    assert second == first


def test_a_snapshot_a_write_behind_is_patched_with_what_the_write_touched(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    _ask(opened, data_dir, local_embedder)
    writer = make_runtime(data_dir, local_embedder)
    opened.append(writer)
    report = writer.graph().reports()[0]
    rewritten = replace(report, summary="Database timeouts are retried with backoff.")
    writer.graph().put_reports([rewritten])
    patched, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 0  # the snapshot, and the one rewritten report read by id
    fresh, whole = _ask(opened, data_dir, local_embedder, snapshot=False)
    assert whole == 2
    assert patched == fresh


def test_a_restored_store_does_not_take_the_snapshot_of_another_history(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder, tmp_path: Path
) -> None:
    """Back up, write, snapshot; restore the backup and write another thing: same count."""
    _ask(opened, data_dir, local_embedder)
    backup = tmp_path / "backup.sqlite3"
    _copy(data_dir / "lore.sqlite3", backup)

    def write(summary: str) -> None:
        writer = make_runtime(data_dir, local_embedder)
        report = writer.graph().reports()[0]
        writer.graph().put_reports([replace(report, summary=summary)])
        writer.close()

    write("Timeouts come from the connection pool; widen it.")
    _ask(opened, data_dir, local_embedder)  # the snapshot follows the write
    for runtime in opened:
        runtime.close()
    opened.clear()
    _copy(backup, data_dir / "lore.sqlite3")
    write("Database timeouts page the on-call engineer at once.")
    restored, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 2  # the snapshot's history is not the store's: read whole
    fresh, _ = _ask(opened, data_dir, local_embedder, snapshot=False)
    assert restored == fresh


def test_a_snapshot_naming_anything_else_is_ignored_not_run(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder, tmp_path: Path
) -> None:
    first, _ = _ask(opened, data_dir, local_embedder)
    marker = tmp_path / "ran"

    class Hostile:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    snapshots = ViewSnapshots(data_dir / "views")
    key = snapshots.key()
    assert key is not None
    assert snapshots.save(key, {"view": Hostile()})  # its key is the store's own
    answer, whole = _ask(opened, data_dir, local_embedder)
    assert not marker.exists()
    assert whole == 2 and answer == first
    snapshots.path.write_bytes(b"\x80\x05 not a pickle")  # damaged: ignored as well
    answer, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 2 and answer == first


def test_a_snapshot_that_cannot_be_written_costs_only_the_speed_up(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    (data_dir / "views").write_text("a file where the folder should be")
    first, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 2 and first
    again, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 2 and again == first


def test_a_write_that_leaves_every_report_as_it_was_keeps_the_scorer(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    """A community's members changed, its report and the hierarchy's shape did not."""
    first, _ = _ask(opened, data_dir, local_embedder)
    runtime = opened[-1]
    searcher = runtime.queries().asker.global_searcher
    scorers, view = searcher._scorers, searcher._view
    assert view is not None
    community = runtime.graph().communities()[0]
    runtime.graph().update_communities(
        [replace(community, members=(*community.members, "a-new-member"))], []
    )
    again = asyncio.run(runtime.queries().ask(AskRequest(question=QUESTION, mode="global")))
    assert again.answer == first
    now = searcher._view
    assert now is not None and now.generation != view.generation  # the write was seen
    assert now.views is view.views and searcher._scorers is scorers  # nothing rebuilt
    behind, whole = _ask(opened, data_dir, local_embedder)  # the snapshot, a write behind
    assert whole == 0 and behind == first


def test_a_graph_gets_its_token_with_its_first_write_or_at_the_first_open_after(
    tmp_path: Path,
) -> None:
    from graph.communities import Community
    from graph.stores.local import LocalGraphStore

    path = tmp_path / "graph.sqlite3"
    store = LocalGraphStore(path)
    assert store.generation() == (0, 0)  # opening an empty store writes nothing
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM graph_meta").fetchone()[0] == 0
    store = LocalGraphStore(path)
    store.replace_communities([Community("0-0", 0, 0, None, ("a",))])
    count, token = store.generation()
    assert count == 1 and token != 0
    assert store.view_changes(count, token) is not None
    store.close()
    with sqlite3.connect(path) as db:  # as a store written before view tokens has it
        db.execute("DELETE FROM graph_meta WHERE name = 'view_token'")
        db.execute("DELETE FROM view_tokens")
    store = LocalGraphStore(path)
    seeded = store.generation()
    assert seeded[0] == 1 and seeded[1] not in (0, token)
    assert store.view_changes(*seeded) is not None
    store.close()


def test_a_view_read_before_a_delete_is_not_written_after_it(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    """The delete's forgetting removes the snapshot while a reader still holds the old view."""
    runtime = make_runtime(data_dir, local_embedder)
    opened.append(runtime)
    asker = runtime.queries().asker
    searcher = asker.global_searcher
    searcher.reports_view()  # read from the store: the text as it was before the delete
    snapshots = ViewSnapshots.of(data_dir)
    snapshots.remove()  # what app.lifecycle.forget_text does after the cascade
    searcher._ready(asker.settings.budget_tokens, None)  # would write the snapshot now
    searcher.wait_for_snapshot()
    assert not snapshots.path.exists()
    _, whole = _ask(opened, data_dir, local_embedder)  # the next process reads the store
    assert whole == 2 and snapshots.path.exists()  # and writes a snapshot of its own


def test_a_delete_removes_what_a_killed_writer_left(tmp_path: Path) -> None:
    snapshots = ViewSnapshots(tmp_path / "views")
    snapshots.directory.mkdir()
    left = snapshots.directory / ".global-k1ll3d"  # a writer killed before its rename
    left.write_bytes(b"The quokka ledger overflowed")
    snapshots.path.write_bytes(b"a snapshot")
    snapshots.remove()
    assert not left.exists() and not snapshots.path.exists()
    assert snapshots.epoch() == 1


def test_the_snapshot_is_written_after_the_question_that_read_the_view_is_answered(
    data_dir: Path,
    opened: list[Runtime],
    local_embedder: LocalEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pickling a big view holds the interpreter: it must not share it with the answer."""
    from retrieval import global_search, keypoints

    saving = threading.Event()
    save, reduce = ViewSnapshots.save, keypoints.reduce_key_points
    seen_while_answering: list[bool] = []

    def watched_save(self: ViewSnapshots, *args: Any, **kwargs: Any) -> Any:
        saving.set()
        return save(self, *args, **kwargs)

    def last_step(*args: Any, **kwargs: Any) -> Any:  # the answer's last step
        seen_while_answering.append(saving.wait(0.5))  # a thread started early is done
        return reduce(*args, **kwargs)

    monkeypatch.setattr(ViewSnapshots, "save", watched_save)
    monkeypatch.setattr(global_search, "reduce_key_points", last_step)
    _, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 2  # the view was read whole, so a snapshot was due
    assert seen_while_answering == [False]
    assert saving.is_set()  # written once the answer was out
    assert (data_dir / "views" / FILE_NAME).is_file()


def test_a_process_that_keeps_its_view_current_puts_back_a_snapshot_a_delete_removed(
    data_dir: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    """A server answers after a delete from its patched view and writes it back, once."""
    from app.lifecycle import delete_documents

    server = make_runtime(data_dir, local_embedder)
    opened.append(server)
    ask = AskRequest(question=QUESTION, mode="global")
    asyncio.run(server.queries().ask(ask))
    searcher = server.queries().asker.global_searcher
    searcher.wait_for_snapshot()
    snapshots = ViewSnapshots.of(data_dir)
    held = snapshots.path.read_bytes()
    victim, gone = ops.most_cited(server)
    assert any(c.encode() in held for c in gone)

    deleted = delete_documents(
        server.graph_services(), server.jobs(), [victim], indexes=server.indexes
    )
    assert deleted.graph.as_dict()["reports_refreshed"] > 0
    assert not snapshots.path.exists()  # the delete's forgetting removed it
    after = asyncio.run(server.queries().ask(ask))  # the view patched by id
    searcher.wait_for_snapshot()
    assert snapshots.path.exists()  # written back from the patched view
    assert not any(c.encode() in snapshots.path.read_bytes() for c in gone)

    fresh, whole = _ask(opened, data_dir, local_embedder)
    assert whole == 0  # the next process reads the snapshot, not the store
    assert fresh == after.answer
    read, whole = _ask(opened, data_dir, local_embedder, snapshot=False)
    assert whole == 2 and read == fresh


def _on_host(runtime: Runtime, views: Path) -> Runtime:
    """``runtime`` as if on another host: its view snapshot kept in a folder of its own."""
    runtime.queries().asker.global_searcher.snapshots = ViewSnapshots(views)
    return runtime


def _whole_reads(runtime: Runtime, ask: AskRequest) -> tuple[str, int]:
    """(the answer, whole reads of the view) of one global question, its snapshot written."""
    seen: list[str] = []
    runtime.graph().database._db.set_trace_callback(seen.append)  # type: ignore[attr-defined]
    answer = asyncio.run(runtime.queries().ask(ask))
    runtime.queries().asker.global_searcher.wait_for_snapshot()
    runtime.graph().database._db.set_trace_callback(None)  # type: ignore[attr-defined]
    return answer.answer, sum(1 for s in seen if s.strip().startswith(WHOLE) and "WHERE" not in s)


def test_a_delete_on_one_host_reaches_the_snapshots_other_hosts_keep(
    data_dir: Path, tmp_path: Path, opened: list[Runtime], local_embedder: LocalEmbedder
) -> None:
    """Hosts share the store, not their data directories: each keeps its own snapshot.

    The host that deletes removes its own file; a long-running process on another host
    rewrites its file at its next global question, and so does a new process there (it
    loads the old file, patches in the reports the delete rewrote, and writes it again).
    """
    from app.lifecycle import delete_documents
    from app.orphans import forget_stale_view

    ask = AskRequest(question=QUESTION, mode="global")
    host_b = _on_host(make_runtime(data_dir, local_embedder), tmp_path / "b" / "views")
    opened.append(host_b)
    _whole_reads(host_b, ask)
    b_file = tmp_path / "b" / "views" / FILE_NAME
    held = b_file.read_bytes()
    victim, gone = ops.most_cited(host_b)
    assert any(c.encode() in held for c in gone)
    c_file = tmp_path / "c" / "views" / FILE_NAME
    c_file.parent.mkdir(parents=True)
    shutil.copyfile(b_file, c_file)  # a third host's copy, made before the delete

    host_a = make_runtime(data_dir, local_embedder)
    opened.append(host_a)
    deleted = delete_documents(
        host_a.graph_services(), host_a.jobs(), [victim], indexes=host_a.indexes
    )
    assert deleted.graph.as_dict()["reports_refreshed"] > 0
    assert b_file.read_bytes() == held  # another host's disk: the delete cannot reach it
    forgotten = host_a.graph().view_forgotten()  # type: ignore[attr-defined]
    assert forgotten > 0

    # the sweep of a process with no snapshot of its own finds nothing to do there
    assert forget_stale_view(host_a.graph, tmp_path / "nowhere") is False
    assert ViewSnapshots(b_file.parent).remove_if_older(forgotten - 1) is False  # current
    after, whole = _whole_reads(host_b, ask)  # its view patched by id, then written back
    assert whole == 0
    assert not any(c.encode() in b_file.read_bytes() for c in gone)
    assert ViewSnapshots(b_file.parent).key().forgotten == forgotten  # type: ignore[union-attr]

    host_c = _on_host(make_runtime(data_dir, local_embedder), c_file.parent)
    opened.append(host_c)
    fresh, whole = _whole_reads(host_c, ask)
    assert whole == 0  # its old file loaded, the rewritten reports patched in
    assert fresh == after
    assert not any(c.encode() in c_file.read_bytes() for c in gone)  # written again
    assert ViewSnapshots(c_file.parent).key().forgotten == forgotten  # type: ignore[union-attr]


def test_the_cyclic_collector_is_paused_while_the_view_is_read(
    data_dir: Path,
    opened: list[Runtime],
    local_embedder: LocalEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole read and a snapshot's load build millions of objects that live on."""
    enabled: dict[str, list[bool]] = {"reports": [], "load": []}
    reports, load = LocalGraphStore.reports, ViewSnapshots.load

    def watched_reports(self: LocalGraphStore, *args: Any, **kwargs: Any) -> Any:
        enabled["reports"].append(gc.isenabled())
        return reports(self, *args, **kwargs)

    def watched_load(self: ViewSnapshots, *args: Any, **kwargs: Any) -> Any:
        enabled["load"].append(gc.isenabled())
        return load(self, *args, **kwargs)

    monkeypatch.setattr(LocalGraphStore, "reports", watched_reports)
    monkeypatch.setattr(ViewSnapshots, "load", watched_load)
    _, whole = _ask(opened, data_dir, local_embedder)  # read whole
    assert whole == 2
    _, whole = _ask(opened, data_dir, local_embedder)  # loaded from the snapshot
    assert whole == 0
    assert enabled == {"reports": [False], "load": [False]}
    assert gc.isenabled()  # and running again once the view is read
