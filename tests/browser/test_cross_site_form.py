"""Issue 30: a page on another loopback port posts a form into the memory, in Chromium.

The attacker's page is served by a plain HTTP server on its own port; it auto-submits a
``text/plain`` form whose body is the JSON of a poisoned runbook (the classic trick: the
field's name holds the JSON). Before issue 30 the server parsed it and stored it.
"""

from __future__ import annotations

import html
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import MISSING
from tests.e2e.test_cli import serving

pytestmark = [pytest.mark.browser, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]

if MISSING is None:
    from selenium.webdriver.remote.webdriver import WebDriver

ORIGINAL = "On HTTP 504 restart the ledger pool."
FIELD = '{"id": "runbooks/504.md", "text": "poisoned", "wait": true, "pad": "'


def _attacker_page(target: str) -> bytes:
    return f"""<!doctype html><html><body>
<form id="f" method="POST" action="{target}/v1/documents" enctype="text/plain">
<input type="hidden" name="{html.escape(FIELD)}" value='"}}'>
</form>
<script>document.getElementById("f").submit();</script>
</body></html>""".encode()


@pytest.fixture
def attacker(tmp_path: Path) -> Iterator[tuple[str, list[bytes]]]:
    """A page on another loopback port, and the bodies the target received (none here)."""
    page: list[bytes] = []

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page[0])

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", page
    finally:
        server.shutdown()
        server.server_close()


def test_a_cross_site_form_post_stores_nothing(
    tmp_path: Path, driver: WebDriver, attacker: tuple[str, list[bytes]]
) -> None:
    with serving(tmp_path / "data", tmp_path / "serve.log") as base:
        seed = {"id": "runbooks/504.md", "text": ORIGINAL, "wait": True}
        httpx.post(f"{base}/v1/documents", json=seed, timeout=300).raise_for_status()
        page_url, page = attacker
        page.append(_attacker_page(base))
        driver.get(page_url)
        deadline = time.monotonic() + 30
        while driver.current_url.startswith(page_url) and time.monotonic() < deadline:
            time.sleep(0.2)  # the form submits itself; the browser lands on the API's answer
        assert driver.current_url.startswith(base), driver.current_url
        assert "CrossSiteRequestRefused" in driver.page_source
        time.sleep(1)
        stored = httpx.get(f"{base}/v1/documents/runbooks/504.md", params={"include": "text"})
        assert stored.json()["text"] == ORIGINAL
