"""The web console in a real browser against a real `lore serve` on the demo corpus."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import MISSING, new_driver
from tests.conftest import CORPUS
from tests.e2e.test_cli import lore, serving

pytestmark = [pytest.mark.browser, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]

if MISSING is None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement
    from selenium.webdriver.support.ui import Select, WebDriverWait

WAIT_S = 120


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo corpus with its graph, as `make demo` builds it, served by `lore serve`."""
    root = tmp_path_factory.mktemp("console")
    data = root / "data"
    for env in ("production", "staging"):
        done = lore(data, "ingest", str(CORPUS / env), "--meta", f"env={env}")
        assert done.returncode == 0, done.stderr
    built = lore(data, "graph", "build")
    assert built.returncode == 0, built.stderr
    with serving(data, root / "serve.log") as base:
        yield base


def wait_for(driver: WebDriver, check: Callable[[WebDriver], Any], timeout: float = WAIT_S) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(check)


def visible(driver: WebDriver, css: str) -> WebElement:
    def find(d: WebDriver) -> WebElement | bool:
        found = d.find_elements(By.CSS_SELECTOR, css)
        return found[0] if found and found[0].is_displayed() else False

    element: WebElement = wait_for(driver, find)
    return element


def fill(driver: WebDriver, css: str, text: str) -> None:
    box = visible(driver, css)
    box.clear()
    box.send_keys(text)


def shoot(driver: WebDriver, screenshots: Path, name: str) -> None:
    assert driver.save_screenshot(str(screenshots / f"{name}.png"))


def test_search_with_a_filter_shows_the_right_runbook_first(
    demo: str, driver: WebDriver, screenshots: Path
) -> None:
    driver.get(f"{demo}/#search")
    fill(driver, "#search-q", "HTTP 504 runbook")
    fill(driver, "#search-filter", "env=staging")
    visible(driver, "#search-go").click()
    first = visible(driver, "#search-results li.result")
    source = first.find_element(By.CSS_SELECTOR, ".result-source").text
    assert source.endswith("staging/checkout-web/runbook-http-504.md"), source
    ranks = first.find_element(By.CSS_SELECTOR, ".ranks").text
    assert "sparse" in ranks and "dense" in ranks and "exact" in ranks and "graph" in ranks
    sources = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".result-source")]
    assert sources and all("/staging/" in s for s in sources), sources
    shoot(driver, screenshots, "1-search")


def test_ask_shows_citations_that_open_the_chunk(
    demo: str, driver: WebDriver, screenshots: Path
) -> None:
    driver.get(f"{demo}/#ask")
    fill(driver, "#ask-q", "What does PAY-5031 mean?")
    visible(driver, "#ask-go").click()
    cite = visible(driver, "#ask-answer a.cite")
    route = visible(driver, "#ask-route").text
    assert "LOCAL" in route.upper(), route
    shoot(driver, screenshots, "2-ask")
    cite.click()
    chunk = visible(driver, "#viewer .chunk-text")
    wait_for(driver, lambda d: "PAY-5031" in chunk.text)
    shoot(driver, screenshots, "3-ask-citation")
    visible(driver, "#viewer a.open-document").click()
    text = visible(driver, "#doc-text")
    wait_for(driver, lambda d: "PAY-5031" in text.text)
    assert "done" in visible(driver, "#doc-status").text
    # a corpus-wide question: global route, citations that open community reports
    driver.get(f"{demo}/#ask")
    fill(driver, "#ask-q", "How do the services handle database timeouts?")
    Select(visible(driver, "#ask-mode")).select_by_value("global")
    visible(driver, "#ask-go").click()
    visible(driver, "#ask-answer a.cite").click()
    visible(driver, "#viewer .report")
    assert "GLOBAL" in visible(driver, "#ask-route").text.upper()
    shoot(driver, screenshots, "3b-ask-global-report")


def test_an_uploaded_file_becomes_searchable(
    demo: str, driver: WebDriver, screenshots: Path, tmp_path: Path
) -> None:
    upload = tmp_path / "fence.md"
    upload.write_text(
        "# Fencing tokens\n\nWhen ERR_CONSOLE_FENCE_7731 appears, rotate the fencing token.\n"
    )
    driver.get(f"{demo}/#documents")
    visible(driver, "#docs-list tr.doc-row")
    driver.find_element(By.CSS_SELECTOR, "#upload-files").send_keys(str(upload))
    fill(driver, "#upload-id", "console/fence.md")
    fill(driver, "#upload-meta", json.dumps({"env": "staging"}))
    visible(driver, "#upload-submit").click()
    # the job runs off the request threads now: its state is re-rendered while polled
    state = "return document.querySelector('#job-state')?.textContent"
    wait_for(driver, lambda d: d.execute_script(state) == "done")
    shoot(driver, screenshots, "4-documents-upload")
    driver.get(f"{demo}/#search")
    fill(driver, "#search-q", "ERR_CONSOLE_FENCE_7731")
    visible(driver, "#search-go").click()
    first = visible(driver, "#search-results li.result .result-source")
    assert first.text == "upload:fence.md"
    first.click()
    wait_for(driver, lambda d: "console/fence.md" in visible(d, "#doc-detail h2").text)
    assert "ERR_CONSOLE_FENCE_7731" in visible(driver, "#doc-text").text
    assert len(driver.find_elements(By.CSS_SELECTOR, "#doc-chunks li")) == 1
    shoot(driver, screenshots, "5-document")


def test_the_graph_view_draws_an_identifier_entity(
    demo: str, driver: WebDriver, screenshots: Path
) -> None:
    driver.get(f"{demo}/#graph")
    fill(driver, "#entity-q", "PAY-5031")
    fill(driver, "#entity-q", "PAY-5031\n")
    visible(driver, "#entity-results .entity-hit")
    names = wait_for(
        driver,
        lambda d: d.execute_script(
            "const g = window.loreGraph; return g && g.nodes().length > 1 && "
            "g.nodes().map(n => n.data('name'));"
        ),
    )
    assert any(n.upper() == "PAY-5031" for n in names), names
    assert "PAY-5031" in visible(driver, "#entity-name").text.upper()
    visible(driver, "#communities-list li.community")
    before = len(names)
    driver.execute_script(
        "const g = window.loreGraph; g.nodes().filter(n => !n.hasClass('expanded'))[0].emit('tap');"
    )
    wait_for(
        driver,
        lambda d: (
            d.execute_script("return window.loreGraph.nodes().length") > before
            or d.execute_script("return window.loreGraph.nodes('.expanded').length") > 1
        ),
    )
    shoot(driver, screenshots, "6-graph")


def test_api_docs_render_from_local_assets(demo: str, driver: WebDriver, screenshots: Path) -> None:
    driver.get(f"{demo}/docs")
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) > 10)
    shoot(driver, screenshots, "9-docs-swagger")
    driver.get(f"{demo}/redoc")
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-section-id]")) > 10)
    shoot(driver, screenshots, "10-docs-redoc")


def test_with_auth_the_console_asks_for_a_key_and_keeps_namespaces_apart(
    tmp_path: Path, screenshots: Path
) -> None:
    data = tmp_path / "data"
    for space, folder in (("team-a", "payments-api"), ("team-b", "search-indexer")):
        done = lore(data, "--namespace", space, "ingest", str(CORPUS / "staging" / folder))
        assert done.returncode == 0, done.stderr
    created = lore(data, "keys", "create", "--namespace", "team-a", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    profile = tmp_path / "profile"
    profile.mkdir()
    driver = new_driver(profile)
    try:
        with serving(data, tmp_path / "serve.log", "--auth") as base:
            driver.get(f"{base}/#documents")
            visible(driver, "#key-dialog #key-input")
            assert "requires an API key" in visible(driver, "#key-message").text
            shoot(driver, screenshots, "7-auth-key-dialog")
            fill(driver, "#key-input", key)
            visible(driver, "#key-save").click()
            visible(driver, "#docs-list tr.doc-row")
            ids = [
                r.get_attribute("data-id")
                for r in driver.find_elements(By.CSS_SELECTOR, "tr.doc-row")
            ]
            assert ids and all("payments-api" in (i or "") for i in ids), ids
            driver.get(f"{base}/#search")
            fill(driver, "#search-q", "reindex backlog shard timeouts")
            visible(driver, "#search-go").click()
            visible(driver, "#search-results li.result")
            sources = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".result-source")]
            assert sources and all("payments-api" in s for s in sources), sources
            shoot(driver, screenshots, "8-auth-search")
            fill(driver, "#namespace", "team-b\n")
            status = visible(driver, "#search-status")
            visible(driver, "#search-go").click()
            wait_for(driver, lambda d: "404" in status.text)
            assert not driver.find_elements(By.CSS_SELECTOR, ".result-source")
    finally:
        driver.quit()
