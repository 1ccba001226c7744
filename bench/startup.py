"""``bench/run startup``: whole-process start-up of the ``umt`` command line (issue 7).

    bench/run startup [--runs 20] [--warmup 3] [--no-hyperfine] [--profile] [--baseline PATH]

Times, as whole processes started from this one (``fork``/``exec`` to exit, stdout piped):

* ``python -c pass``: the interpreter of the project's venv, the floor;
* ``umt --help``;
* ``umt --json start-acquire MAGNET`` with a **new magnet each run** (a fresh info-hash, so a new
  run is written: the path a user takes);
* the same with **one idempotent magnet** (every timed run finds the run that the warm-up
  created and returns it, ``"created": false``);
* ``umt hook download-done HASH`` for a torrent no run tracks (another tool's, as qBittorrent's
  finish hook runs for every torrent): it must stay one cheap, silent exit 0; and the same with
  a chained finish program (``-- true``: umt's hook installed over another program).

``umt`` is the venv's console script, on a throwaway config in a temporary folder (an embedded
SQLite database created and migrated before timing, the library folder beside it), with
``HOME``/``XDG_*`` pointed there and ``UMT_*`` variables removed, so no user config is read. The
commands run interleaved: ``--warmup`` rounds untimed, then ``--runs`` rounds, each round starting
every command once in a rotated order. Reported: median, p10, p90, the median minus the floor and
the median CPU time (user + system) of the process, which a machine shared with other work
inflates much less than the wall time.
``--baseline PATH`` adds each umt command a second time with ``PYTHONPATH=PATH`` (a checkout or
``git archive`` snapshot of another umt, e.g. ``main``), interleaved in the same rounds, so a
change is compared with its baseline under the same load; the baseline has a config and
database of its own (its runs may record another input for the same magnet).
With ``hyperfine`` installed (``apt-get install hyperfine``) the static commands are measured
by it too, as a cross-check (``--shell=none``, same warm-up and run counts).

``--profile`` adds where the time goes: ``-X importtime`` self time summed by top-level package
for each umt command, and, in one process, the import of ``umt.cli.main`` against the command's
own run. Target (issue 7): ``umt --help`` <= 0.3 s. Results go to
``bench/.results/startup-<time>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from statistics import median, quantiles
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / ".results"
VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = VENV_BIN / "python"
UMT = VENV_BIN / "umt"
HELP_TARGET = 0.3
#: Targets of issue 15 (seconds, median wall time).
TARGETS = {"help": HELP_TARGET, "start-new": 0.3, "hook-foreign": 0.15}
IDEMPOTENT_HASH = "b" * 40
FOREIGN_HASH = "f" * 40
TRUE = shutil.which("true") or "/bin/true"


def log(message: str) -> None:
    print(f"[startup {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Command:
    key: str
    label: str
    argv_template: list[str]
    #: Expected ``created`` in the JSON printed by start-acquire (None: not start-acquire).
    created: bool | None = None
    static: bool = True
    #: The command must print nothing at all (the hook for another tool's torrent).
    silent: bool = False
    #: Variables added to the environment (``PYTHONPATH`` of a baseline umt).
    env: dict[str, str] | None = None

    def argv(self, run_no: int) -> list[str]:
        return [part.replace("{hash}", f"{run_no:040x}") for part in self.argv_template]


def commands(config: Path, baseline: Path | None = None,
             baseline_config: Path | None = None) -> list[Command]:
    """The timed commands; a baseline's run on ``baseline_config``, a database of its own (its
    start-acquire may record another input for the same magnet: an idempotency conflict)."""
    umt = [str(UMT), "--config", str(config)]
    cmds = [
        Command("floor", "python -c pass (floor)", [str(PYTHON), "-c", "pass"]),
        Command("help", "umt --help", [str(UMT), "--help"]),
        Command("start-new", "umt --json start-acquire MAGNET (new magnet each run)",
                [*umt, "--json", "start-acquire", "magnet:?xt=urn:btih:{hash}&dn=Bench+{hash}"],
                created=True, static=False),
        Command("start-same", "umt --json start-acquire MAGNET (same magnet, idempotent)",
                [*umt, "--json", "start-acquire",
                 f"magnet:?xt=urn:btih:{IDEMPOTENT_HASH}&dn=Bench"], created=False),
        Command("hook-foreign", "umt hook download-done HASH (a torrent umt does not track)",
                [*umt, "hook", "download-done", FOREIGN_HASH], silent=True),
        Command("hook-chained", "umt hook download-done HASH -- true (a chained finish program)",
                [*umt, "hook", "download-done", FOREIGN_HASH, "--", TRUE], silent=True),
    ]
    if baseline is not None and baseline_config is not None:
        # The venv's console script names this tree's entry point; the baseline's may differ.
        entry = "umt.cli.entry" if (baseline / "umt/cli/entry.py").exists() else "umt.cli.main"
        script = [str(PYTHON), "-c", f"import sys; from {entry} import main; sys.exit(main())"]
        cmds += [
            Command(f"{c.key}@baseline", f"{c.label} [baseline]",
                    [*script, *(str(baseline_config) if part == str(config) else part
                                for part in c.argv_template[1:])],
                    c.created, c.static, c.silent, {"PYTHONPATH": str(baseline)})
            for c in cmds if c.key != "floor"]
    return cmds


@contextmanager
def throwaway_home() -> Iterator[tuple[Path, dict[str, str]]]:
    """A temporary folder and an environment using it (no user config, no ``UMT_*``)."""
    home = Path(tempfile.mkdtemp(prefix="umt-bench-startup-"))
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("UMT_", "PYTHON", "XDG_"))}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"),
                   XDG_CACHE_HOME=str(home / ".cache"), COLUMNS="100")
        yield home, env
    finally:
        shutil.rmtree(home, ignore_errors=True)


def write_config(folder: Path) -> Path:
    """A config in ``folder`` with an embedded SQLite database and a library beside it."""
    (folder / "library").mkdir(parents=True)
    config = folder / "config.toml"
    config.write_text(f'[database]\nurl = "sqlite:///{folder}/umt.db"\n\n'
                      f'[library]\ndir = "{folder}/library"\n')
    return config


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command: Command, run_no: int, env: dict[str, str],
             cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run (children are waited for one at a time, so the
    children's rusage delta is this process's)."""
    argv = command.argv(run_no)
    cpu_before = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, env={**env, **(command.env or {})}, cwd=cwd,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    cpu = _children_cpu() - cpu_before
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    if command.silent and (done.stdout or done.stderr):
        raise RuntimeError(f"{command.label} printed: {(done.stdout + done.stderr).strip()}")
    if command.created is not None:
        created = json.loads(done.stdout)["created"]
        if created != command.created:
            raise RuntimeError(f"{command.label}: created={created}, expected {command.created}")
    return seconds, cpu


def stats(values: list[float]) -> dict[str, float]:
    deciles = quantiles(values, n=10, method="inclusive") if len(values) > 1 else values * 9
    return {"median": median(values), "p10": deciles[0], "p90": deciles[-1],
            "min": min(values), "max": max(values), "n": len(values)}


def hyperfine(cmds: list[Command], env: dict[str, str], cwd: Path, runs: int, warmup: int,
              out: Path) -> dict[str, float]:
    export = out / "hyperfine.json"
    argv = ["hyperfine", "--shell=none", "--warmup", str(warmup), "--runs", str(runs),
            "--style", "none", "--export-json", str(export)]
    for command in cmds:
        argv += ["--command-name", command.key, " ".join(_quote(a) for a in command.argv(0))]
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    data = json.loads(export.read_text())
    return {r["command"]: median(r["times"]) for r in data["results"]}


def _quote(arg: str) -> str:
    # hyperfine --shell=none splits the command line itself, shell-style.
    return "'" + arg.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", arg) else arg


# ---------------------------------------------------------------------- profile


def import_profile(command: Command, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    argv = command.argv(10**6)
    done = subprocess.run([str(PYTHON), "-X", "importtime", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True)
    by_package: dict[str, int] = {}
    modules = 0
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
        if not match:
            continue
        modules += 1
        name = match.group(4)
        top = name.split(".")[0]
        if top == "umt" and name.count(".") >= 1:
            top = ".".join(name.split(".")[:2])
        by_package[top] = by_package.get(top, 0) + int(match.group(1))
    return {"modules": modules, "self_us_by_package": by_package}


SPLIT = """
import sys, time
t0 = time.perf_counter()
import umt.cli.main as m
t1 = time.perf_counter()
sys.argv = ARGV
try:
    m.main()
except SystemExit:
    pass
t2 = time.perf_counter()
print("SPLIT", t1 - t0, t2 - t1, len(sys.modules), file=sys.stderr)
"""


def split_profile(command: Command, env: dict[str, str], cwd: Path, n: int = 7) -> dict[str, float]:
    imports, bodies, modules = [], [], 0
    for i in range(n):
        argv = ["umt", *command.argv(2 * 10**6 + i)[1:]]
        done = subprocess.run([str(PYTHON), "-c", SPLIT.replace("ARGV", repr(argv))], env=env,
                              cwd=cwd, capture_output=True, text=True)
        line = [x for x in done.stderr.splitlines() if x.startswith("SPLIT")][-1].split()
        imports.append(float(line[1]))
        bodies.append(float(line[2]))
        modules = int(line[3])
    return {"import_cli": median(imports), "command": median(bodies), "modules": modules}


# ---------------------------------------------------------------------- main


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run startup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-hyperfine", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--baseline", type=Path, metavar="PATH",
                        help="also time the umt importable from PATH (PYTHONPATH), interleaved")
    args = parser.parse_args(argv)
    out = RESULTS / f"startup-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    load_start = _uptime()
    log(f"results in {out}; {load_start}")
    with throwaway_home() as (cwd, env):
        config = write_config(cwd)
        baseline_config = write_config(cwd / "baseline") if args.baseline else None
        cmds = commands(config, args.baseline, baseline_config)
        # Create and migrate each database, and the idempotent magnet's run, before any timing.
        for command in cmds:
            if command.key.startswith("start-same"):
                subprocess.run(command.argv(0), env={**env, **(command.env or {})}, cwd=cwd,
                               check=True, capture_output=True)
        times: dict[str, list[float]] = {c.key: [] for c in cmds}
        cpu: dict[str, list[float]] = {c.key: [] for c in cmds}
        run_no = 1
        for round_no in range(args.warmup + args.runs):
            shift = round_no % len(cmds)
            for command in cmds[shift:] + cmds[:shift]:
                seconds, cpu_seconds = run_once(command, run_no, env, cwd)
                run_no += 1
                if round_no >= args.warmup:
                    times[command.key].append(seconds)
                    cpu[command.key].append(cpu_seconds)
        results: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "uptime_start": load_start,
            "python": sys.version.split()[0], "runs": args.runs, "warmup": args.warmup,
            "times": times, "stats": {k: stats(v) for k, v in times.items()},
            "baseline": str(args.baseline) if args.baseline else None,
            "cpu": cpu, "cpu_median": {k: median(v) for k, v in cpu.items()},
        }
        if shutil.which("hyperfine") and not args.no_hyperfine:
            log("hyperfine cross-check")
            own = [c for c in cmds if c.static and c.env is None]
            results["hyperfine"] = hyperfine(own, env, cwd, args.runs, args.warmup, out)
        if args.profile:
            log("profile: -X importtime and import/command split")
            results["profile"] = {
                c.key: {**import_profile(c, env, cwd), **split_profile(c, env, cwd)}
                for c in cmds if c.key != "floor" and c.env is None}
        results["uptime_end"] = _uptime()
    (out / "results.json").write_text(json.dumps(results, indent=1))
    text = table(results, cmds)
    (out / "table.md").write_text(text + "\n")
    print(f"{results['started']}, Python {results['python']}, {os.cpu_count()} CPUs")
    print(f"start: {results['uptime_start']}\nend:   {results['uptime_end']}\n")
    print(text)
    return 0


def table(results: dict[str, Any], cmds: list[Command]) -> str:
    st = results["stats"]
    floor = st["floor"]["median"]
    hf = results.get("hyperfine", {})
    lines = [
        f"{results['runs']} runs after {results['warmup']} warm-up rounds, interleaved; ms.",
        "",
        "| command | median | p10 | p90 | median - floor | CPU median | hyperfine median "
        "| target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    cpu = results.get("cpu_median", {})
    for command in cmds:
        s = st[command.key]
        target = ""
        if command.key in TARGETS:
            met = s["median"] <= TARGETS[command.key]
            target = f"≤ {TARGETS[command.key] * 1000:.0f}: **{'met' if met else 'not met'}**"
        lines.append(
            f"| {command.label} | {fmt_ms(s['median'])} | {fmt_ms(s['p10'])} | "
            f"{fmt_ms(s['p90'])} | {'' if command.key == 'floor' else fmt_ms(s['median'] - floor)}"
            f" | {fmt_ms(cpu[command.key]) if command.key in cpu else ''}"
            f" | {fmt_ms(hf[command.key]) if command.key in hf else ''} | {target} |")
    profile = results.get("profile")
    if profile:
        lines += ["", "| command | import umt.cli.main | the command | modules loaded | "
                      "largest import self times (-X importtime, ms) |",
                  "| --- | ---: | ---: | ---: | --- |"]
        for command in cmds:
            p = profile.get(command.key)
            if not p:
                continue
            top = sorted(p["self_us_by_package"].items(), key=lambda kv: -kv[1])[:8]
            lines.append(
                f"| {command.label} | {fmt_ms(p['import_cli'])} | {fmt_ms(p['command'])} | "
                f"{p['modules']} | " + ", ".join(f"{k} {v / 1000:.0f}" for k, v in top) + " |")
    return "\n".join(lines)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
