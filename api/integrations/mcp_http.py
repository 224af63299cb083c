"""MCP over streamable HTTP behind the HTTP API's keys and namespaces.

``lore mcp --transport http`` serves the tools of :mod:`api.integrations.mcp_server` at
``/mcp``. With auth off (the local default) every call works in the default namespace,
as the HTTP API's do. With auth on, each HTTP request must carry
``Authorization: Bearer <key>`` (401 without a valid one) and works in one namespace:
``/mcp?namespace=NAME``, or the key's only one. A namespace the key does not hold is
404, exactly like one that does not exist (an admin key reaches every existing one);
a key holding several namespaces must choose one (422). The check runs on every HTTP
request, not once per MCP session, so a session id alone grants nothing.

The tools were built over one runtime; here they are given a stand-in that forwards to
the runtime chosen for the HTTP request being served (a context variable the MCP SDK
carries from the request to the tool call).
"""

from __future__ import annotations

import json
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from api.deps import Principal, existing_runtime
from api.errors import error_body, status_for
from app.keys import KeyStore
from app.namespaces import Namespaces
from lore.errors import LoreError, UnauthorizedError
from lore.settings import Settings

if TYPE_CHECKING:
    from app.runtime import Runtime

_current: ContextVar[Runtime] = ContextVar("lore_mcp_runtime")


class RequestRuntime:
    """Stands in for a :class:`Runtime`: every attribute is the current request's runtime's."""

    def __getattr__(self, name: str) -> Any:
        """Forward to the runtime chosen for the HTTP request being served."""
        try:
            runtime = _current.get()
        except LookupError:
            raise RuntimeError("no MCP request is being served in this context") from None
        return getattr(runtime, name)


def request_runtime() -> Runtime:
    """The stand-in to build the MCP server with (typed as the runtime it forwards to)."""
    return cast("Runtime", RequestRuntime())


class McpAuth:
    """ASGI middleware: authenticate each HTTP request and choose its namespace's runtime."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        namespaces: Namespaces,
        keys: KeyStore,
        local: Runtime | None = None,
    ) -> None:
        self.app = app
        self.local = local
        self.settings = settings
        self.namespaces = namespaces
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its runtime set, or answer the HTTP API's error."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        requested = query.get("namespace", [None])[0]
        try:
            runtime = self.runtime_for(headers.get("authorization", ""), requested)
        except LoreError as exc:
            await _error(send, exc, headers.get("x-request-id"))
            return
        token = _current.set(runtime)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)

    def runtime_for(self, authorization: str, requested: str | None) -> Runtime:
        """The runtime this request may use (raises the HTTP API's auth errors)."""
        auth = self.settings.auth
        if not auth.enabled and self.local is not None:
            return self.local
        if not auth.enabled:
            principal = Principal(None, (auth.default_namespace,), admin=True)
        else:
            scheme, _, secret = authorization.partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                raise UnauthorizedError("missing `Authorization: Bearer <key>` header")
            key = self.keys.verify(secret.strip())
            if key is None:
                raise UnauthorizedError("unknown or revoked API key")
            principal = Principal(key.id, key.namespaces, key.admin)
        return existing_runtime(principal, self.namespaces, principal.namespace(requested))


async def _error(send: Send, exc: LoreError, rid: str | None) -> None:
    status = status_for(exc)
    body = json.dumps(error_body(type(exc).__name__, str(exc), rid or uuid.uuid4().hex)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_http(settings: Settings, host: str, port: int, local: Runtime | None = None) -> None:
    """Run the MCP server over streamable HTTP at ``/mcp`` until interrupted.

    ``local`` is the runtime every call uses with auth off (else the default namespace's).
    """
    import uvicorn

    from api.integrations.mcp_server import build_mcp_server
    from app.builders import database_for

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    namespaces = Namespaces(settings)
    keys = KeyStore(database_for(settings, "keys"))
    try:
        server = build_mcp_server(request_runtime())
        app = McpAuth(server.streamable_http_app(host=host), settings, namespaces, keys, local)
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        namespaces.close()
        keys.close()
