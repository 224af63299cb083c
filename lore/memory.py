"""Native memory of long-running processes: few malloc arenas.

glibc's allocator gives a thread that meets contention an arena of its own, up to eight
per core, and an arena returns freed memory to the system only from its top. A server's
request threads, the embedding model's and the index engines' threads spread their
allocations over many arenas whose fragmented free space the process keeps for good.
In the soak (``bench/soak.py``, a ``lore serve`` under writes, replacements, deletes,
queries and asks) the resident memory grew by 214 MB in 10 minutes with the default
arenas and by 37 MB with two, most of it in the first 100 s, at the same latencies
(Python's own heap, measured with ``tracemalloc``, was flat in both). Every ``lore``
command and every Celery worker process therefore caps the arenas at :data:`ARENAS`
when it starts, unless ``MALLOC_ARENA_MAX`` is set (glibc then applies the user's value
itself). Nothing happens off glibc (macOS, musl).

Python's own collector of reference cycles is paused (:func:`paused_gc`) while a block
builds a large structure that lives on, such as a new process's global view (every
report, its terms and vectors). Each full collection walks every object the process
holds, and a read that allocates a few million objects set off several of them.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ARENAS = 2
PROMOTE_AT = 50_000
"""Young objects a paused block must leave for them to be promoted (:func:`_promote_young`).

A block that read a view leaves millions; a question answered from a view read before
leaves a few hundred, which the collector then treats as ever (so garbage cycles among
them are collected young, not left to the rarer full collections)."""
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap this process's malloc arenas; whether the cap was set here."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


class _Pauses:
    """How many blocks pause the collector now, and whether it ran before the first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.resume = False


_PAUSES = _Pauses()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (reference counting goes on).

    For a block that builds many objects which outlive it and hold no cycles to
    collect: without the pause, each full collection during the block walks every
    object of the process. Blocks may nest and run in several threads at once; the
    collector runs again when the last one ends, unless it was off before the first
    (a caller's own ``gc.disable()`` is kept); what the blocks built goes to its oldest
    generation when that is :data:`PROMOTE_AT` objects or more (:func:`_promote_young`).
    """
    with _PAUSES.lock:
        if _PAUSES.count == 0:
            _PAUSES.resume = gc.isenabled()
            gc.disable()
        _PAUSES.count += 1
    try:
        yield
    finally:
        with _PAUSES.lock:
            _PAUSES.count -= 1
            if _PAUSES.count == 0 and _PAUSES.resume:
                if gc.get_count()[0] >= PROMOTE_AT:
                    _promote_young()
                gc.enable()


def _promote_young() -> None:
    """Move every object of the young generations to the oldest, without walking them.

    Resumed as it was, the collector would walk all that the block built at once (its
    young generation holds it all: 0.2 s for a view of 10k reports), then again in the
    middle generation, though the objects live on. Freezing and unfreezing moves them
    to the oldest generation in constant time, where the next full collection examines
    them (cycles among them are still found). Skipped when objects are frozen on purpose
    (before a fork, say): unfreezing would release them.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
