"""The web console at ``/`` and the API docs at ``/docs`` and ``/redoc``, from local files.

Everything a browser loads comes from this package (``api/static``, with the graph
library, the Markdown renderer and its sanitiser vendored under ``api/static/vendor``)
or from the ``fastapi-offline`` package (Swagger UI and ReDoc): nothing is fetched from
a CDN, so both work offline. The pages
themselves are public; every API call they make carries the key the person typed in
(``Authorization: Bearer``), so auth is exactly the API's.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

STATIC = Path(str(files("api") / "static"))
# The pages may load nothing from elsewhere: the browser refuses it without trying
# (ReDoc's bundle, for one, links a logo on its CDN).
LOCAL_ONLY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; worker-src 'self' blob:; connect-src 'self'"
)
DOCS_ASSETS = Path(str(files("fastapi_offline") / "static"))


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: str = Field(description="the error's class, e.g. InvalidRequest, NotFoundError")
    detail: Any = Field(description="what went wrong: a sentence, or a list of field errors")
    request_id: str = Field(description="the caller's X-Request-ID, or a fresh one")


def install_console(app: FastAPI) -> None:
    """Serve the console's page and assets."""
    app.mount("/static/docs", StaticFiles(directory=DOCS_ASSETS), name="docs-assets")
    app.mount("/static", StaticFiles(directory=STATIC), name="console-assets")

    @app.get("/", include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(
            STATIC / "index.html",
            media_type="text/html",
            headers={"Content-Security-Policy": LOCAL_ONLY},
        )


def install_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs``, ReDoc at ``/redoc`` (the app is made with both off)."""

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return _local_only(
            get_swagger_ui_html(
                openapi_url="/openapi.json",
                title=f"{app.title} — API",
                swagger_js_url="/static/docs/swagger-ui-bundle.js",
                swagger_css_url="/static/docs/swagger-ui.css",
                swagger_favicon_url="/static/docs/favicon.png",
                oauth2_redirect_url="/docs/oauth2-redirect",
            )
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return _local_only(
            get_redoc_html(
                openapi_url="/openapi.json",
                title=f"{app.title} — API",
                redoc_js_url="/static/docs/redoc.standalone.js",
                redoc_favicon_url="/static/docs/favicon.png",
                with_google_fonts=False,
            )
        )


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = LOCAL_ONLY
    return page


_ERROR_RESPONSES = {
    "422": "Invalid request: a field error list, or a sentence naming the problem",
    "4XX": "Client error: unauthorized (401), not found (404), too large (413)…",
}


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Make the OpenAPI error responses say what the handlers in ``api.errors`` send.

    FastAPI documents ``{"detail": [...]}`` for 422; ours is ``{"error", "detail",
    "request_id"}`` for every error. Each 422 gets that body, and every operation that
    takes input or a key (parameters, a body, security) documents 4XX with it too.
    """
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorBody"] = ErrorBody.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    ref = {"$ref": "#/components/schemas/ErrorBody"}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            takes_input = any(k in operation for k in ("parameters", "requestBody", "security"))
            for code, description in _ERROR_RESPONSES.items():
                if code in operation["responses"] or takes_input:
                    operation["responses"][code] = {
                        "description": description,
                        "content": {"application/json": {"schema": ref}},
                    }
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema
