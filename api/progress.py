"""Progress of a long command: a live bar on a terminal, a steady log line elsewhere.

Under a process manager (systemd, a CI log, ``nohup``) stderr is not a terminal and a
live bar would print nothing until the end, so :class:`ProgressReporter` writes one line
every ``interval_s`` seconds instead — done / total, rate and ETA (once the total is
known: a queued job, a graph build; a streamed directory shows the count so far) — and
a last line when the work ends. ``quiet`` (``lore --quiet``, or ``--json``) prints nothing at all.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class ProgressReporter:
    """Report ``done`` of ``total`` for one labelled piece of work."""

    def __init__(
        self,
        label: str,
        *,
        quiet: bool,
        console: Console,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        stream: TextIO | None = None,
    ) -> None:
        self.label = label
        self.interval_s = interval_s
        self._clock = clock
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._live = not quiet and console.is_terminal
        self._bar = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not self._live,
        )
        self._task = self._bar.add_task(label, total=None, last="")
        self._start = clock()
        self._last_line = self._start
        self.done = 0
        self.total: int | None = None

    def __enter__(self) -> ProgressReporter:
        self._bar.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._bar.__exit__(exc_type, exc, traceback)
        if self.total is None:  # streamed work: the count is known once it ends
            self.total = self.done
        if not self._quiet and not self._live and exc_type is None and self.done:
            self._write(final=True)

    def update(self, done: int, total: int | None = None, last: str = "") -> None:
        """Set the absolute progress (``total`` None while still unknown)."""
        self.done, self.total = done, total if total is not None else self.total
        self._bar.update(self._task, completed=done, total=self.total, last=last)
        now = self._clock()
        if not self._quiet and not self._live and now - self._last_line >= self.interval_s:
            self._last_line = now
            self._write(final=False)

    def advance(self, step: int = 1, last: str = "") -> None:
        """Count ``step`` more items done."""
        self.update(self.done + step, self.total, last)

    def line(self, final: bool = False) -> str:
        """The log line for the current state, e.g. ``ingest: 40/120 (33%), 5.1/s, ETA 16s``."""
        elapsed = max(self._clock() - self._start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            share = f"{self.done}/{self.total} ({100 * self.done / self.total:.0f}%)"
        else:
            share = f"{self.done} so far"
        text = f"{self.label}: {share}, {rate:.1f}/s"
        if final:
            return f"{text}, done in {elapsed:.0f}s"
        if self.total and rate > 0:
            text += f", ETA {max(self.total - self.done, 0) / rate:.0f}s"
        return text

    def _write(self, final: bool) -> None:
        self._stream.write(self.line(final) + "\n")
        self._stream.flush()
