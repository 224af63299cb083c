"""The one place that maps Lorekeeper's error tree to HTTP status codes."""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lore.errors import (
    EmbeddingMismatchError,
    ForbiddenError,
    IndexRebuildingError,
    InvalidRequestError,
    LoreError,
    NotFoundError,
    PayloadTooLargeError,
    TooManyRequestsError,
    TransientError,
    UnauthorizedError,
)

log = logging.getLogger("lore.api")

STATUS_BY_ERROR: list[tuple[type[LoreError], int]] = [
    (UnauthorizedError, 401),
    (ForbiddenError, 403),
    (NotFoundError, 404),
    (PayloadTooLargeError, 413),
    (InvalidRequestError, 422),
    (EmbeddingMismatchError, 409),
    (TooManyRequestsError, 429),
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
        return internal_error(request, exc)

    @app.exception_handler(LoreError)
    async def _lore_error(request: Request, exc: LoreError) -> JSONResponse:
        status = status_for(exc)
        if status == 500:
            return internal_error(request, exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if isinstance(exc, TooManyRequestsError | IndexRebuildingError):
            headers = {"Retry-After": str(exc.retry_after_s)}
        return JSONResponse(
            error_body(type(exc).__name__, str(exc), request_id(request)),
            status_code=status,
            headers=headers,
        )


def internal_error(request: Request, exc: BaseException) -> JSONResponse:
    """A 500: an error id and a generic sentence; the detail goes to the log only."""
    error_id = uuid.uuid4().hex[:16]
    rid = request_id(request)
    log.error(
        "internal error %s (request %s, %s %s)",
        error_id,
        rid,
        request.method,
        request.url.path,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    body = error_body(
        "InternalError",
        f"internal error {error_id}: the server's log has the detail under this id",
        rid,
    )
    body["error_id"] = error_id
    return JSONResponse(body, status_code=500)


_PHRASES = {
    413: "PayloadTooLarge",
    404: "NotFound",
    405: "MethodNotAllowed",
    401: "Unauthorized",
    403: "Forbidden",
}
