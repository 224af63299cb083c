"""Chat calls to any OpenAI-compatible endpoint that return validated pydantic objects.

Every call goes through :meth:`LLMClient.ask` with a :class:`ChatPrompt` (the prompt
modules in ``lore.prompts`` build them). What a model sends back is never trusted:

1. the reply is parsed as JSON and validated against the prompt's pydantic model;
2. if that fails it is *repaired* (code fences, text around the object, trailing commas,
   Python literals, a truncated tail) and validated again;
3. if that fails the model is asked once more, with the validation error;
4. if that fails too, :class:`~lore.errors.LLMReplyError` carries the reason, so the
   caller quarantines the item instead of storing an empty result.

Calls in flight are bounded by a semaphore (and, across processes, by an optional
:class:`RateLimiter`); 429, 5xx, timeouts and connection errors are retried with
exponential backoff (``Retry-After`` honoured); valid replies are cached by model and
prompt hash, so an unchanged input costs no call on a re-run. :class:`LLMStats` counts
calls, tokens, cache hits, repairs, re-prompts and failures.

Before any graph work the endpoint is probed once (:meth:`LLMClient.probe`: the model
list, or a one-token chat where an endpoint has no such route), without the retries, so
a wrong URL or key fails in seconds with a message naming the setting to fix, before
anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from lore.db import Database, Tables, upsert_sql
from lore.errors import (
    BackendUnavailableError,
    ConfigurationError,
    LLMReplyError,
    LLMUnavailableError,
)

ReplyT = TypeVar("ReplyT", bound=BaseModel)

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


@dataclass(frozen=True)
class ChatPrompt(Generic[ReplyT]):
    """A rendered prompt and the pydantic model its reply must validate against."""

    task: str
    system: str
    user: str
    reply: type[ReplyT]

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

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return asdict(self)


class RateLimiter(Protocol):
    """Shared across processes (e.g. a token bucket in Redis); waits, never spins."""

    async def acquire(self, tokens: int = 1) -> None:
        """Return when ``tokens`` calls may be made."""
        ...


_REPLIES = (
    "CREATE TABLE IF NOT EXISTS llm_replies (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "key TEXT NOT NULL UNIQUE, model TEXT NOT NULL, task TEXT NOT NULL, reply TEXT NOT NULL)"
)
_BY_TASK = "CREATE INDEX IF NOT EXISTS llm_replies_by_task ON llm_replies(model, task, id)"


class ReplyCache(Tables):
    """Valid replies by prompt hash (a SQLite file or PostgreSQL; safe across processes).

    ``id`` numbers replies in the order they were first stored (a replaced reply keeps
    its place), so :meth:`replies` can return the latest ones on either engine.
    """

    COMPONENT = "llm_replies"
    VERSION = 2  # 1: no id column (ordered by SQLite's rowid)

    def __init__(self, where: Path | Database) -> None:
        super().__init__(where, _REPLIES)
        if self.database.kind == "sqlite":
            self._number_rows()
        self.database.apply_schema(self.COMPONENT, self.VERSION, _BY_TASK)

    def _number_rows(self) -> None:
        """A cache made before replies had ids: copy it, numbered in rowid order."""
        with self._transaction() as db:
            if "id" in {str(r[1]) for r in db.execute("PRAGMA table_info(llm_replies)")}:
                return
            db.execute(_REPLIES.replace("llm_replies", "llm_replies_numbered"))
            db.execute(
                "INSERT INTO llm_replies_numbered(key, model, task, reply) "
                "SELECT key, model, task, reply FROM llm_replies ORDER BY rowid"
            )
            db.execute("DROP TABLE llm_replies")
            db.execute("ALTER TABLE llm_replies_numbered RENAME TO llm_replies")

    def get(self, key: str) -> str | None:
        """The stored reply, if any."""
        with self._read() as db:
            row = db.execute("SELECT reply FROM llm_replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def replies(self, model: str, task: str, limit: int = 200) -> list[str]:
        """The latest stored replies of one model to one task (for cost estimates)."""
        with self._read() as db:
            rows = db.execute(
                "SELECT reply FROM llm_replies WHERE model = ? AND task = ? "
                "ORDER BY id DESC LIMIT ?",
                (model, task, int(limit)),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def put(self, key: str, model: str, task: str, reply: str) -> None:
        """Remember a reply that validated."""
        with self._transaction() as db:
            db.execute(
                upsert_sql("llm_replies", ("key", "model", "task", "reply"), ("key",)),
                (key, model, task, reply),
            )


def repair_json(text: str) -> Any:
    """Best-effort JSON out of a model's reply; raises ValueError when nothing is left."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON object in the reply")
    body = body[min(starts) :]
    decoder = json.JSONDecoder()
    candidates = [body, _clean(body), _close_brackets(_clean(body))]
    last_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            value, _ = decoder.raw_decode(candidate)  # ignores trailing text
        except json.JSONDecodeError as exc:
            last_error = exc
            continue
        return value
    raise ValueError(f"unparseable JSON: {last_error}")


def _clean(body: str) -> str:
    """Trailing commas and Python literals outside strings."""
    out: list[str] = []
    for piece, in_string in _split_strings(body):
        if in_string:
            out.append(piece)
            continue
        fixed = _TRAILING_COMMA.sub(r"\1", piece)
        out.append(re.sub(r"\b(True|False|None)\b", lambda m: _PY_LITERALS[m.group(1)], fixed))
    return "".join(out)


def _split_strings(body: str) -> list[tuple[str, bool]]:
    """Cut text into (piece, is_inside_a_JSON_string) runs."""
    pieces: list[tuple[str, bool]] = []
    start, inside, escaped = 0, False, False
    for i, ch in enumerate(body):
        if inside and escaped:
            escaped = False
        elif inside and ch == "\\":
            escaped = True
        elif ch == '"':
            if inside:
                pieces.append((body[start : i + 1], True))
                start = i + 1
            else:
                pieces.append((body[start:i], False))
                start = i
            inside = not inside
    pieces.append((body[start:], inside))
    return pieces


def _close_brackets(body: str) -> str:
    """Close what a truncated reply left open (an unterminated string, arrays, objects)."""
    stack: list[str] = []
    pieces = _split_strings(body)
    for piece, in_string in pieces:
        if in_string:
            continue
        for ch in piece:
            if ch in "{[":
                stack.append("}" if ch == "{" else "]")
            elif ch in "}]" and stack:
                stack.pop()
    tail = '"' if pieces and pieces[-1][1] else ""
    trimmed = (body + tail).rstrip().rstrip(",")
    return trimmed + "".join(reversed(stack))


def parse_reply(text: str, model: type[ReplyT]) -> tuple[ReplyT, bool]:
    """Validate a reply, repairing it if needed; returns (reply, was_repaired)."""
    try:
        return model.model_validate_json(text.strip()), False
    except ValidationError:
        pass
    try:
        return model.model_validate(repair_json(text)), True
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise ValueError(f"reply does not match {model.__name__}: {problems}") from None


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
        self._json_mode = json_mode
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
        text = await self._complete(messages)
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
            text = await self._complete(messages)
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
            self._cache.put(key, self.model, prompt.task, text)
        return reply

    async def _complete(self, messages: list[dict[str, str]]) -> str:
        import openai

        if self._client is None or self._semaphore is None:
            raise RuntimeError("LLMClient.ask outside `async with client.connected()`")
        options: dict[str, Any] = {"max_tokens": self._max_tokens, "temperature": self._temperature}
        if self._json_mode:
            options["response_format"] = {"type": "json_object"}
        delay = self._backoff_s
        for attempt in range(self._max_retries + 1):
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


def _retry_after(exc: Any) -> float:
    """Seconds a ``Retry-After`` header asks for (capped at a minute), else 0."""
    try:
        return min(60.0, float(exc.response.headers.get("retry-after", 0)))
    except (AttributeError, TypeError, ValueError):
        return 0.0
