"""Real, private qbittorrent-nox instances on loopback for tests (no pytest here).

Facts this builds on are in QBITTORRENT.md (shared): the config file is written before the first
start, everything listens on 127.0.0.1 only, and DHT/LSD/PeX/UPnP are off so that nothing leaves
the machine.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import hashlib
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import qbittorrentapi
import torf

from umt.media.qbittorrent import QbtClient

QBITTORRENT_NOX = shutil.which("qbittorrent-nox") or "/usr/bin/qbittorrent-nox"
SEEDING_STATES = frozenset({"stalledUP", "uploading", "forcedUP", "queuedUP"})

_PR_SET_PDEATHSIG = 1
_live: dict[int, subprocess.Popen[bytes]] = {}
T = TypeVar("T")


def _kill_leftovers() -> None:
    for process in list(_live.values()):
        _kill_group(process)


atexit.register(_kill_leftovers)


def free_port() -> int:
    """A port nothing listens on right now (bind to 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pbkdf2_password(password: str, *, salt: bytes | None = None) -> str:
    """qBittorrent's ``WebUI\\Password_PBKDF2`` value: PBKDF2-HMAC-SHA512, 100 000 rounds."""
    salt = salt if salt is not None else os.urandom(16)
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 100_000, dklen=64)
    return f"@ByteArray({base64.b64encode(salt).decode()}:{base64.b64encode(key).decode()})"


def wait_until(
    probe: Callable[[], T | None], *, timeout: float, interval: float = 0.1, what: str = "it"
) -> T:
    """Call ``probe`` until it returns something other than None/False; TimeoutError after."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(interval)


class QbtInstance:
    """One qbittorrent-nox process with its own profile, ports, downloads and log."""

    def __init__(
        self,
        base_dir: Path,
        *,
        username: str,
        password: str,
        webui_port: int,
        bt_port: int,
    ) -> None:
        self.base_dir = base_dir
        self.username = username
        self.password = password
        self.webui_port = webui_port
        self.bt_port = bt_port
        self.profile_dir = base_dir / "profile"
        self.download_dir = base_dir / "downloads"
        self.log_path = base_dir / "qbittorrent.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._client: qbittorrentapi.Client | None = None
        #: Shell commands run in a private mount namespace of qbittorrent-nox's own before it
        #: starts (root only), e.g. mounts that give it a view of the disk umt does not have.
        self.namespace_setup: str | None = None

    def __repr__(self) -> str:
        return f"QbtInstance({self.url}, bt_port={self.bt_port}, dir={self.base_dir})"

    @classmethod
    def create(
        cls,
        base_dir: Path,
        *,
        username: str = "umt",
        password: str | None = None,
        local_host_auth: bool = True,
        download_dir: Path | None = None,
    ) -> QbtInstance:
        """Write the profile of a new instance (not started); ``download_dir`` is its default
        save path as qBittorrent sees it (created here unless it is somewhere else)."""
        instance = cls(
            base_dir,
            username=username,
            password=password if password is not None else secrets.token_urlsafe(12),
            webui_port=free_port(),
            bt_port=free_port(),
        )
        if download_dir is not None:
            instance.download_dir = download_dir
        else:
            instance.download_dir.mkdir(parents=True, exist_ok=True)
        instance.config_path.parent.mkdir(parents=True, exist_ok=True)
        instance.config_path.write_text(instance._config(local_host_auth))
        return instance

    @property
    def config_path(self) -> Path:
        return self.profile_dir / "qBittorrent" / "config" / "qBittorrent.conf"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _config(self, local_host_auth: bool) -> str:
        return "\n".join(
            [
                "[LegalNotice]",
                "Accepted=true",
                "",
                "[BitTorrent]",
                f"Session\\Port={self.bt_port}",
                "Session\\Interface=lo",
                "Session\\InterfaceName=lo",
                "Session\\InterfaceAddress=127.0.0.1",
                "Session\\DHTEnabled=false",
                "Session\\LSDEnabled=false",
                "Session\\PeXEnabled=false",
                "Session\\MultiConnectionsPerIp=true",
                "Session\\QueueingSystemEnabled=false",
                f"Session\\DefaultSavePath={self.download_dir}",
                "",
                "[Network]",
                "PortForwardingEnabled=false",
                "",
                "[Preferences]",
                "Connection\\ResolvePeerCountries=false",
                "WebUI\\Address=127.0.0.1",
                f"WebUI\\Port={self.webui_port}",
                "WebUI\\UseUPnP=false",
                f"WebUI\\LocalHostAuth={'true' if local_host_auth else 'false'}",
                f"WebUI\\Username={self.username}",
                f'WebUI\\Password_PBKDF2="{pbkdf2_password(self.password)}"',
                "",
            ]
        )

    def start(self, *, timeout: float = 20.0) -> None:
        """Spawn qbittorrent-nox and wait until its Web API answers."""
        if self.is_running():
            return
        with self.log_path.open("ab") as log:
            argv = [QBITTORRENT_NOX, f"--profile={self.profile_dir}",
                    f"--webui-port={self.webui_port}"]
            if self.namespace_setup:
                argv = ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
                        f'{self.namespace_setup}\nexec "$@"', "sh", *argv]
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        _live[self._process.pid] = self._process
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"qbittorrent-nox exited with {self._process.returncode}; "
                    f"log:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(
                    f"qbittorrent-nox did not answer on {self.url} within {timeout:.0f} s; "
                    f"log:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def _answers(self) -> bool:
        """Any HTTP answer counts: without a login the API says 403."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/app/version", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def stop(self, *, timeout: float = 15.0) -> None:
        """SIGTERM (qBittorrent saves its state), then SIGKILL after ``timeout``."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(process)
        self._forget()

    def kill(self) -> None:
        """SIGKILL the process group at once (no state saved), like a crash."""
        if self._process is not None:
            _kill_group(self._process)
            self._forget()

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        """Kill the process (if any) and remove every file of the instance."""
        self.kill()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def _forget(self) -> None:
        if self._process is not None:
            _live.pop(self._process.pid, None)
            self._process = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self) -> qbittorrentapi.Client:
        """A qbittorrent-api client, logged in (it logs in again by itself after a restart)."""
        if self._client is None:
            self._client = qbittorrentapi.Client(
                host=self.url,
                username=self.username,
                password=self.password,
                REQUESTS_ARGS={"timeout": 10},
            )
            self._client.auth_log_in()
        return self._client

    def adapter(self, **kwargs: Any) -> QbtClient:
        """umt's own adapter for this instance."""
        return QbtClient(self.url, self.username, self.password, **kwargs)

    def set_finish_hook(self, program: str | None) -> None:
        """Configure "run external program on torrent finished".

        qBittorrent runs ``program`` WITHOUT a shell: it splits the string into arguments
        (double quotes group), substitutes placeholders (%I v1 info-hash, %K torrent id,
        %N name, %F content path, %L category, %G tags) and starts it detached. Pipes,
        redirections and ``$VARS`` do nothing; use an absolute program path.
        """
        set_finish_hook(self.client(), program)


def set_finish_hook(client: qbittorrentapi.Client, program: str | None) -> None:
    """See ``QbtInstance.set_finish_hook``; ``None`` disables the hook."""
    client.app_set_preferences(
        {"autorun_enabled": program is not None, "autorun_program": program or ""}
    )


def _die_with_parent() -> None:
    # atexit does not run when pytest itself is SIGKILLed; PR_SET_PDEATHSIG covers that
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    # start_new_session made the process a group leader: the group also holds hook programs
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    _live.pop(process.pid, None)


def make_payload(directory: Path, name: str, size_bytes: int, *, seed: int) -> str:
    """Write ``directory/name`` with ``size_bytes`` pseudo-random bytes; return its sha256."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    digest = hashlib.sha256()
    chunk_size = 4 * 1024 * 1024
    with (directory / name).open("wb") as f:
        remaining = size_bytes
        while remaining > 0:
            chunk = rng.randbytes(min(chunk_size, remaining))
            f.write(chunk)
            digest.update(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def make_torrent(
    path: Path, *, tracker_url: str | None = None, piece_size: int | None = None
) -> bytes:
    """A v1 .torrent of a file or a folder (multi-file), as bytes."""
    torrent = torf.Torrent(
        path=path,
        trackers=[tracker_url] if tracker_url else None,
        private=False,
        created_by="umt-tests",
        piece_size=piece_size,
    )
    torrent.generate()
    data: bytes = torrent.dump()
    return data


@dataclass(frozen=True)
class SeededTorrent:
    info_hash: str
    torrent_bytes: bytes
    path: Path


class Swarm:
    """A seeder instance whose embedded tracker announces at ``announce_url``."""

    def __init__(self, seeder: QbtInstance, tracker_port: int) -> None:
        self.seeder = seeder
        self.tracker_port = tracker_port

    @classmethod
    def start(cls, base_dir: Path) -> Swarm:
        seeder = QbtInstance.create(base_dir / "seeder")
        seeder.start()
        swarm = cls(seeder, free_port())
        seeder.client().app_set_preferences(
            {"enable_embedded_tracker": True, "embedded_tracker_port": swarm.tracker_port}
        )
        return swarm

    @property
    def announce_url(self) -> str:
        return f"http://127.0.0.1:{self.tracker_port}/announce"

    def seed(
        self, path: Path, *, timeout: float = 60.0, piece_size: int | None = None
    ) -> SeededTorrent:
        """Make a torrent of the data at ``path``, add it to the seeder, wait until it seeds."""
        torrent_bytes = make_torrent(path, tracker_url=self.announce_url, piece_size=piece_size)
        info_hash = torf.Torrent.read_stream(torrent_bytes).infohash
        client = self.seeder.client()
        client.torrents_add(torrent_files=torrent_bytes, save_path=str(path.parent))
        wait_until(
            lambda: self._state(client, info_hash) in SEEDING_STATES,
            timeout=timeout,
            what=f"the seeder to seed {path.name}",
        )
        return SeededTorrent(info_hash, torrent_bytes, path)

    @staticmethod
    def _state(client: qbittorrentapi.Client, info_hash: str) -> str | None:
        torrents = client.torrents_info(torrent_hashes=info_hash)
        return str(torrents[0].state) if torrents else None

    def connect(self, leecher: QbtInstance, info_hash: str) -> None:
        """Tell ``leecher`` where the seeder is (for magnets or when no tracker answers)."""
        leecher.client().torrents_add_peers(
            peers=[f"127.0.0.1:{self.seeder.bt_port}"], torrent_hashes=info_hash
        )

    def destroy(self) -> None:
        self.seeder.destroy()


def torrent_file(folder: Path, seeded: SeededTorrent) -> str:
    """``seeded``'s .torrent written into ``folder``; its path, as a source for umt."""
    path = folder / f"{seeded.path.name}.torrent"
    path.write_bytes(seeded.torrent_bytes)
    return str(path)


def flip_byte(path: Path, offset: int) -> None:
    """Corrupt one byte of ``path`` in place (its size stays)."""
    with open(path, "r+b") as file:
        file.seek(offset)
        value = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([value ^ 0x40]))
