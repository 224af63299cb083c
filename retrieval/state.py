"""Small JSON side files recording how far a derived index has caught up with the store."""

from __future__ import annotations

import json
import os
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
