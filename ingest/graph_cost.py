"""What a graph build would send to the LLM, before it runs (``graph build --dry-run``).

The estimate renders the very prompts the build would send — one ``extract_graph``
prompt per chunk still to extract, one ``summarize_community`` prompt per community
whose report the build would (re)write — asks the reply cache which of them it already
answered (those cost nothing), and counts the rest:

- prompt tokens: the messages' text counted by the given counter (Lorekeeper ships no
  tokenizer of any LLM — tiktoken fetches its encodings from the network at run time —
  so the runtime passes the packaged model's word pieces times
  ``llm.tokens_per_word_piece``), plus 3 per message and 3 per reply as chat formats add;
- completion tokens: the mean length of this model's cached replies to the same task
  when there are some, else a stated assumption (an extraction reply as long as its
  chunk, a report of 400 tokens), capped at the prompt's budget (within ``llm.max_tokens``);
- re-prompts: at the rate this model needed them for the task before (the reply cache
  counts calls per ask, failed asks included), each the prompt again with the first
  reply and the reason, and a second reply; none before any call.

The communities are those the build's refresh would summarise, planned as it plans them
(``graph.refresh.preview_refresh``: the region the change touched; every community
after ``--rebuild`` or on a first build). When chunks are still to be extracted, they
are planned on the current graph:
the extraction may change which communities need a report, so that part is a lower
bound (``communities_final`` says so). Nothing is written and no call is made, unless
asked to sample: before a model has answered a task on this data directory, the length
of its replies is a guess (a stated assumption), so ``sample`` makes a few of the planned
calls first, spread over the prompt sizes, and prices the rest by their replies and
re-prompts. Their replies are cached: the build finds them there and does not pay again.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from graph.llm_reports import LLMReportWriter
from graph.models import CommunityReport
from graph.refresh import preview_refresh
from graph.reports import (
    ChunkTexts,
    ReportJob,
    ReportWriter,
    from_children,
    is_current,
    report_fingerprint,
)
from graph.store import GraphStore
from ingest.extract_llm import LLMExtractor
from ingest.extraction import ChunkInput, Extractor
from lore.llm import ChatPrompt, LLMClient, chat_tokens
from lore.prompts import extract_graph, summarize_community
from lore.store_roles import ChunkReader

Count = Callable[[str], int]
T = TypeVar("T")
DEFAULT_REPORT_TOKENS = 400


@dataclass
class BuildEstimate:
    """What a build would send to the LLM and what it would cost."""

    extractor: str
    report_writer: str
    model: str | None
    tokenizer: str
    chunks: int = 0
    """Chunks the build would extract."""
    extraction_calls: int = 0
    extraction_cache_hits: int = 0
    communities: int = 0
    """Communities whose report the build would (re)write."""
    communities_final: bool = True
    report_calls: int = 0
    report_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    completion_basis: list[str] = field(default_factory=list)
    reprompts: float = 0.0
    """Re-prompt calls expected on top of :attr:`calls`, at this model's past rate per task
    (their tokens are in the totals)."""
    reprompt_basis: list[str] = field(default_factory=list)
    reprompt_tokens: int = 0
    """The part of the totals that the expected re-prompts make up."""
    cost: float | None = None
    budget_tokens: int | None = None
    stored_extractor: str | None = None
    """The extractor the stored graph came from, when it is not the configured one."""
    reextract_chunks: int = 0
    """What ``--reextract`` would extract with the configured extractor (when the above)."""
    reextract_calls: int = 0
    reextract_cache_hits: int = 0
    reextract_tokens: int = 0
    sampled_calls: int = 0
    """Calls made first (``sample``) to learn this model's replies on this corpus; their
    replies are cached, so the build does not make them again (counted as cache hits)."""
    sampled_tokens: int = 0
    """What those calls spent (not in the totals: the totals are what the build will)."""

    @property
    def calls(self) -> int:
        """LLM calls the build would make (repairs and retries not counted)."""
        return self.extraction_calls + self.report_calls

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the derived totals."""
        return {**asdict(self), "calls": self.calls, "total_tokens": self.total_tokens}


def prompt_tokens(prompt: ChatPrompt[Any], count: Count) -> int:
    """Tokens of a chat prompt: its messages' text plus the chat format's overhead."""
    return chat_tokens(prompt.messages(), count)


def _mean_reply(client: LLMClient, task: str, count: Count) -> float | None:
    replies = client.cached_replies(task)
    return sum(count(r) for r in replies) / len(replies) if replies else None


def estimate_build(
    store: ChunkReader,
    graph: GraphStore,
    extractor: Extractor,
    writer: ReportWriter,
    pending_rows: Sequence[int],
    count: Count,
    *,
    tokenizer: str,
    max_cluster_size: int = 10,
    seed: int = 42,
    prices: tuple[float | None, float | None] = (None, None),
    budget_tokens: int | None = None,
    rebuild: bool = False,
    drift_margin: float | None = None,
    sample: int = 0,
) -> BuildEstimate:
    """The calls, cache hits, tokens and cost of a build extracting ``pending_rows``.

    ``sample``: for a task this model has no cached replies to yet, make that many of its
    calls first (prompts spread over the range of sizes) and price the rest by them.
    """
    client = _client_of(extractor) or _client_of(writer)
    estimate = BuildEstimate(
        extractor=extractor.name,
        report_writer=writer.name,
        model=client.model if client is not None else None,
        tokenizer=tokenizer,
        chunks=len(pending_rows),
        communities_final=not pending_rows,
        budget_tokens=budget_tokens,
    )
    if isinstance(extractor, LLMExtractor):
        _estimate_extraction(estimate, store, extractor, pending_rows, count, sample)
    if isinstance(writer, LLMReportWriter):
        _estimate_reports(
            estimate,
            graph,
            writer,
            store.texts_by_chunk_ids,
            count,
            max_cluster_size,
            seed,
            rebuild,
            drift_margin,
            sample,
        )
    prompt_price, completion_price = prices
    if prompt_price is not None or completion_price is not None:
        estimate.cost = round(
            estimate.prompt_tokens / 1e6 * (prompt_price or 0.0)
            + estimate.completion_tokens / 1e6 * (completion_price or 0.0),
            4,
        )
    return estimate


def _client_of(role: object) -> LLMClient | None:
    client = getattr(role, "client", None)
    return client if isinstance(client, LLMClient) else None


def _estimate_extraction(
    estimate: BuildEstimate,
    store: ChunkReader,
    extractor: LLMExtractor,
    rows: Sequence[int],
    count: Count,
    sample: int,
) -> None:
    client = extractor.client
    if sample and not client.cached_replies(extract_graph.TASK):
        first = store.chunks_by_row_ids(rows[:SAMPLE_FROM]).values()
        chunks = [ChunkInput(c.id, c.document_id, c.text, c.title) for c in first]
        _sample(estimate, client, chunks, sample, lambda c: len(c.text), extractor.extract_batch)
    mean = _mean_reply(client, extract_graph.TASK, count)
    estimate.completion_basis.append(
        f"extraction: mean of {len(client.cached_replies(extract_graph.TASK))} cached replies"
        if mean is not None
        else "extraction: assumed as long as the chunk (no cached replies yet)"
    )
    rate = _reprompt_rate(estimate, client, extract_graph.TASK, "extraction")
    for start in range(0, len(rows), 500):
        by_row = store.chunks_by_row_ids(rows[start : start + 500])
        for c in by_row.values():
            prompt = extractor.prompt(ChunkInput(c.id, c.document_id, c.text, c.title))
            if client.cached(prompt):
                estimate.extraction_cache_hits += 1
                continue
            estimate.extraction_calls += 1
            reply = mean if mean is not None else count(c.text)
            _add_call(
                estimate,
                prompt_tokens(prompt, count),
                min(client.budget(prompt), math.ceil(reply)),
                rate,
            )


def _estimate_reports(
    estimate: BuildEstimate,
    graph: GraphStore,
    writer: LLMReportWriter,
    chunk_texts: ChunkTexts,
    count: Count,
    max_cluster_size: int,
    seed: int,
    rebuild: bool,
    drift_margin: float | None,
    sample: int,
) -> None:
    """The reports a build would rewrite: as its refresh plans them (``preview_refresh``)."""
    client = writer.client
    communities = preview_refresh(
        graph,
        max_cluster_size=max_cluster_size,
        seed=seed,
        rebuild=rebuild,
        drift_margin=drift_margin,
    )
    existing = {r.community_id: r for r in graph.reports_by_id([c.id for c in communities])}
    children: defaultdict[str | None, list[CommunityReport]] = defaultdict(list)
    planned: list[ReportJob] = []
    rewritten: set[str] = set()
    for community in communities:  # deepest level first, as the build writes them
        previous = existing.get(community.id)
        held = tuple(children.get(community.id, ()))
        if previous is not None:
            children[community.parent].append(previous)
            # a parent reported from its children is rewritten when one of them is
            if is_current(previous, report_fingerprint(graph, community, held)) and not (
                from_children(held) and rewritten.intersection(r.community_id for r in held)
            ):
                continue
        rewritten.add(community.id)
        planned.append(ReportJob(community, held, 1))
    if sample and not client.cached_replies(summarize_community.TASK):
        # only communities without sub-communities: a parent's prompt shows its children's
        # new reports, which the build writes first, so a call on it now would be wasted
        parents = {c.parent for c in communities}
        leaves = [j for j in planned if j.community.id not in parents and not j.children]
        _sample(
            estimate,
            client,
            leaves,
            sample,
            lambda j: len(j.community.members),
            lambda jobs: writer.write_level(graph, chunk_texts, jobs),
        )
    mean = _mean_reply(client, summarize_community.TASK, count)
    estimate.completion_basis.append(
        f"reports: mean of {len(client.cached_replies(summarize_community.TASK))} cached replies"
        if mean is not None
        else f"reports: assumed {DEFAULT_REPORT_TOKENS} tokens each (no cached replies yet)"
    )
    rate = _reprompt_rate(estimate, client, summarize_community.TASK, "reports")
    for job in planned:
        estimate.communities += 1
        prompt = writer.prompt(graph, chunk_texts, job)
        if client.cached(prompt):
            estimate.report_cache_hits += 1
            continue
        estimate.report_calls += 1
        reply = mean if mean is not None else DEFAULT_REPORT_TOKENS
        _add_call(
            estimate,
            prompt_tokens(prompt, count),
            min(client.budget(prompt), math.ceil(reply)),
            rate,
        )


SAMPLE_FROM = 2000
"""Chunks a sample of extraction calls is chosen among (the first pending ones)."""


def _sample(
    estimate: BuildEstimate,
    client: LLMClient,
    candidates: Sequence[T],
    n: int,
    size: Callable[[T], int],
    run: Callable[[list[T]], object],
) -> None:
    """Make ``n`` of the calls now, spread over the candidates' sizes; count what they spent.

    Their replies (and re-prompts) land in the reply cache, where the estimate then reads
    this model's reply length and re-prompt rate, and where the build finds them.
    """
    ordered = sorted(candidates, key=size)
    n = min(n, len(ordered))
    chosen = [ordered[int((i + 0.5) * len(ordered) / n)] for i in range(n)]
    if not chosen:
        return
    stats = client.stats
    calls, tokens = stats.calls, stats.prompt_tokens + stats.completion_tokens
    run(chosen)
    estimate.sampled_calls += stats.calls - calls
    estimate.sampled_tokens += stats.prompt_tokens + stats.completion_tokens - tokens


REPROMPT_TOKENS = 60
"""The re-prompt's own message (the reason and the instruction), in tokens, about."""


def _reprompt_rate(estimate: BuildEstimate, client: LLMClient, task: str, label: str) -> float:
    """Re-prompts per call this model needed for ``task`` before (0 before any call)."""
    found = client.reprompt_rate(task)
    if found is None:
        estimate.reprompt_basis.append(f"{label}: no re-prompts assumed (no earlier calls)")
        return 0.0
    rate, asks = found
    estimate.reprompt_basis.append(f"{label}: {rate:.2f} re-prompts a call, as in {asks} earlier")
    return rate


def _add_call(estimate: BuildEstimate, prompt: int, reply: int, rate: float) -> None:
    """One call's tokens, and ``rate`` times a re-prompt's.

    A re-prompt is the prompt again with the first reply and the reason, and a second
    reply; a reply that was refused is taken as long as a good one.
    """
    again = math.ceil(rate * (prompt + reply + REPROMPT_TOKENS))
    estimate.prompt_tokens += prompt + again
    estimate.completion_tokens += reply + math.ceil(reply * rate)
    estimate.reprompt_tokens += again + math.ceil(reply * rate)
    estimate.reprompts = round(estimate.reprompts + rate, 2)
