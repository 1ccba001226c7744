"""The systemd units in contrib/systemd: the worker stops gracefully and restarts on failure,
the resume timer replaces cron; user and system variants, verified by systemd-analyze."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.conftest import UMT
from tests.support.skips import skip_unavailable
from umt.cli.commands import systemd as systemd_command
from umt.cli.commands.systemd import _quoted
from umt.cli.main import app
from umt.engine import WorkerOptions

UNITS = Path(__file__).resolve().parent.parent / "contrib" / "systemd"
VARIANTS = {"user": "default.target", "system": "multi-user.target"}
NAMES = ("umt-worker.service", "umt-resume.service", "umt-resume.timer")
#: What the worker takes to stop after its grace period: the hand-back of steps that ignore
#: the request (umt.engine.worker.Worker._shut_down).
HAND_BACK = timedelta(seconds=5)


def _unit(variant: str, name: str) -> configparser.ConfigParser:
    # systemd repeats keys (After=, ExecStart=) and uses % specifiers: no strictness, no
    # interpolation, and keys keep their case.
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / variant / name).read_text(encoding="utf-8"))
    return parser


def _seconds(value: str) -> int:
    return int(value.removesuffix("s"))


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_worker_stops_gracefully_and_restarts_on_failure(variant: str) -> None:
    service = _unit(variant, "umt-worker.service")["Service"]
    assert service["ExecStart"].split()[1:] == ["worker"]
    assert Path(service["ExecStart"].split()[0]).name == "umt"
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    grace = WorkerOptions().grace_period + HAND_BACK
    assert timedelta(seconds=_seconds(service["TimeoutStopSec"])) > grace
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "2"  # a bad configuration stays bad
    assert _unit(variant, "umt-worker.service")["Install"]["WantedBy"] == VARIANTS[variant]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_resume_timer_runs_a_oneshot_pass(variant: str) -> None:
    service = _unit(variant, "umt-resume.service")
    assert service["Service"]["Type"] == "oneshot"
    assert service["Service"]["ExecStart"].split()[1:] == ["resume"]
    assert "Restart" not in service["Service"]  # the timer starts the next pass
    timer = _unit(variant, "umt-resume.timer")
    assert "OnCalendar" in timer["Timer"] or "OnUnitActiveSec" in timer["Timer"]
    assert timer["Timer"]["Unit"] == "umt-resume.service"
    assert timer["Install"]["WantedBy"] == "timers.target"


def test_system_units_run_as_their_own_user_and_user_units_as_theirs() -> None:
    for name in ("umt-worker.service", "umt-resume.service"):
        system = _unit("system", name)["Service"]
        assert (system["User"], system["Group"]) == ("umt", "umt")
        assert system["Environment"] == "UMT_CONFIG=/etc/umt/config.toml"
        user = _unit("user", name)["Service"]
        assert "User" not in user and "Environment" not in user
        assert user["ExecStart"].startswith("%h/")


@pytest.mark.parametrize("variant", VARIANTS)
def test_systemd_analyze_verifies_the_units(variant: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        skip_unavailable("the systemd units verified by systemd-analyze",
                         "systemd-analyze is not installed")
    # What `umt systemd` prints: verify refuses an ExecStart that does not exist, and this
    # one names this checkout's umt.
    flags = ["--system"] if variant == "system" else []
    for name in NAMES:
        printed = subprocess.run([UMT, "systemd", *flags, name], capture_output=True, text=True,
                                 check=True, timeout=60)
        assert name.endswith(".timer") or f"ExecStart={UMT} " in printed.stdout
        (tmp_path / name).write_text(printed.stdout, encoding="utf-8")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    scope = ["--user"] if variant == "user" else []
    done = subprocess.run(
        [analyze, *scope, "verify", *NAMES], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_LEVEL": "notice"},
        timeout=120, check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


@pytest.mark.parametrize("variant", VARIANTS)
def test_umt_systemd_prints_the_shipped_unit_with_this_umt(variant: str) -> None:
    flags = ["--system"] if variant == "system" else []
    for name in NAMES:
        printed = CliRunner().invoke(app, ["systemd", *flags, name], catch_exceptions=False)
        assert printed.exit_code == 0, printed.output
        shipped = (UNITS / variant / name).read_text(encoding="utf-8")
        installed = "%h/.local/share/umt/venv/bin/umt" if variant == "user" else (
            "/opt/umt/venv/bin/umt")
        assert printed.stdout == shipped.replace(f"ExecStart={installed}", f"ExecStart={UMT}")


def test_umt_systemd_refuses_an_unknown_unit() -> None:
    refused = CliRunner().invoke(app, ["systemd", "umt.service"], catch_exceptions=False)
    assert refused.exit_code == 2
    assert refused.stdout == "" and refused.stderr.startswith("umt: error: unknown unit")


def test_a_path_systemd_would_misread_is_quoted() -> None:
    assert _quoted("/opt/my umt/bin/umt") == '"/opt/my umt/bin/umt"'
    assert _quoted("/home/50%/bin/umt") == "/home/50%%/bin/umt"


def test_contrib_systemd_is_what_the_package_ships() -> None:
    assert UNITS.resolve() == Path(systemd_command.__file__).parent.parent / "systemd"
