"""The AIMD bound on calls in flight (lore/llm/aimd.py), as pure logic."""

from __future__ import annotations

import asyncio

from lore.llm.aimd import AdaptiveLimit


def test_a_timeout_halves_once_per_burst_and_never_below_one() -> None:
    gate = AdaptiveLimit(8)
    gate.failed(0)
    assert gate.limit == 4
    gate.failed(0)  # started before the cut: already answered by it
    assert gate.limit == 4
    gate.failed(1)
    gate.failed(2)
    gate.failed(3)
    gate.failed(4)
    assert gate.limit == 1 and gate.decreases == 3


def test_a_late_first_token_halves_and_a_run_of_successes_grows_by_one() -> None:
    gate = AdaptiveLimit(4, slack_s=0.5, grow_after=3)
    gate.succeeded(0, first_token_s=1.0, prompt_chars=1000)  # the best so far
    gate.succeeded(0, first_token_s=1.4, prompt_chars=1000)  # within 1.5x: fine
    assert gate.limit == 4
    gate.succeeded(0, first_token_s=2.0, prompt_chars=2000)  # twice the prompt, as fast
    assert gate.limit == 4
    gate.succeeded(0, first_token_s=3.0, prompt_chars=1000)  # queued behind a reply
    assert gate.limit == 2
    for _ in range(3):
        gate.succeeded(1, first_token_s=1.0, prompt_chars=1000)
    assert gate.limit == 3 and gate.increases == 1
    for _ in range(30):
        gate.succeeded(1, first_token_s=1.0, prompt_chars=1000)
    assert gate.limit == 4  # the setting is the ceiling


def test_slots_wait_for_the_limit() -> None:
    gate = AdaptiveLimit(2)

    async def run() -> int:
        async def hold() -> None:
            async with gate.slot():
                await asyncio.sleep(0.02)

        await asyncio.gather(*(hold() for _ in range(6)))
        return gate.peak_in_flight

    assert asyncio.run(run()) == 2 and gate.in_flight == 0
