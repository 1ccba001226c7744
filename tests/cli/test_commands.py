"""Each command's human and JSON output and exit codes, in-process on the embedded SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import INFO_HASH, OTHER_HASH, Cli, magnet
from umt.media.acquire import WORKFLOW_VERSION

RUN_ID = "0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90"


def test_start_acquire_prints_the_run_id_and_creates_one_run(cli: Cli) -> None:
    result = cli.ok("start-acquire", magnet())
    run_id = result.stdout.strip()
    assert len(run_id) == 36
    assert "started acquiring 'Some Film [2160p]'" in result.stderr
    again = cli.json("start-acquire", magnet())
    assert again == {"run_id": run_id, "status": "pending", "created": False,
                     "info_hash": INFO_HASH}
    assert cli.json("runs")[0]["title"] == "Some Film [2160p]"
    assert len(cli.json("runs")) == 1


def test_start_acquire_json_and_options(cli: Cli) -> None:
    started = cli.json("start-acquire", magnet(), "--name", "My Film", "--retention", "0",
                       "--idempotency-key", "k1")
    assert started["created"] is True and started["status"] == "pending"
    assert started["info_hash"] == INFO_HASH
    status = cli.json("status", started["run_id"])
    assert status["title"] == "My Film"
    other = cli.json("start-acquire", magnet(), "--idempotency-key", "k2", "--name", "My Film",
                     "--retention", "0")
    assert other["created"] is True and other["run_id"] != started["run_id"]


def test_start_acquire_from_a_torrent_file(cli: Cli, tmp_path: Path) -> None:
    torf = pytest.importorskip("torf")
    payload = tmp_path / "payload.mkv"
    payload.write_bytes(b"x" * 40_000)
    torrent = torf.Torrent(path=payload, trackers=["http://127.0.0.1:1/announce"])
    torrent.generate()
    torrent_file = tmp_path / "payload.torrent"
    torrent.write(torrent_file)
    started = cli.json("start-acquire", str(torrent_file))
    assert started["info_hash"] == torrent.infohash
    assert cli.json("status", started["run_id"])["title"] == "payload.mkv"


def test_start_acquire_wait_gives_up_with_exit_1(cli: Cli) -> None:
    result = cli.invoke("start-acquire", magnet(), "--wait", "0.5", "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["imported"] is False
    assert result.stderr.splitlines()[-1].startswith("umt: error: run ")
    assert "still pending after waiting 0.5s" in result.stderr


def test_start_acquire_wait_on_a_canceled_run_exits_1(cli: Cli) -> None:
    run_id = cli.start(INFO_HASH, "--idempotency-key", "held")
    cli.ok("cancel", run_id)
    result = cli.invoke("start-acquire", magnet(), "--idempotency-key", "held", "--wait")
    assert result.exit_code == 1, result.output
    assert result.stdout.strip() == run_id
    assert f"umt: error: run {run_id} canceled" in result.stderr


def test_a_signal_no_run_waits_for_is_kept(cli: Cli) -> None:
    """Its later delivery is tested against qBittorrent: test_qbittorrent.py,
    test_a_kept_signal_is_delivered_once_the_run_waits_for_it."""
    kept = cli.json("signal", f"download-done:{INFO_HASH}", "--data", '{"a": 1}')
    assert kept["signal"] == f"download-done:{INFO_HASH}"
    assert kept["delivered_to"] == [] and kept["kept"] is True and kept["duplicate"] is False
    human = cli.ok("signal", "custom:thing")
    assert human.stdout.strip() == "kept custom:thing: no run waits for it yet"


def test_signal_idempotency_key(cli: Cli) -> None:
    first = cli.json("signal", "greeting", "--idempotency-key", "once")
    second = cli.json("signal", "greeting", "--idempotency-key", "once")
    assert second["duplicate"] is True and second["signal_id"] == first["signal_id"]
    conflict = cli.invoke("signal", "other", "--idempotency-key", "once")
    assert conflict.exit_code == 1, conflict.output
    assert "already used for a different signal" in conflict.stderr


def test_signal_to_a_run_and_to_a_canceled_run(cli: Cli) -> None:
    run_id = cli.start()
    targeted = cli.json("signal", f"download-done:{INFO_HASH}", "--run", run_id)
    assert targeted["kept"] is True  # the run does not wait yet (no worker ran it)
    cli.ok("cancel", run_id)
    refused = cli.invoke("signal", f"download-done:{INFO_HASH}", "--run", run_id)
    assert refused.exit_code == 1, refused.output
    assert refused.stderr == (f"umt: error: cannot signal run {run_id}: it is already "
                              "canceled\n")


def test_cancel_human_json_and_finished(cli: Cli) -> None:
    first = cli.start()
    assert cli.ok("cancel", first).stdout.strip() == (
        f"run {first} canceled; compensation pending")
    second = cli.start(OTHER_HASH)
    assert cli.json("cancel", second) == {"run_id": second, "status": "canceled",
                                          "compensation": "pending"}
    again = cli.invoke("cancel", first, "--json")
    assert again.exit_code == 1
    assert again.stdout == ""
    assert again.stderr == f"umt: error: cannot cancel run {first}: it is already canceled\n"


def test_cancel_wait_reports_a_compensation_nobody_runs(cli: Cli) -> None:
    run_id = cli.start()
    result = cli.invoke("cancel", run_id, "--wait", "0.3")
    assert result.exit_code == 1, result.output
    assert "compensation of run" in result.stderr and "still pending" in result.stderr


def test_status_human_and_json(cli: Cli) -> None:
    run_id = cli.start()
    human = cli.ok("status", run_id).stdout
    assert f"run {run_id}  acquire@{WORKFLOW_VERSION}  pending" in human
    assert "title:    Some Film [2160p]" in human
    status = cli.json("status", run_id)
    assert {key: status[key] for key in ("run_id", "workflow", "version", "status", "steps",
                                         "output", "error", "detail", "compensation")} == {
        "run_id": run_id, "workflow": "acquire", "version": WORKFLOW_VERSION, "status": "pending",
        "steps": [], "output": None, "error": None, "detail": None, "compensation": None,
    }
    cli.ok("cancel", run_id)
    assert cli.json("status", run_id)["status"] == "canceled"
    assert "(compensation pending)" in cli.ok("status", run_id).stdout


def test_runs_filters_and_limits(cli: Cli) -> None:
    first = cli.start()
    second = cli.start(OTHER_HASH)
    cli.ok("cancel", first)
    assert [run["run_id"] for run in cli.json("runs")] == [second, first]
    assert [run["run_id"] for run in cli.json("runs", "--status", "canceled")] == [first]
    assert len(cli.json("runs", "--limit", "1")) == 1
    human = cli.ok("runs").stdout
    assert human.splitlines()[0].split() == [
        "RUN", "WORKFLOW", "STATUS", "TITLE", "DETAIL", "CREATED", "UPDATED"]
    assert first in human and second in human
    assert "canceled (compensation pending)" in human
    empty = cli.ok("runs", "--status", "running")
    assert empty.stdout == "" and "no runs with status running" in empty.stderr


def test_runs_on_a_database_that_does_not_exist_creates_nothing(cli: Cli) -> None:
    assert cli.json("runs") == []
    assert not cli.db_path.exists()


def test_show_timeline_and_ledger(cli: Cli) -> None:
    run_id = cli.start()
    human = cli.ok("show", run_id).stdout
    assert f"run {run_id}  acquire@{WORKFLOW_VERSION}  pending" in human
    assert "no step has started yet" in human and "ledger: no entries" in human
    shown = cli.json("show", run_id)
    assert shown["run_id"] == run_id and shown["steps"] == [] and shown["ledger"] == []
    both = cli.invoke("show", run_id, "--follow", "--json")
    assert both.exit_code == 2


def test_show_follow_ends_when_the_run_has_settled(cli: Cli) -> None:
    run_id = cli.start(INFO_HASH, "--idempotency-key", "x")
    cli.ok("cancel", run_id)
    _settle_compensation(cli, run_id)
    result = cli.ok("show", run_id, "--follow")
    assert "canceled (compensation succeeded)" in result.stdout


def _settle_compensation(cli: Cli, run_id: str) -> None:
    # No worker here: mark the compensation done the way a worker would.
    with sqlite3.connect(cli.db_path) as connection:
        connection.execute("UPDATE runs SET compensation = 'succeeded', due_at = NULL "
                           "WHERE id = ?", (run_id,))


def test_tables_lists_engine_and_business_tables(cli: Cli) -> None:
    names = cli.ok("tables").stdout.split()
    assert {"main.runs", "main.steps", "main.attempts", "main.signals", "main.workers",
            "main.schema_migrations", "main.ledger", "main.catalog"} <= set(names)
    assert cli.json("tables")["tables"] == names


def test_db_status_migrate_and_gc(cli: Cli) -> None:
    missing = cli.json("db", "status")
    assert missing["exists"] is False
    assert not cli.db_path.exists()
    migrated = cli.json("db", "migrate")
    assert {m["component"] for m in migrated["applied"]} == {"engine", "records"}
    assert "nothing to do" in cli.ok("db", "migrate").stdout
    status = cli.json("db", "status")
    assert status["current"] is True
    assert "engine: version 2 of 2 (current)" in cli.ok("db", "status").stdout
    run_id = cli.start()
    cli.ok("cancel", run_id)
    _settle_compensation(cli, run_id)
    assert cli.json("db", "gc", "--older-than", "1d")["deleted"]["runs"] == 0
    assert cli.json("db", "gc", "--older-than", "0")["deleted"]["runs"] == 1
    assert "deleted 0 runs" in cli.ok("db", "gc", "--older-than", "P1D").stdout


def test_catalog_is_empty_without_imports(cli: Cli) -> None:
    assert cli.json("catalog") == []
    assert "the catalog is empty" in cli.ok("catalog").stderr


def test_hook_download_done_keeps_the_signal(cli: Cli) -> None:
    run_id = cli.start()
    assert run_id  # the kept signal waits for this run's wait-download step
    result = cli.ok("hook", "download-done", INFO_HASH.upper())
    assert result.stdout == ""
    assert result.stderr == (f"umt hook: download-done:{INFO_HASH}: no run waits yet, "
                             "signal kept\n")


def test_hook_for_a_v2_only_torrent_does_nothing(cli: Cli) -> None:
    result = cli.ok("hook", "download-done", "-")
    assert "no v1 info-hash" in result.stderr
    assert not cli.db_path.exists()


def test_resume_with_nothing_due_and_qbittorrent_down(cli: Cli) -> None:
    result = cli.invoke("resume", "--json")
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert summary["executed"] == 0 and summary["reconciled"] is None
    assert "unreachable" in summary["qbittorrent_error"]
    assert result.stderr.splitlines()[-1].startswith("umt: error: qBittorrent at ")


def test_global_json_flag_and_config_option(cli: Cli, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "other.db"}"\n')
    env = {"UMT_DATABASE_URL": None}
    result = cli.invoke("--config", str(other), "--json", "signal", "x", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kept"] is True
    assert (tmp_path / "other.db").exists()


def test_version(cli: Cli) -> None:
    assert cli.ok("--version").stdout.startswith("umt ")


def test_no_command_prints_the_help_as_a_usage_error(cli: Cli) -> None:
    result = cli.invoke()
    assert result.exit_code == 2
    assert "Usage: umt" in result.stderr and result.stdout == ""


def test_permission_warning_for_a_readable_config_with_a_password(cli: Cli) -> None:
    cli.write_config('[qbittorrent]\npassword = "hunter2-secret"\n')
    cli.config_path.chmod(0o644)
    result = cli.ok("runs")
    assert "umt: warning: config file" in result.stderr and "chmod 600" in result.stderr
    assert "hunter2-secret" not in result.output


def test_catalog_lists_imports(cli: Cli) -> None:
    run_id = cli.start()
    with sqlite3.connect(cli.db_path) as connection:
        connection.execute(
            "INSERT INTO catalog (run_id, title, info_hash, library_paths, size, content_hash,"
            " import_method, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, "Some Film [2160p]", INFO_HASH, '["/lib/Some Film/film.mkv"]',
             3 * 1024**3, "abc", "hardlink", "2026-01-02T03:04:05.000000+00:00"),
        )
    connection.close()
    [item] = cli.json("catalog")
    assert item["run_id"] == run_id and item["library_paths"] == ["/lib/Some Film/film.mkv"]
    human = cli.ok("catalog").stdout
    assert "Some Film [2160p]" in human and "3.0 GiB" in human and "hardlink" in human


def test_show_renders_a_copy_in_flight_as_a_progress_bar(cli: Cli) -> None:
    from datetime import UTC, datetime

    from rich.console import Console

    from umt.cli.commands.show import Snapshot, render
    from umt.engine import Attempt

    run_id = cli.start()
    now = datetime.now(UTC)
    copying = Attempt(id=1, run_id=run_id, phase="main", position=3, step_name="copy-file",
                      attempt=1, status="running", worker_id="w" * 36, lease_epoch=1,
                      started_at=now, finished_at=None, error=None,
                      progress={"done": 512.0, "total": 2048.0, "file": "film.mkv"},
                      progress_at=now)
    snapshot = Snapshot(run=_run(cli, run_id), steps=[], attempts=[copying], ledger=[], now=now)
    terminal = Console(record=True, width=120, force_terminal=True)
    terminal.print(render(snapshot, bars=True))
    shown = terminal.export_text()
    assert "copy-file film.mkv" in shown and "512 B of 2.0 KiB (25%)" in shown
    assert "progress:" not in shown  # a bar, not the text line
    plain = Console(record=True, width=120)
    plain.print(render(snapshot, bars=False))
    assert "progress: copy-file film.mkv: 512 B of 2.0 KiB (25%)" in plain.export_text()


def test_show_measures_time_on_the_engines_clock_not_this_hosts(cli: Cli) -> None:
    """On PostgreSQL the engine's clock is the server's: the times ``umt show`` prints (a running
    step's duration) are spans on that clock, so a host whose clock is off must not skew them."""
    from datetime import UTC, datetime

    from umt.app import App
    from umt.cli.commands.show import Snapshot
    from umt.config import load_settings
    from umt.engine import Engine, FakeClock

    run_id = cli.start()
    moment = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    app = App(load_settings(None, env={"UMT_DATABASE_URL": f"sqlite:///{cli.db_path}"}))
    try:
        engine = Engine(app.engine().database, clock=FakeClock(moment))
        assert Snapshot.read(engine, run_id).now == moment
    finally:
        app.close()


def _run(cli: Cli, run_id: str) -> Any:
    from umt.app import App
    from umt.config import load_settings

    settings = load_settings(None, env={"UMT_DATABASE_URL": f"sqlite:///{cli.db_path}"})
    app = App(settings)
    try:
        return app.engine().get(run_id)
    finally:
        app.close()


def test_doctor_reports_a_missing_config_file_as_a_failed_check(cli: Cli) -> None:
    result = cli.invoke("doctor", "--json", env={"UMT_CONFIG": "/nonexistent/umt.toml"})
    assert result.exit_code == 1
    [check] = json.loads(result.stdout)["checks"]
    assert check["name"] == "config" and check["status"] == "fail"
    assert result.stderr == "umt: error: 1 check(s) failed: config\n"


def test_doctor_warns_when_the_library_group_cannot_read_the_downloads(
    cli: Cli, tmp_path: Path,
) -> None:
    downloads, library = tmp_path / "doctor-downloads", tmp_path / "doctor-library"
    (downloads / "Pack").mkdir(parents=True)
    library.mkdir()
    (downloads / "Pack" / "readable.mkv").write_bytes(b"x")
    (downloads / "Pack" / "readable.mkv").chmod(0o644)
    (downloads / "Pack" / "private.mkv").write_bytes(b"x")
    (downloads / "Pack" / "private.mkv").chmod(0o600)
    env = {"UMT_DOWNLOAD_DIR": str(downloads), "UMT_LIBRARY_DIR": str(library),
           "UMT_LIBRARY_GROUP": "65534"}  # a group the files do not have: "others" must read

    def group_check(extra: dict[str, str]) -> dict[str, str]:
        checks = json.loads(cli.invoke("doctor", "--json", env={**env, **extra}).stdout)["checks"]
        return next(check for check in checks if check["name"] == "library group")

    warned = group_check({})
    assert warned["status"] == "warn" and "cannot read 1 of 2 file(s)" in warned["detail"]
    assert "private.mkv, mode 0600" in warned["detail"] and "UMask" in warned["fix"]
    assert group_check({"UMT_IMPORT_MODE": "copy"})["status"] == "ok"
    (downloads / "Pack" / "private.mkv").chmod(0o604)
    assert group_check({})["status"] == "ok"
    assert group_check({"UMT_LIBRARY_GROUP": ""})["status"] == "skip"


def test_umt_debug_adds_the_traceback(cli: Cli) -> None:
    quiet = cli.invoke("status", RUN_ID)
    assert "Traceback" not in quiet.stderr
    loud = cli.invoke("status", RUN_ID, env={"UMT_DEBUG": "1"})
    assert loud.exit_code == 2
    assert loud.stderr.startswith("Traceback (most recent call last):")
    assert loud.stderr.endswith(f"umt: error: no run with id {RUN_ID}\n")
