"""Duplicate-heavy check: how many distinct documents MMR puts in the top 10.

    python -m bench.ops_mmr --data ../shared/data/ops_runbooks [--diversity 0.2,0.3]

Ingests the two runbook collections of the ops corpus (prometheus-operator and
OpenShift), which hold the same alert's runbook twice for 33 alerts. For each of those
alerts the query is the alert's name in words ("etcd members down"); the figure is the
mean number of distinct documents among the top 10 chunks, and how often both
collections' runbooks for that alert appear, with MMR off and on.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.ingest import ingest
from bench.common import machine, runtime_for, timed
from ingest.loaders import load_paths
from lore.models import Rejected, SourceDocument
from retrieval.contract import QueryRequest

COLLECTIONS = ("prometheus-operator/runbooks", "openshift/runbooks")


def alert_name(doc_id: str) -> str:
    """The alert a runbook is for, from its file name (``ocp:a/b/KubeNodeNotReady.md``)."""
    return doc_id.rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".md")


def alert_of(doc_id: str) -> str:
    """The alert's key (lower case)."""
    return alert_name(doc_id).lower()


def runbooks(path: Path) -> Iterator[SourceDocument | Rejected]:
    """The records of the two runbook collections."""
    for item in load_paths([path], include=["*.jsonl"], exclude=[], max_bytes=5_000_000):
        if isinstance(item, SourceDocument) and item.metadata.get("source") in COLLECTIONS:
            yield item


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the index and print the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/lore-bench-ops"))
    parser.add_argument("--diversity", default="0.1,0.2,0.3")
    args = parser.parse_args(argv)
    runtime = runtime_for(args.work)
    out: dict[str, Any] = {
        "dataset": "ops_runbooks (two runbook collections)",
        "machine": machine(),
    }
    if runtime.store.counts()["chunks"] == 0:
        report, seconds = timed(
            lambda: ingest(runtime.job_services(), runbooks(args.data / "docs.jsonl")).report
        )
        out["ingest"] = {
            "documents": len(report.done),
            "chunks": report.chunks,
            "seconds": round(seconds, 1),
        }
    docs = runtime.store.list_documents()
    by_alert: dict[str, set[str]] = {}
    names: dict[str, str] = {}
    for doc in docs:
        by_alert.setdefault(alert_of(doc.id), set()).add(str(doc.metadata.get("source")))
        names[alert_of(doc.id)] = alert_name(doc.id)
    shared = sorted(a for a, sources in by_alert.items() if len(sources) == 2)
    out["queries"] = len(shared)
    settings = {"mmr_off": 0.0} | {f"mmr@{d}": float(d) for d in args.diversity.split(",")}
    for name, diversity in settings.items():
        distinct, both = 0, 0
        for alert in shared:
            text = " ".join(re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", names[alert]))
            response = runtime.queries().query_sync(
                QueryRequest(search_text=text, top_k=10, diversity=diversity)
            )
            doc_ids = {r.document_id for r in response.results}
            distinct += len(doc_ids)
            both += sum(1 for d in doc_ids if alert_of(d) == alert) >= 2
        out[name] = {
            "distinct_docs_in_top10": round(distinct / len(shared), 2),
            "both_copies_in_top10": round(both / len(shared), 2),
        }
    runtime.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
