"""A real acquisition, end to end, driven through the ``umt`` command line (see scripts/demo)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.qbittorrent import QbtInstance, Swarm, make_payload

MOVIE = "Big.Buck.Sample.2026.2160p.mkv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mb", type=int, default=64, help="size of the sample movie")
    parser.add_argument("--keep", action="store_true", help="keep the demo folder afterwards")
    parser.add_argument("--dir", type=Path, help="demo folder (default: a new temporary one)")
    options = parser.parse_args()

    root = options.dir or Path(tempfile.mkdtemp(prefix="umt-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    say(f"demo folder: {root}")
    swarm = client = worker = None
    try:
        say("starting a seeder qbittorrent-nox with an embedded tracker")
        swarm = Swarm.start(root / "seeder")
        make_payload(root / "sample", MOVIE, options.size_mb * 1024 * 1024, seed=2026)
        seeded = swarm.seed(root / "sample" / MOVIE)
        torrent = root / f"{MOVIE}.torrent"
        torrent.write_bytes(seeded.torrent_bytes)

        say("starting umt's own qbittorrent-nox client")
        client = QbtInstance.create(root / "client")
        client.start()
        (root / "library").mkdir(exist_ok=True)
        config = write_config(root, client)
        umt = [str(Path(sys.executable).with_name("umt")), "--config", str(config)]

        run([*umt, "doctor"], check=False)
        run([*umt, "qbittorrent", "install-hook"])
        title = "Big Buck Sample (2026)"
        started = json.loads(run([*umt, "--json", "start-acquire", str(torrent), "--name", title]))
        run_id = started["run_id"]

        say("starting `umt worker` (stops with SIGTERM at the end)")
        worker_log = (root / "worker.log").open("wb")
        worker = subprocess.Popen([*umt, "worker"], stdout=worker_log, stderr=worker_log,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        status = wait_for_final(umt, run_id, timeout=300)
        run([*umt, "show", run_id])
        run([*umt, "catalog"])
        library = root / "library"
        say("library contents:")
        for path in sorted(library.rglob("*")):
            if path.is_file():
                print(f"    {path.relative_to(library)}  ({path.stat().st_size:,} bytes)")
        if status != "succeeded":
            say(f"the run ended {status}; see {root / 'worker.log'}")
            return 1
        imported = [path for path in library.rglob("*") if path.is_file()]
        expected = sha256_of(root / "sample" / MOVIE)
        if len(imported) != 1 or sha256_of(imported[0]) != expected:
            say(f"expected one library file with SHA-256 {expected}, found {imported}")
            return 1
        say("done: the movie is in the library and the torrent was cleaned up")
        return 0
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
        for instance in (client, swarm):
            if instance is not None:
                instance.destroy()
        if not options.keep and options.dir is None:
            shutil.rmtree(root, ignore_errors=True)


def sha256_of(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def write_config(root: Path, client: QbtInstance) -> Path:
    config = root / "umt.toml"
    config.write_text("\n".join([
        "[database]", f'url = "sqlite:///{root}/umt.db"',
        "[qbittorrent]", f'url = "{client.url}"', f'username = "{client.username}"',
        f'password = "{client.password}"', f'download_dir = "{client.download_dir}"',
        "[library]", f'dir = "{root / "library"}"',
        "[acquire]", 'retention = "5s"', "",
    ]))
    config.chmod(0o600)
    return config


def wait_for_final(umt: list[str], run_id: str, *, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        status = json.loads(quiet([*umt, "--json", "status", run_id]))
        line = str(status["status"])
        if status.get("detail"):
            line += f" - {status['detail']}"
        current = [s["name"] for s in status["steps"] if s["status"] != "succeeded"]
        line += f" (at {current[0]})" if current else ""
        if line != last:
            say(f"run {run_id[:8]}: {line}")
            last = line
        if status["status"] in ("succeeded", "failed", "canceled"):
            return str(status["status"])
        time.sleep(0.5)
    return "timed out"


def run(command: list[str], *, check: bool = True) -> str:
    print(f"\n$ {shlex.join(['umt', *command[1:]])}", flush=True)
    result = subprocess.run(command, capture_output=True, text=True, env=os.environ)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if check and result.returncode != 0:
        raise SystemExit(f"demo: `umt {command[1]}…` exited {result.returncode}")
    return result.stdout


def quiet(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
