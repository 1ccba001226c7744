"""The dashboard in a real browser (Debian's chromium driven by Playwright) against real
qbittorrent-nox: start an acquisition from the page and watch it change without reloading,
cancel another run from the page and watch its compensation, on both backends."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.media.conftest import swarm  # noqa: F401  (the seeding qbittorrent-nox)
from tests.media.pipeline import REPO, Pipeline
from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    make_payload,
)
from tests.support.skips import unavailable
from tests.web.conftest import served
from umt.web.server import create_app

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
#: Playwright's own browser download is not reachable: Debian's chromium, headless.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: Set to write the README's screenshots into docs/ (else they go to the test's tmp folder).
SCREENSHOTS_ENV = "UMT_WEB_SCREENSHOTS"
#: Generous: a worker, a real download and a 2 s retention happen in between.
LIVE_TIMEOUT_MS = 120_000

if not shutil.which(CHROMIUM):
    # As root the test command installs it: then a full run fails here (tests/support/skips.py).
    pytest.skip(f"{CHROMIUM} is missing (the test command installs it as root)"
                if os.geteuid() == 0 else
                unavailable("the browser tests of umt web", f"{CHROMIUM} is missing and only "
                            "root may install it"), allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web-browser")


@pytest.fixture(scope="module")
def film(swarm: Swarm, base: Path) -> SeededTorrent:  # noqa: F811
    folder = base / "seeded"
    make_payload(folder, "Browser.Film.2026.2160p.mkv", 8 * 1024 * 1024, seed=11)
    return swarm.seed(folder / "Browser.Film.2026.2160p.mkv")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pipeline]:
    client = QbtInstance.create(tmp_path / "client", local_host_auth=True)
    client.start()
    url = (f"sqlite:///{tmp_path}/umt.db" if request.param == "sqlite"
           else str(request.getfixturevalue("pg_url")))
    pipeline = Pipeline(tmp_path / "umt", client, url)
    client.set_finish_hook(pipeline.hook_program())
    try:
        yield pipeline
    finally:
        pipeline.close()
        client.destroy()


@pytest.fixture
def dashboard(pipeline: Pipeline) -> Iterator[str]:
    """``umt web`` on the pipeline's installation, served by uvicorn on a free port."""
    with served(create_app(pipeline.app, checks=list, token=None)) as url:
        yield url


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1000, "height": 720})
    yield context.new_page()
    context.close()


def screenshot_path(tmp_path: Path, name: str) -> Path:
    if os.environ.get(SCREENSHOTS_ENV):
        return REPO / "docs" / name
    return tmp_path / name


def test_start_from_the_page_and_watch_it_finish_without_reloading(
    pipeline: Pipeline, dashboard: str, page: Page, film: SeededTorrent, tmp_path: Path
) -> None:
    torrent = tmp_path / "Browser.Film.torrent"
    torrent.write_bytes(film.torrent_bytes)
    page.goto(f"{dashboard}/")
    page.click("details.start summary")
    page.set_input_files("input[name=torrent]", str(torrent))
    page.fill("input[name=name]", "Browser Film (2026)")
    page.click("form[action='/runs'] button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}\?notice=started$"))
    expect(page.locator("p.notice")).to_have_text("Acquisition started.")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#live-state")).to_be_visible()  # the live stream is open

    with pipeline.worker():
        status = page.locator("dl.facts .status")
        expect(status).to_have_text("sleeping", timeout=LIVE_TIMEOUT_MS)  # seeding: imported
        expect(page.locator("table.timeline")).to_contain_text("register")
        expect(page.locator("dl.facts")).to_contain_text("Browser Film (2026)/")
        page.screenshot(path=screenshot_path(tmp_path, "web-run.png"), full_page=True)
        expect(status).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    assert page.evaluate("window.notReloaded") is True

    # Two more runs for the picture: one waiting for a worker, one canceled.
    pipeline.start("magnet:?xt=urn:btih:" + "cd" * 20 + "&dn=Another.Film.2025.2160p")
    canceled = pipeline.start("magnet:?xt=urn:btih:" + "ef" * 20 + "&dn=Unwanted.Show.S01")
    pipeline.engine.cancel(canceled)
    page.goto(f"{dashboard}/")
    expect(page.locator("table.runs")).to_contain_text("Browser Film (2026)")
    expect(page.locator("table.runs")).to_contain_text("compensation pending")
    page.screenshot(path=screenshot_path(tmp_path, "web-runs.png"), full_page=True)


def test_cancel_from_the_page_and_watch_the_compensation(
    pipeline: Pipeline, dashboard: str, page: Page
) -> None:
    nobody_seeds = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=Never+Seeded"
    run_id = pipeline.start(nobody_seeds)
    with pipeline.worker():
        page.goto(f"{dashboard}/runs/{run_id}")
        page.evaluate("window.notReloaded = true")
        # The worker adds the torrent and waits for it, live on the page.
        expect(page.locator("dl.facts .status")).to_have_text("waiting",
                                                               timeout=LIVE_TIMEOUT_MS)
        assert page.evaluate("window.notReloaded") is True
        page.click("form.danger button")
        page.wait_for_url(re.compile(rf"/runs/{run_id}\?notice=canceled$"))
        page.evaluate("window.notReloaded = true")
        expect(page.locator("dl.facts .status")).to_have_text("canceled")
        compensation = page.locator("dl.facts .compensation")
        expect(compensation).to_have_text("compensation succeeded", timeout=LIVE_TIMEOUT_MS)
        assert page.evaluate("window.notReloaded") is True
    expect(page.locator("table.timeline")).to_contain_text("(compensation)")
    assert pipeline.client.adapter().find("ab" * 20) is None

    # On a phone nothing is wider than the screen (wide tables scroll inside themselves).
    page.set_viewport_size({"width": 390, "height": 844})
    for path in (f"/runs/{run_id}", "/", "/catalog", "/health"):
        page.goto(f"{dashboard}{path}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_copy_progress_moves_on_the_open_page(
    tmp_path: Path, page: Page, film: SeededTorrent, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest, backend: str,
) -> None:
    """A copy import on a slowed disk: the run page's progress bar advances without a reload
    (bytes, percent and rate come from the copy itself, pushed by the live stream)."""
    import time as clock

    from umt.media.importing.transfer import KernelCopy

    real_copy = KernelCopy.copy

    def slow_copy(self: KernelCopy, offset: int, count: int) -> int:  # ~8 MiB in about 6 s
        clock.sleep(0.72 * count / (1024 * 1024))
        return real_copy(self, offset, count)

    monkeypatch.setattr(KernelCopy, "copy", slow_copy)
    client = QbtInstance.create(tmp_path / "client", local_host_auth=True)
    client.start()
    url = (f"sqlite:///{tmp_path}/umt.db" if backend == "sqlite"
           else str(request.getfixturevalue("pg_url")))
    pipeline = Pipeline(tmp_path / "umt", client, url, import_mode="copy")
    client.set_finish_hook(pipeline.hook_program())
    try:
        torrent = tmp_path / "film.torrent"
        torrent.write_bytes(film.torrent_bytes)
        run_id = pipeline.start(str(torrent), title="Slow Copy Film")
        with served(create_app(pipeline.app, checks=list, token=None)) as site:
            page.goto(f"{site}/runs/{run_id}")
            page.evaluate("window.notReloaded = true")
            with pipeline.worker():
                bar = page.locator("div.progress progress")
                expect(bar).to_be_visible(timeout=LIVE_TIMEOUT_MS)
                first = float(bar.get_attribute("value") or 0)
                expect(page.locator("div.progress span")).to_contain_text("copy-file")
                page.wait_for_function(
                    f"() => {{ const bar = document.querySelector('div.progress progress');"
                    f" return bar !== null && Number(bar.value) > {first}; }}",
                    timeout=LIVE_TIMEOUT_MS,
                )
                expect(page.locator("dl.facts .status")).to_have_text(
                    "sleeping", timeout=LIVE_TIMEOUT_MS)
            assert page.evaluate("window.notReloaded") is True
        [library_file] = pipeline.library_files()
        assert library_file.stat().st_size == film.path.stat().st_size
    finally:
        pipeline.close()
        client.destroy()
