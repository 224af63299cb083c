"""Chat calls to any OpenAI-compatible endpoint that return validated pydantic objects.

Every call goes through :meth:`LLMClient.ask` with a :class:`ChatPrompt` (the prompt
modules in ``lore.prompts`` build them). What a model sends back is never trusted:

1. the reply is parsed as JSON and validated against the prompt's pydantic model;
2. if that fails it is *repaired* (code fences, text around the object, trailing commas,
   Python literals, a truncated tail) and validated again;
3. if that fails the model is asked once more, with the validation error;
4. if that fails too, :class:`~lore.errors.LLMReplyError` carries the reason, so the
   caller quarantines the item instead of storing an empty result.

Replies are streamed: a call times out when it gets no token for
``inactivity_timeout_s``, or, before its first token, when no call of the client got one
for ``first_token_timeout_s`` (a queued call waits while the endpoint works for us); a
call given up or cancelled closes its stream, so the server stops generating. Calls in
flight are bounded by an AIMD limit per client (:mod:`lore.llm.aimd`: halved on timeouts,
429s and late first tokens, grown back on success) and, across processes, by an
optional :class:`RateLimiter`; 429, 5xx, timeouts and connection errors are retried with
exponential backoff (``Retry-After`` honoured); valid replies are cached by model and
prompt hash, so an unchanged input costs no call on a re-run. :class:`LLMStats` counts
calls, tokens, cache hits, repairs, re-prompts and failures.

Before any graph work the endpoint is probed once (:meth:`LLMClient.probe`: the model
list, or a one-token chat where an endpoint has no such route), without the retries, so
a wrong URL or key fails in seconds with a message naming the setting to fix, before
anything is written.
"""

from lore.llm.cache import ReplyCache, forget_replies
from lore.llm.client import (
    GRAMMAR_OMIT,
    REPROMPT,
    ChatPrompt,
    LLMClient,
    LLMStats,
    RateLimiter,
    chat_tokens,
    prompt_key,
    response_format,
)
from lore.llm.repair import parse_reply, repair_json

__all__ = [
    "GRAMMAR_OMIT",
    "REPROMPT",
    "ChatPrompt",
    "LLMClient",
    "LLMStats",
    "RateLimiter",
    "ReplyCache",
    "chat_tokens",
    "forget_replies",
    "parse_reply",
    "prompt_key",
    "repair_json",
    "response_format",
]
