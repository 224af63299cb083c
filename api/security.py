"""Cross-site defences and response headers, for every route of the HTTP API.

A server on localhost is reachable from every page the user's browser opens, so:

* **Host** — a request whose ``Host`` is not an allowed host is refused (421): a
  DNS-rebinding page (``attacker.example`` resolving to 127.0.0.1) sends its own name.
  Loopback names are allowed by default; ``api.allowed_hosts`` lists others (``*``: any).
* **Origin** — a state-changing request (anything but GET, HEAD, OPTIONS) that carries an
  ``Origin`` must come from the server's own origin or one in ``api.allowed_origins``.
* **Content type** — a state-changing request must be JSON (a cross-site form cannot
  send ``application/json`` without a CORS preflight, which this server never grants)
  or carry the console's header ``X-Lore-Client`` (a custom header, which a form cannot
  send either); so must a body without a content type (``fetch`` of a Blob). A
  body-less request (DELETE) needs none: a cross-site page can only send it through
  ``fetch``, whose preflight fails, and its ``Origin`` is checked.

Refusals are 403 (421 for a wrong host) with the usual JSON error body. Every response
also gets the security headers: a Content-Security-Policy without inline scripts,
``frame-ancestors 'none'``, ``X-Content-Type-Options: nosniff`` and a Referrer-Policy.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_body

CLIENT_HEADER = "x-lore-client"
"""The console's CSRF defence: a custom header a cross-site form cannot send."""
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_TYPES = ("application/json",)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; worker-src 'self' blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The default policy; a page with inline scripts adds their hashes (see ``api.console``)."""
HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
}


def host_name(host: str) -> str:
    """The name part of a ``Host`` header (no port; IPv6 without brackets), lowercased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


class CrossSiteGuard:
    """ASGI middleware: Host, Origin and content-type checks, then security headers."""

    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: Iterable[str] = LOOPBACK_HOSTS,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.hosts = {host_name(h) for h in allowed_hosts}
        self.any_host = "*" in self.hosts
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what fails a check; add the headers to whatever is sent."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.refusal(scope["method"], headers)
        if refusal is not None:
            status, detail = refusal
            await _refuse(send, status, detail, headers.get("x-request-id"))
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode())
                    for k, v in HEADERS.items()
                    if k.encode() not in present
                ]
                if b"content-security-policy" not in present:
                    extra.append((b"content-security-policy", CSP.encode()))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, method: str, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, why) when the request must be refused, else None."""
        host = headers.get("host", "")
        if not self.any_host and host_name(host) not in self.hosts:
            return 421, (
                f"host {host!r} is not one this server answers to; add it to "
                "LORE_API__ALLOWED_HOSTS (see docs/security.md)"
            )
        if method.upper() in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, host):
            return 403, (
                f"cross-site request from origin {origin!r} refused; add it to "
                "LORE_API__ALLOWED_ORIGINS if it is yours"
            )
        kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        has_body = headers.get("content-length", "0") not in ("", "0") or (
            "transfer-encoding" in headers
        )
        if (kind or has_body) and kind not in JSON_TYPES and CLIENT_HEADER not in headers:
            return 403, (
                f"a {kind!r} body needs the `X-Lore-Client` header (send JSON with "
                "Content-Type: application/json, or files as multipart with that header)"
            )
        return None

    def origin_allowed(self, origin: str, host: str) -> bool:
        """The server's own origin (same host and port) or a listed one."""
        origin = origin.rstrip("/").lower()
        if origin in self.origins or "*" in self.origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()


async def _refuse(send: Send, status: int, detail: str, rid: str | None) -> None:
    name = "MisdirectedRequest" if status == 421 else "CrossSiteRequestRefused"
    body = json.dumps(error_body(name, detail, rid or uuid.uuid4().hex)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.encode(), v.encode()) for k, v in HEADERS.items()),
        (b"content-security-policy", CSP.encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


CONSOLE = {"X-Lore-Client": "console"}
"""The header the console (and a script uploading files) sends: ``headers=CONSOLE``."""
