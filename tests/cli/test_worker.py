"""umt worker stops on SIGTERM/SIGINT, drains and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from tests.cli.conftest import UMT, Cli


def _signal_when_installed(signum: int) -> threading.Thread:
    """Send ``signum`` to this process once umt's handler replaced the default one."""

    def wait_and_signal() -> None:
        deadline = time.monotonic() + 30
        while getattr(signal.getsignal(signum), "__name__", "") != "request_stop":
            if time.monotonic() > deadline:
                return  # never kill the test process with a default handler in place
            time.sleep(0.02)
        time.sleep(0.3)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=wait_and_signal, daemon=True)
    thread.start()
    return thread


def test_worker_in_process_stops_on_sigterm(cli: Cli) -> None:
    run_id = cli.start()
    before = signal.getsignal(signal.SIGTERM)
    sender = _signal_when_installed(signal.SIGTERM)
    result = cli.invoke("worker", "--concurrency", "1")
    sender.join(5)
    assert result.exit_code == 0, result.output
    assert "started on" in result.stderr and "(concurrency 1)" in result.stderr
    assert "SIGTERM received" in result.stderr and "stopped" in result.stderr
    assert signal.getsignal(signal.SIGTERM) is before
    assert cli.json("status", run_id)["status"] != "running"


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
