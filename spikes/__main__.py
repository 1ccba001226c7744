"""``python -m spikes``: run the spike scenarios for real and print the report.

    python -m spikes                                  # everything, PostgreSQL and SQLite
    python -m spikes --only b,c --backend sqlite      # (b-kill, b-freeze, c) on SQLite
    python -m spikes --report spikes/last-report.md   # also write the report there

Exit code 0 when every scenario passes, 1 when one fails, 2 on bad arguments. See
spikes/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from spikes.breakages import BREAK_ENV, BREAKAGES, install_in_spikes
from spikes.breakages import parse as parse_breakages
from spikes.harness import POSTGRESQL, SQLITE, Case, Spikes
from spikes.report import Report, Section
from spikes.scenarios import Scenario, register_all

BACKEND_LABELS = {POSTGRESQL: "PostgreSQL", SQLITE: "SQLite"}


def _matches(scenario: Scenario, wanted: str, scenarios: list[Scenario]) -> bool:
    """``wanted`` is the scenario's key, or else a prefix of keys (b = b-kill and b-freeze;
    qbt-drop is only qbt-drop, not qbt-drop-real)."""
    if any(s.key == wanted for s in scenarios):
        return scenario.key == wanted
    return scenario.key.startswith(f"{wanted}-")


def _select(scenarios: list[Scenario], only: str | None) -> list[Scenario]:
    if not only:
        return [s for s in scenarios if s.default]
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    chosen = [s for s in scenarios if any(_matches(s, w, scenarios) for w in wanted)]
    unknown = [w for w in wanted if not any(_matches(s, w, scenarios) for s in scenarios)]
    if unknown:
        raise SystemExit(f"spikes: unknown scenario(s) {', '.join(unknown)}; known: "
                         + ", ".join(s.key for s in scenarios))
    return chosen


def _qbittorrent_version() -> str:
    try:
        done = subprocess.run(["qbittorrent-nox", "--version"], capture_output=True, text=True,
                              timeout=10, check=False)
        return done.stdout.strip() or "?"
    except OSError:
        return "not installed"


def _interrupt_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spikes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", metavar="A,B,...",
                        help="scenario keys or prefixes (b = b-kill and b-freeze)")
    parser.add_argument("--backend", choices=["postgresql", "sqlite", "both"], default="both")
    parser.add_argument("--report", metavar="PATH", type=Path,
                        help="also write the Markdown report to PATH")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (logs, databases, library)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)

    parse_breakages(os.environ.get(BREAK_ENV, ""))  # a misspelt name stops here, not later
    install_in_spikes(os.environ.get(BREAK_ENV, ""))
    known = register_all()
    scenarios = _select(known, args.only)
    if args.list:
        for s in scenarios if args.only else known:
            flag = "" if s.default else "  (only with --only: shows an open bug)"
            print(f"{s.key:<14} {'/'.join(s.backends):<18} {s.title}{flag}")
        return 0
    backends = [POSTGRESQL, SQLITE] if args.backend == "both" else [args.backend]
    plan = [(s, b) for s in scenarios for b in s.backends if b in backends]
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)

    began = time.monotonic()
    spikes = Spikes(keep=args.keep)
    report = Report(header=[])
    pg_version: str | None = None
    try:
        for number, (scenario, backend) in enumerate(plan, 1):
            section = Section(scenario.key, scenario.title, BACKEND_LABELS[backend],
                              setup=scenario.setup)
            report.sections.append(section)
            print(f"spikes: [{number}/{len(plan)}] ({scenario.key}) {backend} ...",
                  file=sys.stderr, flush=True)
            case = None
            try:
                case = Case(spikes, section, backend)
                scenario.run(case)
            except KeyboardInterrupt:
                section.error = "interrupted"
                raise
            except Exception as exc:
                section.failed_with(exc)
            finally:
                if case is not None:
                    case.close()
                section.seconds = time.monotonic() - section.started
            print(f"spikes:   ({scenario.key}) {backend}: {section.status} "
                  f"in {section.seconds:.1f} s", file=sys.stderr, flush=True)
        pg_version = spikes.postgres_version() if any(b == POSTGRESQL for _, b in plan) else None
    finally:
        spikes.close()
        report.seconds = time.monotonic() - began
        report.header = _header(pg_version, args, plan)
        text = report.markdown()
        print(text)
        if args.report is not None:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text(text)
        if report.failed:
            print(report.failure_digest(), flush=True)
    return 0 if not report.failed else 1


def _header(pg_version: str | None, args: argparse.Namespace,
            plan: list[tuple[Scenario, str]]) -> list[str]:
    uses_real_qbt = any(s.key in ("a", "qbt-drop-real") for s, _ in plan)
    lines = [
        f"- run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}",
        "- command: `python -m spikes" + (f" --only {args.only}" if args.only else "")
        + (f" --backend {args.backend}" if args.backend != "both" else "") + "`",
        f"- PostgreSQL {pg_version} (a throwaway cluster started by the spikes)"
        if pg_version else "- PostgreSQL: not used",
        f"- qbittorrent-nox: {_qbittorrent_version()}" if uses_real_qbt else
        "- qbittorrent-nox: not used by the scenarios run",
        "- every command is umt's CLI, run as its own process with `--config` and `--json`: "
        "`umt` is `python -m umt.cli.main`; `python -m spikes.umt_cli` is the same CLI with "
        "the spike workflows registered, fault hooks (SPIKE_FAULTS) and `spike-start`",
        "- `…` is the scenario's own temporary directory, `$TMP` the run's",
    ]
    if os.environ.get(BREAK_ENV):
        lines.append(f"- **broken build**: {BREAK_ENV}={os.environ[BREAK_ENV]} in every umt "
                     "process (the scenarios that depend on it must FAIL; spikes/breakages.py):")
        lines += [f"  - `{name}`: {BREAKAGES[name].breaks} (patched: {BREAKAGES[name].seam}"
                  + ("; in this process too" if BREAKAGES[name].in_spikes else "") + ")"
                  for name in parse_breakages(os.environ[BREAK_ENV])]
    return lines


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("spikes: interrupted; everything started was stopped", file=sys.stderr)
        sys.exit(130)
