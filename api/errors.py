"""The one place that maps Lorekeeper's error tree to HTTP status codes."""

from __future__ import annotations

import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lore.errors import (
    EmbeddingMismatchError,
    ForbiddenError,
    InvalidRequestError,
    LoreError,
    NotFoundError,
    PayloadTooLargeError,
    TransientError,
    UnauthorizedError,
)

STATUS_BY_ERROR: list[tuple[type[LoreError], int]] = [
    (UnauthorizedError, 401),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (PayloadTooLargeError, 413),
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


def too_large_detail(max_bytes: int) -> str:
    """What a 413 says."""
    return (
        f"request body over the {max_bytes:,}-byte limit (LORE_API__MAX_BODY_BYTES); "
        "split it into several requests"
    )


def error_body(error: str, detail: object, rid: str) -> dict[str, object]:
    """The JSON body every error response has."""
    return {"error": error, "detail": detail, "request_id": rid}


def install_error_handlers(app: FastAPI, max_body_bytes: int | None = None) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(LoreError)
    async def _lore_error(request: Request, exc: LoreError) -> JSONResponse:
        status = status_for(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(
            error_body(type(exc).__name__, str(exc), request_id(request)),
            status_code=status,
            headers=headers,
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

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail: object = exc.detail
        if exc.status_code == 413 and max_body_bytes is not None:
            detail = too_large_detail(max_body_bytes)
        return JSONResponse(
            error_body(_PHRASES.get(exc.status_code, "HTTPError"), detail, request_id(request)),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            error_body("InternalError", f"{type(exc).__name__}: {exc}", request_id(request)),
            status_code=500,
        )


_PHRASES = {
    413: "PayloadTooLarge",
    404: "NotFound",
    405: "MethodNotAllowed",
    401: "Unauthorized",
    403: "Forbidden",
}
