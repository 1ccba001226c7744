"""The spikes can fail (issue 6, acceptance 2): against a deliberately broken engine
(``UMT_ENGINE_BREAK``, see ``umt/engine/faults.py``) the scenario that depends on the broken
property reports FAIL and ``python -m spikes`` exits 1; against the real engine the same
scenarios PASS and it exits 0.

Each run is ``python -m spikes --only … --backend sqlite`` in its own process (its workers and
CLI commands inherit the switch); the four runs go in parallel to keep this test short.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

#: switch → the scenario that must FAIL without it, and the check that must say why.
BROKEN = {
    "fencing": ("b-freeze", "exactly one `done` row for hold, written by B"),
    "mailbox": ("c", "wait-download received that very signal"),
    "determinism": ("g", "the drifted v1 code stopped the run"),
}


def _spikes(tmp_path: Path, name: str, only: str, switch: str | None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UMT_", "SPIKE_"))}
    if switch:
        env["UMT_ENGINE_BREAK"] = switch
    env["PYTHONPATH"] = str(REPO)
    report = tmp_path / f"{name}.md"
    return subprocess.Popen(
        [sys.executable, "-m", "spikes", "--only", only, "--backend", "sqlite",
         "--report", str(report)],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )


def _results(report: str) -> dict[str, str]:
    """scenario key → PASS/FAIL, from the report's summary table."""
    return dict(re.findall(r"^\| \(([\w-]+)\) .*? \| SQLite \| (PASS|FAIL) \|", report, re.M))


def test_scenarios_pass_on_the_real_engine_and_fail_on_broken_ones(tmp_path: Path) -> None:
    runs = {"real": _spikes(tmp_path, "real", ",".join(s for s, _ in BROKEN.values()), None)}
    for switch, (scenario, _) in BROKEN.items():
        runs[switch] = _spikes(tmp_path, switch, scenario, switch)
    codes: dict[str, int] = {}
    try:
        for name, process in runs.items():
            _, stderr = process.communicate(timeout=400)
            codes[name] = process.returncode
            assert (tmp_path / f"{name}.md").exists(), stderr
    finally:
        for process in runs.values():
            if process.poll() is None:
                process.kill()

    real = (tmp_path / "real.md").read_text()
    assert codes["real"] == 0, real
    assert _results(real) == {s: "PASS" for s, _ in BROKEN.values()}, real
    for switch, (scenario, reason) in BROKEN.items():
        report = (tmp_path / f"{switch}.md").read_text()
        assert codes[switch] == 1, report
        assert _results(report) == {scenario: "FAIL"}, report
        assert f"UMT_ENGINE_BREAK={switch}" in report
        failed = [line for line in report.splitlines() if line.startswith("- FAIL: ")]
        assert any(reason in line for line in failed), report
        assert "Error (the scenario could not finish)" not in report, report
