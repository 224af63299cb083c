"""The web console in a real browser against a real `lore serve` on the demo corpus."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
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
    assert source == "staging/checkout-web/runbook-http-504.md", source
    ranks = first.find_element(By.CSS_SELECTOR, ".ranks").text
    assert "sparse" in ranks and "dense" in ranks and "exact" in ranks and "graph" in ranks
    sources = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".result-source")]
    assert sources and all(s.startswith("staging/") for s in sources), sources
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
            # a wrong key is refused in the dialog itself, with the server's reason
            fill(driver, "#key-input", "lk_not_a_real_key")
            visible(driver, "#key-save").click()
            message = visible(driver, "#key-message")
            wait_for(driver, lambda d: "refused" in message.text)
            assert driver.find_element(By.CSS_SELECTOR, "#key-dialog").is_displayed()
            assert driver.execute_script("return sessionStorage.getItem('lore.apiKey')") is None
            shoot(driver, screenshots, "7b-auth-wrong-key")
            fill(driver, "#key-input", key)
            visible(driver, "#key-save").click()
            wait_for(
                driver, lambda d: not d.find_element(By.CSS_SELECTOR, "#key-dialog").is_displayed()
            )
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


# -- issue 32: Markdown, highlighted matches, the community overview ------------------------


def test_results_render_markdown_sanitised_with_matches_marked(
    demo: str, driver: WebDriver, screenshots: Path
) -> None:
    hostile = {
        "id": "console/hostile.md",
        "text": "# Hostile note\n\nERR_HOSTILE_9 <script>window.pwned = 1</script> "
        '<img src=x onerror="window.pwned = 2"> [click](javascript:window.pwned=3) **bold**',
        "wait": True,
    }
    stored = httpx.post(f"{demo}/v1/documents", json=hostile, timeout=120)
    assert stored.status_code in (200, 201, 202), stored.text
    driver.get(f"{demo}/#search")
    fill(driver, "#search-q", "HTTP 504 runbook")
    fill(driver, "#search-filter", "env=staging")
    visible(driver, "#search-go").click()
    first = visible(driver, "#search-results li.result .result-text")
    # Markdown became elements: no raw markers left, code spans and emphasis rendered
    html = first.get_attribute("innerHTML") or ""
    assert "<code>" in html or "<strong>" in html or "<h" in html, html[:300]
    assert "**" not in first.text and "## " not in first.text
    marks = [m.text for m in driver.find_elements(By.CSS_SELECTOR, "#search-results mark.hit")]
    assert marks and {m.upper() for m in marks} <= {"HTTP", "504", "RUNBOOK"}, marks
    assert any(m == "504" for m in marks)
    shoot(driver, screenshots, "11-search-markdown")
    fill(driver, "#search-filter", "")
    fill(driver, "#search-q", "ERR_HOSTILE_9")
    visible(driver, "#search-go").click()
    result = visible(driver, "#search-results li.result .result-text")
    wait_for(driver, lambda d: "ERR_HOSTILE_9" in result.text)
    assert result.find_elements(By.CSS_SELECTOR, "strong")
    assert not result.find_elements(By.CSS_SELECTOR, "script, img[onerror], [onerror]")
    hrefs = [a.get_attribute("href") or "" for a in result.find_elements(By.CSS_SELECTOR, "a")]
    assert not any(h.startswith("javascript:") for h in hrefs), hrefs
    assert driver.execute_script("return window.pwned === undefined")
    shoot(driver, screenshots, "12-search-hostile")


def test_the_graph_opens_on_an_overview_of_top_level_communities(
    demo: str, driver: WebDriver, screenshots: Path
) -> None:
    communities = httpx.get(f"{demo}/v1/communities", params={"reports": True}, timeout=60).json()
    top = {c["id"]: c for c in communities if c["parent"] is None}
    assert top
    driver.get(f"{demo}/#graph")
    drawn = wait_for(
        driver,
        lambda d: d.execute_script(
            "const g = window.loreGraph; return g && g.nodes('.community.top').length > 0 && "
            "g.nodes('.community.top').map(n => [n.data('community'), n.data('name'), "
            "n.data('members'), n.data('level'), n.width()]);"
        ),
    )
    assert {d[0] for d in drawn} == set(top)
    assert driver.execute_script("return window.loreGraph.nodes().length") == len(top)
    for community_id, name, members, level, _ in drawn:
        report = top[community_id]["report"]
        assert name == (report["title"] if report else community_id)
        assert (members, level) == (top[community_id]["size"], top[community_id]["level"])
    by_members = sorted(drawn, key=lambda d: d[2])
    assert by_members[-1][4] >= by_members[0][4]  # sized by members
    legend = visible(driver, "#graph-legend")
    levels = {c["level"] for c in communities}
    items = legend.find_elements(By.CSS_SELECTOR, ".legend-item[data-level]")
    assert {int(i.get_attribute("data-level") or -1) for i in items} == levels
    assert "size: members" in legend.text
    shoot(driver, screenshots, "13-graph-overview")
    biggest = by_members[-1][0]
    driver.execute_script(
        "window.loreGraph.getElementById(arguments[0]).emit('tap');", f"community:{biggest}"
    )
    members = wait_for(
        driver,
        lambda d: d.execute_script(
            "const m = window.loreGraph.nodes('.member'); "
            "return m.length > 0 && m.map(n => n.id());"
        ),
    )
    assert set(members) <= set(top[biggest]["members"])
    assert len(members) == min(40, len(top[biggest]["members"]))
    # each member is labelled by its entity's name (as the entity page spells it), not its key
    name_of = dict(zip(top[biggest]["members"], top[biggest]["member_names"], strict=True))
    labels = driver.execute_script(
        "return window.loreGraph.nodes('.member').map(n => [n.id(), n.style('label')]);"
    )
    assert [label for _, label in labels] == [name_of[key] for key, _ in labels]
    assert any(label != key for key, label in labels), labels  # names, not the keys
    for key, label in labels[:3]:
        entity = httpx.get(f"{demo}/v1/entities/{key}", timeout=60).json()["entity"]
        assert label == entity["name"]
    children = [c["id"] for c in communities if c["parent"] == biggest]
    drawn_children = driver.execute_script(
        "return window.loreGraph.nodes('.community').not('.centre').map(n => n.data('community'));"
    )
    assert sorted(drawn_children) == sorted(children)
    assert driver.execute_script("return window.loreGraph.edges().length") == len(members) + len(
        children
    )
    visible(driver, "#entity-detail .report")
    listed = driver.find_elements(By.CSS_SELECTOR, "#entity-detail .report .members a")
    assert [a.text for a in listed] == top[biggest]["member_names"][:40]
    shoot(driver, screenshots, "14-graph-community")
    visible(driver, "#graph-overview").click()
    wait_for(
        driver,
        lambda d: (
            d.execute_script("return window.loreGraph.nodes('.community.top').length") == len(top)
        ),
    )
