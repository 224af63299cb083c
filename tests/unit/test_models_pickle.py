"""The graph's report and community classes pickle as their fields (view snapshots)."""

from __future__ import annotations

import dataclasses
import pickle

from graph.communities import Community
from graph.models import CommunityReport, Finding


def test_every_field_survives_a_pickle_round_trip() -> None:
    finding = Finding("Timeouts.", ("ledger",), (("ledger", "pool"),), ("c1",))
    report = CommunityReport(
        "1-2", 1, "Ledger", "Summary.", (finding,), 3.5, "fp", ("c1", "c2"), "llm"
    )
    community = Community("1-2", 1, 2, "0-1", ("ledger", "pool"))
    for value in (finding, report, community):
        # a field added later must be added to __reduce__ too: its arguments are the fields
        assert len(value.__reduce__()[1]) == len(dataclasses.fields(value))
        assert pickle.loads(pickle.dumps(value, protocol=5)) == value
