"""umt as a subprocess against a real PostgreSQL: migrate, tables, start, signal, cancel,
status, and a worker stopped with SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from typing import Any

import pytest

from tests.cli.conftest import INFO_HASH, OTHER_HASH, UMT, Cli, magnet


@pytest.fixture
def pg_cli(cli: Cli, pg_url: str) -> Cli:
    cli.env["UMT_DATABASE_URL"] = pg_url
    return cli


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_schema_is_refused_until_migrated(pg_cli: Cli) -> None:
    refused = pg_cli.run("runs")
    assert refused.returncode == 1
    assert refused.stderr.startswith("umt: error: ") and "umt db migrate" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert pg_cli.run("tables").stdout == ""


def test_migrate_tables_start_signal_cancel_status(pg_cli: Cli) -> None:
    migrated = _json(pg_cli.run("db", "migrate", "--json"))
    assert {m["component"] for m in migrated["applied"]} == {"engine", "records"}
    assert "nothing to do" in pg_cli.run("db", "migrate").stdout
    assert _json(pg_cli.run("db", "status", "--json"))["current"] is True

    tables = pg_cli.run("tables")
    assert tables.returncode == 0, tables.stderr
    assert tables.stdout.split() == [
        "umt.attempts", "umt.runs", "umt.schema_migrations", "umt.signals", "umt.steps",
        "umt.workers", "umt_media.catalog", "umt_media.ledger", "umt_media.library_claims",
    ]

    started = _json(pg_cli.run("start-acquire", magnet(), "--json"))
    assert started["created"] is True and started["info_hash"] == INFO_HASH
    run_id = started["run_id"]
    again = _json(pg_cli.run("start-acquire", magnet(), "--json"))
    assert again == {**started, "created": False}

    sent = _json(pg_cli.run("signal", f"download-done:{INFO_HASH}", "--json"))
    assert sent == {**sent, "signal": f"download-done:{INFO_HASH}", "delivered_to": [],
                    "kept": True}

    assert _json(pg_cli.run("cancel", run_id, "--json")) == {
        "run_id": run_id, "status": "canceled", "compensation": "pending"}
    status = _json(pg_cli.run("status", run_id, "--json"))
    assert (status["run_id"], status["workflow"], status["status"]) == (
        run_id, "acquire", "canceled")
    assert status["compensation"] == "pending" and status["steps"] == []

    finished = pg_cli.run("cancel", run_id)
    assert finished.returncode == 1
    assert finished.stderr == f"umt: error: cannot cancel run {run_id}: it is already canceled\n"
    unknown = pg_cli.run("status", "0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90")
    assert unknown.returncode == 2

    listed = _json(pg_cli.run("runs", "--json"))
    assert [run["run_id"] for run in listed] == [run_id]
    assert run_id in pg_cli.run("runs").stdout


def test_worker_subprocess_stops_on_sigterm(pg_cli: Cli) -> None:
    assert pg_cli.run("db", "migrate").returncode == 0
    run_id = _json(pg_cli.run("start-acquire", magnet(OTHER_HASH), "--json"))["run_id"]
    worker = subprocess.Popen([UMT, "worker", "--concurrency", "2"], text=True,
                              env=pg_cli.subprocess_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        assert worker.stderr is not None
        assert "started on" in worker.stderr.readline()
        # The run is claimed and its first step tries the (unreachable) qBittorrent.
        deadline = time.monotonic() + 30
        while _json(pg_cli.run("status", run_id, "--json"))["steps"] == []:
            assert time.monotonic() < deadline, "the worker never started the run"
            time.sleep(0.2)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    assert out == ""
    assert "SIGTERM received" in err and "stopped" in err
    status = _json(pg_cli.run("status", run_id, "--json"))
    assert status["status"] in ("pending", "waiting")
