"""One LLM rate limit shared by every worker: a token bucket kept in Redis.

The bucket (``rate`` tokens a second, at most ``capacity`` saved up) lives in one Redis
hash and is updated by one Lua script, so concurrent workers on any number of machines
draw from the same budget atomically, timed by the Redis server's clock. A caller
*reserves* its tokens: the script takes them even when the bucket runs short (the
balance goes negative) and answers how long until the reservation is covered; the caller
sleeps exactly that long, once. No polling, no busy loop, one round trip per call, and
callers are served in the order they asked.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from lore.errors import InvalidRequestError

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from lore.settings import Settings

_RESERVE = """
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local now
if ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil then
  tokens = capacity
  ts = now
end
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * rate)
  ts = now
end
tokens = tokens - want
local wait = 0
if tokens < 0 then
  wait = -tokens / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(ts))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
return tostring(wait)
"""


class RateLimiter(Protocol):
    """What the LLM client calls before each request."""

    async def acquire(self, tokens: int = 1) -> None:
        """Return once ``tokens`` may be spent (sleeping as long as needed)."""
        ...


class RedisTokenBucket:
    """A token bucket in Redis shared by every process using the same key."""

    def __init__(self, client: Redis, key: str, *, rate: float, capacity: int) -> None:
        if rate <= 0 or capacity < 1:
            raise InvalidRequestError("a token bucket needs rate > 0 and capacity >= 1")
        self._client = client
        self.key = key
        self.rate = rate
        self.capacity = capacity
        self._script = client.register_script(_RESERVE)

    async def reserve(self, tokens: int = 1, *, now: float | None = None) -> float:
        """Take ``tokens``; return the seconds to wait before spending them.

        ``now`` replaces the Redis server's clock (for tests).
        """
        if not 1 <= tokens <= self.capacity:
            raise InvalidRequestError(
                f"cannot take {tokens} tokens from a bucket of {self.capacity}"
            )
        args: list[str | float | int] = [
            self.rate,
            self.capacity,
            tokens,
            "" if now is None else repr(now),
        ]
        reply = await self._script(keys=[self.key], args=args)
        return float(reply.decode() if isinstance(reply, bytes) else reply)

    async def aclose(self) -> None:
        """Close the Redis connections (they belong to the event loop that made them)."""
        await self._client.aclose()

    async def acquire(self, tokens: int = 1) -> None:
        """Reserve ``tokens`` and sleep until they are covered."""
        wait = await self.reserve(tokens)
        if wait > 0:
            await asyncio.sleep(wait)


def build_rate_limiter(settings: Settings, name: str = "llm") -> RedisTokenBucket | None:
    """The shared LLM limiter when a Redis broker is configured, else None (no limit)."""
    url = settings.broker.url
    if not url or not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    from redis.asyncio import Redis

    return RedisTokenBucket(
        Redis.from_url(url),
        f"{settings.broker.key_prefix}ratelimit:{name}",
        rate=settings.workers.llm_rate_per_s,
        capacity=settings.workers.llm_burst,
    )
