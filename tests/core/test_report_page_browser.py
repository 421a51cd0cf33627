"""The report page in a real headless browser (issue 94): Debian's chromium, driven by Selenium,
opens ``report/index.html`` from disk, finds the significance table, clicks through from a system
to its section and to a sentence, and the page logs no console error.

Needs ``chromium`` and ``chromium-driver`` (Debian) and ``selenium`` (pip); skipped without them
unless ``RERANK_REQUIRE_BROWSER`` is set (then it fails, naming what is missing)."""

import importlib.util
import os
import shutil

import pytest

from rerank.cli import main
from tests.core.test_significance_report import _experiment

MISSING = [
    what
    for what, found in (
        ("chromium", shutil.which("chromium")),
        ("chromedriver", shutil.which("chromedriver")),
        ("selenium", importlib.util.find_spec("selenium")),
    )
    if not found
]
pytestmark = pytest.mark.skipif(
    bool(MISSING) and not os.environ.get("RERANK_REQUIRE_BROWSER"),
    reason=f"needs a headless browser: {', '.join(MISSING)} not installed",
)


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    yield driver
    driver.quit()


def test_the_report_page_opens_and_clicks_through_to_a_sentence(tmp_path, browser):
    from selenium.webdriver.common.by import By

    exp, _, _ = _experiment(tmp_path)
    argv = [
        "report",
        str(exp),
        "--metrics",
        "bleu,chrf",
        "--shuffles",
        "200",
        "--resamples",
        "20",
        "--bootstrap",
        "200",
    ]
    assert main(argv + ["--analysis", "--source", str(exp / "data/test.en")]) == 0
    page = exp / "report" / "index.html"
    browser.get(page.as_uri())
    table = browser.find_element(By.ID, "significance")
    assert "+nmt" in table.text and "baseline" in table.text and "Δ [" in table.text
    table.find_element(By.LINK_TEXT, "+nmt").click()
    assert browser.current_url.endswith("#sys-_nmt")
    section = browser.find_element(By.ID, "sys-_nmt")
    assert section.is_displayed() and "Sentences by gain" in section.text
    first = section.find_element(By.CSS_SELECTOR, "table.sent tr[id] a")
    sentence_id = first.text
    first.click()
    assert browser.current_url.endswith(f"#s-_nmt-{sentence_id}")
    row = browser.find_element(By.ID, f"s-_nmt-{sentence_id}")
    assert row.is_displayed() and len(row.find_elements(By.TAG_NAME, "td")) == 8
    assert section.find_elements(By.TAG_NAME, "svg")  # the buckets' charts
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
