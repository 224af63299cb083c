"""Progress of a long command: a live bar on a terminal, a steady log line elsewhere.

One reporter serves every long command (``lore ingest``, ``lore graph build``, …).
Its interface is small on purpose:

* ``with progress_reporter(ctx, "ingest") as bar:`` (``api.cli_common``) makes one;
* ``bar.update(done, total)`` sets the absolute count, ``bar.advance(n)`` adds to it
  (``total`` None while unknown: a streamed directory shows the count so far);
* ``bar.phase("reports", total)`` starts the next stage of the same command (its own
  count, rate and ETA; ``lore graph build`` goes "extracting" then "reports");
* ``bar.line()`` is the text of one log line.

Off a terminal (a pipe, a CI log, systemd, ``nohup``) a live bar would print nothing
until the end, so the reporter writes one line when a phase starts, then one every
``interval_s`` seconds — done / total, rate and ETA — and a last line when it ends:
``ingest: 40/120 (33%), 5.1/s, ETA 16s``. ``quiet`` (``lore -q``, or ``--json``)
prints nothing at all. Counters another part adds (LLM calls, tokens) belong in
``last``, the free text after the count.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

    from lore.llm import LLMStats


class ProgressReporter:
    """Report ``done`` of ``total`` for one labelled piece of work (see the module doc)."""

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
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.label = label
        self.interval_s = interval_s
        self._clock = clock
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._live = not quiet and console.is_terminal
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            disable=not self._live,
        )
        self._task: TaskID = self._bar.add_task(label, total=None, last="")
        self._start = clock()
        self._last_line: float | None = None
        self.done = 0
        self.total: int | None = None
        self.last = ""

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
        self._end_phase(exc_type is None)

    def _end_phase(self, ok: bool) -> None:
        if self.total is None:  # streamed work: the count is known once it ends
            self.total = self.done
        if self._logging and ok and (self.done or self._last_line is not None):
            self._write(final=True)

    @property
    def _logging(self) -> bool:
        return not self._quiet and not self._live

    def phase(self, label: str, total: int | None = None) -> None:
        """End the current stage (its last line) and start ``label`` at 0 of ``total``."""
        self._end_phase(True)
        self.label, self.done, self.total, self.last = label, 0, total, ""
        self._start, self._last_line = self._clock(), None
        self._bar.update(self._task, description=label, completed=0, total=total, last="")
        if self._logging:
            self._last_line = self._start
            self._write(final=False)

    def update(self, done: int, total: int | None = None, last: str = "") -> None:
        """Set the absolute progress (``total`` None while still unknown)."""
        self.done, self.total = done, total if total is not None else self.total
        self.last = last
        self._bar.update(self._task, completed=done, total=self.total, last=last)
        now = self._clock()
        if self._logging and (self._last_line is None or now - self._last_line >= self.interval_s):
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
            return f"{text}, done in {elapsed:.0f}s" + (f"; {self.last}" if self.last else "")
        if self.total and rate > 0:
            text += f", ETA {max(self.total - self.done, 0) / rate:.0f}s"
        return text + (f"; {self.last}" if self.last else "")

    def _write(self, final: bool) -> None:
        self._stream.write(self.line(final) + "\n")
        self._stream.flush()


def llm_counters(stats: LLMStats, elapsed_s: float) -> str:
    """The LLM figures shown after a count, e.g. ``LLM 12 calls, 5400 tokens, 27 tokens/s``.

    Tokens/s is completion tokens generated per second of the run so far; empty before
    the first call or cache hit (an offline build shows nothing).
    """
    if not stats.calls and not stats.cache_hits:
        return ""
    rate = stats.completion_tokens / max(elapsed_s, 1e-9)
    text = (
        f"LLM {stats.calls} calls, {stats.prompt_tokens + stats.completion_tokens} tokens, "
        f"{rate:.1f} tokens/s"
    )
    if stats.cache_hits:
        text += f", {stats.cache_hits} cache hits"
    if stats.retries:
        text += f", {stats.retries} retries"
    return text


class GraphProgress:
    """The callbacks of a graph build or refresh: extraction, then reports, with LLM counters.

    ``extracted`` and ``reports`` take ``(done, total)``; ``stats`` receives the run's
    :class:`LLMStats` once it exists, so every line shows its calls, tokens and rate.
    """

    def __init__(self, bar: ProgressReporter) -> None:
        self.bar = bar
        self._live: list[LLMStats] = []
        self._started = time.monotonic()

    def counters(self) -> str:
        """The LLM figures so far (empty before the first call)."""
        return llm_counters(self._live[0], time.monotonic() - self._started) if self._live else ""

    def stats(self, stats: LLMStats) -> None:
        """Follow ``stats`` (updated as calls end)."""
        self._live.append(stats)

    def extracted(self, done: int, total: int) -> None:
        """Chunks extracted of those to extract."""
        self.bar.update(done, total, last=self.counters())

    def reports(self, done: int, total: int) -> None:
        """Reports written of those to write (a new phase at the first call)."""
        if self.bar.label != "reports":
            self.bar.phase("reports", total)  # a line at once off a terminal
        else:
            self.bar.update(done, total, last=self.counters())
