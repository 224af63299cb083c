"""Precision of the offline extractor on a labelled random sample of a real corpus.

    python -m bench.entity_precision --data ../shared/data/ops_runbooks/docs.jsonl
        [--labels tests/fixtures/entity_labels_ops.json] [--dump]

Draws documents at random (seeded) from a JSON-lines corpus (``_id``, ``title``,
``text``), chunks them as ingestion does, runs the offline extractor on every chunk and
collects the distinct entities per document. The labels fixture holds our judgement of
each (document id, entity name): 1 = a thing a reader would look up (a named
component, person, alert, metric, setting, command...), 0 = noise (a label, a
sentence-initial word, boilerplate, markup debris, a common word). Precision is the
labelled-correct share of the extracted entities; ``unlabelled`` counts entities the
fixture has no judgement for (``--dump`` lists them to be labelled). Prints JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

from bench.common import machine
from ingest.chunking import chunk_text
from ingest.extract_offline import document_words
from ingest.extraction import ChunkInput, OfflineExtractor
from lore.tokens import counter_for, packaged_model_dir

LABELS = Path(__file__).resolve().parents[1] / "tests/fixtures/entity_labels_ops.json"


def sample_documents(path: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` documents drawn at random (same seed, same documents)."""
    with path.open(encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle if line.strip()]
    return random.Random(seed).sample(docs, min(n, len(docs)))


def entities_of(doc: dict[str, Any], counter: Any, extractor: OfflineExtractor) -> dict[str, str]:
    """Entity name → type for one document, chunked as ingestion chunks it."""
    fields = {f.name for f in dataclasses.fields(ChunkInput)}
    drafts = chunk_text(doc["text"], counter, size=200, overlap=30)
    words = document_words(d.text for d in drafts)  # what the whole document says of its words
    inputs = []
    for i, draft in enumerate(drafts):
        extra: dict[str, Any] = {"heading": draft.heading} if "heading" in fields else {}
        if "words" in fields:
            extra["words"] = words
        inputs.append(ChunkInput(f"c{i}", doc["_id"], draft.text, doc.get("title", ""), **extra))
    found: dict[str, str] = {}
    for result in extractor.extract_batch(inputs):
        for entity in getattr(result, "entities", []):
            found.setdefault(entity.name, entity.type)
    return found


def main(argv: list[str] | None = None) -> None:
    """Run and print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a docs.jsonl corpus")
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--dump", action="store_true", help="list unlabelled entities")
    args = parser.parse_args(argv)
    fixture = json.loads(args.labels.read_text()) if args.labels.exists() else {"labels": []}
    labels = {(row["doc"], row["entity"]): int(row["label"]) for row in fixture["labels"]}
    counter = counter_for(packaged_model_dir())
    extractor = OfflineExtractor()
    docs = sample_documents(args.data, args.docs, args.seed)
    correct = wrong = 0
    unlabelled: list[dict[str, str]] = []
    wrong_examples: list[str] = []
    by_type: dict[str, list[int]] = {}
    for doc in docs:
        for name, kind in sorted(entities_of(doc, counter, extractor).items()):
            label = labels.get((doc["_id"], name))
            if label is None:
                unlabelled.append({"doc": doc["_id"], "entity": name, "type": kind})
                continue
            correct += label
            wrong += 1 - label
            by_type.setdefault(kind, [0, 0])[label] += 1
            if not label:
                wrong_examples.append(name)
    judged = correct + wrong
    if args.dump:
        print(json.dumps(unlabelled, indent=1, ensure_ascii=False))
        return
    out = {
        "dataset": str(args.data),
        "machine": machine(),
        "extractor": extractor.version,
        "documents": len(docs),
        "entities_judged": judged,
        "unlabelled": len(unlabelled),
        "precision": round(correct / judged, 3) if judged else None,
        "by_type": {k: {"correct": v[1], "wrong": v[0]} for k, v in sorted(by_type.items())},
        "wrong_examples": wrong_examples[:40],
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
