"""The one place that maps Lorekeeper's error tree to HTTP status codes."""

from __future__ import annotations

import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from lore.errors import (
    EmbeddingMismatchError,
    InvalidRequestError,
    LoreError,
    NotFoundError,
    TransientError,
)

STATUS_BY_ERROR: list[tuple[type[LoreError], int]] = [
    (NotFoundError, 404),
    (InvalidRequestError, 422),
    (EmbeddingMismatchError, 409),
    (TransientError, 503),
]


def status_for(exc: LoreError) -> int:
    """HTTP status for an error (500 for anything unmapped)."""
    for cls, status in STATUS_BY_ERROR:
        if isinstance(exc, cls):
            return status
    return 500


def request_id(request: Request) -> str:
    """The caller's ``X-Request-ID``, or a fresh one."""
    return request.headers.get("x-request-id") or uuid.uuid4().hex


def error_body(error: str, detail: object, rid: str) -> dict[str, object]:
    """The JSON body every error response has."""
    return {"error": error, "detail": detail, "request_id": rid}


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(LoreError)
    async def _lore_error(request: Request, exc: LoreError) -> JSONResponse:
        return JSONResponse(
            error_body(type(exc).__name__, str(exc), request_id(request)),
            status_code=status_for(exc),
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [
            {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type")}
            for err in exc.errors()
        ]
        return JSONResponse(
            error_body("InvalidRequest", detail, request_id(request)), status_code=422
        )
