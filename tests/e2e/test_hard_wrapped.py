"""Hard-wrapped Markdown in, whole sentences out: reports, key points and answers."""

import re
from pathlib import Path

from lore.embedders import LocalEmbedder
from lore.sentences import is_whole
from retrieval.ask_contract import AskRequest
from tests import ops
from tests.conftest import make_runtime

DOCS = {
    "quorum.md": """# Quorum loss in the Brightwater cluster

The Brightwater cluster keeps three replicas of every ledger shard. When one
replica is down the cluster still accepts writes, but when two replicas are
down the shard loses quorum and Brightwater rejects every write until an
operator restores a replica.

The Ledger Coordinator watches replica health. It pages the Storage Guild when
a shard has been without quorum for more than five minutes, and it records the
outage in the incident log.
""",
    "clock.md": """# Clock skew on Brightwater nodes

Clock skew between Brightwater nodes breaks lease renewal. The Ledger
Coordinator refuses a lease whose timestamp is more than two seconds ahead of
its own clock, so a skewed node keeps losing its leases and its shards move
away.

Operators fix skew by restarting the time daemon on the node. The Storage Guild
reviews every skew incident at the weekly operations review.
""",
    "disks.md": """# Disk pressure on ledger shards

Disk pressure on a Brightwater node slows compaction of the ledger shards it
holds. When free space falls below ten percent the Ledger Coordinator moves
shards to a node with more room, which adds load to the rest of the cluster.

The Storage Guild adds disks when more than a third of the nodes report disk
pressure in the same week.
""",
}


def answer_sentences(answer: str) -> list[str]:
    """The statements an extractive answer shows (after its [n] marker and source)."""
    out = []
    for line in answer.splitlines():
        match = re.match(r"^\[\d+\] (.*)$", line)
        if match:
            body = re.sub(r" \(report [^)]*\)$", "", match.group(1))
            body = re.sub(r"^.*? \([^)]*\.md\): ", "", body)  # local: "where (source): text"
            out.append(body)
    return out


def test_no_key_point_or_answer_sentence_starts_or_ends_mid_sentence(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in DOCS.items():
        (corpus / name).write_text(text)
    runtime = make_runtime(tmp_path / "data", local_embedder)
    try:
        ops.ingest_paths(runtime, [corpus])
        ops.build_graph(runtime)
        reports = runtime.graph().reports()
        assert reports
        for report in reports:
            for finding in report.findings:
                assert is_whole(finding.text), finding.text
            assert "entities (" not in report.summary  # no meta-statistics
        # the report vectors were written with the reports: nothing left to embed
        assert runtime.report_vectors().catch_up(reports) == 0
        for mode in ("global", "local"):
            response = runtime.queries().ask_sync(
                AskRequest(
                    question="How do the Storage Guild and the Ledger Coordinator handle failures?",
                    mode=mode,
                )
            )
            said = answer_sentences(response.answer)
            assert said, response.answer
            for statement in said:
                for sentence in re.split(r"(?<=[.!?]) (?=[A-Z])", statement):
                    assert is_whole(sentence), (mode, sentence)
            texts = [s.lower() for s in said]
            assert len(texts) == len(set(texts))  # never the same passage twice
    finally:
        runtime.close()
