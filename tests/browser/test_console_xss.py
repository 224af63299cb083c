"""Stored XSS against the console, under its Content-Security-Policy, in a real browser.

The console renders stored text as Markdown (markdown-it with raw HTML off, then
DOMPurify). Issue 30 asks for the XSS payload set to be run again against that renderer
under the policy: here a set of classic vectors (script and event-handler tags, SVG and
MathML tricks, ``javascript:``/``data:`` links in Markdown and HTML, entity-encoded
schemes, forms, frames, objects) is stored as document text, headings, titles and
metadata, ingested and built into the graph (so entity names and extractive community
reports carry it too), then every view that shows stored text is opened: search results,
a local answer with its citations, the document list and one document, the entity
search, and community reports. In each, no payload may run (every payload sets
``window.pwned``) and no dangerous element or attribute may reach the DOM.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import MISSING
from tests.browser.test_console import fill, shoot, visible, wait_for
from tests.e2e.test_cli import lore, serving

pytestmark = [pytest.mark.browser, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]

if MISSING is None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

MARK = "XSSMARK"
PAYLOADS = [
    "<script>window.pwned = 1</script>",
    '<img src=x onerror="window.pwned = 2">',
    '<svg onload="window.pwned = 3"><circle r="1"/></svg>',
    '<iframe srcdoc="<script>parent.pwned = 4</script>"></iframe>',
    "[a link](javascript:window.pwned=5)",
    "[mixed case](JaVaScRiPt:window.pwned=6)",
    "[tab inside](jav&#x09;ascript:window.pwned=7)",
    '<a href="javascript:window.pwned=8">html link</a>',
    '![image](x" onerror="window.pwned=9)',
    '<details open ontoggle="window.pwned = 10"><summary>s</summary></details>',
    '<math><mtext><table><mglyph><style><img src=x onerror="window.pwned = 11">',
    '<form action="javascript:window.pwned=12"><button>go</button></form>',
    "[data url](data:text/html;base64,PHNjcmlwdD5wYXJlbnQucHduZWQ9MTM8L3NjcmlwdD4=)",
    '<object data="javascript:window.pwned=14"></object><embed src="javascript:1">',
    '<input autofocus onfocus="window.pwned = 15">',
    "<body onload=window.pwned=16>",
    '<div style="background:url(javascript:window.pwned=17)">styled</div>',
    "<noscript><p title=\"</noscript><img src=x onerror='window.pwned=18'>\"></noscript>",
    "`<img src=x onerror=window.pwned=19>` in a code span and **bold** text",
    "<<script>script>window.pwned = 20<</script>/script>",
]
# what must never be in a view of stored text
DANGEROUS = (
    "script, iframe, object, embed, form, input, math, svg, style, base, meta, link,"
    " [onerror], [onload], [ontoggle], [onfocus], [onclick], [srcdoc], [style*='javascript']"
)
# the containers the console fills with stored text (its own forms are outside them)
VIEWS = (
    "#search-results, #ask-route, #ask-answer, #ask-citations, #docs-list, #doc-detail,"
    " #entity-results, #entity-detail, #communities-list, #graph-legend, #viewer-body"
)


def hostile_documents(root: Path) -> Path:
    """Four Markdown files whose headings, text and lists carry every payload."""
    docs = root / "hostile"
    docs.mkdir()
    quarter = len(PAYLOADS) // 4
    for n in range(4):
        part = PAYLOADS[n * quarter : (n + 1) * quarter]
        lines = [f"# {part[0]} {MARK} note {n}", ""]
        lines += [f"Service Gateway{n} reports {MARK} ERR_XSS_{n}: {p}" for p in part]
        lines += ["", *(f"- item {p}" for p in part), "", f"## {part[-1]}", "", "The end."]
        (docs / f"note-{n}.md").write_text("\n".join(lines) + "\n")
    return docs


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The hostile notes, ingested with a hostile metadata value, graph built, served."""
    root = tmp_path_factory.mktemp("xss")
    data = root / "data"
    docs = hostile_documents(root)
    ingested = lore(data, "ingest", str(docs), "--meta", f"note={PAYLOADS[1]}")
    assert ingested.returncode == 0, ingested.stderr
    built = lore(data, "graph", "build")
    assert built.returncode == 0, built.stderr
    with serving(data, root / "serve.log") as base:
        yield base


def assert_clean(driver: WebDriver, view: str) -> None:
    """No payload ran and nothing dangerous is in the views of stored text."""
    assert driver.execute_script("return window.pwned === undefined"), view
    found = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".flatMap(v => [...v.querySelectorAll(arguments[1])]).map(e => e.outerHTML.slice(0, 120))",
        VIEWS,
        DANGEROUS,
    )
    assert not found, (view, found)
    links = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].flatMap(v => [...v.querySelectorAll("
        "'a[href], img[src]')]).map(a => (a.getAttribute('href') || a.getAttribute('src'))"
        ".trim().toLowerCase())",
        VIEWS,
    )
    unsafe = [h for h in links if h.startswith(("javascript:", "data:", "vbscript:"))]
    assert not unsafe, (view, unsafe)


def test_the_server_sends_a_policy_without_inline_scripts(hostile: str) -> None:
    policy = httpx.get(f"{hostile}/", timeout=30).headers["content-security-policy"]
    script = next(d for d in policy.split(";") if d.strip().startswith("script-src"))
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script, policy
    assert "frame-ancestors 'none'" in policy, policy


def test_no_payload_runs_in_any_view_of_stored_text(
    hostile: str, driver: WebDriver, screenshots: Path
) -> None:
    # search results: Markdown rendered, matches highlighted
    driver.get(f"{hostile}/#search")
    fill(driver, "#search-q", MARK)
    visible(driver, "#search-go").click()
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#search-results li")) >= 4)
    rendered = driver.find_elements(By.CSS_SELECTOR, "#search-results .result-text")
    assert any(r.find_elements(By.CSS_SELECTOR, "strong, code") for r in rendered)
    assert_clean(driver, "search")
    shoot(driver, screenshots, "xss-1-search")

    # a local answer and its citations
    driver.get(f"{hostile}/#ask")
    fill(driver, "#ask-q", f"What does {MARK} ERR_XSS_1 report?")
    visible(driver, "#ask-go").click()
    wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#ask-answer").text.strip())
    assert_clean(driver, "ask")
    shoot(driver, screenshots, "xss-2-ask")

    # the document list, and one document with its title, metadata, text and chunks
    driver.get(f"{hostile}/#documents")
    rows = wait_for(
        driver,
        lambda d: (
            len(found := d.find_elements(By.CSS_SELECTOR, "#docs-list .doc-row")) >= 4 and found
        ),
    )
    assert_clean(driver, "documents")
    rows[0].click()
    detail = visible(driver, "#doc-detail")
    wait_for(driver, lambda d: MARK in detail.text and "Text" in detail.text)
    assert "onerror" in detail.text  # the payload is shown as text, not dropped
    assert_clean(driver, "document")
    shoot(driver, screenshots, "xss-3-document")

    # entity search and community reports built from the hostile text
    driver.get(f"{hostile}/#graph")
    fill(driver, "#entity-q", "ERR_XSS_2\n")
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#entity-results li"))
    assert_clean(driver, "entities")
    items = wait_for(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#communities-list li.community")
    )
    for n in range(min(3, len(items))):
        driver.find_elements(By.CSS_SELECTOR, "#communities-list li.community .title")[n].click()
        visible(driver, "#viewer-body")  # the report; the canvas draws the community
        wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#viewer-body").text.strip())
        wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#entity-detail").text.strip())
        assert_clean(driver, f"community report {n}")
        shoot(driver, screenshots, f"xss-4-report-{n}")
        visible(driver, "#viewer-close").click()
