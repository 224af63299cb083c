"""The request-body limit: 413 with our JSON error body, declared or streamed alike.

A body whose ``Content-Length`` is over the limit is refused before it is read; a
streamed (chunked) body is counted by Starlette's ``RequestBodyLimitMiddleware`` and
stopped when it passes the limit, which surfaces as a 413 through our error handlers.
"""

from __future__ import annotations

import json
import uuid

from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import error_body, too_large_detail


class BodyLimit:
    """Outermost of our middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = RequestBodyLimitMiddleware(app, max_body_size=max_bytes)
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a declared oversize body, else count what arrives."""
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            declared = headers.get(b"content-length", b"")
            if declared.isdigit() and int(declared) > self.max_bytes:
                rid = headers.get(b"x-request-id", b"").decode("latin-1") or uuid.uuid4().hex
                body = json.dumps(
                    error_body("PayloadTooLarge", too_large_detail(self.max_bytes), rid)
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 413,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
