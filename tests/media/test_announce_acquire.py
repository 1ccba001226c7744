"""Media servers and the user told about real acquisitions (real qbittorrent-nox processes on
loopback; Jellyfin, Plex and Apprise's json:// receiver are the documented stand-ins of
tests/support/mediaservers.py: real media servers cannot be installed here)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.media.pipeline import Pipeline
from tests.support.mediaservers import Stand, jellyfin, message_sink, plex
from tests.support.qbittorrent import QbtInstance, SeededTorrent, Swarm, make_payload, wait_until
from umt.cli.main import app as cli_app

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

MiB = 1024 * 1024
TOKEN = "jf-T0KEN-never-shown"
PLEX_TOKEN = "plex-T0KEN-never-shown"
#: Tables are as wide as the terminal; the checks read whole cells.
WIDE = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("announce")


@pytest.fixture(scope="module")
def movie(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded"
    make_payload(folder, "Announced.Film.2026.1080p.mkv", 8 * MiB, seed=14)
    return swarm.seed(folder / "Announced.Film.2026.1080p.mkv")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_pipeline(tmp_path: Path, client: QbtInstance, extra: str) -> Pipeline:
    return Pipeline(tmp_path / "umt", client, f"sqlite:///{tmp_path}/umt.db",
                    extra_config=extra)


def umt(pipeline: Pipeline, *args: str) -> str:
    result = CliRunner().invoke(cli_app, ["--config", str(pipeline.config_path), *args], env=WIDE,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def sink_url(sink: Stand) -> str:
    return sink.url.replace("http://", "json://") + "/"


def torrent_file(tmp_path: Path, seeded: SeededTorrent) -> str:
    path = tmp_path / "film.torrent"
    path.write_bytes(seeded.torrent_bytes)
    return str(path)


def test_an_import_is_scanned_by_jellyfin_and_plex_and_announced_once(
    tmp_path: Path, fresh_client: QbtInstance, movie: SeededTorrent, stands: list[Stand],
) -> None:
    jf = jellyfin(TOKEN)
    sink = message_sink()
    stands += [jf, sink]
    library = tmp_path / "umt" / "library"
    px = plex(PLEX_TOKEN, {"1": ["/elsewhere"], "2": [str(library)]})
    stands.append(px)
    pipeline = make_pipeline(tmp_path, fresh_client, "\n".join([
        "[notify]", f'urls = ["{sink_url(sink)}"]',
        "[[media_servers]]", 'kind = "jellyfin"', f'url = "{jf.url}"', f'token = "{TOKEN}"',
        "[[media_servers]]", 'kind = "plex"', f'url = "{px.url}"', f'token = "{PLEX_TOKEN}"',
    ]))
    try:
        fresh_client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(torrent_file(tmp_path, movie), title="Announced Film (2026)")
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))
        [library_file] = pipeline.library_files()

        [update] = jf.requests_to("/Library/Media/Updated")
        assert update.method == "POST" and update.headers["x-emby-token"] == TOKEN
        assert update.json() == {"Updates": [{"Path": str(library_file),
                                              "UpdateType": "Created"}]}
        [refresh] = px.requests_to("/library/sections/2/refresh")
        assert refresh.headers["x-plex-token"] == PLEX_TOKEN
        assert refresh.query == {"path": [str(library_file.parent)]}
        assert not jf.violations and not px.violations

        [message] = sink.messages()
        assert message["title"] == "umt: Announced Film (2026) imported"
        body = message["message"]
        assert "size: 8.0 MiB" in body and str(library_file) in body and run_id in body
        assert run.output["warnings"] == []
        done = {e.operation for e in pipeline.ledger(run_id) if e.phase == "done"}
        assert {"notify-library:jellyfin", "notify-library:plex",
                "notify:imported:json#1"} <= done

        shown = umt(pipeline, "show", run_id) + umt(pipeline, "runs")
        assert TOKEN not in shown
        assert PLEX_TOKEN not in shown
        assert "warning:" not in shown and "warning)" not in shown
        doctor = CliRunner().invoke(cli_app, ["--config", str(pipeline.config_path), "doctor"],
                                    env=WIDE)
        assert "media server jellyfin" in doctor.stdout and "media server plex" in doctor.stdout
        assert "1 Apprise URL(s) understood: json#1" in doctor.stdout
        assert TOKEN not in doctor.stdout and PLEX_TOKEN not in doctor.stdout
    finally:
        pipeline.close()


def test_a_media_server_down_leaves_the_run_succeeded_with_a_warning(
    tmp_path: Path, fresh_client: QbtInstance, movie: SeededTorrent,
) -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    pipeline = make_pipeline(tmp_path, fresh_client, "\n".join([
        "[notify]", "attempts = 2", 'retry_interval = "1s"',
        "[[media_servers]]", 'kind = "jellyfin"', 'name = "den"', f'url = "{down}"',
        f'token = "{TOKEN}"',
    ]))
    try:
        fresh_client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(torrent_file(tmp_path, movie))
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))
        assert pipeline.library_files()  # the import stays
        [warning] = run.output["warnings"]
        assert warning.startswith("media server gave up after 2 attempt(s): den (")
        assert "is not reachable" in warning

        show = umt(pipeline, "show", run_id)
        assert "warning: media server gave up after 2 attempt(s): den" in show
        runs = umt(pipeline, "runs")
        assert "succeeded (1 warning)" in runs
        listed = json.loads(umt(pipeline, "runs", "--json"))
        assert listed[0]["warnings"] == [warning]
        assert json.loads(umt(pipeline, "show", run_id, "--json"))["warnings"] == [warning]
        assert TOKEN not in show + runs
        doctor = CliRunner().invoke(cli_app, ["--config", str(pipeline.config_path), "doctor"],
                                    env=WIDE)
        assert doctor.exit_code == 1 and "media server den" in doctor.stdout
        assert TOKEN not in doctor.stdout
    finally:
        pipeline.close()


def test_a_canceled_run_is_announced_once(
    tmp_path: Path, fresh_client: QbtInstance, stands: list[Stand],
) -> None:
    sink = message_sink()
    stands.append(sink)
    pipeline = make_pipeline(tmp_path, fresh_client,
                             "\n".join(["[notify]", f'urls = ["{sink_url(sink)}"]']))
    hostile = "Nobody.Seeds.This\x1b]0;pwned\x07" + "y" * 300
    magnet = "magnet:?xt=urn:btih:" + "ab" * 20
    try:
        run_id = pipeline.start(magnet, title=hostile)
        with pipeline.worker():
            wait_until(lambda: pipeline.engine.get(run_id).status == "waiting", timeout=60,
                       what="the run to wait for its download")
            pipeline.engine.cancel(run_id)
            run = pipeline.wait(run_id, timeout=60)
        assert run.status == "canceled" and run.compensation == "succeeded"
        [message] = sink.messages()
        assert message["title"].endswith(" canceled") and "\x1b" not in message["title"]
        assert len(message["title"]) < 160
        assert run_id in message["message"]
        steps = [s.name for s in pipeline.engine.steps(run_id) if s.phase == "compensation"]
        assert steps[-1] == "notify-outcome"
    finally:
        pipeline.close()


def test_a_stalled_download_is_announced_as_stalled_with_its_reason(
    tmp_path: Path, fresh_client: QbtInstance, stands: list[Stand],
) -> None:
    sink = message_sink()
    stands.append(sink)
    pipeline = Pipeline(tmp_path / "umt", fresh_client, f"sqlite:///{tmp_path}/umt.db",
                        stall_timeout="2s",
                        extra_config="\n".join(["[notify]", f'urls = ["{sink_url(sink)}"]']))
    try:
        run_id = pipeline.start("magnet:?xt=urn:btih:" + "cd" * 20, title="Nobody Seeds")
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=120)
        assert run.status == "failed" and run.compensation == "succeeded", run.error
        [message] = sink.messages()
        assert message["title"] == "umt: Nobody Seeds stalled"
        assert "reason: step 'check-progress' failed" in message["message"]
        assert "no progress for" in message["message"] and run_id in message["message"]
    finally:
        pipeline.close()


def test_a_run_started_before_the_upgrade_finishes_with_its_own_steps(
    tmp_path: Path, fresh_client: QbtInstance, movie: SeededTorrent, stands: list[Stand],
) -> None:
    """A version-1 run (umt before notify-library) is claimed by today's worker and finishes as
    it began: no step it never had, no drift, no run stranded by the upgrade."""
    jf = jellyfin(TOKEN)
    stands.append(jf)
    pipeline = make_pipeline(tmp_path, fresh_client, "\n".join([
        "[[media_servers]]", 'kind = "jellyfin"', f'url = "{jf.url}"', f'token = "{TOKEN}"',
    ]))
    try:
        fresh_client.set_finish_hook(pipeline.hook_program())
        # The run is started as the earlier umt started it …
        pipeline.app.__dict__["acquire_workflow"] = pipeline.app.acquire_workflows["1"]
        run_id = pipeline.start(torrent_file(tmp_path, movie), title="Old Film")
        del pipeline.app.__dict__["acquire_workflow"]
        # … and today's worker, which starts version 2, runs it.
        assert pipeline.app.acquire_workflow.version == "2"
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert (run.version, run.status) == ("1", "succeeded"), (run.error, run.detail)
        names = [step.name for step in pipeline.engine.steps(run_id)]
        assert "cleanup" in names and not [n for n in names if n.startswith("notify")]
        assert jf.requests_to("/Library/Media/Updated") == []
        assert len(pipeline.library_files()) == 1
    finally:
        pipeline.close()
