"""MkDocs hook: the HTTP API reference page, generated from the app's OpenAPI document.

``mkdocs.yml`` names this file under ``hooks``; at every build :func:`on_files` adds
``reference/http-api.md`` rendered from :func:`http_api_markdown`, so the page can never
fall behind the routes (``mkdocs build --strict`` runs in ``make test``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

PAGE = "reference/http-api.md"


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the HTTP app, built on an empty, temporary data directory."""
    from api.app import create_app
    from lore.settings import load_settings

    with tempfile.TemporaryDirectory() as tmp:
        schema: dict[str, Any] = create_app(load_settings(data_dir=Path(tmp))).openapi()
    return schema


def _schema_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref") or (schema.get("items") or {}).get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return f"list of `{name}`" if "items" in schema else f"`{name}`"
    return f"`{schema.get('type', 'object')}`"


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [str(op["summary"]), ""]
    if op.get("description"):
        lines += [str(op["description"]).strip(), ""]
    params = op.get("parameters") or []
    if params:
        lines += ["| parameter | in | required | type | meaning |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema") or {}
            meaning = str(p.get("description") or "").replace("\n", " ").replace("|", "/")
            lines.append(
                f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} "
                f"| {_schema_name(schema)} | {meaning} |"
            )
        lines.append("")
    body = (op.get("requestBody") or {}).get("content") or {}
    for media, content in body.items():
        lines += [f"Request body ({media}): {_schema_name(content.get('schema') or {})}", ""]
    responses = op.get("responses") or {}
    if responses:
        lines += ["| status | meaning |", "|---|---|"]
        for status, response in responses.items():
            lines.append(f"| {status} | {str(response.get('description', '')).strip()} |")
        lines.append("")
    return lines


def http_api_markdown(document: dict[str, Any]) -> str:
    """The reference page: every operation grouped by tag, then every schema as JSON."""
    info = document.get("info") or {}
    out = [
        "# HTTP API reference",
        "",
        f"Generated from the OpenAPI document of {info.get('title', 'the API')} "
        f"{info.get('version', '')} at build time; a running server serves the same "
        "document at `/openapi.json` and renders it at `/docs` and `/redoc`.",
        "",
    ]
    by_tag: dict[str, list[str]] = {}
    for path, methods in sorted((document.get("paths") or {}).items()):
        for method, op in methods.items():
            tag = (op.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).extend(_operation(method, path, op))
    for tag in sorted(by_tag):
        out += [f"## {tag}", "", *by_tag[tag]]
    schemas = (document.get("components") or {}).get("schemas") or {}
    if schemas:
        out += ["## Schemas", ""]
        for name in sorted(schemas):
            out += [f"### `{name}`", "", "```json", json.dumps(schemas[name], indent=2), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference page to the site's files."""
    from mkdocs.structure.files import File

    content = http_api_markdown(openapi_document())
    files.append(File.generated(config, PAGE, content=content))
    return files
