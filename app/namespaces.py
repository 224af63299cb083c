"""One runtime per namespace: separate stores and indexes, one shared embedding model.

A namespace is a data directory of its own — the default namespace is the data
directory itself (so a single-user setup looks exactly as before), any other lives in
``<data_dir>/namespaces/<name>``. With the store on PostgreSQL (``store.url``) a
namespace other than the default also gets its own schemas (``<prefix>_ns_<name>_<hash>…``),
so its tables are never those of another. Nothing is shared between namespaces but the
loaded model, so a query in one can never return a chunk of another.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from pathlib import Path

from app.builders import store_exists, store_schema, stored_namespaces
from app.keys import check_namespace
from app.orphans import OrphanSweep, end_orphaned_jobs, forget_stale_view
from app.runtime import Runtime, open_runtime
from lore.embedders import Embedder
from lore.settings import Settings
from lore.store import NAMESPACE_KEY


def namespace_dir(settings: Settings, namespace: str) -> Path:
    """Where a namespace's store and indexes live."""
    check_namespace(namespace)
    if namespace == settings.auth.default_namespace:
        return settings.data_dir
    return settings.data_dir / "namespaces" / namespace


def namespace_prefix(prefix: str, namespace: str) -> str:
    """The PostgreSQL schema prefix of a namespace other than the default (unique per name)."""
    clean = re.sub(r"[^a-z0-9]", "_", namespace)[:20]
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:8]  # "a-b" and "a_b" differ
    return f"{prefix}_ns_{clean}_{digest}"


def namespace_settings(settings: Settings, namespace: str) -> Settings:
    """The settings of one namespace: its data directory, schemas and tag in Neo4j."""
    graph, store = settings.graph, settings.store
    if namespace != settings.auth.default_namespace:
        graph = graph.model_copy(update={"neo4j_namespace": f"{graph.neo4j_namespace}.{namespace}"})
        prefix = namespace_prefix(store.schema_prefix, namespace)
        store = store.model_copy(update={"schema_prefix": prefix})
    return settings.model_copy(
        update={"data_dir": namespace_dir(settings, namespace), "graph": graph, "store": store}
    )


class Namespaces:
    """Runtimes opened on first use and kept for the life of the process.

    Each open runtime is swept for orphaned jobs every ``jobs.orphan_sweep_s`` seconds
    (``app.orphans``) until :meth:`close`.
    """

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.embedder = embedder
        self._runtimes: dict[str, Runtime] = {}
        self._sweeps: list[OrphanSweep] = []
        self._lock = threading.Lock()

    def runtime(self, namespace: str) -> Runtime:
        """The namespace's runtime (created, with an empty store, on first write or read)."""
        with self._lock:
            found = self._runtimes.get(namespace)
            if found is not None:
                return found
            settings = namespace_settings(self.settings, namespace)
            runtime = open_runtime(settings, self.embedder, namespace)  # one model per process
            self.embedder = runtime.embedder
            if runtime.store.get_meta(NAMESPACE_KEY) != namespace:
                runtime.store.set_meta(NAMESPACE_KEY, namespace)  # listed by existing()
            # jobs of a server that died mid-request end here
            end_orphaned_jobs(runtime.store, runtime.jobs())
            sweep = OrphanSweep(  # and of one dying later
                runtime.store,
                runtime.jobs(),
                runtime.indexes,
                settings.jobs.orphan_sweep_s,
                views=functools.partial(forget_stale_view, runtime.graph, runtime.data_dir),
            )
            sweep.start()
            self._sweeps.append(sweep)
            self._runtimes[namespace] = runtime
            return runtime

    def exists(self, namespace: str) -> bool:
        """Whether the namespace has a store (or is the default, or open already)."""
        if namespace == self.settings.auth.default_namespace:
            return True
        with self._lock:
            if namespace in self._runtimes:
                return True
        return store_exists(namespace_settings(self.settings, namespace))

    def opened(self) -> dict[str, Runtime]:
        """The runtimes opened so far, by namespace."""
        with self._lock:
            return dict(self._runtimes)

    def existing(self) -> list[str]:
        """Namespaces that have a store (on disk, or on the PostgreSQL server)."""
        names = {self.settings.auth.default_namespace}
        if self.settings.store.url:
            stored = stored_namespaces(self.settings)
            names.update(
                name
                for schema, name in stored.items()
                if name and schema == store_schema(namespace_settings(self.settings, name))
            )
            return sorted(names)
        root = self.settings.data_dir / "namespaces"
        if root.is_dir():
            names.update(p.name for p in root.iterdir() if (p / "lore.sqlite3").exists())
        return sorted(names)

    def stop_sweeps(self) -> None:
        """Stop the orphan sweeps (a process shutting down); the runtimes stay open."""
        with self._lock:
            for sweep in self._sweeps:
                sweep.stop()
            self._sweeps.clear()

    def close(self) -> None:
        """Stop the sweeps, then close every runtime."""
        with self._lock:
            for sweep in self._sweeps:
                sweep.stop()
            self._sweeps.clear()
            for runtime in self._runtimes.values():
                runtime.close()
            self._runtimes.clear()
