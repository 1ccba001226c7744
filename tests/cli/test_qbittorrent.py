"""doctor, install-hook, show-hook, the hook itself and resume against a real qbittorrent-nox."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import INFO_HASH, UMT, Cli, qbittorrent_env
from tests.support.qbittorrent import QbtInstance

pytestmark = pytest.mark.qbittorrent


def _checks(result_stdout: str) -> dict[str, str]:
    return {check["name"]: check["status"] for check in json.loads(result_stdout)["checks"]}


def test_doctor_install_hook_show_hook(qbt_cli: Cli, qbittorrent: QbtInstance) -> None:
    before = qbt_cli.invoke("doctor", "--json")
    assert before.exit_code == 1, before.output
    assert _checks(before.stdout) == {
        "config": "ok", "database": "ok", "qbittorrent": "ok", "finish hook": "fail",
        "paths": "ok", "library": "ok", "hardlinks": "ok", "library group": "skip",
    }
    assert before.stderr == "umt: error: 1 check(s) failed: finish hook\n"
    assert qbittorrent.password not in before.output

    dry = qbt_cli.ok("qbittorrent", "install-hook", "--dry-run")
    program = dry.stdout.strip()
    assert program == (f"{UMT} --config {qbt_cli.config_path} hook download-done %I")
    assert qbt_cli.json("qbittorrent", "show-hook")["installed"] is False

    installed = qbt_cli.json("qbittorrent", "install-hook")
    assert installed == {"program": program, "installed": True, "previous": None,
                         "chained": None}
    assert qbittorrent.client().app_preferences()["autorun_program"] == program
    shown = qbt_cli.json("qbittorrent", "show-hook")
    assert shown["installed"] is True and shown["program"] == program
    assert "the hook is installed" in qbt_cli.ok("qbittorrent", "show-hook").stdout

    after = qbt_cli.ok("doctor")
    assert "FAIL" not in after.stdout and after.stderr == ""


def test_the_installed_program_line_works_without_any_environment(
    qbt_cli: Cli, qbittorrent: QbtInstance,
) -> None:
    program = qbt_cli.json("qbittorrent", "install-hook")["program"]
    run_id = qbt_cli.start(INFO_HASH)  # a run that does not wait yet: the signal is kept
    # What qBittorrent does: substitute %I, split into arguments, no shell, its own environment.
    argv = shlex.split(program.replace("%I", INFO_HASH.upper()))
    done = subprocess.run(argv, env={}, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"umt hook: download-done:{INFO_HASH}: no run waits yet, signal kept\n"
    with sqlite3.connect(qbt_cli.db_path) as connection:
        rows = connection.execute("SELECT name, data, status FROM signals").fetchall()
    connection.close()
    assert rows == [(f"download-done:{INFO_HASH}", '{"source":"hook"}', "kept")]
    assert qbt_cli.json("status", run_id)["status"] == "pending"


def test_install_hook_refuses_a_database_only_in_the_environment(
    cli: Cli, qbittorrent: QbtInstance,
) -> None:
    qbittorrent.set_finish_hook(None)
    cli.env.update(qbittorrent_env(qbittorrent))
    result = cli.invoke("qbittorrent", "install-hook")
    assert result.exit_code == 1, result.output
    assert "the database URL comes from UMT_DATABASE_URL" in result.stderr
    assert qbittorrent.client().app_preferences()["autorun_enabled"] is False


def test_resume_submits_reconciles_and_compensates(qbt_cli: Cli, qbittorrent: QbtInstance) -> None:
    run_id = qbt_cli.start(INFO_HASH, "--retention", "0")
    first = qbt_cli.json("resume")
    assert first["reconciled"] == {"signaled": [], "missing": [], "errored": [],
                                   "downloading": []}
    assert first["failed"] == 0 and first["executed"] >= 1
    status = qbt_cli.json("status", run_id)
    assert status["status"] == "waiting"
    assert status["steps"][:2] == [
        {"name": "submit-download", "status": "succeeded", "attempts": 1, "phase": "main",
         "kind": "step"},
        {"name": "wait-download", "status": "waiting", "attempts": 0, "phase": "main",
         "kind": "signal"},
    ]
    torrent = qbittorrent.client().torrents_info(torrent_hashes=INFO_HASH)
    assert [t["category"] for t in torrent] == ["umt-cli-tests"]

    second = qbt_cli.json("resume")
    assert second["reconciled"]["downloading"] == [run_id]
    assert "downloading 0%" in qbt_cli.json("status", run_id)["detail"]
    shown = qbt_cli.json("show", run_id)
    assert [(e["operation"], e["phase"]) for e in shown["ledger"]] == [
        (f"qbt-add:{INFO_HASH}", "intent"), (f"qbt-add:{INFO_HASH}", "done")]
    human = qbt_cli.ok("show", run_id).stdout
    assert "timeline" in human and f"signal download-done:{INFO_HASH}" in human
    assert f"qbt-add:{INFO_HASH}" in human

    signaled = qbt_cli.json("signal", f"download-done:{INFO_HASH}", "--data", '{"by": "test"}')
    assert signaled["delivered_to"] == [run_id] and signaled["kept"] is False
    assert qbt_cli.json("cancel", run_id)["status"] == "canceled"
    qbt_cli.json("resume")
    final = qbt_cli.json("status", run_id)
    assert (final["status"], final["compensation"]) == ("canceled", "succeeded")
    assert qbittorrent.client().torrents_info(torrent_hashes=INFO_HASH) == []
    assert [r["status"] for r in qbt_cli.json("runs")] == ["canceled"]


def test_doctor_reports_hardlinks_across_missing_download_dir(
    qbt_cli: Cli, tmp_path: Path,
) -> None:
    qbt_cli.env["UMT_DOWNLOAD_DIR"] = str(tmp_path / "elsewhere")
    qbt_cli.env["UMT_IMPORT_MODE"] = "hardlink"
    result = qbt_cli.invoke("doctor", "--json")
    assert result.exit_code == 1
    assert _checks(result.stdout)["hardlinks"] == "fail"
    hardlinks = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "hardlinks")
    assert hardlinks["fix"]


def test_doctor_fails_on_a_missing_library_folder(qbt_cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "unmounted" / "library"
    result = qbt_cli.invoke("doctor", "--json", env={"UMT_LIBRARY_DIR": str(missing)})
    assert result.exit_code == 1
    library = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "library")
    assert library["status"] == "fail" and library["fix"].startswith(f"mkdir -p {missing}")
    assert not missing.exists()


def test_a_kept_signal_is_delivered_once_the_run_waits_for_it(qbt_cli: Cli) -> None:
    run_id = qbt_cli.start(INFO_HASH, "--retention", "0")
    kept = qbt_cli.json("signal", f"download-done:{INFO_HASH}", "--data", '{"by": "test"}')
    assert (kept["delivered_to"], kept["kept"]) == ([], True)

    qbt_cli.json("resume")
    steps = {step["name"]: step["status"] for step in qbt_cli.json("status", run_id)["steps"]}
    assert steps["wait-download"] == "succeeded", steps
