"""Worker processes that are other machines, for tests (root only): each ``umt worker`` runs
with a hostname of its own and the shared download folder mounted at a path of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.media.pipeline import REPO


class Host:
    """``umt worker`` as another machine: its own hostname, the shared download folder
    mounted at a path of its own (empty for everyone else)."""

    def __init__(self, name: str, root: Path, shared: Path, config: Path,
                 faults: str | None = None) -> None:
        """``faults``: injected by ``spikes.umt_cli`` (``SPIKE_FAULTS``, e.g. ``slow-copy=16``:
        copies at 16 MB/s)."""
        self.name = name
        self.log = root / f"worker-{name}.log"
        setup = f"hostname {name}\nmount --bind '{shared}' '{root / name}'\nexec \"$@\""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-ec", setup,
                 "sh", sys.executable, "-m", "spikes.umt_cli" if faults else "umt.cli.main",
                 "--config", str(config), "worker", "--concurrency", "2"],
                cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
                env={**os.environ, "SPIKE_FAULTS": faults} if faults else None,
            )

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
