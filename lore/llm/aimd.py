"""An adaptive bound on the calls one client has in flight (AIMD).

The bound starts at ``llm.max_concurrency`` and follows what the endpoint can take:

- **halve** (never below 1) when a call times out, is answered 429, or waits for its
  first token *well above the running best*: the time to first token per character of
  prompt (prompt processing scales with it), compared with the lowest of the last
  ``window`` replies; "well above" is more than ``factor`` times the expected wait and
  more than ``slack_s`` seconds over it. A call queued behind another on an endpoint
  that answers one request at a time waits a whole reply longer than the best, so such
  an endpoint settles at one call in flight;
- **grow by one** (up to the setting) after ``grow_after`` replies in a row without
  such a signal.

Only calls that started after the last decrease can cause the next one, so a burst of
slow replies already in flight halves the bound once, not once per reply.

The bound is **per client, so per process**: each worker process adapts on its own.
What is shared across workers is the optional rate limiter (a token bucket in Redis,
``app/ratelimit.py``), which bounds calls per second, not calls in flight.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class AdaptiveLimit:
    """Calls in flight, bounded by a limit that halves on trouble and grows on success."""

    def __init__(
        self,
        ceiling: int,
        *,
        factor: float = 1.5,
        slack_s: float = 1.0,
        grow_after: int = 8,
        window: int = 32,
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling
        self.in_flight = 0
        self.peak_in_flight = 0
        self.decreases = 0
        self.increases = 0
        self._factor = factor
        self._slack_s = slack_s
        self._grow_after = grow_after
        self._rates: deque[float] = deque(maxlen=window)  # seconds to first token per char
        self._epoch = 0  # bumped by every decrease
        self._streak = 0
        self._changed: asyncio.Condition | None = None

    def bind(self) -> None:
        """Start on the running event loop (what was learned about the endpoint is kept)."""
        self._changed = asyncio.Condition()
        self.in_flight = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one of the calls in flight; yields the epoch the call started in."""
        if self._changed is None:
            self.bind()
        changed = self._changed
        assert changed is not None
        async with changed:
            await changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield self._epoch
        finally:
            async with changed:
                self.in_flight -= 1
                changed.notify_all()

    def succeeded(self, epoch: int, first_token_s: float, prompt_chars: int) -> None:
        """A reply came: halve if its first token came well late, else count towards growing."""
        rate = first_token_s / max(1, prompt_chars)
        best = min(self._rates) if self._rates else None
        self._rates.append(rate)
        if best is not None:
            expected = best * prompt_chars
            if first_token_s > self._factor * expected and first_token_s > expected + self._slack_s:
                self._decrease(epoch)
                return
        if epoch != self._epoch:
            return  # started before the last decrease: says nothing about the new limit
        self._streak += 1
        if self._streak >= self._grow_after and self.limit < self.ceiling:
            self.limit += 1
            self.increases += 1
            self._streak = 0  # waiters see it when this call's slot is released

    def failed(self, epoch: int) -> None:
        """A call timed out or was refused for load (429): halve the limit."""
        self._decrease(epoch)

    def _decrease(self, epoch: int) -> None:
        if epoch != self._epoch:
            return  # the limit was already cut since this call started
        self._epoch += 1
        self._streak = 0
        if self.limit > 1:
            self.limit = max(1, self.limit // 2)
            self.decreases += 1
