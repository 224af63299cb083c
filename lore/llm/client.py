"""The chat client: bounded, retried calls to any OpenAI-compatible endpoint.

See :mod:`lore.llm` for what a call goes through.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any, Generic, Protocol

from lore.errors import (
    BackendUnavailableError,
    ConfigurationError,
    LLMReplyError,
    LLMUnavailableError,
)
from lore.llm.cache import ReplyCache
from lore.llm.repair import ReplyT, parse_reply

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatPrompt(Generic[ReplyT]):
    """A rendered prompt and the pydantic model its reply must validate against."""

    task: str
    system: str
    user: str
    reply: type[ReplyT]
    chunk_ids: tuple[str, ...] = ()
    """The stored chunks whose text the prompt holds: deleting one forgets the reply."""

    def messages(self) -> list[dict[str, str]]:
        """The chat messages to send."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


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
    failures: int = 0
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
        max_concurrency: int = 4,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        max_tokens: int = 2000,
        temperature: float = 0.0,
        json_mode: bool = True,
        structured_output: str = "auto",
        cache: ReplyCache | None = None,
        limiter: Callable[[], RateLimiter | None] | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._max_concurrency = max_concurrency
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._max_tokens = max_tokens
        self._temperature = temperature
        # json_mode=False is the deprecated spelling of structured_output="none"
        self._forms = list(_FORMS[structured_output if json_mode else "none"])
        self._cache = cache
        self._limiter_factory = limiter
        self._limiter: RateLimiter | None = None
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None
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
                timeout=self._timeout_s,
                max_retries=0,  # retries are ours: counted, and with our backoff
            )
            self._semaphore = asyncio.Semaphore(self._max_concurrency)
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
                self._client, self._semaphore, self._limiter = None, None, None

    def cached(self, prompt: ChatPrompt[Any]) -> bool:
        """Whether this exact prompt would be answered from the cache (no call)."""
        if self._cache is None:
            return False
        hit = self._cache.get(prompt_key(self.model, prompt))
        if hit is None:
            return False
        try:
            parse_reply(hit, prompt.reply)
        except ValueError:
            return False
        return True

    def cached_replies(self, task: str, limit: int = 200) -> list[str]:
        """The latest cached replies of this model to ``task`` (empty without a cache)."""
        return [] if self._cache is None else self._cache.replies(self.model, task, limit)

    @property
    def max_tokens(self) -> int:
        """The completion tokens one call may return."""
        return self._max_tokens

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
                reply, _ = parse_reply(hit, prompt.reply)
            except ValueError:
                pass  # the reply model changed since; ask again
            else:
                self.stats.cache_hits += 1
                return reply
        messages = prompt.messages()
        text = await self._complete(messages, prompt)
        try:
            reply, repaired = parse_reply(text, prompt.reply)
        except ValueError as first:
            self.stats.reprompts += 1
            messages += [
                {"role": "assistant", "content": text},
                {
                    "role": "user",
                    "content": f"Your reply could not be used: {first}. Reply again with only "
                    "the JSON object described above, nothing before or after it.",
                },
            ]
            text = await self._complete(messages, prompt)
            try:
                reply, repaired = parse_reply(text, prompt.reply)
            except ValueError as second:
                self.stats.failures += 1
                raise LLMReplyError(
                    f"{prompt.task}: invalid reply after repair and one re-prompt: {second}"
                ) from None
        if repaired:
            self.stats.repaired += 1
        if self._cache is not None:
            self._cache.put(key, self.model, prompt.task, text, chunk_ids=prompt.chunk_ids)
        return reply

    @property
    def structured_output(self) -> str:
        """The response_format form calls use now (``auto`` settles on the first one honoured)."""
        return self._forms[0]

    def _response_format(self, prompt: ChatPrompt[Any]) -> dict[str, Any] | None:
        form = self._forms[0]
        if form == "none":
            return None
        if form == "json_object":
            return {"type": "json_object"}
        schema = prompt.reply.model_json_schema()
        if form == "json_object_schema":  # llama.cpp's grammar-constrained JSON
            return {"type": "json_object", "schema": _plain_schema(schema, schema.get("$defs", {}))}
        return {
            "type": "json_schema",
            "json_schema": {"name": prompt.task, "schema": schema, "strict": False},
        }

    def _downgrade(self, exc: Any) -> bool:
        """Drop a response_format the endpoint refuses (once per form); False if none left."""
        if len(self._forms) < 2 or "response_format" not in f"{exc.message} {exc.body}":
            return False
        refused = self._forms.pop(0)
        log.warning(
            "LLM endpoint %s refused response_format %s (%s): using %s from now on",
            self.base_url,
            refused,
            exc.status_code,
            self._forms[0],
        )
        return True

    async def _complete(
        self, messages: list[dict[str, str]], prompt: ChatPrompt[Any] | None = None
    ) -> str:
        import openai

        if self._client is None or self._semaphore is None:
            raise RuntimeError("LLMClient.ask outside `async with client.connected()`")
        delay = self._backoff_s
        attempt = -1
        while attempt < self._max_retries:
            attempt += 1
            options: dict[str, Any] = {
                "max_tokens": self._max_tokens,
                "temperature": self._temperature,
            }
            if prompt is not None and (form := self._response_format(prompt)) is not None:
                options["response_format"] = form
            wait = min(delay, self._backoff_max_s) * (0.5 + random.random() / 2)
            async with self._semaphore:
                if self._limiter is not None:
                    await self._limiter.acquire()
                self.stats.calls += 1
                try:
                    response = await self._client.chat.completions.create(
                        model=self.model, messages=messages, **options
                    )
                except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                    error: Exception = exc
                except openai.APIStatusError as exc:
                    if exc.status_code >= 400 and self._downgrade(exc):
                        attempt -= 1  # not a retry: the same call in a form it takes
                        continue
                    if exc.status_code in (401, 403, 404):
                        raise ConfigurationError(
                            f"LLM endpoint {self.base_url} refused the call "
                            f"({exc.status_code}): check llm.base_url, llm.model and llm.api_key"
                        ) from None
                    if exc.status_code not in (408, 409, 429) and exc.status_code < 500:
                        raise LLMReplyError(
                            f"LLM endpoint answered {exc.status_code}: {exc.message}"
                        ) from None
                    error = exc
                    wait = max(wait, _retry_after(exc))
                else:
                    return self._read(response)
            if attempt == self._max_retries:
                break
            self.stats.retries += 1
            await asyncio.sleep(wait)
            delay *= 2
        raise BackendUnavailableError(
            f"LLM endpoint {self.base_url} failed {self._max_retries + 1} times; last: {error}"
        )

    def _read(self, response: Any) -> str:
        usage = getattr(response, "usage", None)
        choices = getattr(response, "choices", None) or []
        text = (choices[0].message.content or "") if choices else ""
        if usage is not None:
            self.stats.prompt_tokens += int(usage.prompt_tokens or 0)
            self.stats.completion_tokens += int(usage.completion_tokens or 0)
        return str(text)


# the response_format forms tried in order; ``auto`` keeps the first the endpoint honours
_FORMS: dict[str, tuple[str, ...]] = {
    "auto": ("json_schema", "json_object_schema", "json_object", "none"),
    "json_schema": ("json_schema", "json_object", "none"),
    "json_object": ("json_object", "none"),
    "none": ("none",),
}


# keywords llama-cpp-python's schema-to-grammar converter turns into rules it cannot parse
_UNGRAMMATICAL = {"maxLength", "minLength", "maxItems", "minItems", "title", "description"}


def _plain_schema(node: Any, defs: dict[str, Any]) -> Any:
    """The schema with references inlined and length bounds dropped (validation keeps them)."""
    if isinstance(node, list):
        return [_plain_schema(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _plain_schema(defs[ref.removeprefix("#/$defs/")], defs)
    return {
        k: _plain_schema(v, defs)
        for k, v in node.items()
        if k not in _UNGRAMMATICAL and k != "$defs"
    }


def _retry_after(exc: Any) -> float:
    """Seconds a ``Retry-After`` header asks for (capped at a minute), else 0."""
    try:
        return min(60.0, float(exc.response.headers.get("retry-after", 0)))
    except (AttributeError, TypeError, ValueError):
        return 0.0
