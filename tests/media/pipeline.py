"""A umt installation for tests: config file, database, library, a real qBittorrent client."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from tests.support.qbittorrent import QbtInstance
from umt.app import App
from umt.config import load_settings
from umt.engine import Engine, Run, WorkerOptions
from umt.media.sources import parse_source
from umt.records import catalog, ledger

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Pipeline:
    root: Path
    client: QbtInstance
    database_url: str
    import_mode: str = "auto"
    library_dir: Path | None = None
    retention: str = "2s"
    stall_timeout: str = "off"
    #: qBittorrent's download folder as umt sees it (default: where qBittorrent sees it).
    download_dir: Path | None = None
    #: More TOML, appended as it is (e.g. [[qbittorrent.path_map]] tables).
    extra_config: str = ""
    lease: str = "3s"
    all_files: bool = False
    #: More [library] settings, as TOML lines (naming_template, file_mode, …).
    library_extra: str = ""
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.library = self.library_dir or self.root / "library"
        self.library.mkdir(parents=True, exist_ok=True)
        self.config_path = self.root / "umt.toml"
        self.config_path.write_text(self._config_text())
        self.config_path.chmod(0o600)
        self.settings = load_settings(self.config_path, env={})
        self.app = App(self.settings)
        self.engine: Engine = self.app.engine(migrate_embedded=True, check_schema=False)
        self.engine.migrate()

    def _config_text(self) -> str:
        return "\n".join([
            "[database]", f'url = "{self.database_url}"',
            "[qbittorrent]", f'url = "{self.client.url}"', f'username = "{self.client.username}"',
            f'password = "{self.client.password}"',
            f'download_dir = "{self.download_dir or self.client.download_dir}"',
            "[library]", f'dir = "{self.library}"', f'import_mode = "{self.import_mode}"',
            f"all_files = {'true' if self.all_files else 'false'}", self.library_extra,
            "[acquire]", f'retention = "{self.retention}"', 'download_timeout = "10m"',
            f'stall_timeout = "{self.stall_timeout}"',
            "[engine]", f'lease = "{self.lease}"', 'poll_interval = "1s"',
            'sqlite_poll_interval = "0.1s"', self.extra_config, "",
        ])

    def close(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        self.app.close()

    # ------------------------------------------------------------------ runs

    def start(self, source: str, **options: object) -> str:
        result = self.app.start_acquire(parse_source(source), **options)  # type: ignore[arg-type]
        return result.run.id

    def wait(self, run_id: str, *, timeout: float, until: tuple[str, ...] = ()) -> Run:
        deadline = time.monotonic() + timeout
        while True:
            run = self.engine.get(run_id)
            settled = run.finished and run.compensation not in ("pending", "running")
            if settled or run.status in until or time.monotonic() > deadline:
                return run
            time.sleep(0.1)

    def ledger(self, run_id: str) -> list[ledger.LedgerEntry]:
        return ledger.entries_of_run(self.engine.database, run_id)

    def catalog(self) -> list[catalog.CatalogItem]:
        return catalog.items(self.engine.database)

    def library_files(self) -> list[Path]:
        return sorted(path for path in self.library.rglob("*") if path.is_file())

    # ------------------------------------------------------------------ workers

    @contextlib.contextmanager
    def worker(self, **options: object) -> Iterator[None]:
        """An in-process worker on a thread."""
        defaults: dict[str, object] = {
            "concurrency": 2, "lease": timedelta(seconds=3),
            "poll_interval": timedelta(seconds=1), "grace_period": timedelta(seconds=2),
        }
        worker = self.engine.worker(self.app.registry(), WorkerOptions(**{**defaults, **options}))  # type: ignore[arg-type]
        stop = threading.Event()
        crashed: list[BaseException] = []

        def serve() -> None:
            try:
                worker.run(stop)
            except BaseException as exc:
                crashed.append(exc)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(30)
        # Like the engine tests' workers: a worker that crashed or hangs fails the test.
        assert not thread.is_alive(), "the in-process worker did not stop"
        if crashed:
            raise AssertionError(f"the in-process worker crashed: {crashed[0]!r}") from crashed[0]

    def spawn_worker(self, faults: str | None = None) -> subprocess.Popen[bytes]:
        """``umt worker`` as its own process, logging to a file. ``faults``: injected by
        ``spikes.umt_cli`` (``SPIKE_FAULTS``, e.g. ``slow-copy=100``: copies at 100 MB/s)."""
        log = (self.root / f"worker-{len(self._processes)}.log").open("wb")
        command = self.umt_command("worker", "--concurrency", "2")
        env = None
        if faults:
            command[2] = "spikes.umt_cli"
            env = {**os.environ, "SPIKE_FAULTS": faults}
        process = subprocess.Popen(
            command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=REPO,
            start_new_session=True, env=env,
        )
        self._processes.append(process)
        return process

    def umt_command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "umt.cli.main", "--config", str(self.config_path), *args]

    def hook_program(self) -> str:
        """The finish hook as qBittorrent runs it: no shell, no environment of ours, through
        the console script (``umt.cli.entry``, the hook's fast path) as installed."""
        script = Path(sys.executable).parent / "umt"
        return " ".join([str(script), "--config", str(self.config_path),
                         "hook", "download-done", "%I"])

    @staticmethod
    def kill(process: subprocess.Popen[bytes]) -> None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
