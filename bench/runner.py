"""``bench/run``: umt next to OpenWorkflow and DBOS on peer-bench, in one run, on one cluster.

    bench/run [compare] [--quick] [--engines ow,dbos,umt] [--benches B1,B2] [--repeats N] [--keep]
    bench/run scale [--sizes 2000,100000]                      (see bench/scale.py)
    bench/run table RESULT_DIR                                 (reprint a table)

``compare`` copies ../shared/peer-bench (read-only) to ``bench/.peer-bench/``, runs ``npm
install`` there, creates ``bench/.dbos-venv/`` with DBOS Transact (PyPI ``dbos``, pinned below;
never in the project's venv), starts one PostgreSQL cluster (pg_stat_statements; fsync,
full_page_writes and synchronous_commit on, like the baseline), runs the harness once with
OpenWorkflow's adapters, once with DBOS's and once with umt's, each in a database of its own on
that cluster, and prints each metric for the engines with umt's ratios and the issue's target.
Raw results and logs go to ``bench/.results/<time>/``. Any harness knob (B1_RUNS, B2_TRIALS, …)
set in the environment is passed on; the flags below override it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PEER_BENCH_SOURCE = ROOT.parent / "shared" / "peer-bench"
PEER_BENCH = BENCH / ".peer-bench"
RESULTS = BENCH / ".results"
PYTHON = ROOT / ".venv" / "bin" / "python"
DBOS_VENV = BENCH / ".dbos-venv"
DBOS_PYTHON = DBOS_VENV / "bin" / "python"
DBOS_REQUIREMENT = "dbos==3.4.0"

#: Settings that make the throwaway cluster behave like the baseline's (PostgreSQL defaults
#: for durability; the test-support cluster turns them off for speed).
DURABLE_SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}

QUICK = {
    "REPEATS": "1",
    "B2_TRIALS": "10",
    "B2_GAP_MS": "1500",
    "B3_TRIALS": "10",
    "B3_GAP_MS": "500",
    "B4_SUBMITS": "300",
    "B5_WARMUP_MS": "3000",
    "B5_WINDOW_MS": "15000",
}
FULL = {"REPEATS": "2"}

ENGINES = {"ow": "OpenWorkflow", "dbos": "DBOS", "before": "umt (before)", "umt": "umt"}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- peer-bench copy


def prepare_peer_bench() -> Path:
    """A writable copy of peer-bench with its node packages installed."""
    PEER_BENCH.mkdir(parents=True, exist_ok=True)
    for source in PEER_BENCH_SOURCE.rglob("*"):
        target = PEER_BENCH / source.relative_to(PEER_BENCH_SOURCE)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        if target.exists():
            target.chmod(target.stat().st_mode | stat.S_IWUSR)
        shutil.copyfile(source, target)
        target.chmod(0o644)
    stamp = PEER_BENCH / "node_modules" / ".umt-lock-copy"
    lock = (PEER_BENCH / "package-lock.json").read_text()
    if not stamp.exists() or stamp.read_text() != lock:
        log("npm install in bench/.peer-bench")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=PEER_BENCH, check=True,
                       stdout=sys.stderr)
        stamp.write_text(lock)
    return PEER_BENCH


def prepare_dbos_venv() -> Path:
    """A venv of its own with DBOS Transact: umt does not depend on it, and CI never installs it."""
    stamp = DBOS_VENV / ".umt-requirement"
    if stamp.exists() and stamp.read_text() == DBOS_REQUIREMENT:
        return DBOS_VENV
    log(f"creating bench/.dbos-venv with {DBOS_REQUIREMENT}")
    # Without bench/run's PYTHONPATH: pip would take the work tree's umt for an installed one.
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    subprocess.run([str(PYTHON), "-m", "venv", "--clear", str(DBOS_VENV)], check=True, env=env)
    subprocess.run([str(DBOS_PYTHON), "-m", "pip", "install", "--quiet", DBOS_REQUIREMENT],
                   check=True, stdout=sys.stderr, env=env)
    stamp.write_text(DBOS_REQUIREMENT)
    return DBOS_VENV


# ---------------------------------------------------------------------- cluster


@contextmanager
def bench_cluster(url: str | None, keep: bool, log_to: Path | None = None) -> Iterator[str]:
    """A started throwaway cluster (or ``url``); yields an admin URL. Its server log (with
    checkpoints: outliers often coincide with one) is copied to ``log_to`` at the end."""
    if url:
        yield url
        return
    sys.path.insert(0, str(ROOT))
    from tests.support.postgres import PostgresCluster

    home = Path(tempfile.mkdtemp(prefix="umt-bench-pg-"))
    cluster = PostgresCluster.create(
        home / "cluster", preload_pg_stat_statements=True, synchronous_commit=True
    )
    try:
        # The settings file of the test support comes first; later lines win.
        with (cluster.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# bench/run: durability like the baseline\n")
            conf.writelines(f"{name} = {value}\n" for name, value in DURABLE_SETTINGS.items())
            conf.write("log_checkpoints = on\nlog_autovacuum_min_duration = 0\n")
        cluster.start()
        log(f"cluster on port {cluster.port} in {cluster.data_dir}")
        yield cluster.url()
    finally:
        if log_to is not None and cluster.log_file.exists():
            shutil.copyfile(cluster.log_file, log_to)
        if keep:
            log(f"--keep: cluster left running at {cluster.url()} ({cluster.data_dir})")
        else:
            cluster.destroy()
            shutil.rmtree(home, ignore_errors=True)


def fresh_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
        settings = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                (list(DURABLE_SETTINGS),),
            )
        }
    wrong = {k: v for k, v in settings.items() if v != DURABLE_SETTINGS[k]}
    if wrong:
        log(f"warning: the cluster does not run like the baseline: {wrong}")
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


# ---------------------------------------------------------------------- harness


#: A checkout whose ``umt`` (and ``bench``) the umt adapters import instead of this one's
#: (``--umt-path``: measure a patched engine without touching this work tree).
UMT_PATH: Path | None = None
#: An earlier checkout of umt measured in the same run as engine ``before`` (``--before``).
BEFORE_PATH: Path | None = None


def harness_env(engine: str, db_url: str, knobs: dict[str, str], out: Path) -> dict[str, str]:
    env = {**os.environ, **knobs, "BENCH_DB_URL": db_url, "BENCH_OUT": str(out)}
    env.pop("UMT_BENCH_KEEP_WORKFLOW", None)
    if engine in ("umt", "before"):
        first = BEFORE_PATH if engine == "before" else UMT_PATH
        paths = [str(first) if first else None, str(ROOT), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        env["DRIVER_CMD"] = f"{PYTHON} -m bench.umt_driver"
        env["WORKER_CMD"] = f"{PYTHON} -m bench.umt_worker"
    elif engine == "dbos":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["DRIVER_CMD"] = f"{DBOS_PYTHON} -m bench.dbos_driver"
        env["WORKER_CMD"] = f"{DBOS_PYTHON} -m bench.dbos_worker"
    else:
        env.pop("DRIVER_CMD", None)
        env.pop("WORKER_CMD", None)
    return env


def run_harness(
    engine: str, db_url: str, knobs: dict[str, str], out: Path,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    env = {**harness_env(engine, db_url, knobs, out), **(extra_env or {})}
    logfile = out.with_suffix(".log")
    log(f"harness: {ENGINES[engine]} {' '.join(f'{k}={v}' for k, v in sorted(knobs.items()))}")
    with logfile.open("w") as sink:
        process = subprocess.Popen(["node", "bench/harness.mjs"], cwd=PEER_BENCH, env=env,
                                   stdout=sink, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        for line in process.stderr:
            sink.write(line)
            sink.flush()
            if " B" in line or "---" in line or "rror" in line or "setup" in line:
                sys.stderr.write(f"  {engine}: {line}")
        code = process.wait()
    if code != 0:
        raise SystemExit(f"the harness failed for {engine} (exit {code}); see {logfile}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# ---------------------------------------------------------------------- table


def pct(values: list[float], p: float) -> float | None:
    """The harness's percentile (nearest rank)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def _med(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def metrics(result: dict[str, Any]) -> dict[str, float | None]:
    """One number per metric from a harness result: medians over repeats, raw values pooled."""
    r = result.get("results", {})
    m: dict[str, float | None] = {}
    if b1 := r.get("B1"):
        for key in ("runsPerSec", "stepsPerSec", "dbStatementsPerRun", "dbXactPerRun",
                    "workerCpuPctOfOneCore", "postgresCpuPctOfOneCore"):
            m[f"B1.{key}"] = _med([rep[key] for rep in b1])
    if b2 := r.get("B2"):
        raw = [x for rep in b2 for x in rep["raw"]]
        m["B2.median"], m["B2.p95"] = pct(raw, 0.5), pct(raw, 0.95)
        m["B2.sendMs"] = _med([rep["sendSignalCallMs"]["median"] for rep in b2])
    if b3 := r.get("B3"):
        raw = [x for rep in b3 for x in rep["raw"]]
        m["B3.median"], m["B3.p95"] = pct(raw, 0.5), pct(raw, 0.95)
        m["B3.wake"] = _med([rep["wakeOvershootMs"]["median"] for rep in b3])
    if b4 := r.get("B4"):
        m["B4.median"] = _med([rep["submitMs"]["median"] for rep in b4])
        m["B4.p95"] = _med([rep["submitMs"]["p95"] for rep in b4])
        m["B4.idem"] = _med([rep["submitWithIdempotencyKeyMs"]["median"] for rep in b4])
    if b5 := r.get("B5"):
        for conc in sorted({res["workerConcurrency"] for rep in b5 for res in rep}, reverse=True):
            rows = [res for rep in b5 for res in rep if res["workerConcurrency"] == conc]
            for key in ("dbStatementsPerSec", "dbXactPerSec", "workerCpuPctOfOneCore"):
                m[f"B5.{conc}.{key}"] = _med([row[key] for row in rows])
            m[f"B5.{conc}.runs"] = _med([row["sleepingRuns"] for row in rows])
    return m


#: (metric key, label, target text, check(umt, ow) -> bool | None)
ROWS: list[tuple[str, str, str, Any]] = [
    ("B1.runsPerSec", "B1 throughput, runs/s", "≥ 1.5x OW", lambda u, o: u >= 1.5 * o),
    ("B1.stepsPerSec", "B1 steps/s", "", None),
    ("B1.dbStatementsPerRun", "B1 DB statements per run", "", None),
    ("B1.dbXactPerRun", "B1 DB transactions per run", "", None),
    ("B1.workerCpuPctOfOneCore", "B1 worker CPU, % of a core", "", None),
    ("B1.postgresCpuPctOfOneCore", "B1 PostgreSQL CPU, % of a core", "", None),
    ("B2.median", "B2 signal → completed, median ms", "≤ 10", lambda u, o: u <= 10),
    ("B2.p95", "B2 signal → completed, p95 ms", "≤ 25", lambda u, o: u <= 25),
    ("B2.sendMs", "B2 send-signal call, median ms", "", None),
    ("B3.median", "B3 1 s sleep overshoot (completion), median ms", "≤ 10",
     lambda u, o: u <= 10),
    ("B3.p95", "B3 1 s sleep overshoot (completion), p95 ms", "≤ 25", lambda u, o: u <= 25),
    ("B3.wake", "B3 wake overshoot t1-t0-1000, median ms", "", None),
    ("B4.median", "B4 submit, median ms", "≤ 0.5", lambda u, o: u <= 0.5),
    ("B4.p95", "B4 submit, p95 ms", "", None),
    ("B4.idem", "B4 submit with idempotency key, median ms", "", None),
]


def b5_rows(m: dict[str, float | None]) -> list[tuple[str, str, str, Any]]:
    rows: list[tuple[str, str, str, Any]] = []
    for conc in sorted({int(k.split(".")[1]) for k in m if k.startswith("B5.")}, reverse=True):
        runs = m.get(f"B5.{conc}.runs")
        idle = f"B5 idle worker conc {conc} ({runs:.0f} asleep)" if runs else f"B5 conc {conc}"
        rows += [
            (f"B5.{conc}.dbStatementsPerSec", f"{idle}, statements/s", "≤ 1",
             lambda u, o: u <= 1),
            (f"B5.{conc}.dbXactPerSec", f"{idle}, transactions/s", "", None),
            (f"B5.{conc}.workerCpuPctOfOneCore", f"{idle}, worker CPU %", "", None),
        ]
    return rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


#: The peers umt is compared with, in the table's column order.
PEERS = (("ow", "OpenWorkflow 0.10.1", "OW"), ("dbos", "DBOS 3.4.0", "DBOS"),
         ("before", "umt before", "before"))


def table(results: dict[str, dict[str, Any]]) -> str:
    """One row per metric: each engine's number, umt's ratio to each peer, umt's target."""
    peers = [(key, title, short) for key, title, short in PEERS if key in results]
    figures = {engine: metrics(result) for engine, result in results.items()}
    mu = figures.get("umt", {})
    head = ["metric", "target", *(title for _, title, _ in peers), "umt",
            *(f"umt ÷ {short}" for _, _, short in peers), "target met"]
    align = ["---", "---", *(["---:"] * (2 * len(peers) + 1)), ":---:"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    merged: dict[str, float | None] = {k: v for m in figures.values() for k, v in m.items()}
    for key, label, target, check in ROWS + b5_rows(merged):
        values = {engine: m.get(key) for engine, m in figures.items()}
        if all(v is None for v in values.values()):
            continue
        u = mu.get(key)
        ratios = []
        for peer, _, _ in peers:
            p = values.get(peer)
            ratios.append(f"{u / p:.2f}x" if (p and u is not None) else "-")
        met = ""
        if check is not None and u is not None:
            try:
                met = "yes" if check(u, values.get("ow")) else "**no**"
            except TypeError:
                met = "-"
        cells = [label, target, *(_fmt(values.get(peer)) for peer, _, _ in peers), _fmt(u),
                 *ratios, met]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe(results: dict[str, dict[str, Any]]) -> str:
    any_result = next(iter(results.values()))
    cfg = any_result["config"]
    host = any_result["host"]
    return (
        f"{host['cpus']} CPUs, {host['pg'].split(',')[0]}, node {host['node']}; "
        f"repeats {cfg['repeats']}, B1 {cfg['b1Runs']} runs x {cfg['b1Workers']} workers x "
        f"{cfg['b1Concurrency']}, B2 {cfg['b2Trials']} trials, B3 {cfg['b3Trials']} trials, "
        f"B4 {cfg['b4Submits']} submits, B5 {cfg['b5Runs']} runs, window "
        f"{cfg['b5WindowMs'] / 1000:.0f} s; started {any_result['startedAt']}"
    )


# ---------------------------------------------------------------------- commands


def knobs_from(args: argparse.Namespace) -> dict[str, str]:
    knobs = dict(QUICK if args.quick else FULL)
    for name in ("REPEATS", "BENCHES", "B1_RUNS", "B2_TRIALS", "B3_TRIALS", "B4_SUBMITS",
                 "B5_RUNS", "B5_CONCURRENCY", "B5_WINDOW_MS", "B2_GAP_MS", "B3_GAP_MS",
                 "B5_WARMUP_MS", "LAT_CONCURRENCY", "B1_WORKERS", "B1_CONCURRENCY"):
        if name in os.environ:
            knobs[name] = os.environ[name]
    if args.repeats is not None:
        knobs["REPEATS"] = str(args.repeats)
    if args.benches:
        knobs["BENCHES"] = args.benches
    return knobs


def use_umt_from(path: str | None) -> None:
    global UMT_PATH
    UMT_PATH = Path(path).resolve() if path else None


def compare(args: argparse.Namespace) -> int:
    global BEFORE_PATH
    use_umt_from(args.umt_path)
    prepare_peer_bench()
    engines = [e.strip() for e in args.engines.split(",") if e.strip() and e.strip() != "before"]
    if args.before:
        BEFORE_PATH = Path(args.before).resolve()
        if not (BEFORE_PATH / "umt").is_dir() or not (BEFORE_PATH / "bench").is_dir():
            raise SystemExit(f"--before {BEFORE_PATH}: needs the snapshot's umt/ and bench/")
        engines.insert(engines.index("umt") if "umt" in engines else len(engines), "before")
    if unknown := [e for e in engines if e not in ENGINES]:
        raise SystemExit(f"unknown engine(s) {unknown}; known: {', '.join(ENGINES)}")
    if "dbos" in engines:
        prepare_dbos_venv()
    out_dir = RESULTS / time.strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    knobs = knobs_from(args)
    results: dict[str, dict[str, Any]] = {}
    with bench_cluster(args.url, args.keep, out_dir / "postgres.log") as admin_url:
        for engine in engines:
            db_url = fresh_database(admin_url, f"bench_{engine}")
            results[engine] = run_harness(engine, db_url, knobs, out_dir / f"{engine}.json")
    text = f"{describe(results)}\n\n{table(results)}\n"
    if UMT_PATH:
        text = f"umt imported from {UMT_PATH}\n{text}"
    if BEFORE_PATH:
        text = f"umt before imported from {BEFORE_PATH}\n{text}"
    (out_dir / "table.md").write_text(text)
    latest = RESULTS / "latest"
    latest.unlink(missing_ok=True)
    latest.symlink_to(out_dir.name)
    print(text)
    log(f"results in {out_dir}")
    return 0


def reprint(args: argparse.Namespace) -> int:
    folder = Path(args.result_dir)
    if list(folder.glob("umt-*-claim.json")):
        from bench.scale import reprint as reprint_scale

        print(reprint_scale(folder))
        return 0
    results = {e: json.loads((folder / f"{e}.json").read_text())
               for e in ENGINES if (folder / f"{e}.json").exists()}
    print(f"{describe(results)}\n\n{table(results)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("import-path", "startup", "parse", "web", "workers"):  # bench/<name>
        from importlib import import_module

        return int(import_module(f"bench.{argv[0].replace('-', '_')}").main(argv[1:]))
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    for name in ("compare", "scale"):
        p = sub.add_parser(name)
        p.add_argument("--url", help="an existing superuser URL instead of a throwaway cluster")
        p.add_argument("--keep", action="store_true", help="leave the throwaway cluster running")
        p.add_argument("--umt-path", help="import umt from this checkout (e.g. a patched engine)")
    p_compare = sub.choices["compare"]
    p_compare.add_argument("--quick", action="store_true", help="1 repeat, fewer trials (~8 min)")
    p_compare.add_argument("--engines", default="ow,dbos,umt")
    p_compare.add_argument("--before", metavar="PATH",
                           help="also measure this earlier snapshot of umt (its umt/ and bench/) "
                                "in the same run, as column 'umt before'")
    p_compare.add_argument("--benches", help="e.g. B1,B4 (default: all five)")
    p_compare.add_argument("--repeats", type=int)
    p_scale = sub.choices["scale"]
    p_scale.add_argument("--sizes", default="2000,100000")
    p_scale.add_argument("--trials", type=int, default=20, help="B2 and B3 trials per size")
    p_table = sub.add_parser("table")
    p_table.add_argument("result_dir")
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["compare", *argv]
    args = parser.parse_args(argv)
    if args.command == "scale":
        from bench.scale import scale

        return scale(args)
    if args.command == "table":
        return reprint(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
