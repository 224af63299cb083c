"""The queries ``make demo`` runs after ingesting the demo corpus.

    python -m examples.demo_queries --data-dir .lore/demo

Each query goes through the same runtime as ``lore search`` (one model load for all).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from api.cli import print_results
from api.cli_common import out
from app.runtime import open_runtime
from lore.settings import load_settings
from retrieval.contract import QueryRequest

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("an error code, exactly", {"search_text": "E_LEDGER_LOCK_TIMEOUT", "top_k": 3}),
    ("a method name", {"search_text": "TokenRefresher.rotate_keys", "top_k": 3}),
    ("a dotted config key", {"search_text": "pool.idle_timeout_ms", "top_k": 3}),
    (
        "a paraphrase (no shared identifiers)",
        {"search_text": "why did shoppers find an empty basket after stepping away", "top_k": 3},
    ),
    (
        "HTTP 504, production only (metadata filter)",
        {
            "search_text": "HTTP 504 gateway timeout",
            "top_k": 3,
            "metadata_filter": {"env": "production"},
        },
    ),
    (
        "the same, staging, with the seed's weights",
        {
            "search_text": "HTTP 504 gateway timeout",
            "top_k": 3,
            "metadata_filter": {"env": "staging"},
            "hybrid_params": {"dense_weight": 0.6, "sparse_weight": 0.4, "rrf_k_constant": 60},
        },
    ),
]


def main() -> None:
    """Run the demo queries and print their results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    runtime = open_runtime(load_settings(data_dir=args.data_dir))
    try:
        for label, body in QUERIES:
            request = QueryRequest.model_validate(body)
            extra = f"  filter {request.metadata_filter}" if request.metadata_filter else ""
            out.console.rule(f"[bold]{label}[/]: {request.search_text!r}{extra}")
            print_results(runtime.queries().query_sync(request))
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
