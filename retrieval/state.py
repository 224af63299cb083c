"""Side files of the derived indexes: how far each caught up, and the files it wrote.

The marks of those files (size, modification time) let a live process notice them
damaged under it (:class:`FileWatch`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def read_state(path: Path) -> dict[str, Any]:
    """The recorded state, or an empty dict when the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write atomically: a crash leaves the old file or the new one, never half of one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


STATE = "state.json"
Marks = dict[str, list[int]]
"""File name → [size in bytes, modification time in ns]."""


def file_marks(directory: Path, names: Iterable[str]) -> Marks:
    """Size and modification time of each named file in ``directory`` that exists."""
    out: Marks = {}
    for name in names:
        try:
            found = (directory / name).stat()
        except OSError:
            continue
        out[name] = [found.st_size, found.st_mtime_ns]
    return out


class FileWatch:
    """The files an index last wrote or loaded, so damage under a live process is noticed.

    A process keeps its indexes in memory (hnswlib) or maps their files (tantivy), so a
    file truncated, zeroed or overwritten under it goes unseen until a read of that file
    fails, a write merges it, or the next start. :meth:`damage` compares the files with
    what this process last wrote or loaded: one ``stat`` a file. Another process that
    committed in between (under the index lock) rewrote them legitimately: it records the
    files it wrote in ``state.json`` (``files``), which this watch then adopts.
    """

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._marks: Marks = {}

    def adopt(self, names: Iterable[str]) -> Marks:
        """Take ``names`` (and ``state.json``) as they are now as intact; their data marks."""
        data = file_marks(self._dir, names)
        self._marks = {**data, **file_marks(self._dir, [STATE])}
        return data

    def forget(self) -> None:
        """Nothing on disk to vouch for (an index started empty)."""
        self._marks = {}

    def damage(self) -> str | None:
        """Why the files are not the ones this process wrote or loaded; None when they are."""
        if not self._marks:
            return None
        now = file_marks(self._dir, self._marks)
        if now == self._marks:
            return None
        state = read_state(self._dir / STATE)
        recorded = state.get("files")
        if isinstance(recorded, dict) and recorded and file_marks(self._dir, recorded) == recorded:
            self.adopt(recorded)  # another process committed: its files are intact
            return None
        if not state:
            return f"{STATE} is unreadable"
        for name, (size, _) in sorted(self._marks.items()):
            if name not in now:
                return f"{name} is missing"
            if now[name][0] != size:
                return f"{name} is {now[name][0]} bytes, {size} when written"
            if now[name] != self._marks[name]:
                return f"{name} was overwritten"
        return "its files changed"
