"""The Celery application: broker and result backend (Redis) from :class:`Settings`.

``celery -A workers.celery_app worker`` finds :data:`app`; it reads the settings when
Celery first needs its configuration (never at import). Clients (the CLI, the API) build
their own app with :func:`create_app` and send tasks by name, so they import no task
code. Crash safety: tasks are acknowledged *after* they run (``acks_late``) and a task
whose worker process died is re-queued (``reject_on_worker_lost``); a worker that
disappears altogether leaves its task unacknowledged in Redis, and another worker
restores it once ``broker.visibility_timeout_s`` has passed. Every task is idempotent, so
running one twice is harmless.
"""

from __future__ import annotations

import uuid
from typing import Any

from celery import Celery

from lore.db import redact
from lore.errors import BackendUnavailableError, ConfigurationError
from lore.memory import limit_malloc_arenas
from lore.settings import Settings, load_settings

TASKS_MODULE = "workers.tasks"
limit_malloc_arenas()  # a worker imports this first, before its pool starts: few arenas


def celery_config(settings: Settings) -> dict[str, Any]:
    """Celery settings derived from ours."""
    broker, workers = settings.broker, settings.workers
    if not broker.url:
        raise ConfigurationError("no broker configured (LORE_BROKER__URL)")
    visibility = broker.visibility_timeout_s
    return {
        "broker_url": broker.url,
        "result_backend": broker.result_backend or broker.url,
        "broker_transport_options": {
            "global_keyprefix": broker.key_prefix,
            "visibility_timeout": visibility,
            "unacked_restore_interval": max(1.0, min(10.0, visibility / 5)),
            "unacked_restore_throttle": 1,
        },
        "result_backend_transport_options": {"global_keyprefix": broker.key_prefix},
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "task_default_queue": broker.queue,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        # A replacement pool child must report up within this; ours does so at once (the
        # model warms in a thread), but the default 4 s is tight on a loaded 2-core host,
        # and a child killed there is forked again and again without ever taking a task.
        "worker_proc_alive_timeout": 30.0,
        "task_time_limit": workers.task_time_limit_s,
        "task_soft_time_limit": workers.task_time_limit_s * 0.9,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_expires": 24 * 3600,
        "worker_hijack_root_logger": False,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "beat_schedule": {
            "lore-refresh-stale": {
                "task": "lore.refresh_stale",
                "schedule": workers.refresh_interval_s,
            },
            "lore-resume-jobs": {
                "task": "lore.resume_jobs",
                "schedule": workers.resume_interval_s,
            },
        },
    }


def create_app(settings: Settings, *, with_tasks: bool = False) -> Celery:
    """A Celery app for ``settings`` (a client sends tasks by name with it)."""
    app = Celery("lorekeeper", set_as_current=False, include=[TASKS_MODULE] if with_tasks else [])
    app.conf.update(celery_config(settings))
    return app


def broker_epoch(settings: Settings) -> str:
    """The broker's epoch: a value set in Redis once and lost when Redis loses its data.

    Jobs remember the epoch they were enqueued under; a different epoch means their
    queued tasks may be gone (see :func:`app.steps.resume`).
    """
    import redis

    if not settings.broker.url:
        return ""
    client = redis.Redis.from_url(
        settings.broker.url, socket_connect_timeout=5.0, socket_timeout=30.0
    )
    try:
        key = f"{settings.broker.key_prefix}epoch"
        client.set(key, uuid.uuid4().hex, nx=True)
        value = client.get(key)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise BackendUnavailableError(
            f"the broker at {redact(settings.broker.url)} does not answer ({exc}); start it, "
            "or unset LORE_BROKER__URL to run everything in this process"
        ) from None
    finally:
        client.close()
    return value.decode() if isinstance(value, bytes) else str(value)


app = Celery("lorekeeper", include=[TASKS_MODULE])


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _configure(sender: Celery, **kwargs: Any) -> None:
    sender.conf.update(celery_config(load_settings()))
