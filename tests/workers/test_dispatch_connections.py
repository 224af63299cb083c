"""Queuing work leaves no Redis connection behind (real Redis, no worker needed)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import redis

from lore.settings import load_settings
from tests.workers.conftest import REDIS_URL, broker_settings
from workers.client import CeleryDispatcher


def _open_redis_sockets() -> int:
    """Established TCP connections of this process to port 6379 (Linux's /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    count = 0
    with open("/proc/self/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            count += remote.endswith(":18EB") and state == "01" and inode in inodes
    return count


def test_sending_tasks_opens_no_connection_per_send(
    tmp_path: Path, broker_env: dict[str, str]
) -> None:
    # The API queues a job per request and never waits for a task's result: the result
    # backend's connection opened per send was a socket left for the garbage collector
    # a queue of its own: no worker of another test takes these tasks
    queue = f"{broker_settings(broker_env)['queue']}-dispatch-{uuid.uuid4().hex[:6]}"
    broker = {**broker_settings(broker_env), "queue": queue}
    settings = load_settings(data_dir=tmp_path, broker=broker)
    dispatcher = CeleryDispatcher(settings)
    watcher = redis.Redis.from_url(REDIS_URL)
    try:
        prefix = settings.broker.key_prefix
        watcher.ping()  # its own connection is open before counting
        before = _open_redis_sockets()
        for _ in range(6):
            dispatcher.delete(uuid.uuid4().hex, ["gone.md"])  # a task nobody takes here
        # the sender's pooled connections, not one per send
        assert _open_redis_sockets() - before <= 2
        assert watcher.llen(f"{prefix}{queue}") == 6
    finally:
        watcher.delete(f"{settings.broker.key_prefix}{queue}")
        watcher.close()
