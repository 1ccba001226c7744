"""The spikes can fail (issue 6, acceptance 2; issue 17): against a build with one guarantee
removed (``UMT_ENGINE_BREAK=<breakage>``, see ``spikes/breakages.py``) each scenario guarding it
reports FAIL on every backend it runs on (both, or PostgreSQL for the PostgreSQL-only ones), for
the check that names that guarantee, and ``python -m spikes`` exits 1; against the real build the
same scenarios PASS and it exits 0.

Each run is ``python -m spikes --only <scenario>`` (its backends) in its own process, whose
workers and commands inherit the breakage; a few run at a time. A full run of ``scripts/test``
runs ``python -m spikes`` (every scenario, the real build) before pytest and names its report in
``TESTS_SPIKES_REPORT``: the real-build half is then read from that report, not run again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from spikes.__main__ import BACKEND_LABELS
from spikes.breakages import BREAKAGES
from spikes.scenarios import register_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

REPO = Path(__file__).resolve().parents[1]
AT_ONCE = 3

#: breakage → the scenarios that must FAIL with it, each with the start of the check that must
#: say why.
BROKEN: dict[str, list[tuple[str, str]]] = {
    "fencing": [("b-freeze", "exactly one `done` row for hold, written by B")],
    "mailbox": [("c", "wait-download received that very signal")],
    "determinism": [("g", "the drifted v1 code stopped the run")],
    "versions": [("g", "v1 run due but untouched while only v2 ran")],
    "reaping": [("b-kill", "same-host takeover before A's lease ran out")],
    "retries": [("e", "5 planned failures, 3 allowed")],
    "idempotency": [("f", "same key, same input: the existing run")],
    "uncancelable-copy": [("d", "the in-flight copy stopped before its end")],
    "unfenced-publish": [("copy-freeze", "the library file was published once, by B")],
    "no-recovery": [("rename-kill", "A2 recognised the finished import")],
    "discard-finished": [("cancel-retention", "the library file stays, byte for byte")],
    "path-claims": [("path-race", "the loser names the holder")],
    "double-claim": [("i", "60 step bodies started: none ran twice")],
    "apart-step-writes": [("h", "the refused commit left nothing")],
    "unjoined-start": [("h", "start joins the caller's transaction")],
    "outage-fatal": [("pg-sleep", "the worker did not exit"), ("pg-500", "no worker exited")],
    "busy-poll": [("sleepers-10k", "idle polling stays cheap")],
    "local-clock": [("skew", "every sleep woke no earlier than asked")],
    "lost-add": [("qbt-drop", "the run knows it added the torrent"),
                 ("qbt-drop-real", "the run still knows the torrent is its own")],
    "no-self-fence": [("partition", "A logged the loss within 15 s of the cut")],
    "deaf-listener": [("partition-listen", "A logged the lost connection")],
}

#: scenario → the backends it runs on (PostgreSQL-only scenarios: PostgreSQL).
BACKENDS_OF = {s.key: tuple(BACKEND_LABELS[b] for b in s.backends) for s in register_all()}
#: breakage → the backends where it must make its scenarios FAIL, when not all of theirs (the
#: check it breaks is made on those only).
FAILS_ON = {"unjoined-start": ("PostgreSQL",)}
#: The report of ``python -m spikes`` on this very build, when scripts/test made one.
REAL_REPORT_ENV = "TESTS_SPIKES_REPORT"
GUARDED = sorted({scenario for guarded in BROKEN.values() for scenario, _ in guarded})


def _spikes(report: Path, scenario: str, breakage: str | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UMT_", "SPIKE_"))}
    if breakage:
        env["UMT_ENGINE_BREAK"] = breakage
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "spikes", "--only", scenario, "--backend", "both",
         "--report", str(report)],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, timeout=900, check=False,
    )
    return done.returncode, done.stderr


def _sections(report: str) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """(scenario, backend) → (PASS/FAIL, the section's FAIL lines)."""
    found = {}
    for section in re.split(r"^(?=## \()", report, flags=re.M)[1:]:
        head = re.match(r"## \(([\w-]+)\) .* — (\w+): (PASS|FAIL)", section)
        assert head is not None, section[:200]
        failed = [line for line in section.splitlines() if line.startswith("- FAIL: ")]
        found[(head[1], head[2])] = (head[3], failed)
    return found


def _problems(name: str, report_path: Path, code: int, stderr: str,
              scenario: str, reason: str | None) -> list[str]:
    """What is wrong with one run: empty when the real build PASSed (``reason`` None) or the
    broken one FAILed on both backends for ``reason``."""
    if not report_path.exists():
        return [f"{name}: no report (exit {code}): {stderr[-2000:]}"]
    report = report_path.read_text()
    sections = _sections(report)
    problems = []
    backends = BACKENDS_OF[scenario]
    if sorted(sections) != sorted((scenario, backend) for backend in backends):
        problems.append(f"{name}: ran {sorted(sections)}, not {scenario} on {backends}")
    for (_, backend), (result, failed) in sections.items():
        if reason is not None and backend not in FAILS_ON.get(name, (backend,)):
            continue
        if reason is None and result != "PASS":
            problems.append(f"{name} on {backend}: FAIL on the real build: {failed}")
        if reason is not None and not any(line.startswith(f"- FAIL: {reason}")
                                          for line in failed):
            problems.append(f"{name} on {backend}: {result}, but not for {reason!r}: {failed}")
    if "Error (the scenario could not finish)" in report:
        problems.append(f"{name}: a scenario could not finish (see {report_path})")
    if code != (0 if reason is None else 1):
        problems.append(f"{name}: python -m spikes exited {code}")
    if reason is not None and f"UMT_ENGINE_BREAK={name}" not in report:
        problems.append(f"{name}: the report does not name the breakage")
    return problems


def _real_report_problems(report_path: Path) -> list[str]:
    """What is wrong with a whole-suite report of the real build for the guarded scenarios."""
    report = report_path.read_text()
    problems = []
    if "UMT_ENGINE_BREAK=" in report:
        problems.append(f"{report_path} is the report of a broken build")
    if "Error (the scenario could not finish)" in report:
        problems.append(f"a scenario could not finish (see {report_path})")
    sections = _sections(report)
    for scenario in GUARDED:
        for backend in BACKENDS_OF[scenario]:
            result, failed = sections.get((scenario, backend), ("missing", []))
            if result != "PASS":
                problems.append(f"real-{scenario} on {backend}: {result} on the real build: "
                                f"{failed}")
    return problems


def test_every_breakage_is_guarded_by_a_scenario() -> None:
    assert sorted(BROKEN) == sorted(BREAKAGES)


def test_scenarios_pass_on_the_real_build_and_fail_on_broken_ones(tmp_path: Path) -> None:
    real_report = os.environ.get(REAL_REPORT_ENV)
    problems = _real_report_problems(Path(real_report)) if real_report else []
    jobs: list[tuple[str, str, str | None]] = [] if real_report else [
        (f"real-{scenario}", scenario, None) for scenario in GUARDED
    ]
    jobs += [(name, scenario, reason)
             for name, guarded in BROKEN.items() for scenario, reason in guarded]

    def run(job: tuple[str, str, str | None]) -> list[str]:
        name, scenario, reason = job
        report = tmp_path / (f"{name}.md" if reason is None else f"{name}-{scenario}.md")
        code, stderr = _spikes(report, scenario, None if reason is None else name)
        return _problems(name, report, code, stderr, scenario, reason)

    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        problems += [problem for found in pool.map(run, jobs) for problem in found]
    assert not problems, "\n".join(problems)
