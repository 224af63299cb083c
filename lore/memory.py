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
"""

from __future__ import annotations

import ctypes
import os
import sys

ARENAS = 2
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
