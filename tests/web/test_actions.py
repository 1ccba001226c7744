"""Actions from the page go where the CLI's go, with the CLI's validation and messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markupsafe import escape
from typer.testing import CliRunner

from tests.cli.conftest import INFO_HASH, magnet
from tests.support.qbittorrent import make_payload, make_torrent
from tests.web.conftest import Site
from umt.cli.main import app as cli_app


def cli_error(*args: str) -> str:
    """The one-line message ``umt`` prints for these arguments (same environment)."""
    result = CliRunner().invoke(cli_app, list(args))
    assert result.exit_code == 2, result.output
    found = re.fullmatch(r"umt: error: (.*)\n", result.stderr)
    assert found is not None, result.stderr
    return found.group(1)


def error_shown(page: str) -> str:
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', page, re.S)
    assert found is not None, page
    return found.group(1)


def test_start_from_a_magnet_is_the_cli_start(site: Site) -> None:
    started = site.post("/runs", {"source": magnet(INFO_HASH, "Some Film"), "name": "My Title",
                                  "retention": "3d"})
    assert started.status_code == 303
    run_id = re.fullmatch(r"/runs/([0-9a-f-]{36})\?notice=started", started.headers["location"])
    assert run_id is not None
    run = site.engine.get(run_id.group(1))
    assert run.input["title"] == "My Title" and run.input["retention_seconds"] == 3 * 86400
    assert run.idempotency_key == INFO_HASH
    page = site.client.get(started.headers["location"]).text
    assert "Acquisition started." in page and "My Title" in page

    fields = {"source": magnet(INFO_HASH, "Some Film"), "name": "My Title", "retention": "3d"}
    again = site.post("/runs", fields)
    assert again.headers["location"] == f"/runs/{run.id}?notice=exists"
    conflict = site.post("/runs", {**fields, "name": "Another Title"})
    assert conflict.status_code == 409 and "idempotency key" in error_shown(conflict.text)


def test_start_from_an_uploaded_torrent(site: Site, tmp_path: Path) -> None:
    make_payload(tmp_path / "payload", "Uploaded Film.mkv", 4096, seed=1)
    data = make_torrent(tmp_path / "payload" / "Uploaded Film.mkv")
    started = site.post("/runs", files={"torrent": ("film.torrent", data)})
    assert started.status_code == 303
    run_id = started.headers["location"].split("/")[2].split("?")[0]
    run = site.engine.get(run_id)
    assert run.input["title"] == "Uploaded Film.mkv" and run.input["source"]["kind"] == "torrent"


@pytest.mark.parametrize("source", [
    "magnet:?dn=no-hash",
    "magnet:?xt=urn:btih:1234",
    "ftp://example.org/film.torrent",
])
def test_a_bad_source_gets_the_cli_message_and_changes_nothing(site: Site, source: str) -> None:
    refused = site.post("/runs", {"source": source})
    assert refused.status_code == 400
    assert error_shown(refused.text) == escape(cli_error("start-acquire", source))
    assert str(escape(source)) in refused.text  # the form keeps what was typed
    assert site.engine.list_runs() == []


def test_a_bad_uploaded_file_and_a_bad_retention_are_refused(site: Site) -> None:
    refused = site.post("/runs", files={"torrent": ("junk.torrent", b"not bencode")})
    assert refused.status_code == 400
    assert error_shown(refused.text).startswith("junk.torrent: not a valid torrent file")
    retention = site.post("/runs", {"source": magnet(), "retention": "soon"})
    assert retention.status_code == 400
    cli_message = cli_error("start-acquire", magnet(), "--retention", "soon")
    assert error_shown(retention.text) == escape(cli_message.replace("--retention", "retention"))
    assert site.engine.list_runs() == []


def test_a_server_path_is_not_a_source_from_the_page(site: Site, tmp_path: Path) -> None:
    refused = site.post("/runs", {"source": "/etc/passwd"})
    assert refused.status_code == 400
    assert "paste a magnet link" in error_shown(refused.text)


def test_cancel_twice_and_cancel_unknown(site: Site) -> None:
    started = site.post("/runs", {"source": magnet()})
    run_id = started.headers["location"].split("/")[2].split("?")[0]
    assert site.post(f"/runs/{run_id}/cancel").status_code == 303
    again = site.post(f"/runs/{run_id}/cancel")
    assert again.status_code == 409
    assert error_shown(again.text) == f"cannot cancel run {run_id}: it is already canceled"
    unknown = site.post("/runs/0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90/cancel")
    assert unknown.status_code == 404


def test_signals_kept_refused_and_malformed(site: Site) -> None:
    kept = site.post("/signal", {"name": f"download-done:{INFO_HASH}"})
    assert kept.headers["location"] == "/?notice=kept"
    assert "Signal kept: no run waits for it yet." in site.client.get("/?notice=kept").text
    bad_name = site.post("/signal", {"name": "has space"})
    assert bad_name.status_code == 400
    assert error_shown(bad_name.text) == escape(cli_error("signal", "has space"))
    bad_json = site.post("/signal", {"name": "ok", "data": "{nope"})
    assert bad_json.status_code == 400
    assert error_shown(bad_json.text).startswith("data: not valid JSON")


def test_get_never_changes_anything(site: Site) -> None:
    started = site.post("/runs", {"source": magnet()})
    run_id = started.headers["location"].split("/")[2].split("?")[0]
    assert site.client.get(f"/runs/{run_id}/cancel").status_code == 405
    assert site.client.get("/signal?name=x").status_code == 405
    assert site.engine.get(run_id).status == "pending"
