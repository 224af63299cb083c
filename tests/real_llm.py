"""The real model server the ``real_llm`` tests talk to, read from ``TEST_LLM_*``.

``scripts/llm_server.py`` starts llama-cpp-python serving SmolLM2-135M-Instruct on
loopback and sets ``TEST_LLM_URL``. Without the variable a ``real_llm`` test is skipped
with the reason, unless ``TEST_LLM_REQUIRED=1`` says the server must be there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

MISSING = (
    "TEST_LLM_URL not set (no model server; `python -m scripts.llm_server run -- "
    "pytest -m real_llm …` starts llama-cpp-python with SmolLM2-135M on loopback)"
)


@dataclass(frozen=True)
class RealLLM:
    """Where the model answers, and what it is."""

    url: str
    model: str
    name: str

    def lore_env(self, **overrides: str) -> dict[str, str]:
        """``LORE_LLM__*`` settings pointing ``lore`` at this server, plus ``overrides``."""
        return {"LORE_LLM__BASE_URL": self.url, "LORE_LLM__MODEL": self.model, **overrides}


def require_server() -> None:
    """Skip the calling test when no server is set (fail instead when it is required).

    ``TEST_LLM_REQUIRED=1`` (set where the server is meant to run) turns the skip into a
    failure, so a broken server start cannot pass as skipped tests.
    """
    if os.environ.get("TEST_LLM_URL"):
        return
    if os.environ.get("TEST_LLM_REQUIRED") == "1":
        pytest.fail(f"real_llm tests cannot run: {MISSING}", pytrace=False)
    pytest.skip(MISSING)


def real_llm_from_environment() -> RealLLM:
    """The server from the environment (skips or fails like :func:`require_server`)."""
    require_server()
    return RealLLM(
        url=os.environ["TEST_LLM_URL"],
        model=os.environ.get("TEST_LLM_MODEL", "smollm2-135m-instruct"),
        name=os.environ.get("TEST_LLM_SERVER", "an OpenAI-compatible server"),
    )
