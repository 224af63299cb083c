"""Worker heartbeats: a dead worker's tasks are sent again within seconds.

Without this, a worker that disappears altogether (``kill -9``, the OOM killer, a host
that went away) leaves its task unacknowledged in Redis until the broker's visibility
timeout (``broker.visibility_timeout_s``, an hour by default: it must exceed the longest
task) has passed, and its job reads ``running`` all that time.

Every process that runs tasks keeps the key ``{prefix}alive:{owner}`` alive (its TTL is
``workers.heartbeat_ttl_s``, renewed every ``workers.heartbeat_s``) from a thread, and
records each task it starts in the hash ``{prefix}claims`` (task id → owner, and the task
to send again) until the task ends. The same thread sweeps: a claim whose owner's key has
expired belongs to a process that died; the first sweeper to remove it (``HDEL`` is
atomic, so exactly one) sends the task again. Every task is idempotent, so the copy the
broker redelivers after its visibility timeout is harmless. A part of a community refresh
(a summary, a level's store) is sent again as the refresh of its job, which redoes only
what is still stale.

The thread also watches the broker's epoch (:func:`workers.celery_app.broker_epoch`): a
Redis that restarted empty has lost every queued task and every claim, and the jobs are
resumed (``lore.resume_jobs``) on the next beat, with or without ``celery beat``.

Only Redis and the standard library: the layer below (``app``) knows nothing of this.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from app.job_owners import this_process
from lore.settings import Settings

log = logging.getLogger(__name__)

# tasks sent again as they were: each takes ids and is idempotent
AS_THEY_WERE = frozenset(
    {
        "lore.ingest_documents",
        "lore.extract_chunks",
        "lore.delete_documents",
        "lore.refresh_stale",
        "lore.build_communities",
    }
)
# a chord's parts: their chord cannot be rebuilt, the refresh of their job is sent instead
REFRESH_PARTS = frozenset({"lore.summarize_community", "lore.store_level"})


@dataclass(frozen=True)
class Resend:
    """A task to send again: name, positional and keyword arguments."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def to_json(self) -> str:
        """The task as JSON (kept in the claim)."""
        return json.dumps({"name": self.name, "args": list(self.args), "kwargs": self.kwargs})

    @classmethod
    def from_json(cls, text: str | bytes) -> Resend:
        """The task kept by :meth:`to_json`."""
        data = json.loads(text)
        return cls(str(data["name"]), tuple(data["args"]), dict(data["kwargs"]))


def resend_of(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Resend | None:
    """What to send if the process running this task dies (None: nothing)."""
    if name in AS_THEY_WERE:
        return Resend(name, tuple(args), dict(kwargs))
    if name in REFRESH_PARTS:
        job_id = kwargs.get("job_id") if name == "lore.summarize_community" else args[1]
        if not job_id:
            return None
        namespace = {k: v for k, v in kwargs.items() if k == "namespace"}
        return Resend("lore.refresh_stale", (job_id,), namespace)
    return None


class Heartbeat:
    """The beat and sweep thread of one process (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        send: Callable[[Resend], None],
        *,
        owner: str | None = None,
        client: Any = None,
    ) -> None:
        self.settings = settings
        self.owner = owner or this_process()
        self.send = send
        prefix = settings.broker.key_prefix
        self.claims_key = f"{prefix}claims"
        self.alive_prefix = f"{prefix}alive:"
        self.epoch_key = f"{prefix}epoch"
        self.beat_s = settings.workers.heartbeat_s
        self.ttl_s = settings.workers.heartbeat_ttl_s
        self.client = client or redis.Redis.from_url(
            settings.broker.url or "", socket_connect_timeout=5.0, socket_timeout=10.0
        )
        self.resent = 0
        self._epoch: bytes | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- claims, from the task signals --------------------------------------------------

    def claim(self, task_id: str, resend: Resend) -> None:
        """Record that this process runs ``task_id`` (and how to send it again)."""
        value = json.dumps({"owner": self.owner, "since": time.time(), "task": resend.to_json()})
        self.client.hset(self.claims_key, task_id, value)

    def release(self, task_id: str) -> None:
        """The task ended here (done, failed or handed to a retry)."""
        self.client.hdel(self.claims_key, task_id)

    # -- the beat ------------------------------------------------------------------------

    def beat(self) -> int:
        """Mark this process alive, resend dead owners' tasks, watch the epoch.

        Returns how many tasks were sent again.
        """
        self.client.set(f"{self.alive_prefix}{self.owner}", "1", ex=max(1, round(self.ttl_s)))
        sent = self.sweep()
        # the epoch is set here when missing (as every sender does), so a restart after it
        # was first seen always reads as a new one
        self.client.set(self.epoch_key, uuid.uuid4().hex, nx=True)
        found = self.client.get(self.epoch_key)
        epoch = found if isinstance(found, bytes) else b""
        if self._epoch is not None and epoch != self._epoch:
            log.warning("the broker lost its data (a new epoch): resuming unfinished jobs")
            self.send(Resend("lore.resume_jobs", (), {}))
        self._epoch = epoch
        return sent

    def sweep(self) -> int:
        """Send again the claimed tasks of processes whose heartbeat has expired."""
        sent = 0
        now = time.time()
        for task_id, raw in self.client.hgetall(self.claims_key).items():
            claim = json.loads(raw)
            owner = str(claim["owner"])
            if owner == self.owner or now - float(claim["since"]) < self.ttl_s:
                continue
            if self.client.exists(f"{self.alive_prefix}{owner}"):
                continue
            if not self.client.hdel(self.claims_key, task_id):
                continue  # another sweeper took it
            resend = Resend.from_json(claim["task"])
            log.warning(
                "worker process %s died running %s (%s): sending it again",
                owner,
                resend.name,
                task_id.decode() if isinstance(task_id, bytes) else task_id,
            )
            self.send(resend)
            sent += 1
        self.resent += sent
        return sent

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except Exception:  # Redis away: the next beat tries again
                log.warning("heartbeat: the broker does not answer", exc_info=True)
            self._stop.wait(self.beat_s)

    def start(self) -> None:
        """Beat from a daemon thread until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lore-heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop beating; the key expires and this process's claims become resendable."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.beat_s + 5)
            self._thread = None
        try:
            self.client.delete(f"{self.alive_prefix}{self.owner}")
        except Exception:
            log.debug("heartbeat: could not remove the alive key", exc_info=True)
        self.client.close()
