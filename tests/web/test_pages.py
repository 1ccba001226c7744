"""The pages show what the CLI shows: runs (filter, search, keyset pages), a run's timeline,
ledger and compensation, the catalog, the doctor checks and the live workers."""

from __future__ import annotations

import html
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from markupsafe import escape

from tests.cli.conftest import INFO_HASH, OTHER_HASH, magnet
from tests.support.qbittorrent import wait_until
from tests.web.conftest import Site
from umt.engine import WorkerOptions, Workflow
from umt.engine.jsonvalues import canonical_json
from umt.media.sources import parse_source
from umt.records import PACKAGE
from umt.web import pages


def start(site: Site, info_hash: str, name: str) -> str:
    return site.app.start_acquire(parse_source(magnet(info_hash, name))).run.id


def titles(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<a href="/runs/[^"]+">([^<]*)</a>', page)]


def a_hash(number: int) -> str:
    return f"{number:040x}"


def test_runs_newest_first_filtered_searched_and_paged_by_key(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [start(site, a_hash(n + 1), f"Film {n}") for n in range(5)]
    site.engine.cancel(ids[1])
    monkeypatch.setattr(pages, "PAGE_SIZE", 2)

    first = site.client.get("/")
    assert first.status_code == 200
    assert titles(first.text) == ["Film 4", "Film 3"]
    older = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert older is not None and "offset" not in older.group(1)
    second = site.client.get(html.unescape(older.group(1)))
    assert titles(second.text) == ["Film 2", "Film 1"]
    third_link = re.search(r'<a href="([^"]+)" rel="next">', second.text)
    assert third_link is not None
    third = site.client.get(html.unescape(third_link.group(1)))
    assert titles(third.text) == ["Film 0"] and 'rel="next"' not in third.text

    assert titles(site.client.get("/?status=canceled").text) == ["Film 1"]
    assert titles(site.client.get("/?q=film+3").text) == ["Film 3"]
    assert titles(site.client.get(f"/?q={a_hash(3)[-6:]}").text) == ["Film 2"]
    assert "No runs with status waiting" in site.client.get("/?status=waiting").text
    # A LIKE wildcard typed in the box is a character, not a wildcard.
    assert titles(site.client.get("/?q=%25").text) == []


def _confirming(ctx: Any, value: Any) -> Any:
    text = ctx.step("compose", lambda step: f"hello {value}")
    ctx.wait_for_signal("confirm", "confirm:web")
    return {"text": text}


CONFIRMING = Workflow("confirming", "1", _confirming)


def test_run_page_shows_timeline_awaited_signal_and_output(site: Site) -> None:
    run = site.engine.start(CONFIRMING, "world").run
    site.engine.worker([CONFIRMING]).drain()

    page = site.client.get(f"/runs/{run.id}")
    assert page.status_code == 200
    text = page.text
    assert "compose" in text and "attempt 1" in text
    assert "<code>confirm:web</code>" in text and "Send this signal" in text
    assert 'class="status status-waiting"' in text

    sent = site.post("/signal", {"name": "confirm:web", "run": run.id})
    assert sent.status_code == 303
    assert sent.headers["location"] == f"/runs/{run.id}?notice=delivered"
    site.engine.worker([CONFIRMING]).drain()
    done = site.client.get(sent.headers["location"]).text
    assert "Signal delivered." in done
    assert 'class="status status-succeeded"' in done
    assert str(escape('{"text": "hello world"}')) in done
    assert "Cancel this run" not in done


def test_canceled_run_shows_its_compensation(site: Site) -> None:
    run_id = start(site, INFO_HASH, "Some Film")
    canceled = site.post(f"/runs/{run_id}/cancel")
    assert canceled.status_code == 303
    page = site.client.get(canceled.headers["location"]).text
    assert "Run canceled; a worker runs its compensation." in page
    assert "status-canceled" in page and "compensation pending" in page
    listed = site.client.get("/").text
    assert "compensation pending" in listed


def test_unknown_and_malformed_runs_are_404(site: Site) -> None:
    assert site.client.get("/runs/0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90").status_code == 404
    assert site.client.get("/runs/not-a-run").status_code == 404


def test_catalog_lists_and_searches(site: Site) -> None:
    run_a = start(site, INFO_HASH, "Alpha")
    run_b = start(site, OTHER_HASH, "Beta")
    database = site.engine.database
    insert = database.query_set(PACKAGE)["insert_catalog_item"]
    now = datetime.now(UTC)
    with database.transaction() as session:
        for run_id, title, info_hash, age in ((run_a, "Alpha Film", INFO_HASH, 2),
                                              (run_b, "Beta Film", OTHER_HASH, 1)):
            session.execute(insert, {
                "run_id": run_id, "title": title, "info_hash": info_hash,
                "library_paths": canonical_json([f"/library/{title}/{title}.mkv"]), "size": 2048,
                "content_hash": None, "import_method": "hardlink",
                "imported_at": now - timedelta(minutes=age)})
    everything = site.client.get("/catalog").text
    assert everything.index("Beta Film") < everything.index("Alpha Film")
    assert "/library/Alpha Film/Alpha Film.mkv" in everything and "2.0 KiB" in everything
    found = site.client.get("/catalog?q=alpha").text
    assert "Alpha Film" in found and "Beta Film" not in found
    assert "Nothing in the catalog matches" in site.client.get("/catalog?q=gamma").text
    assert "Alpha Film" in site.client.get(f"/catalog?q={INFO_HASH[:12]}").text


def test_health_shows_doctor_checks_and_live_workers(site: Site) -> None:
    page = site.client.get("/health").text
    for check in ("config", "database", "qbittorrent", "library"):
        assert f"<td>{check}</td>" in page
    assert "verdict-fail" in page  # qBittorrent is not running in this test
    assert "No worker is alive" in page
    site.engine.store.register_worker(
        "0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90", host_key="test-host", hostname="media-box",
        pid=4242, process_start="1", workflows=["acquire@1"])
    page = site.client.get("/health").text
    assert "<td>media-box</td><td>4242</td>" in page


def test_pages_work_without_javascript_and_fit_a_phone(site: Site) -> None:
    page = site.client.get("/").text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert '<form method="post" action="/runs" enctype="multipart/form-data">' in page
    assert '<section id="live" data-events="/events?since=' in page
    css = site.client.get("/static/app.css")
    assert css.status_code == 200 and "@media (max-width: 40rem)" in css.text


RELEASE = threading.Event()


def _copying(ctx: Any, value: Any) -> Any:
    def copy(step: Any) -> str:
        step.progress(512 * 1024, 2 * 1024 * 1024, file="Film<1>.mkv")
        RELEASE.wait(30)
        return "copied"

    return ctx.step("copy-file", copy)


COPYING = Workflow("copying", "1", _copying)


def test_copy_progress_shows_on_the_runs_and_the_run_page(site: Site) -> None:
    run = site.engine.start(COPYING, None).run
    worker = site.engine.worker([COPYING], WorkerOptions(poll_interval=timedelta(seconds=0.2)))
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    RELEASE.clear()
    thread.start()
    try:
        wait_until(lambda: any(a.progress for a in site.engine.running_attempts([run.id])),
                   timeout=20, what="the copy to report progress")
        shown = "copy-file Film&lt;1&gt;.mkv: 512.0 KiB of 2.0 MiB (25%)"
        listed = site.client.get("/").text
        assert shown in listed and '<progress max="100" value="25">' in listed
        page = site.client.get(f"/runs/{run.id}").text
        assert shown in page and "/s, " in page and " left" in page  # rate and ETA
    finally:
        RELEASE.set()
        stop.set()
        thread.join(20)
    assert site.engine.get(run.id).status == "succeeded"
