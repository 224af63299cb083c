"""The HTTP client the LangChain integrations share: one server, its key, readable errors.

    http = LoreHttp("http://127.0.0.1:8080", api_key="lk_…", namespaces=["ops"])
    found = http.call("POST", "/v1/memory/query", json={"search_text": "HTTP 504"})

A reply outside 2xx raises the error of Lorekeeper's own tree the server mapped to that
status (``lore/errors.py``, ``api/errors.py``): :class:`UnauthorizedError` for a 401,
:class:`NotFoundError` for a 404, :class:`InvalidRequestError` for a 422, and so on, each
message naming the server, the status and the server's reason. A server that cannot be
reached (refused, unknown host, no answer in time) is a :class:`BackendUnavailableError`
naming the URL; a URL that is not ``http(s)://host[:port]`` is refused when the client
is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from lore import errors
from lore.errors import (
    BackendUnavailableError,
    EmbeddingMismatchError,
    ForbiddenError,
    IndexRebuildingError,
    InvalidRequestError,
    LoreError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentError,
    TooManyRequestsError,
    TransientError,
    UnauthorizedError,
)

# the inverse of api/errors.py's STATUS_BY_ERROR (its error names are these classes')
ERROR_BY_STATUS: dict[int, type[LoreError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: EmbeddingMismatchError,
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    429: TooManyRequestsError,
    503: TransientError,
}
HINTS = {
    401: " (give api_key=, a key `lore keys create` made)",
    403: " (this key may not do that)",
}


def check_url(url: str) -> str:
    """``url`` without a trailing slash, or a :class:`ValueError` saying what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"url must be the server's http(s) address, e.g. http://127.0.0.1:8080; got {url!r}"
        )
    return url.rstrip("/")


def bearer(api_key: SecretStr | str | None) -> dict[str, str]:
    """The ``Authorization`` header for ``api_key`` (none without a key)."""
    if api_key is None:
        return {}
    secret = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
    return {"Authorization": f"Bearer {secret}"}


@dataclass(frozen=True)
class LoreHttp:
    """Calls to one Lorekeeper server (``lore serve``), with its key and namespaces.

    ``client`` / ``async_client`` are httpx clients to reuse (their ``request`` is
    called; e.g. a FastAPI ``TestClient``); without them each call opens and closes one.
    """

    url: str
    api_key: SecretStr | str | None = None
    namespaces: Sequence[str] = ()
    timeout_s: float = 30.0
    client: Any = field(default=None, repr=False)
    async_client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", check_url(self.url))

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """One request; the reply's JSON, or the error of Lorekeeper's tree it stands for."""
        client = self.client or httpx.Client(base_url=self.url, timeout=self.timeout_s)
        try:
            reply = client.request(method, path, **self._arguments(json, params))
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        finally:
            if self.client is None:
                client.close()
        return self._answer(method, path, reply)

    async def acall(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """:meth:`call` on an event loop."""
        client = self.async_client or httpx.AsyncClient(base_url=self.url, timeout=self.timeout_s)
        try:
            reply = await client.request(method, path, **self._arguments(json, params))
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        finally:
            if self.async_client is None:
                await client.aclose()
        return self._answer(method, path, reply)

    def _arguments(self, json: Any, params: Sequence[tuple[str, str]]) -> dict[str, Any]:
        namespaces = [("namespace", n) for n in self.namespaces]
        arguments: dict[str, Any] = {
            "params": [*namespaces, *params],
            "headers": bearer(self.api_key),
        }
        if json is not None:
            arguments["json"] = json
        return arguments

    def _unreachable(self, exc: httpx.HTTPError) -> LoreError:
        if isinstance(exc, httpx.TimeoutException):
            return BackendUnavailableError(
                f"Lorekeeper at {self.url} did not answer within {self.timeout_s:g} s "
                f"({type(exc).__name__}); raise timeout_s for long ingests"
            )
        reason = str(exc) or type(exc).__name__
        return BackendUnavailableError(
            f"cannot reach Lorekeeper at {self.url}: {reason} (is `lore serve` running there?)"
        )

    def _answer(self, method: str, path: str, reply: Any) -> Any:
        status = int(reply.status_code)
        if 200 <= status < 300:
            try:
                return reply.json()
            except ValueError:
                raise PermanentError(
                    f"{method} {self.url}{path} answered {status} without JSON: is {self.url} "
                    "a Lorekeeper server?"
                ) from None
        raise self._refusal(method, path, reply)

    def _refusal(self, method: str, path: str, reply: Any) -> LoreError:
        status = int(reply.status_code)
        name = None
        try:
            body = reply.json()
        except ValueError:
            detail: Any = " ".join(str(reply.text).split())[:300] or "(no body)"
        else:
            detail = body.get("detail", body) if isinstance(body, dict) else body
            name = body.get("error") if isinstance(body, dict) else None
        message = (
            f"Lorekeeper at {self.url} answered {method} {path} with HTTP {status}: "
            f"{detail}{HINTS.get(status, '')}"
        )
        cls = _error_class(name, status)
        if issubclass(cls, TooManyRequestsError | IndexRebuildingError):
            return cls(message, retry_after_s=_seconds(reply.headers.get("Retry-After")))
        return cls(message)


def _error_class(name: object, status: int) -> type[LoreError]:
    """The class the server named (``{"error": "UnauthorizedError"}``), else the status's."""
    named = getattr(errors, name, None) if isinstance(name, str) else None
    if isinstance(named, type) and issubclass(named, LoreError):
        return named
    return ERROR_BY_STATUS.get(status, TransientError if status >= 500 else PermanentError)


def _seconds(value: str | None) -> int:
    try:
        return max(1, int(value or "5"))
    except ValueError:
        return 5
