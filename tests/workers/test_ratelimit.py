"""The Redis token bucket shared by every worker's LLM client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from app.ratelimit import RedisTokenBucket
from tests.workers.conftest import REDIS_URL, redis_up

pytestmark = pytest.mark.workers


@pytest.fixture
def key() -> Iterator[str]:
    if not redis_up(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL} (.ci/run starts one)")
    name = f"lore-test-bucket-{uuid.uuid4().hex}"
    yield name
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.delete(name)
    client.close()


@asynccontextmanager
async def _buckets(key: str, count: int) -> AsyncIterator[list[RedisTokenBucket]]:
    from redis.asyncio import Redis

    clients = [Redis.from_url(REDIS_URL) for _ in range(count)]
    try:
        yield [RedisTokenBucket(c, key, rate=2.0, capacity=3) for c in clients]
    finally:
        for client in clients:
            await client.aclose()


def test_reservations_follow_the_bucket_arithmetic(key: str) -> None:
    async def run() -> list[float]:
        async with _buckets(key, 2) as (a, b):  # two clients: two workers sharing one key
            now = 1000.0
            waits = [await a.reserve(now=now), await b.reserve(now=now), await a.reserve(now=now)]
            waits.append(await b.reserve(now=now))  # bucket empty: 1 token at 2/s
            waits.append(await a.reserve(now=now))  # queued behind it
            waits.append(await b.reserve(2, now=now + 10))  # refilled, capped at 3
            return waits

    assert asyncio.run(run()) == [0.0, 0.0, 0.0, 0.5, 1.0, 0.0]


def test_acquire_sleeps_once_instead_of_polling(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> None:
        async with _buckets(key, 1) as (bucket,):
            monkeypatch.setattr(asyncio, "sleep", fake_sleep)
            for _ in range(5):
                await bucket.acquire()

    asyncio.run(run())
    assert len(slept) == 2  # 3 from the burst; each later call sleeps exactly once
    assert all(0 < s <= 1.0 for s in slept)


def test_a_reservation_larger_than_the_bucket_is_refused(key: str) -> None:
    from lore.errors import InvalidRequestError

    async def run() -> None:
        async with _buckets(key, 1) as (bucket,):
            with pytest.raises(InvalidRequestError):
                await bucket.reserve(4)

    asyncio.run(run())
