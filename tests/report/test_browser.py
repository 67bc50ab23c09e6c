"""report.html as a person sees it: opened offline in headless Chromium (Debian's package,
driven by Playwright), it loads without an error, asks the network for nothing and shows every
figure. Skipped with the reason where Chromium or Playwright is absent; on CI (``CI=true``),
which installs both, their absence fails the test instead."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from evolve.report import write_comparison
from tests.report.test_html_reports import parse

pytestmark = pytest.mark.slow  # a real browser (~12 s of CPU with its calibration runs)

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"]
"""Headless Chromium as root on a closed network (without the background-networking flags it
tries Google's hosts at every start)."""


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI installs it (see .ci/run), so the browser test must run there")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        _missing("Chromium is not installed (Debian: `apt-get install chromium`)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright is not installed (`pip install -e '.[test]'`)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def open_offline(browser, path: Path, screenshot: Path) -> list[dict]:
    """Open ``path`` in a fresh page; fail on any console error, page error, failed or
    non-local request; return the state of every image after load."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url[:80]}"))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(f"network: {r.url}"))
    page.goto(path.resolve().as_uri(), wait_until="load")
    images = page.evaluate("""Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth,
        height: i.naturalHeight, shown: i.getBoundingClientRect().width, alt: i.alt}))""")
    title = page.title()
    page.screenshot(path=str(screenshot), full_page=True)
    page.close()
    assert problems == []
    assert title
    return images


def _all_shown(images: list[dict], expected: int) -> None:
    assert len(images) == expected
    for img in images:
        assert img["complete"] and img["width"] > 100 and img["height"] > 100 and img["shown"] > 100, img
        assert img["alt"]  # every figure says what it shows


@pytest.mark.full_report  # checks the PNG figures: drawn in a copy of the shared (light) run
def test_calibration_report_opens_offline_with_every_figure(browser, calibration_runs, tmp_path):
    from evolve.report import write_report

    run = shutil.copytree(calibration_runs[0], tmp_path / "run")
    write_report(run)
    html = run / "report.html"
    images = open_offline(browser, html, tmp_path / "calibration.png")
    _all_shown(images, len(parse(html).images))
    assert len(images) >= 6
    assert (tmp_path / "calibration.png").stat().st_size > 10_000


@pytest.mark.full_report  # checks the PNG figures
def test_bench_report_opens_offline_with_every_figure(browser, bench_run, tmp_path):
    from evolve.report import write_bench_report

    write_bench_report(bench_run, n_boot=50)
    images = open_offline(browser, bench_run / "report.html", tmp_path / "bench.png")
    _all_shown(images, 3)


def test_comparison_opens_offline(browser, calibration_runs, tmp_path):
    write_comparison(list(calibration_runs), tmp_path / "cmp", n_boot=50)
    _all_shown(open_offline(browser, tmp_path / "cmp" / "report.html", tmp_path / "cmp.png"), 1)
