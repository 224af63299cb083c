"""run_sync gives back the coroutine's own result, without ever formatting it."""

from __future__ import annotations

import asyncio
import threading

from lore.aio import run_sync


class Costly:
    """A result whose repr is expensive (a large pydantic response): counted, never wanted."""

    formatted = 0

    def __repr__(self) -> str:
        Costly.formatted += 1
        return "Costly(...)"


async def produce() -> Costly:
    await asyncio.sleep(0)
    return Costly()


def test_the_result_comes_back_unformatted_from_plain_code() -> None:
    Costly.formatted = 0
    results = [run_sync(produce) for _ in range(3)]
    assert all(isinstance(r, Costly) for r in results) and len({id(r) for r in results}) == 3
    assert Costly.formatted == 0  # asyncio.run's SIGINT bookkeeping used to repr it


def test_inside_a_running_loop_it_runs_on_a_thread_of_its_own() -> None:
    async def where() -> str:
        return threading.current_thread().name

    async def caller() -> tuple[str, bool]:
        made = run_sync(produce)  # a sync API called from async code
        return run_sync(where), isinstance(made, Costly)

    thread, made = asyncio.run(caller())
    assert thread.startswith("lore-run-sync") and made
