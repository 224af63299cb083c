"""Issue 30: cross-site writes, DNS rebinding, security headers and 500 bodies.

The requests replay the issue's curl reproductions against the app as ``lore serve``
builds it (default settings: auth off, loopback hosts only).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.security import CONSOLE
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.settings import load_settings

LOCAL = "http://127.0.0.1:8080"
POISON = b'{"id":"runbooks/504.md","text":"poisoned","wait":true}'


@dataclass
class Served:
    client: TestClient
    operations: list[tuple[str, str]]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Served]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("xsite"),
        api={"allowed_hosts": ["localhost", "127.0.0.1", "::1"]},  # the defaults
    )
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))

    @app.get("/boom", include_in_schema=False)
    async def boom() -> None:
        raise RuntimeError("database is locked at /secret/data/lore.sqlite3.lock")

    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        client.post(
            "/v1/documents",
            json={"id": "runbooks/504.md", "text": "On HTTP 504 restart the pool.", "wait": True},
        ).raise_for_status()
        schema = app.openapi()["paths"]
        paths = [(m.upper(), p) for p, ops in schema.items() for m in ops]
        yield Served(client, paths)


def stored_text(client: TestClient) -> str:
    reply = client.get("/v1/documents/runbooks/504.md", params={"include": "text"})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["text"])


def test_a_cross_site_text_plain_post_is_refused_and_stores_nothing(served: Served) -> None:
    reply = served.client.post(
        "/v1/documents",
        content=POISON,
        headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
    )
    assert reply.status_code == 403, reply.text
    assert "evil.example" in reply.json()["detail"]
    assert stored_text(served.client) == "On HTTP 504 restart the pool."


def test_a_form_type_without_origin_is_refused_too(served: Served) -> None:
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"):
        reply = served.client.post("/v1/documents", content=POISON, headers={"Content-Type": kind})
        assert reply.status_code == 403, (kind, reply.text)
    assert stored_text(served.client) == "On HTTP 504 restart the pool."


def test_a_body_without_a_content_type_is_refused(served: Served) -> None:
    reply = served.client.post("/v1/documents", content=POISON, headers={"Content-Type": ""})
    assert reply.status_code == 403, reply.text


def test_a_json_post_from_another_origin_is_refused(served: Served) -> None:
    reply = served.client.post(
        "/v1/documents",
        content=POISON,
        headers={"Origin": "http://127.0.0.1:9999", "Content-Type": "application/json"},
    )
    assert reply.status_code == 403
    gone = served.client.delete(
        "/v1/documents/runbooks/504.md", headers={"Origin": "https://evil.example"}
    )
    assert gone.status_code == 403
    assert stored_text(served.client) == "On HTTP 504 restart the pool."


def test_same_origin_json_and_console_uploads_pass(served: Served) -> None:
    same = served.client.post(
        "/v1/documents",
        json={"id": "notes/a.md", "text": "Same-origin note about ERR_FENCE.", "wait": True},
        headers={"Origin": LOCAL},
    )
    assert same.status_code == 200, same.text
    upload = served.client.post(
        "/v1/documents",
        files={"file": ("b.md", b"An uploaded note about ERR_GATE.")},
        data={"wait": "true"},
        headers={**CONSOLE, "Origin": LOCAL},
    )
    assert upload.status_code == 200, upload.text


def test_a_rebinding_host_is_refused(served: Served) -> None:
    reply = served.client.get("/v1/documents", headers={"Host": "attacker.example:8080"})
    assert reply.status_code == 421, reply.text
    assert "runbooks" not in reply.text
    for host in ("127.0.0.1:8080", "localhost", "[::1]:8080"):
        assert served.client.get("/v1/documents", headers={"Host": host}).status_code == 200, host


def test_every_route_sends_the_security_headers(served: Served) -> None:
    pages = ["/", "/docs", "/redoc", "/docs/oauth2-redirect", "/static/js/api.js", "/nope"]
    calls = [(m, re.sub(r"\{[^}]+\}", "x", p)) for m, p in served.operations]
    calls += [("GET", page) for page in pages]
    assert ("POST", "/v1/documents") in calls and len(calls) > 20
    for method, path in calls:
        reply = served.client.request(method, path, headers={"Content-Type": "application/json"})
        csp = reply.headers["content-security-policy"]
        script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
        assert "unsafe-inline" not in script_src, path
        assert "frame-ancestors 'none'" in csp, path
        assert reply.headers["x-content-type-options"] == "nosniff", path
        assert reply.headers["referrer-policy"] == "no-referrer", path
    refused = served.client.get("/", headers={"Host": "evil.example"})
    assert refused.headers["x-content-type-options"] == "nosniff"


def test_a_500_carries_an_error_id_and_logs_the_detail(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="lore.api"):
        reply = served.client.get("/boom")
    assert reply.status_code == 500
    body = reply.json()
    assert "/secret" not in reply.text and "locked" not in reply.text
    assert body["error"] == "InternalError" and body["error_id"] in body["detail"]
    logged = [r for r in caplog.records if body["error_id"] in r.getMessage()]
    assert logged and "lore.sqlite3.lock" in str(logged[0].exc_info)
