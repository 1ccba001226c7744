"""Telling media servers and the user: the HTTP calls against documented stand-ins, and the
steps' promises (retried, idempotent, once per event, a warning instead of a failure)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.mediaservers import Stand, jellyfin, message_sink, plex
from umt.cli.main import app
from umt.engine import Engine, Registry, WorkerOptions, Workflow, open_database
from umt.media import announce
from umt.media.mediaservers import MediaServer, MediaServerError
from umt.media.notifier import NotifyTarget, syntax_problem, targets
from umt.records import RECORDS_MIGRATIONS, business_schema, ledger

TOKEN = "s3cr3t-t0ken-value"


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


# ---------------------------------------------------------------------- HTTP calls


@pytest.mark.parametrize("kind", ["jellyfin", "emby"])
def test_jellyfin_and_emby_are_told_the_imported_files(stands: list[Stand], kind: str) -> None:
    stand = jellyfin(TOKEN)
    stands.append(stand)
    server = MediaServer(kind, kind, stand.url, TOKEN)  # type: ignore[arg-type]
    path = "/library/Film (2026)/Film.2026.mkv"
    assert server.scan([path]) == [path]
    [request] = stand.requests_to("/Library/Media/Updated")
    assert request.method == "POST" and request.headers["x-emby-token"] == TOKEN
    assert request.json() == {"Updates": [{"Path": path, "UpdateType": "Created"}]}
    assert "version 10.9.11" in server.check()
    assert not stand.violations


def test_plex_scans_the_folder_in_the_section_that_holds_it(stands: list[Stand]) -> None:
    stand = plex(TOKEN, {"1": ["/srv/tv"], "2": ["/srv/movies", "/mnt/more"], "7": ["/srv"]})
    stands.append(stand)
    server = MediaServer("plex", "plex", stand.url, TOKEN)
    scanned = server.scan(["/srv/movies/Film (2026)/Film.mkv", "/srv/movies/Film (2026)/a.srt"])
    assert scanned == ["/srv/movies/Film (2026)"]
    [listing] = stand.requests_to("/library/sections")
    assert listing.headers["x-plex-token"] == TOKEN
    # The deepest section that holds the folder, not the one above it.
    [refresh] = stand.requests_to("/library/sections/2/refresh")
    assert refresh.method == "GET" and refresh.headers["x-plex-token"] == TOKEN
    assert refresh.query == {"path": ["/srv/movies/Film (2026)"]}
    assert "X-Plex-Token" not in refresh.query
    assert server.check() == "token accepted, 3 library section(s)"
    assert not stand.violations


def test_plex_without_a_section_for_the_path_is_an_error(stands: list[Stand]) -> None:
    stand = plex(TOKEN, {"1": ["/srv/tv"]})
    stands.append(stand)
    with pytest.raises(MediaServerError, match="no Plex library section holds /srv/movies/X"):
        MediaServer("plex", "plex", stand.url, TOKEN).scan(["/srv/movies/X/x.mkv"])


def test_the_path_as_the_server_sees_the_library(stands: list[Stand]) -> None:
    stand = jellyfin(TOKEN)
    stands.append(stand)
    server = MediaServer("jellyfin", "jf", stand.url, TOKEN, library_path="/media",
                         library_dir="/srv/library")
    assert server.scan(["/srv/library/F (2026)/f.mkv"]) == ["/media/F (2026)/f.mkv"]


@pytest.mark.parametrize("kind", ["jellyfin", "plex"])
def test_a_refused_token_and_a_server_down_say_so_without_the_token(
    stands: list[Stand], kind: str
) -> None:
    stand = jellyfin("other") if kind == "jellyfin" else plex("other", {})
    stands.append(stand)
    server = MediaServer(kind, kind, stand.url, TOKEN)  # type: ignore[arg-type]
    with pytest.raises(MediaServerError, match=r"401 \(the token was refused") as refused:
        server.check()
    down = MediaServer(kind, kind, closed_port_url(), TOKEN)  # type: ignore[arg-type]
    with pytest.raises(MediaServerError, match="is not reachable") as unreachable:
        down.scan(["/x/y.mkv"])
    for error in (refused.value, unreachable.value):
        assert TOKEN not in str(error)
    assert TOKEN not in repr(server)


def test_apprise_sends_to_a_json_endpoint(stands: list[Stand]) -> None:
    sink = message_sink()
    stands.append(sink)
    [target] = targets([sink.url.replace("http://", "json://") + "/"])
    target.send("umt: Film imported", "Film: imported\nrun: r1")
    [message] = sink.messages()
    assert message["title"] == "umt: Film imported"
    assert message["message"] == "Film: imported\nrun: r1"
    assert target.label == "json#1"


def test_apprise_url_syntax_is_checked_without_sending() -> None:
    assert syntax_problem("json://127.0.0.1:9/") is None
    assert syntax_problem("ntfys://ntfy.sh/umt-topic") is None
    assert syntax_problem("nosuchservice://token@x/") is not None


def test_a_message_names_title_size_paths_and_run_with_a_bounded_title() -> None:
    hostile = "Film\x1b[2J" + "x" * 500
    title, body = announce.message(
        announce.IMPORTED, title=hostile, run_id="r-1", size=3 * 1024**3,
        paths=[f"/lib/F/{n}.mkv" for n in range(7)],
    )
    assert "\x1b" not in title + body and "Film\\x1b[2J" in body
    first = body.splitlines()[0]
    assert len(first) <= announce.TITLE_CHARS + len(": imported")
    assert "size: 3.0 GiB" in body and "run: r-1" in body
    assert "/lib/F/0.mkv" in body and "and 2 more" in body and "/lib/F/6.mkv" not in body


def test_outcome_events() -> None:
    stalled = {"type": "StepFailed", "message": "step 'check-progress' failed after 1 "
               "attempt(s): no progress for 0:10:00 (acquire.stall_timeout): 12% (stalledDL)"}
    assert announce.outcome_event("failed", stalled) == announce.STALLED
    assert announce.outcome_event("failed", {"message": "step 'copy-file' failed"}) == "failed"
    assert announce.outcome_event("canceled", stalled) == announce.CANCELED


# ---------------------------------------------------------------------- the steps' promises


FAST_RETRY = announce.retry_policy(3, timedelta(0))


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    url = (f"sqlite:///{tmp_path / 'umt.db'}" if request.param == "sqlite"
           else str(request.getfixturevalue("pg_url")))
    database = open_database(url, schemas=("umt", business_schema("umt")))
    engine = Engine(database, migration_sets=[RECORDS_MIGRATIONS])
    engine.migrate()
    yield engine
    engine.close()


def run_to_the_end(engine: Engine, workflow: Workflow, value: Any = None) -> str:
    run_id = engine.start(workflow, value).run.id
    options = WorkerOptions(concurrency=1, poll_interval=timedelta(seconds=0.05))
    for _ in range(20):
        engine.worker(Registry([workflow]), options).drain()
        if engine.get(run_id).finished:
            return run_id
    raise AssertionError(f"run {run_id} did not finish: {engine.get(run_id)}")


def test_a_server_down_for_good_is_a_warning_and_the_others_are_asked_once(
    engine: Engine, stands: list[Stand]
) -> None:
    up = jellyfin(TOKEN)
    stands.append(up)
    servers = [MediaServer("jellyfin", "up", up.url, TOKEN),
               MediaServer("plex", "down", closed_port_url(), TOKEN)]

    def flow(ctx: Any, _: Any) -> Any:
        return ctx.step("notify-library", lambda step: announce.notify_library(
            step, ["/lib/F/f.mkv"], servers, FAST_RETRY), retry=FAST_RETRY)

    run_id = run_to_the_end(engine, Workflow("scan", "1", flow))
    run = engine.get(run_id)
    assert run.status == "succeeded"
    assert run.output["done"] == ["up"]
    [warning] = run.output["warnings"]
    assert warning.startswith("media server gave up after 3 attempt(s): down (")
    assert TOKEN not in warning
    # Retried three times in all, but the server that answered was asked once.
    assert len(up.requests_to("/Library/Media/Updated")) == 1
    phases = [(e.operation, e.phase) for e in ledger.entries_of_run(engine.database, run_id)]
    assert phases.count(("notify-library:down", "failed")) == 3
    assert phases.count(("notify-library:up", "done")) == 1


def test_a_message_is_sent_once_per_event_even_after_an_interrupted_attempt(
    engine: Engine, stands: list[Stand]
) -> None:
    sink = message_sink()
    stands.append(sink)
    url = sink.url.replace("http://", "json://") + "/"
    down = "json://" + closed_port_url().removeprefix("http://") + "/"
    senders = targets([url, down])

    def flow(ctx: Any, _: Any) -> Any:
        first = ctx.step("notify-imported", lambda step: announce.notify_user(
            step, "imported", "t", "b", senders, FAST_RETRY), retry=FAST_RETRY)
        # A worker that died while sending left an intent without an outcome.
        ctx.step("crash-while-sending", lambda step: ledger.record(
            step, "notify:failed:json#1", ledger.INTENT, {}))
        second = ctx.step("notify-outcome", lambda step: announce.notify_user(
            step, "failed", "t", "b", senders[:1], FAST_RETRY), retry=FAST_RETRY)
        return {"first": first, "second": second}

    run_id = run_to_the_end(engine, Workflow("tell", "1", flow))
    output = engine.get(run_id).output
    assert engine.get(run_id).status == "succeeded"
    assert len(sink.messages()) == 1  # three attempts, one message
    assert output["first"]["done"] == ["json#1"]
    assert "json#2" in output["first"]["warnings"][0]
    # The interrupted send is not repeated: at most once per event.
    assert output["second"] == {"done": ["json#1"], "warnings": []}
    skipped = [e for e in ledger.entries_of_run(engine.database, run_id)
               if e.operation == "notify:failed:json#1" and e.phase == "skipped"]
    assert len(skipped) == 1


def test_no_server_and_no_service_is_nothing_to_do(engine: Engine) -> None:
    def flow(ctx: Any, _: Any) -> Any:
        return ctx.step("notify-library", lambda step: announce.notify_library(
            step, ["/x"], [], FAST_RETRY))

    run_id = run_to_the_end(engine, Workflow("none", "1", flow))
    assert engine.get(run_id).output == {"done": [], "warnings": []}


def test_notify_target_repr_hides_the_url() -> None:
    assert "secret" not in repr(NotifyTarget("tgram://secret/123", 1))


def test_doctor_checks_each_media_server_and_notification_url(
    tmp_path: Path, stands: list[Stand]
) -> None:
    refusing = jellyfin("the-right-one")
    accepting = plex(TOKEN, {"1": ["/srv"]})
    stands += [refusing, accepting]
    config = tmp_path / "umt.toml"
    config.write_text("\n".join([
        "[database]", f'url = "sqlite:///{tmp_path}/umt.db"',
        "[qbittorrent]", f'url = "{closed_port_url()}"',
        "[library]", f'dir = "{tmp_path}"',
        "[notify]", f'urls = ["json://127.0.0.1:9/{TOKEN}", "nosuchservice://{TOKEN}@x/"]',
        "[[media_servers]]", 'kind = "jellyfin"', f'url = "{refusing.url}"', f'token = "{TOKEN}"',
        "[[media_servers]]", 'kind = "plex"', f'url = "{accepting.url}"', f'token = "{TOKEN}"',
    ]))
    config.chmod(0o600)
    result = CliRunner().invoke(app, ["--config", str(config), "doctor", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert TOKEN not in result.stdout + result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["media server jellyfin"]["status"] == "fail"
    assert "401 (the token was refused)" in checks["media server jellyfin"]["detail"]
    assert checks["media server plex"]["status"] == "ok"
    assert checks["notifications"]["status"] == "fail"
    assert checks["notifications"]["detail"].startswith("nosuchservice#2: ")
    assert "json#1" not in checks["notifications"]["detail"]
    # Nothing was sent: the json:// URL was only parsed.
    assert not refusing.requests_to("/Library/Media/Updated")
