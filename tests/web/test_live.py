"""Live updates: the server pushes a change (Server-Sent Events) fed by the engine's wake-ups,
on both backends; an idle page costs what an idle worker costs, no page costs nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.conftest import INFO_HASH, magnet
from tests.web.conftest import make_site
from tests.web.conftest import served as serve
from umt.cli.application import Application
from umt.media.sources import parse_source
from umt.web.feed import ChangeFeed


@pytest.fixture
def served(configured: Application) -> Iterator[str]:
    with serve(make_site(configured)) as url:
        yield url


def next_change(lines: Iterator[str]) -> str:
    for line in lines:
        if line == "event: change":
            return next(lines)
    raise AssertionError("the stream ended")


def test_changes_are_pushed_to_an_open_page(served: str, configured: Application) -> None:
    timeout = httpx.Timeout(5.0, read=12.0)  # a change must come well before the keep-alive
    with httpx.stream("GET", f"{served}/events?since=0", timeout=timeout) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines) == "retry: 3000"
        first = next_change(lines)  # the feed's first look: whatever changed before
        run = configured.app.start_acquire(parse_source(magnet(INFO_HASH))).run  # notifies
        second = next_change(lines)
        assert int(second.removeprefix("data: ")) > int(first.removeprefix("data: "))
        # A change that wakes no worker (no NOTIFY on PostgreSQL) is pushed as well.
        configured.app.engine().annotate(run.id, "downloading 42%")
        next_change(lines)
        page = httpx.get(f"{served}/").text
        assert "downloading 42%" in page


def test_the_stream_of_a_page_rendered_before_a_change_catches_up(
    served: str, configured: Application
) -> None:
    with httpx.stream("GET", f"{served}/events?since=0", timeout=12) as stream:
        lines = stream.iter_lines()
        version = next_change(lines).removeprefix("data: ")
        # Another page, rendered at an older version, gets a change at once.
        with httpx.stream("GET", f"{served}/events?since=-1", timeout=12) as late:
            late_lines = late.iter_lines()
            assert next(late_lines) == "retry: 3000"
            assert next_change(late_lines) == f"data: {version}"


def test_no_open_page_reads_nothing_and_an_idle_page_reads_at_the_worker_pace(
    configured: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = configured.app.engine()
    settings = configured.settings.engine
    reads = []
    if engine.database.notifies:
        marker = engine.change_marker
        monkeypatch.setattr(engine, "change_marker",
                            lambda keys: reads.append(1) or marker(keys))
    else:
        version = engine.database.data_version  # type: ignore[attr-defined]
        monkeypatch.setattr(engine.database, "data_version", lambda: reads.append(1) or version())
    feed = ChangeFeed(engine, sqlite_interval=settings.sqlite_poll_interval.total_seconds(),
                      idle_interval=settings.poll_interval.total_seconds())
    if engine.database.notifies:
        # What an idle worker does on PostgreSQL: LISTEN, and a look every poll interval.
        assert feed._interval(busy=False, hot_until=0) == settings.poll_interval.total_seconds()
        assert feed._interval(busy=True, hot_until=0) == 1.0
        # A run falls due (a timer, a lease expiry): its claim notifies nobody, so look then.
        assert feed._interval(busy=False, hot_until=0, due_in=0.3) == pytest.approx(0.35)
        assert feed._interval(busy=False, hot_until=0, due_in=3600) == (
            settings.poll_interval.total_seconds())
    else:
        # What an idle worker does on SQLite: PRAGMA data_version every SQLite poll interval.
        assert feed._interval(busy=False, hot_until=0) == (
            settings.sqlite_poll_interval.total_seconds())

    async def one_page() -> None:
        changed = asyncio.Event()
        feed.subscribe(changed)
        await asyncio.wait_for(changed.wait(), 10)  # the first look
        feed.unsubscribe(changed)

    try:
        asyncio.run(one_page())
        assert reads
        settled = len(reads)
        time.sleep(1.5)  # nobody listens: nothing is read (one look may have been under way)
        assert len(reads) <= settled + 1
    finally:
        feed.close()
