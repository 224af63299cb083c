"""A daemon thread doing one step every interval: job heartbeats, orphan sweeps.

Both are small loops with the same lifecycle and the same failure policy — the database
can be away for a while (a PostgreSQL restart), so a failing step is logged once at
WARNING, retried every interval, and its recovery logged at INFO; nothing is raised into
the process. :meth:`Periodic.stop` ends the thread after the step under way, if any.
"""

from __future__ import annotations

import logging
import threading


class Periodic:
    """Calls :meth:`step` every ``interval_s`` seconds on a daemon thread named ``name``.

    Subclasses implement :meth:`step` (False ends the thread; it has then called
    :meth:`_forget` under ``_lock``) and start the thread with :meth:`_launch`.
    ``what`` names the step in log lines, written to ``log``.
    """

    def __init__(self, name: str, what: str, interval_s: float, log: logging.Logger) -> None:
        self._name = name
        self._what = what
        self._interval_s = interval_s
        self._log = log
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def step(self) -> bool:
        """One round of work; False when the thread should end."""
        raise NotImplementedError

    def running(self) -> bool:
        """Whether the thread is at work."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """End the thread (after the step under way, if any); it never starts again."""
        self._stopped.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _launch(self) -> None:
        """Under ``_lock``: start the thread unless it runs (in this process) or stopped."""
        gone = self._thread is None or not self._thread.is_alive()  # (or a fork's copy)
        if gone and not self._stopped.is_set():
            self._thread = threading.Thread(target=self._run, name=self._name)
            self._thread.daemon = True
            self._thread.start()

    def _forget(self) -> None:
        """Under ``_lock``, as the thread ends: no thread works now."""
        if self._thread is threading.current_thread():
            self._thread = None

    def _run(self) -> None:
        failing = False
        while not self._stopped.wait(self._interval_s):
            try:
                keep = self.step()
            except Exception as exc:  # the database is away for now: the next step retries
                if not failing:
                    self._log.warning(
                        "%s failed, retrying every %ss: %s", self._what, self._interval_s, exc
                    )
                failing = True
                continue
            if failing:
                self._log.info("%s recovered", self._what)
                failing = False
            if not keep:
                return
        with self._lock:
            self._forget()
