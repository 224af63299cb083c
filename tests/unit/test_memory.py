"""Few malloc arenas for long-running processes (``lore.memory``)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading

from lore.memory import PROMOTE_AT, paused_gc
from tests.conftest import ROOT

PROBE = textwrap.dedent(
    """
    import ctypes, threading
    from lore.memory import limit_malloc_arenas
    print(limit_malloc_arenas())
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    barrier = threading.Barrier(8)
    def churn():  # allocate from eight threads at once: each may want an arena
        barrier.wait()
        for _ in range(2000):
            libc.free(ctypes.c_void_p(libc.malloc(4096)))
    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    text = open("/proc/self/maps").read()
    # a thread arena is a 64 MB-aligned heap: its mappings start on a 64 MB boundary
    starts = [int(line.split("-")[0], 16) for line in text.splitlines() if line.endswith(" 0 ")]
    print(sum(1 for s in starts if s % (64 << 20) == 0))
    """
)


def _arenas(env: dict[str, str], cap: bool = True) -> tuple[str, int]:
    probe = PROBE if cap else PROBE.replace("print(limit_malloc_arenas())", "print(None)")
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    applied, heaps = done.stdout.split()
    return applied, int(heaps)


def test_the_cap_holds_the_arenas_of_many_threads_down() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _arenas(env, cap=False)[1] >= 3  # the threads spread over arenas of their own
    applied, heaps = _arenas(env)
    assert applied == "True"
    assert heaps <= 1  # the main arena is no heap; at most one thread arena besides it


def test_a_users_setting_is_left_to_glibc() -> None:
    env = {**os.environ, "MALLOC_ARENA_MAX": "4"}
    applied, _ = _arenas(env)
    assert applied == "False"


def test_the_collector_is_paused_for_the_outermost_block_and_runs_after_it() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def other_block() -> None:  # a second thread's block, still open when ours ends
        with paused_gc():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other_block)
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block's end does not resume it
        thread.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other thread's block still pauses it
    leave.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_a_paused_block_built_goes_to_the_oldest_generation_unwalked() -> None:
    with paused_gc():
        built = [[i] for i in range(PROMOTE_AT)]  # lists: objects the collector tracks
    assert gc.get_count()[0] < 100  # no walk of them is due
    young = {id(o) for o in gc.get_objects(generation=0)} | {
        id(o) for o in gc.get_objects(generation=1)
    }
    assert not any(id(o) in young for o in built)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(o) in oldest for o in built)
    assert gc.get_freeze_count() == 0  # nothing left frozen


def test_objects_frozen_on_purpose_stay_frozen() -> None:
    """A block big enough to promote what it built leaves a caller's frozen objects be.

    Checked on one object of ours, not by the freeze count: another thread of the test
    process may free frozen objects of its own meanwhile (the count once fell by 2).
    """
    kept = [["frozen on purpose"]]
    gc.freeze()
    try:
        with paused_gc():
            built = [[i] for i in range(PROMOTE_AT)]
        tracked = {id(o) for o in gc.get_objects()}  # the permanent generation is not listed
        assert id(kept) not in tracked and id(kept[0]) not in tracked
        assert gc.get_freeze_count() > 0
        assert built[0] == [0]
    finally:
        gc.unfreeze()
    assert id(kept) in {id(o) for o in gc.get_objects()}


def test_a_small_block_s_objects_stay_young() -> None:
    """A question answered from a cached view: its few objects are collected as ever."""
    gc.collect()
    with paused_gc():
        built = [[i] for i in range(300)]
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert all(id(o) in young for o in built)
