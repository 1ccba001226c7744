"""umt worker stops on SIGTERM/SIGINT, finishes what is in flight, hands runs back, exits 0."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from contextlib import closing
from pathlib import Path

from tests.cli.conftest import UMT, Cli


def _run_row(db_path: Path, run_id: str) -> dict[str, object] | None:
    if not db_path.exists():
        return None
    with closing(sqlite3.connect(db_path, timeout=30)) as connection:
        connection.row_factory = sqlite3.Row
        row = connection.execute("SELECT status, lease_owner FROM runs WHERE id = ?",
                                 (run_id,)).fetchone()
    return dict(row) if row is not None else None


def _signal_once_claimed(signum: int, db_path: Path, run_id: str) -> threading.Thread:
    """Send ``signum`` to this process once umt's handler is installed and a worker holds the run,
    so that the stop always has a step in flight to finish and a run to hand back."""

    def claimed() -> bool:
        row = _run_row(db_path, run_id)
        return row is not None and row["status"] == "running"

    def wait_and_signal() -> None:
        deadline = time.monotonic() + 60
        while getattr(signal.getsignal(signum), "__name__", "") != "request_stop" or not claimed():
            if time.monotonic() > deadline:
                return  # never kill the test process with a default handler in place
            time.sleep(0.01)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=wait_and_signal, daemon=True)
    thread.start()
    return thread


def test_worker_in_process_finishes_the_step_in_flight_and_hands_the_run_back_on_sigterm(
    cli: Cli,
) -> None:
    run_id = cli.start()
    before = signal.getsignal(signal.SIGTERM)
    sender = _signal_once_claimed(signal.SIGTERM, cli.db_path, run_id)
    result = cli.invoke("worker", "--concurrency", "1")
    sender.join(5)
    assert result.exit_code == 0, result.output
    assert "started on" in result.stderr and "(concurrency 1)" in result.stderr
    assert "SIGTERM received" in result.stderr and "stopped" in result.stderr
    assert signal.getsignal(signal.SIGTERM) is before
    status = cli.json("status", run_id)
    # The step in flight (qBittorrent is unreachable) ran to its end: one attempt, to be retried.
    assert [(s["name"], s["status"], s["attempts"]) for s in status["steps"]] == [
        ("submit-download", "retrying", 1)]
    assert _run_row(cli.db_path, run_id) == {"status": "pending", "lease_owner": None}


def _start_worker(cli: Cli) -> subprocess.Popen[str]:
    process = subprocess.Popen([UMT, "worker"], env=cli.subprocess_env(), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert "started on" in line, line
    return process


def test_worker_subprocess_stops_on_sigint_and_sigterm(cli: Cli) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        process = _start_worker(cli)
        process.send_signal(signum)
        try:
            out, err = process.communicate(timeout=30)
        finally:
            process.kill()
        assert process.returncode == 0, err
        assert out == ""
        assert f"{signal.Signals(signum).name} received" in err and "stopped" in err


def _attempts(cli: Cli, run_id: str) -> list[tuple[str, str, int]]:
    return [(s["name"], s["status"], s["attempts"]) for s in cli.json("status", run_id)["steps"]]


def test_a_worker_process_stopped_mid_step_releases_the_run_to_the_next_worker(
    cli: Cli,
) -> None:
    """SIGTERM while a step hangs (a qBittorrent that accepts but never answers): the worker
    waits out its grace period, hands the run back and exits 0; the next worker continues it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete in the backlog; nothing ever answers
        cli.env["UMT_QBITTORRENT_URL"] = f"http://127.0.0.1:{silent.getsockname()[1]}"
        cli.env["UMT_QBITTORRENT_TIMEOUT"] = "5m"
        run_id = cli.start()
        log_file = cli.tmp_path / "worker.log"
        process = subprocess.Popen([UMT, "worker", "-v", "--log-file", str(log_file)],
                                   env=cli.subprocess_env(), text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while "step submit-download started" not in _text(log_file):
                assert time.monotonic() < deadline and process.poll() is None, _text(log_file)
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode == 0, err
    assert (out, err) == ("", "")
    log = _text(log_file)
    assert "SIGTERM received" in log and "handing back 1 run(s) still in flight" in log
    assert f"run {run_id}: step did not stop; lease handed back anyway" in log
    assert _run_row(cli.db_path, run_id) == {"status": "pending", "lease_owner": None}
    assert _attempts(cli, run_id) == [("submit-download", "pending", 1)]

    # The silent qBittorrent is gone (connections are refused): the next worker takes the run
    # over at once and records its own attempt of the same step.
    resumed = cli.run("resume", "-v")
    assert resumed.returncode == 1, resumed.stderr
    assert f"run {run_id}: claimed (acquire" in resumed.stderr
    assert _attempts(cli, run_id) == [("submit-download", "retrying", 2)]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""
