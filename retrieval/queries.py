"""The query façade of one data directory: ``query`` and ``ask``, each on fresh indexes.

Before a search the indexes are caught up with the store (one cheap ``MAX(seq)`` read
when nothing changed; the catch-up itself runs on a search thread, off the event loop),
then the :class:`~retrieval.hybrid.HybridSearcher` or the :class:`~retrieval.ask.Asker`
answers. The HTTP read path needs nothing else. While an index whose files vanished or
were damaged is rebuilt from the store in the background, searches are refused with a 503
and ``Retry-After`` — also the search during which an engine failed on damaged files.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lore.aio import run_sync
from lore.errors import IndexRebuildingError
from retrieval.contract import QueryRequest, QueryResponse
from retrieval.hybrid import HybridSearcher
from retrieval.index_set import REBUILD_RETRY_AFTER_S, IndexSet

if TYPE_CHECKING:  # questions load the router, global search and answer writers on use
    from retrieval.ask import Asker
    from retrieval.ask_contract import AskRequest, AskResponse


def _rebuilding_error(rebuilding: dict[str, str]) -> IndexRebuildingError:
    return IndexRebuildingError(
        "the search indexes are being rebuilt from the store ("
        + "; ".join(f"{name}: {why}" for name, why in sorted(rebuilding.items()))
        + "); retry shortly",
        retry_after_s=REBUILD_RETRY_AFTER_S,
    )


@dataclass
class QueryService:
    """Local search and questions over one index set (the asker made on first use)."""

    indexes: IndexSet
    searcher: HybridSearcher
    make_asker: Callable[[], Asker]
    _asker: Asker | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    @property
    def asker(self) -> Asker:
        """Router, global search and answer writer (made once, by the first question)."""
        with self._lock:
            if self._asker is None:
                self._asker = self.make_asker()
            return self._asker

    async def catch_up(self) -> None:
        """Bring the indexes up to the store's last change, if they are behind.

        Raises :class:`IndexRebuildingError` (a 503 with ``Retry-After``) while index files
        that vanished are rebuilt from the store in the background (started here if need be).
        """
        rebuilding = self.indexes.heal_in_background()
        if rebuilding:
            raise _rebuilding_error(rebuilding)
        if self.indexes.behind():
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self.searcher.executor, self.indexes.catch_up)

    async def query(self, request: QueryRequest) -> QueryResponse:
        """Catch up, then search."""
        await self.catch_up()
        try:
            return await self.searcher.search(request)
        except BaseException as exc:
            self._refuse_if_damaged(exc)
            raise

    def query_sync(self, request: QueryRequest) -> QueryResponse:
        """Blocking :meth:`query` (also works inside a running event loop)."""
        return run_sync(lambda: self.query(request))

    async def ask(self, request: AskRequest) -> AskResponse:
        """Catch up, then route, gather and answer."""
        await self.catch_up()
        try:
            return await self.asker.ask(request)
        except BaseException as exc:
            self._refuse_if_damaged(exc)
            raise

    def ask_sync(self, request: AskRequest) -> AskResponse:
        """Blocking :meth:`ask` (also works inside a running event loop)."""
        return run_sync(lambda: self.ask(request))

    def _refuse_if_damaged(self, exc: BaseException) -> None:
        """A 503 when an index engine failed on files damaged under the process."""
        rebuilding = self.indexes.recover(exc)
        if rebuilding:
            raise _rebuilding_error(rebuilding) from exc

    def close(self) -> None:
        """Stop the search threads; let the global view's snapshot finish its write."""
        if self._asker is not None:
            self._asker.global_searcher.wait_for_snapshot()
        self.searcher.executor.shutdown(wait=True)
        self.searcher.embed_executor.shutdown(wait=True)
