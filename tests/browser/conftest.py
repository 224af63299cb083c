"""Headless Chromium (Debian's chromium + chromium-driver) driven by Selenium.

Every test here is marked ``browser`` and skipped, with the reason, where the browser,
its driver or selenium is missing (CI installs them in ``.ci/run``). Pages are
saved as PNG screenshots into one temp directory whose path is printed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - depends on the dev extra
    webdriver = None  # type: ignore[assignment]

MISSING = (
    "selenium is not installed (pip install -e '.[dev]')"
    if webdriver is None
    else "no headless Chromium here: apt-get install -y chromium chromium-driver"
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists())
    else None
)
if MISSING and os.environ.get("CI") == "true":  # CI installs them: missing there is a failure
    raise RuntimeError(f"browser tests cannot run in CI: {MISSING}")


_SHOTS: list[Path] = []


@pytest.fixture(scope="session")
def screenshots() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="lore-console-screens-"))
    _SHOTS.append(directory)
    return directory


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for directory in _SHOTS:
        terminalreporter.write_line(f"console screenshots: {directory}")


def new_driver(profile: Path) -> webdriver.Chrome:
    """A fresh headless Chromium with its own profile, no background network."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    browser = new_driver(profile)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)
