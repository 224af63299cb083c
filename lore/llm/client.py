"""The chat client: bounded, retried calls to any OpenAI-compatible endpoint.

See :mod:`lore.llm` for what a call goes through.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from lore.errors import (
    BackendUnavailableError,
    ConfigurationError,
    LLMReplyError,
    LLMUnavailableError,
)
from lore.llm.aimd import AdaptiveLimit
from lore.llm.cache import ReplyCache
from lore.llm.repair import ReplyT, parse_reply

log = logging.getLogger(__name__)

T = TypeVar("T")

# servers send about one token per streamed piece; prompts are estimated at this many chars
CHARS_PER_TOKEN = 4
REPROMPT = "Your reply could not be used"
"""How the user turn of a re-prompt starts (after an unusable reply)."""
# what chat formats add to the text: tokens per message, and to open the reply
PER_MESSAGE = 3
PER_REPLY = 3


def chat_tokens(messages: list[dict[str, str]], count: Callable[[str], int]) -> int:
    """Prompt tokens of chat messages: their text by ``count`` plus what chat formats add."""
    return sum(count(m["content"]) for m in messages) + PER_MESSAGE * len(messages) + PER_REPLY


class CallTimeoutError(Exception):
    """A call's stream went quiet for longer than its bound (it is closed, then retried)."""


@dataclass(frozen=True)
class ChatPrompt(Generic[ReplyT]):
    """A rendered prompt and the pydantic model its reply must validate against."""

    task: str
    system: str
    user: str
    reply: type[ReplyT]
    chunk_ids: tuple[str, ...] = ()
    """The stored chunks whose text the prompt holds: deleting one forgets the reply."""
    report_ids: tuple[str, ...] = ()
    """The communities whose reports the prompt holds: rewriting or removing one of those
    reports (a delete's cascade) forgets the reply."""
    max_tokens: int | None = None
    """The completion tokens this reply needs at most (``llm.max_tokens`` caps it)."""
    check: Callable[[ReplyT], str | None] | None = field(default=None, compare=False)
    """A check of a valid reply against what the prompt holds: why it cannot be used, or
    None. A reply it refuses is treated like an invalid one (one re-prompt with the reason,
    then :class:`LLMReplyError`); the cache key does not depend on it."""

    examples: tuple[tuple[str, str], ...] = ()
    """Worked examples, sent as earlier turns (user, assistant) before the real question:
    small models follow a demonstrated turn where they copy a described one."""

    def usable(self, text: str) -> tuple[ReplyT, bool]:
        """The reply in ``text`` and whether it needed repair; ValueError why it is not usable."""
        reply, repaired = parse_reply(text, self.reply)
        if self.check is not None and (reason := self.check(reply)) is not None:
            raise ValueError(reason)
        return reply, repaired

    def messages(self) -> list[dict[str, str]]:
        """The chat messages to send."""
        turns = [{"role": "system", "content": self.system}]
        for asked, answered in self.examples:
            turns += [
                {"role": "user", "content": asked},
                {"role": "assistant", "content": answered},
            ]
        return [*turns, {"role": "user", "content": self.user}]


@dataclass
class LLMStats:
    """What a client spent; one object per run, added up across clients."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    retries: int = 0
    repaired: int = 0
    reprompts: int = 0
    reprompt_prompt_tokens: int = 0  # of the re-prompts (counted in the totals too)
    reprompt_completion_tokens: int = 0
    failures: int = 0
    timeouts: int = 0  # calls given up for silence (first token or between tokens)
    usage_estimated: int = 0  # calls whose endpoint sent no usage: tokens estimated
    dropped_entities: int = 0  # placeholders or names the chunk does not contain
    dropped_relations: int = 0  # an end that is not a kept entity

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return asdict(self)


class RateLimiter(Protocol):
    """Shared across processes (e.g. a token bucket in Redis); waits, never spins."""

    async def acquire(self, tokens: int = 1) -> None:
        """Return when ``tokens`` calls may be made."""
        ...


def prompt_key(model: str, prompt: ChatPrompt[Any]) -> str:
    """Cache key: the model and the exact messages."""
    raw = json.dumps([model, prompt.task, prompt.messages()], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()


class LLMClient:
    """Validated chat calls; use ``async with client.connected():`` around a batch."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        first_token_timeout_s: float = 120.0,
        inactivity_timeout_s: float = 30.0,
        stream: bool = True,
        max_concurrency: int = 4,
        latency_slack_s: float = 1.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        max_tokens: int = 2000,
        temperature: float = 0.0,
        json_mode: bool = True,
        structured_output: str = "auto",
        cache: ReplyCache | None = None,
        limiter: Callable[[], RateLimiter | None] | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.base_url = base_url
        # counts text an endpoint reports no usage for (the dry run counts with the same)
        self._count_tokens = count_tokens
        self.model = model
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._first_token_timeout_s = first_token_timeout_s
        self._inactivity_timeout_s = inactivity_timeout_s
        self._stream = stream
        self._stream_usage = True  # stream_options.include_usage, until an endpoint refuses it
        self._last_progress = 0.0  # when any call of this client last received a piece
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._max_tokens = max_tokens
        self._temperature = temperature
        # json_mode=False is the deprecated spelling of structured_output="none"
        self._forms = list(_FORMS[structured_output if json_mode else "none"])
        self._cache = cache
        settled = cache.settled_form(base_url, model) if cache is not None else None
        if settled in self._forms[1:]:  # refused better ones before: not sent again
            del self._forms[: self._forms.index(settled)]
        self._limiter_factory = limiter
        self._limiter: RateLimiter | None = None
        self._client: Any = None
        # calls in flight: AIMD from max_concurrency down to 1 and back (per client/process)
        self.gate = AdaptiveLimit(max_concurrency, slack_s=latency_slack_s)
        self._open = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._users = 0
        self._probed = False
        self.stats = LLMStats()

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[LLMClient]:
        """Open the HTTP client and the semaphore on the running event loop.

        Re-entrant on one loop (concurrent requests of a server share the connection);
        the last one out closes it.
        """
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import openai

            self._loop, self._users = loop, 0
            self._client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key or "not-needed",
                # the bounds on a reply are ours (first token, silence, whole reply);
                # httpx only bounds connecting
                timeout=openai.Timeout(None, connect=min(30.0, self._timeout_s)),
                max_retries=0,  # retries are ours: counted, and with our backoff
            )
            self.gate.bind()
            self._open = True
            # a limiter's connections belong to one event loop: made here, closed at the end
            self._limiter = self._limiter_factory() if self._limiter_factory else None
        self._users += 1
        try:
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                await self._client.close()
                close = getattr(self._limiter, "aclose", None)
                if close is not None:
                    await close()
                self._client, self._limiter, self._open = None, None, False

    def cached(self, prompt: ChatPrompt[Any]) -> bool:
        """Whether this exact prompt would be answered from the cache (no call)."""
        if self._cache is None:
            return False
        hit = self._cache.get(prompt_key(self.model, prompt))
        if hit is None:
            return False
        try:
            prompt.usable(hit)
        except ValueError:
            return False
        return True

    def _count_calls(self, task: str, calls: int) -> None:
        if self._cache is not None:
            self._cache.count_calls(self.model, task, calls)

    def reprompt_rate(self, task: str) -> tuple[float, int] | None:
        """Re-prompts per ask this model needed for ``task`` so far, and over how many asks.

        None without a cache or before any ask (the dry run then assumes none).
        """
        if self._cache is None:
            return None
        asks, calls = self._cache.calls_per_ask(self.model, task)
        return ((calls - asks) / asks, asks) if asks else None

    def cached_replies(self, task: str, limit: int = 200) -> list[str]:
        """The latest cached replies of this model to ``task`` (empty without a cache)."""
        return [] if self._cache is None else self._cache.replies(self.model, task, limit)

    @property
    def concurrency(self) -> int:
        """Calls this client lets be in flight now (AIMD, see :mod:`lore.llm.aimd`)."""
        return self.gate.limit

    @property
    def max_tokens(self) -> int:
        """The completion tokens one call may return (``llm.max_tokens``: the cap)."""
        return self._max_tokens

    def budget(self, prompt: ChatPrompt[Any] | None) -> int:
        """The completion tokens a call for ``prompt`` is sent with: its own, within the cap."""
        if prompt is None or prompt.max_tokens is None:
            return self._max_tokens
        return max(16, min(self._max_tokens, prompt.max_tokens))

    def probe(self, timeout_s: float = 10.0) -> None:
        """Check once that the endpoint answers and accepts the key (blocking).

        Raises :class:`~lore.errors.LLMUnavailableError` when it cannot be reached and
        :class:`~lore.errors.ConfigurationError` when it refuses the key or the model.
        Later calls return at once.
        """
        if not self._probed:
            asyncio.run(self._probe(min(timeout_s, self._timeout_s)))
            self._probed = True

    async def _probe(self, timeout_s: float) -> None:
        import openai

        client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self._api_key or "not-needed",
            timeout=timeout_s,
            max_retries=0,
        )
        try:
            try:
                await client.models.list()
            except openai.APIStatusError as exc:
                if exc.status_code not in (404, 405):
                    raise
                # no model list here: one token of chat instead
                await client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": "ping"}], max_tokens=1
                )
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise LLMUnavailableError(
                f"LLM endpoint {self.base_url} cannot be reached ({exc}); check llm.base_url "
                "(LORE_LLM__BASE_URL) or unset it to use the offline extractor"
            ) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise ConfigurationError(
                    f"LLM endpoint {self.base_url} refused the key ({exc.status_code}): "
                    "check llm.api_key (LORE_LLM__API_KEY)"
                ) from None
            if exc.status_code == 404:
                raise ConfigurationError(
                    f"LLM endpoint {self.base_url} does not serve model {self.model!r} (404): "
                    "check llm.model (LORE_LLM__MODEL) and llm.base_url"
                ) from None
            if exc.status_code == 429:
                return  # there, and busy: the calls themselves wait and retry
            if exc.status_code >= 500 or exc.status_code == 408:
                raise LLMUnavailableError(
                    f"LLM endpoint {self.base_url} is not answering ({exc.status_code}); "
                    "try again later"
                ) from None
            raise ConfigurationError(
                f"LLM endpoint {self.base_url} answered {exc.status_code} to a probe: {exc.message}"
            ) from None
        finally:
            await client.close()

    async def ask(self, prompt: ChatPrompt[ReplyT]) -> ReplyT:
        """The validated reply (from the cache when the same prompt was answered before)."""
        key = prompt_key(self.model, prompt)
        if self._cache is not None and (hit := self._cache.get(key)) is not None:
            try:
                reply, _ = prompt.usable(hit)
            except ValueError:
                pass  # the reply model or its check changed since; ask again
            else:
                self.stats.cache_hits += 1
                return reply
        messages = prompt.messages()
        text = await self._complete(messages, prompt)
        try:
            reply, repaired = prompt.usable(text)
        except ValueError as first:
            self.stats.reprompts += 1
            self._count_calls(prompt.task, 2)
            messages += [
                {"role": "assistant", "content": text},
                {
                    "role": "user",
                    "content": f"{REPROMPT}: {first}. Reply again with only "
                    "the JSON object described above, nothing before or after it.",
                },
            ]
            text = await self._complete(messages, prompt)
            try:
                reply, repaired = prompt.usable(text)
            except ValueError as second:
                self.stats.failures += 1
                raise LLMReplyError(
                    f"{prompt.task}: invalid reply after repair and one re-prompt: {second}"
                ) from None
        else:
            self._count_calls(prompt.task, 1)
        if repaired:
            self.stats.repaired += 1
        if self._cache is not None:
            self._cache.put(
                key,
                self.model,
                prompt.task,
                text,
                chunk_ids=prompt.chunk_ids,
                report_ids=prompt.report_ids,
            )
        return reply

    @property
    def structured_output(self) -> str:
        """The response_format form calls use now (``auto`` settles on the first one honoured)."""
        return self._forms[0]

    def _response_format(self, prompt: ChatPrompt[Any]) -> dict[str, Any] | None:
        return response_format(self._forms[0], prompt.task, prompt.reply)

    def _downgrade(self, exc: Any, sent: str) -> bool:
        """Drop a response_format the endpoint refuses (once per form); False if none left.

        ``sent`` is the form the refused call carried: calls in flight together that are
        refused alike drop it once.
        """
        if "response_format" not in f"{exc.message} {exc.body}":
            return False
        if sent != self._forms[0]:
            return sent in _FORMS["auto"]  # already dropped by another call: just send again
        if len(self._forms) < 2:
            return False
        refused = self._forms.pop(0)
        if self._cache is not None:  # the next process starts from it too
            self._cache.settle_form(self.base_url, self.model, self._forms[0])
        log.warning(
            "LLM endpoint %s refused response_format %s (%s): using %s from now on",
            self.base_url,
            refused,
            exc.status_code,
            self._forms[0],
        )
        return True

    def _stream_refused(self, exc: Any, streamed: bool, with_usage: bool) -> bool:
        """Stop sending what an endpoint refuses about streaming; False if it was not that.

        ``streamed`` and ``with_usage`` say what the refused call carried.
        """
        said = f"{exc.message} {exc.body}"
        if streamed and with_usage and "stream_options" in said:
            if self._stream_usage:
                self._stream_usage = False
                log.warning(
                    "LLM endpoint %s refused stream_options (%s): streaming without the "
                    "usage chunk; token counts are estimated",
                    self.base_url,
                    exc.status_code,
                )
            return True
        if streamed and "stream" in said.replace("stream_options", ""):
            if self._stream:
                self._stream = False
                log.warning(
                    "LLM endpoint %s refused a streamed call (%s): whole replies from now on, "
                    "each bounded by llm.timeout_s = %ss",
                    self.base_url,
                    exc.status_code,
                    self._timeout_s,
                )
            return True
        return False

    async def _complete(
        self, messages: list[dict[str, str]], prompt: ChatPrompt[Any] | None = None
    ) -> str:
        import openai

        if self._client is None or not self._open:
            raise RuntimeError("LLMClient.ask outside `async with client.connected()`")
        delay = self._backoff_s
        attempt = -1
        error: Exception | None = None
        while attempt < self._max_retries:
            attempt += 1
            wait = min(delay, self._backoff_max_s) * (0.5 + random.random() / 2)
            async with self.gate.slot() as epoch:
                if self._limiter is not None:
                    await self._limiter.acquire()
                # decided once the call may go: a form refused while it queued is not sent
                options: dict[str, Any] = {
                    "max_tokens": self.budget(prompt),
                    "temperature": self._temperature,
                }
                if prompt is not None and (form := self._response_format(prompt)) is not None:
                    options["response_format"] = form
                sent = (self._forms[0], self._stream, self._stream_usage)
                self.stats.calls += 1
                try:
                    if self._stream:
                        text, first_token_s = await self._streamed(messages, options)
                    else:
                        text, first_token_s = await self._whole(messages, options)
                except CallTimeoutError as exc:
                    self.stats.timeouts += 1
                    self.gate.failed(epoch)
                    error = exc
                except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                    error = exc
                except openai.APIStatusError as exc:
                    if exc.status_code >= 400 and (
                        self._stream_refused(exc, sent[1], sent[2]) or self._downgrade(exc, sent[0])
                    ):
                        attempt -= 1  # not a retry: the same call in a form it takes
                        continue
                    error = exc
                    wait = max(wait, self._transient(exc, epoch))
                else:
                    chars = sum(len(m["content"]) for m in messages)
                    self.gate.succeeded(epoch, first_token_s, chars)
                    return text
            if attempt == self._max_retries:
                break
            self.stats.retries += 1
            await asyncio.sleep(wait)
            delay *= 2
        raise BackendUnavailableError(
            f"LLM endpoint {self.base_url} failed {self._max_retries + 1} times; last: {error}"
        )

    def _transient(self, exc: Any, epoch: int) -> float:
        """Seconds to wait before retrying a status worth retrying; raise for the others.

        A 429 (the endpoint says it is overloaded) also halves the calls in flight.
        """
        if exc.status_code == 429:
            self.gate.failed(epoch)
        if exc.status_code in (401, 403, 404):
            raise ConfigurationError(
                f"LLM endpoint {self.base_url} refused the call "
                f"({exc.status_code}): check llm.base_url, llm.model and llm.api_key"
            ) from None
        if exc.status_code not in (408, 409, 429) and exc.status_code < 500:
            raise LLMReplyError(f"LLM endpoint answered {exc.status_code}: {exc.message}") from None
        return _retry_after(exc)

    async def _whole(
        self, messages: list[dict[str, str]], options: dict[str, Any]
    ) -> tuple[str, float]:
        """One call answered as a whole reply, within ``timeout_s``; and its seconds."""
        assert self._client is not None
        started = time.monotonic()
        deadline = started + self._timeout_s
        response = await _within(
            self._client.chat.completions.create(model=self.model, messages=messages, **options),
            lambda: deadline,
            f"no reply within llm.timeout_s = {self._timeout_s}s",
        )
        usage = getattr(response, "usage", None)
        choices = getattr(response, "choices", None) or []
        text = str((choices[0].message.content or "") if choices else "")
        if usage is not None:
            self._spent(messages, int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0))
        else:
            self._estimate(messages, text, pieces=0)
        return text, time.monotonic() - started

    async def _streamed(
        self, messages: list[dict[str, str]], options: dict[str, Any]
    ) -> tuple[str, float]:
        """One streamed call and its seconds to first token: bounded by silence, not length.

        The first token may wait while the endpoint answers our other calls (a server
        that serves one request at a time queues them): that wait is bounded by
        ``first_token_timeout_s`` of silence on *every* call of this client, so it never
        runs out while the endpoint is visibly working for us. Once tokens flow, a gap
        of ``inactivity_timeout_s`` between two of them times the call out. Either way,
        and on cancellation, the stream is closed: the server sees the connection go and
        stops generating.
        """
        assert self._client is not None
        started = time.monotonic()
        first: float | None = None
        last = started

        def deadline() -> float:
            if first is None:
                return max(started, self._last_progress) + self._first_token_timeout_s
            return last + self._inactivity_timeout_s

        def silence() -> str:
            if first is None:
                return (
                    f"no first token for llm.first_token_timeout_s = {self._first_token_timeout_s}s"
                )
            return f"no token for llm.inactivity_timeout_s = {self._inactivity_timeout_s}s"

        extra: dict[str, Any] = {"stream": True}
        if self._stream_usage:
            extra["stream_options"] = {"include_usage": True}
        stream = await _within(
            self._client.chat.completions.create(
                model=self.model, messages=messages, **options, **extra
            ),
            deadline,
            silence,
        )
        parts: list[str] = []
        usage: Any = None
        pieces = 0
        try:
            chunks = stream.__aiter__()
            while True:
                try:
                    chunk = await _within(chunks.__anext__(), deadline, silence)
                except StopAsyncIteration:
                    break
                last = self._last_progress = time.monotonic()
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in getattr(chunk, "choices", None) or []:
                    content = getattr(choice.delta, "content", None) if choice.index == 0 else None
                    if content:
                        parts.append(content)
                        pieces += 1
                        if first is None:
                            first = last
        finally:
            await stream.close()  # also on a timeout or a cancel: the server stops
        text = "".join(parts)
        if usage is not None:
            self._spent(messages, int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0))
        else:
            self._estimate(messages, text, pieces)
        return text, (first if first is not None else time.monotonic()) - started

    def _estimate(self, messages: list[dict[str, str]], text: str, pieces: int) -> None:
        """Count tokens an endpoint did not report.

        The prompt by the client's counter (the one ``graph build --dry-run`` counts
        with), else 4 characters a token; the reply a streamed piece a token, else the same.
        """
        count = self._count_tokens or (lambda t: len(t) // CHARS_PER_TOKEN)
        if self.stats.usage_estimated == 0:
            log.warning(
                "LLM endpoint %s reports no token usage: counts are estimated "
                "(a streamed piece a token; prompts %s)",
                self.base_url,
                "as the dry run counts them"
                if self._count_tokens
                else f"{CHARS_PER_TOKEN} characters a token",
            )
        self.stats.usage_estimated += 1
        self._spent(messages, max(1, chat_tokens(messages, count)), pieces or count(text))

    def _spent(self, messages: list[dict[str, str]], prompt: int, completion: int) -> None:
        """Add one call's tokens; a re-prompt's also to the ``reprompt_*`` counters."""
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += completion
        if (
            messages
            and messages[-1]["role"] == "user"
            and messages[-1]["content"].startswith(REPROMPT)
        ):
            self.stats.reprompt_prompt_tokens += prompt
            self.stats.reprompt_completion_tokens += completion


async def _within(
    awaitable: Awaitable[T], deadline: Callable[[], float], reason: str | Callable[[], str]
) -> T:
    """Await ``awaitable`` until ``deadline()`` (read again whenever it is reached).

    Past the deadline the await is cancelled (its connection closed) and
    :class:`CallTimeoutError` raised.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            left = deadline() - time.monotonic()
            if left <= 0:
                raise CallTimeoutError(reason if isinstance(reason, str) else reason())
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})


# the response_format forms tried in order; ``auto`` keeps the first the endpoint honours
_FORMS: dict[str, tuple[str, ...]] = {
    "auto": ("json_schema", "json_object_schema", "json_object", "none"),
    "json_schema": ("json_schema", "json_object", "none"),
    "json_object": ("json_object", "none"),
    "none": ("none",),
}


def response_format(form: str, task: str, reply: type[BaseModel]) -> dict[str, Any] | None:
    """The ``response_format`` of a call in ``form`` (one of ``auto``'s), asking for ``reply``.

    ``json_schema`` is OpenAI's (vLLM, Ollama and llama-server take it too);
    ``json_object_schema`` is llama.cpp's grammar-constrained JSON, with the schema made
    plain enough for llama-cpp-python's grammar converter; ``none`` sends nothing.
    """
    if form == "none":
        return None
    if form == "json_object":
        return {"type": "json_object"}
    schema = reply.model_json_schema()
    if form == "json_object_schema":
        return {"type": "json_object", "schema": _plain_schema(schema, schema.get("$defs", {}))}
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": task, "schema": _unmarked(schema), "strict": False},
        }
    raise ValueError(f"unknown response_format form {form!r}")


# keywords llama-cpp-python's schema-to-grammar converter turns into rules it cannot parse
_UNGRAMMATICAL = {"maxLength", "minLength", "maxItems", "minItems", "title", "description"}
GRAMMAR_OMIT = "x-grammar-omit"
"""Marks a property (``Field(json_schema_extra={GRAMMAR_OMIT: True})``) that the grammar
form leaves out: the reply is shorter, and the field's default stands in."""


def _plain_schema(node: Any, defs: dict[str, Any]) -> Any:
    """The schema with references inlined and length bounds dropped (validation keeps them).

    Keywords are dropped, never properties of those names (a report's ``title``, a
    point's ``description``), save those marked :data:`GRAMMAR_OMIT`.
    """
    if isinstance(node, list):
        return [_plain_schema(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _plain_schema(defs[ref.removeprefix("#/$defs/")], defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _UNGRAMMATICAL or key in ("$defs", GRAMMAR_OMIT):
            continue
        if key == "properties" and isinstance(value, dict):
            kept = {
                n: v for n, v in value.items() if not (isinstance(v, dict) and v.get(GRAMMAR_OMIT))
            }
            out[key] = {n: _plain_schema(v, defs) for n, v in kept.items()}
            if isinstance(node.get("required"), list):
                out["required"] = [n for n in node["required"] if n in kept]
        elif key == "required" and "required" in out:
            continue
        else:
            out[key] = _plain_schema(value, defs)
    return out


def _unmarked(node: Any) -> Any:
    """The schema without :data:`GRAMMAR_OMIT` marks (other forms keep every property)."""
    if isinstance(node, list):
        return [_unmarked(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {k: _unmarked(v) for k, v in node.items() if k != GRAMMAR_OMIT}


def _retry_after(exc: Any) -> float:
    """Seconds a ``Retry-After`` header asks for (capped at a minute), else 0."""
    try:
        return min(60.0, float(exc.response.headers.get("retry-after", 0)))
    except (AttributeError, TypeError, ValueError):
        return 0.0
