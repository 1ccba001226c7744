"""What the scenarios run on: a throwaway PostgreSQL cluster, SQLite files, umt processes, a fake
and a real qBittorrent, and the database read directly for evidence.

Every process started here runs in its own session with PR_SET_PDEATHSIG, and ``Spikes.close``
(always called, also on failure or Ctrl-C) kills what is left, destroys the cluster and the
qBittorrent instances and removes the temporary directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from spikes.breakages import BREAK_ENV
from spikes.fake_qbittorrent import FakeQbittorrent
from spikes.report import Section, compact

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
POSTGRESQL = "postgresql"
SQLITE = "sqlite"
T = TypeVar("T")

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of umt processes: no UMT_*/SPIKE_* of ours except the break switch."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UMT_", "SPIKE_"))}
    if os.environ.get(BREAK_ENV):
        env[BREAK_ENV] = os.environ[BREAK_ENV]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def wait_until(probe: Callable[[], T | None], timeout: float, interval: float = 0.1) -> T | None:
    """``probe()`` until it returns something truthy, or None after ``timeout`` seconds.

    Exceptions of the database being away (a restarting PostgreSQL) count as "not yet".
    """
    from umt.engine import StoreUnavailable

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except (StoreUnavailable, psycopg.OperationalError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


class RunNotReached(AssertionError):
    """A run did not reach the state a scenario waits for."""


def _described(until: Callable[[Any], bool] | Sequence[str]) -> str:
    return "the awaited state" if callable(until) else "/".join(until)


# ---------------------------------------------------------------------- processes


@dataclass
class Proc:
    label: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def state(self) -> str:
        """The kernel's state letter (R, S, T for stopped, Z, …), or X when gone."""
        try:
            text = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return "X"
        return text.rsplit(")", 1)[1].split()[0]

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGCONT)
                os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, as systemd stops ``umt worker``; SIGKILL after ``timeout``."""
        self.send(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_lines(self, *needles: str) -> list[str]:
        return [line for line in self.log().splitlines() if any(n in line for n in needles)]


@dataclass
class CliResult:
    shown: str
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None

    @property
    def error_line(self) -> str:
        """``exit N: umt: error: …`` (or the output of a command that did not fail)."""
        lines = [line for line in self.stderr.splitlines() if line.startswith("umt: error")]
        if lines:
            return f"exit {self.code}: {lines[-1]}"
        return f"exit {self.code}: {compact(self.json) if self.json is not None else ''}"


# ---------------------------------------------------------------------- the whole invocation


class Spikes:
    """Shared by every scenario of one ``python -m spikes``."""

    def __init__(self, keep: bool = False) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="umt-spikes-"))
        os.chmod(self.base, 0o755)  # the postgres user must reach its cluster below
        self.keep = keep
        self.processes: list[Proc] = []
        self._cluster: Any = None
        self._swarm: Any = None
        self._leecher: Any = None
        self._databases = 0

    def close(self) -> None:
        for proc in self.processes:
            proc.kill()
        for closer in (self._close_qbittorrent, self._close_postgres):
            try:
                closer()
            except Exception as exc:  # cleanup goes on
                print(f"spikes: cleanup: {exc}", file=sys.stderr)
        if not self.keep:
            import shutil

            shutil.rmtree(self.base, ignore_errors=True)

    # ------------------------------------------------------------------ PostgreSQL

    def postgres(self) -> Any:
        if self._cluster is None:
            from tests.support.postgres import PostgresCluster

            cluster = PostgresCluster.create(self.base / "postgres",
                                             preload_pg_stat_statements=True,
                                             synchronous_commit=True)
            self._cluster = cluster
            cluster.start()
        return self._cluster

    def postgres_version(self) -> str:
        with psycopg.connect(self.postgres().url(), autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"

    def new_database(self, name: str) -> str:
        self._databases += 1
        dbname = re.sub(r"[^a-z0-9_]", "_", f"spike_{self._databases}_{name}".lower())[:60]
        cluster = self.postgres()
        cluster.create_database(dbname)
        return str(cluster.url(dbname))

    def _close_postgres(self) -> None:
        if self._cluster is not None:
            self._cluster.destroy()
            self._cluster = None

    # ------------------------------------------------------------------ real qBittorrent

    def real_qbittorrent(self) -> tuple[Any, Any]:
        """(swarm, leecher): a seeding qbittorrent-nox with its tracker and the one umt drives."""
        if self._swarm is None:
            from tests.support.qbittorrent import QbtInstance, Swarm

            self._swarm = Swarm.start(self.base / "qbittorrent")
            leecher = QbtInstance.create(self.base / "qbittorrent" / "leecher")
            leecher.start()
            self._leecher = leecher
        return self._swarm, self._leecher

    def _close_qbittorrent(self) -> None:
        if self._leecher is not None:
            self._leecher.destroy()
            self._leecher = None
        if self._swarm is not None:
            self._swarm.destroy()
            self._swarm = None

    # ------------------------------------------------------------------ processes

    def spawn(self, label: str, argv: list[str], env: dict[str, str], log_path: Path) -> Proc:
        with log_path.open("ab") as log:
            popen = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        proc = Proc(label, popen, log_path)
        self.processes.append(proc)
        return proc


# ---------------------------------------------------------------------- one scenario


class Case:
    """One scenario on one backend: its directory, database, config file and processes."""

    def __init__(self, spikes: Spikes, section: Section, backend: str) -> None:
        self.spikes = spikes
        self.section = section
        self.backend = backend
        slug = re.sub(r"[^a-z0-9]+", "-", f"{section.key}-{backend}".lower())
        self.dir = spikes.base / slug
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.library = self.dir / "library"
        self.library.mkdir()
        if backend == POSTGRESQL:
            self.db_url = spikes.new_database(section.key)
            self.sqlite_path: Path | None = None
        else:
            self.sqlite_path = self.dir / "umt.db"
            self.db_url = f"sqlite:///{self.sqlite_path}"
        self.config_path = self.dir / "umt.toml"
        self.procs: list[Proc] = []
        self.fake: FakeQbittorrent | None = None
        self._app: Any = None
        self._cli_count = 0

    @property
    def pg(self) -> bool:
        return self.backend == POSTGRESQL

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
        if self._app is not None:
            with contextlib.suppress(Exception):
                self._app.close()
        if self.fake is not None:
            self.fake.stop()

    # ------------------------------------------------------------------ configuration

    def fake_qbittorrent(self) -> FakeQbittorrent:
        if self.fake is None:
            self.fake = FakeQbittorrent(self.dir / "fake-qbittorrent").start()
        return self.fake

    def configure(
        self, *, qbittorrent: tuple[str, str, str, Path] | None = None,
        import_mode: str = "copy", retention: str = "1s", lease: str = "30s",
        poll: str = "1s", concurrency: int = 2,
    ) -> None:
        """Writes the config file every command of this case reads (``--config``)."""
        if qbittorrent is None:
            fake = self.fake_qbittorrent()
            qbittorrent = (fake.url, fake.username, fake.password, fake.download_dir)
        url, user, password, download_dir = qbittorrent
        self.config_path.write_text("\n".join([
            "[database]", f'url = "{self.db_url}"', "",
            "[qbittorrent]", f'url = "{url}"', f'username = "{user}"',
            f'password = "{password}"', f'download_dir = "{download_dir}"', 'timeout = "5s"', "",
            "[library]", f'dir = "{self.library}"', f'import_mode = "{import_mode}"', "",
            "[acquire]", f'retention = "{retention}"', 'download_timeout = "10m"', "",
            "[engine]", f'lease = "{lease}"', f'poll_interval = "{poll}"',
            'sqlite_poll_interval = "0.1s"', f"concurrency = {concurrency}", "",
        ]))
        self.config_path.chmod(0o600)
        self.section.setup = (self.section.setup + " · " if self.section.setup else "") + (
            f"engine.lease {lease}, poll {poll}")

    # ------------------------------------------------------------------ umt processes

    def _argv(self, spike: bool) -> list[str]:
        # A breakage is installed by spikes.umt_cli: then every umt process goes through it.
        module = "spikes.umt_cli" if spike or os.environ.get(BREAK_ENV) else "umt.cli.main"
        return [PYTHON, "-m", module, "--config", str(self.config_path)]

    def shorten(self, text: str) -> str:
        return text.replace(str(self.dir), "…").replace(str(self.spikes.base), "$TMP")

    def umt(self, *args: str, spike: bool = False, timeout: float = 120.0,
            show: bool = True) -> CliResult:
        """Runs one umt command (``--json``) and records it with its output as evidence."""
        argv = [*self._argv(spike), "--json", *args]
        prefix = "python -m spikes.umt_cli" if spike else "umt"
        shown_args = [a if len(a) < 90 else a[:60] + "…" for a in args]
        shown = self.shorten(f"{prefix} --json {shlex.join(shown_args)}")
        try:
            done = subprocess.run(argv, cwd=REPO, env=child_env(), capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            code, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = -1, str(exc.stdout or ""), f"timed out after {timeout:.0f}s"
        result = CliResult(shown, code, out, err)
        if show:
            self.show_command(result)
        return result

    def show_command(self, result: CliResult) -> None:
        lines = [f"$ {result.shown}"]
        if result.json is not None:
            lines.append(self.shorten(compact(result.json)))
        if result.code != 0:
            lines.append(self.shorten(result.error_line))
        self.section.block(lines)

    def worker(self, label: str, *, workflows: Sequence[str] | None = None,
               faults: str | None = None, concurrency: int = 2,
               env: dict[str, str] | None = None) -> Proc:
        """``umt worker`` as its own process (through ``spikes.umt_cli`` when it needs the
        spike workflows or faults); ``env``: more environment (``UMT_DATABASE_URL``, …)."""
        extra: dict[str, str] = dict(env or {})
        spike = bool(workflows) or bool(faults)
        if workflows:
            extra["SPIKE_WORKFLOWS"] = ",".join(workflows)
        if faults:
            extra["SPIKE_FAULTS"] = faults
        argv = [*self._argv(spike), "worker", "--concurrency", str(concurrency)]
        log_path = self.dir / f"worker-{label}.log"
        proc = self.spikes.spawn(label, argv, child_env(extra), log_path)
        self.procs.append(proc)
        return proc

    def freeze(self, proc: Proc, run_id: str, attempts: int = 50) -> None:
        """SIGSTOP ``proc`` at a moment it holds no lock on ``run_id`` (nor, on SQLite, the
        write lock): a process frozen inside a transaction blocks every other worker until it
        is resumed, which is not the lease loss a scenario means to show."""
        for _ in range(attempts):
            proc.send(signal.SIGSTOP)
            if wait_until(lambda: proc.state() == "T", 5, interval=0.01) and self._lockable(run_id):
                return
            proc.send(signal.SIGCONT)
            time.sleep(0.05)
        raise RuntimeError(f"{proc.label} always held a lock when frozen ({attempts} tries)")

    def _lockable(self, run_id: str) -> bool:
        """Whether the run's row (SQLite: the database) can be locked for writing right now."""
        try:
            if self.pg:
                with psycopg.connect(self.db_url, connect_timeout=3) as conn:
                    conn.execute("SET lock_timeout = '300ms'")
                    conn.execute("SELECT id FROM umt.runs WHERE id = %s FOR UPDATE", (run_id,))
                    conn.rollback()
                return True
            assert self.sqlite_path is not None
            lite = sqlite3.connect(self.sqlite_path, timeout=0.3, isolation_level=None)
            try:
                lite.execute("BEGIN IMMEDIATE")
                lite.execute("ROLLBACK")
            finally:
                lite.close()
            return True
        except (psycopg.Error, sqlite3.OperationalError):
            return False

    def wait_registered(self, proc: Proc, timeout: float = 30.0) -> str | None:
        """The worker id of ``proc`` once it has registered."""
        def probe() -> str | None:
            rows = self.sql(f"SELECT id FROM {self.table('workers')} WHERE pid = :pid "
                            "AND stopped_at IS NULL", pid=proc.pid)
            return str(rows[0]["id"]) if rows else None

        return wait_until(probe, timeout)

    # ------------------------------------------------------------------ direct reads

    def table(self, name: str) -> str:
        if not self.pg:
            return name
        return f"umt_media.{name}" if name in ("ledger", "catalog") else f"umt.{name}"

    def sql(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """A direct read (or write) with ``:name`` parameters, outside umt."""
        if self.pg:
            text = re.sub(r"(?<!:):([a-z_]+)", r"%(\1)s", query.replace("%", "%%"))
            with psycopg.connect(self.db_url, autocommit=True, row_factory=dict_row,
                                 connect_timeout=3) as conn:
                cursor = conn.execute(text, params)
                return list(cursor.fetchall()) if cursor.description else []
        assert self.sqlite_path is not None
        lite = sqlite3.connect(self.sqlite_path, timeout=10, isolation_level=None)
        try:
            lite.row_factory = sqlite3.Row
            rows = lite.execute(query, params).fetchall()
            return [{k: _json_column(k, v) for k, v in dict(row).items()} for row in rows]
        finally:
            lite.close()

    @property
    def engine(self) -> Any:
        """An in-process engine on the case's database, for cheap polling."""
        if self._app is None:
            from umt.app import App
            from umt.config import load_settings

            self._app = App(load_settings(self.config_path, env={}), pool_size=2)
        return self._app.engine(migrate_embedded=False, check_schema=False)

    def run(self, run_id: str) -> Any:
        return self.engine.get(run_id)

    def wait_run(self, run_id: str, until: Callable[[Any], bool] | Sequence[str],
                 timeout: float) -> Any:
        """The run once ``until`` holds (statuses, or a predicate); raises ``RunNotReached``
        after ``timeout`` seconds, so that a scenario never goes on from a state it did not
        reach."""
        found = self._poll_run(run_id, until, timeout)
        if found is None:
            last = self.run(run_id)
            raise RunNotReached(f"run {run_id} did not reach {_described(until)} within "
                                f"{timeout:.0f} s (last status {last.status})")
        return found

    def settled(self, run_id: str, timeout: float) -> Any:
        """The run once final and done compensating, else its last state (which the
        scenario's checks then judge: a run that never settles fails them)."""
        found = self._poll_run(run_id, lambda r: r.finished and r.compensation not in (
            "pending", "running"), timeout)
        return found if found is not None else self.run(run_id)

    def _poll_run(self, run_id: str, until: Callable[[Any], bool] | Sequence[str],
                  timeout: float) -> Any:
        if callable(until):
            predicate = until
        else:
            statuses = tuple(until)
            predicate = lambda run: run.status in statuses  # noqa: E731

        def probe() -> Any:
            run = self.run(run_id)
            return run if predicate(run) else None

        return wait_until(probe, timeout)

    def ledger(self, run_id: str | None = None) -> list[dict[str, Any]]:
        where = "WHERE run_id = :run_id" if run_id else ""
        params = {"run_id": run_id} if run_id else {}
        return self.sql(f"SELECT * FROM {self.table('ledger')} {where} ORDER BY id", **params)

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        return self.sql(f"SELECT * FROM {self.table('attempts')} WHERE run_id = :run_id "
                        "ORDER BY id", run_id=run_id)

    def worker_labels(self) -> dict[str, str]:
        rows = self.sql(f"SELECT id, pid FROM {self.table('workers')}")
        by_pid = {proc.pid: proc.label for proc in self.procs}
        return {str(row["id"]): by_pid.get(row["pid"], f"pid {row['pid']}") for row in rows}

    def ledger_block(self, entries: list[dict[str, Any]], *, title: str = "ledger") -> None:
        labels = self.worker_labels()
        lines = [f"{title}: run      step            att worker epoch operation → phase  detail"]
        for e in entries:
            detail = e["detail"]  # decoded by sql()
            if isinstance(detail, dict):
                detail = _shown_detail(detail)
            run = str(e["run_id"])[:8]
            operation = self.shorten(str(e["operation"])).replace(str(e["run_id"]), run)
            operation = re.sub(r"\b([0-9a-f]{8})[0-9a-f]{32}\b", r"\1…", operation)
            if len(operation) > 48:
                kind, _, rest = operation.partition(":")
                operation = f"{kind}:…{rest[-(46 - len(kind)):]}"
            lines.append(
                f"  {run} {e['step']:<15} {e['attempt']:<3} "
                f"{labels.get(str(e['worker_id']), str(e['worker_id'])[:8]):<6} "
                f"{e['lease_epoch']:<5} {operation} → {e['phase']:<8} "
                f"{self.shorten(compact(detail, 160))}"
            )
        self.section.block(lines)


#: Ledger detail keys shown first (the long ones, paths and hashes, last and shortened).
_DETAIL_ORDER = ("recovered", "outcome", "present_before", "removed", "reason", "attempt",
                 "epoch", "pid", "method", "mode", "size", "removed_partial", "sha256")


def _shown_detail(detail: dict[str, Any]) -> dict[str, Any]:
    shown = {k: detail[k] for k in _DETAIL_ORDER if k in detail}
    shown.update({k: v for k, v in detail.items() if k not in shown and k != "created_dirs"})
    if isinstance(shown.get("sha256"), str):
        shown["sha256"] = shown["sha256"][:12] + "…"
    return shown


#: Columns SQLite keeps as JSON text (PostgreSQL's jsonb comes back decoded).
_JSON_COLUMNS = frozenset({"data", "detail", "result", "input", "output", "error",
                           "delivered_to", "progress", "library_paths", "workflows"})


def _json_column(name: str, value: Any) -> Any:
    if name in _JSON_COLUMNS and isinstance(value, str):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value

