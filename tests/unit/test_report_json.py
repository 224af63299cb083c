"""A community report's stored JSON: the fields ``dataclasses.asdict`` gives, read back whole."""

import json
from dataclasses import asdict

from graph.models import CommunityReport, Finding


def _report() -> CommunityReport:
    return CommunityReport(
        community_id="2-7",
        level=2,
        title="Payments \u2014 ledger",
        summary='The ledger "retries" twice.',
        findings=(
            Finding("The ledger retries.", ("ledger",), (("ledger", "payments"),), ("c1", "c2")),
            Finding("Payments time out.", chunks=("c3",)),
        ),
        importance=7.5,
        fingerprint="f" * 16,
        chunk_ids=tuple(f"c{i}" for i in range(1, 500)),
        method="llm",
    )


def test_a_report_is_stored_as_its_asdict_fields_and_reads_back_equal() -> None:
    report = _report()
    stored = report.to_json()
    assert stored == json.dumps(asdict(report), sort_keys=True)  # stored reports compare equal
    assert CommunityReport.from_json(stored) == report
    assert json.loads(stored)["findings"][0]["relations"] == [["ledger", "payments"]]


def test_a_report_orjson_refuses_reads_back_through_json() -> None:
    """A lone surrogate in extracted text: json.dumps escapes it, orjson will not parse it."""
    report = CommunityReport(
        community_id="0-1",
        level=0,
        title="bad \udc80 byte",
        summary="text with a surrogate \ud800 and a huge 1e400 float stays readable",
        findings=(Finding("A finding.", chunks=("c1",)),),
        importance=float("inf"),
        fingerprint="f" * 16,
    )
    stored = report.to_json()
    assert CommunityReport.from_json(stored) == report
