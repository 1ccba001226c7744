"""A throwaway PostgreSQL cluster for tests, or an existing server given by URL.

`PostgresCluster.create()` runs `initdb` from the installed binaries and tunes the cluster for
tests (no fsync, loopback only, a free port, its own socket directory). PostgreSQL refuses to
run as root; when this process is root (as in CI) every server command runs as the unprivileged
`postgres` user through `runuser`, in directories that user owns.

`PostgresCluster.from_url()` wraps a server somebody else runs (see `TEST_PG_URL_ENV`): databases
can be created and dropped on it, but it cannot be started, stopped, restarted or killed.

Linux only: process liveness is read from /proc.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

log = logging.getLogger(__name__)

TEST_PG_URL_ENV = "UMT_TEST_PG_URL"
SERVICE_USER = "postgres"
StopMode = Literal["smart", "fast", "immediate"]

_DEBIAN_BINDIR_GLOB = "/usr/lib/postgresql/*/bin"
_PG_CTL_TIMEOUT_S = 60
_PROCESS_EXIT_TIMEOUT_S = 30.0
_PORT_ATTEMPTS = 5
_LOG_TAIL_LINES = 40
_CONF_FILE = "umt_test.conf"
# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 107
_PORT_CLASH_MARKERS = ("could not bind", "address already in use")


class PostgresClusterError(RuntimeError):
    """The cluster could not be created, started, stopped or killed."""


class ExternalServerError(NotImplementedError):
    """The operation needs a cluster this process created, not a server given by URL."""


class PostgresCluster:
    """A PostgreSQL server reachable over TCP on 127.0.0.1 (or at a given URL)."""

    def __init__(self, admin_url: str, local: _LocalServer | None) -> None:
        self._admin_url = admin_url
        self._local = local

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        base_dir: Path,
        *,
        port: int | None = None,
        preload_pg_stat_statements: bool = False,
        synchronous_commit: bool = False,
    ) -> PostgresCluster:
        """Run initdb for a new cluster under `base_dir` (not started yet).

        `synchronous_commit=True` makes a commit survive `kill()`; with the default (off) a
        transaction committed in the last few hundred milliseconds is lost when the server's
        processes are killed, because its WAL was still in shared memory.
        """
        local = _LocalServer.initialise(
            base_dir,
            port=port,
            preload_pg_stat_statements=preload_pg_stat_statements,
            synchronous_commit=synchronous_commit,
        )
        return cls(_tcp_url(local.port, "postgres"), local)

    @classmethod
    def from_url(cls, url: str) -> PostgresCluster:
        """Wrap an existing server; `url` names a database that may create and drop databases."""
        if urlsplit(url).scheme not in ("postgresql", "postgres"):
            raise ValueError(f"not a postgresql:// URL: {url!r}")
        return cls(url, None)

    # --- where it is ----------------------------------------------------------------------------

    @property
    def is_external(self) -> bool:
        """True for a server given by URL: it cannot be started, stopped or killed from here."""
        return self._local is None

    @property
    def port(self) -> int:
        if self._local is not None:
            return self._local.port
        return urlsplit(self._admin_url).port or 5432

    @property
    def data_dir(self) -> Path:
        return self._require_local("data_dir").data_dir

    @property
    def log_file(self) -> Path:
        return self._require_local("log_file").log_file

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for database `dbname` on this server."""
        if self._local is not None:
            return _tcp_url(self._local.port, dbname)
        return _with_dbname(self._admin_url, dbname)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._require_local("start").start()

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server; does nothing if it is not running."""
        self._require_local("stop").stop(mode)

    def restart(self) -> None:
        local = self._require_local("restart")
        local.stop("fast")
        local.start()

    def kill(self) -> None:
        """SIGKILL the postmaster and all its processes, as in a crash of the server.

        Data handed to the kernel survives (fsync is off, but the machine keeps running);
        `start()` afterwards runs crash recovery.
        """
        self._require_local("kill").kill()

    def is_running(self) -> bool:
        if self._local is not None:
            return self._local.is_running()
        return self._accepts_connections()

    def destroy(self) -> None:
        """Stop the server and delete its files. A server given by URL is left alone."""
        if self._local is not None:
            self._local.destroy()

    def __enter__(self) -> PostgresCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.destroy()

    # --- databases ------------------------------------------------------------------------------

    def create_database(self, name: str, template: str | None = None) -> None:
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            query = query + sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        with self._admin_connection() as conn:
            conn.execute(query)

    def drop_database(self, name: str) -> None:
        """Drop `name`, disconnecting its sessions; does nothing if it does not exist."""
        query = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        with self._admin_connection() as conn:
            conn.execute(query)

    # --- internals ------------------------------------------------------------------------------

    def _admin_connection(self) -> psycopg.Connection[TupleRow]:
        return psycopg.connect(self._admin_url, autocommit=True, connect_timeout=10)

    def _accepts_connections(self) -> bool:
        try:
            with psycopg.connect(self._admin_url, connect_timeout=3):
                return True
        except psycopg.OperationalError:
            return False

    def _require_local(self, operation: str) -> _LocalServer:
        if self._local is None:
            raise ExternalServerError(
                f"{operation}() needs a cluster created by PostgresCluster.create(); "
                f"this one is an existing server given by URL ({TEST_PG_URL_ENV})"
            )
        return self._local

    def __repr__(self) -> str:
        where = "external" if self._local is None else str(self._local.data_dir)
        return f"<PostgresCluster port={self.port} {where}>"


@dataclass
class _LocalServer:
    """The files and processes of a cluster created by this process."""

    bindir: Path
    home: Path
    port: int
    port_is_fixed: bool
    socket_dir: Path
    settings: dict[str, str]
    # Directories made with mkdtemp, deleted whole by destroy().
    owned_dirs: list[Path] = field(default_factory=list)
    destroyed: bool = False

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "postmaster.pid"

    @classmethod
    def initialise(
        cls,
        base_dir: Path,
        *,
        port: int | None,
        preload_pg_stat_statements: bool,
        synchronous_commit: bool,
    ) -> _LocalServer:
        bindir = find_bindir()
        home, owned_dirs = _prepare_home(Path(base_dir))
        socket_dir = _socket_dir_for(home, owned_dirs)
        chosen_port = port if port is not None else pick_free_port()
        server = cls(
            bindir=bindir,
            home=home,
            port=chosen_port,
            port_is_fixed=port is not None,
            socket_dir=socket_dir,
            settings=_test_settings(
                chosen_port, socket_dir, preload_pg_stat_statements, synchronous_commit
            ),
            owned_dirs=owned_dirs,
        )
        try:
            server.run_initdb()
        except BaseException:
            server.destroy()
            raise
        return server

    def run_initdb(self) -> None:
        args = [
            str(self.bindir / "initdb"),
            "-D", str(self.data_dir),
            "-U", SERVICE_USER,
            "--auth=trust",
            "-E", "UTF8",
            f"--locale={_initdb_locale()}",
            "--no-sync",
        ]  # fmt: skip
        result = self.run(args)
        if result.returncode != 0:
            raise PostgresClusterError(
                f"initdb failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
            )
        postgresql_conf = self.data_dir / "postgresql.conf"
        with postgresql_conf.open("a", encoding="utf-8") as conf:
            conf.write(f"\ninclude '{_CONF_FILE}'\n")
        self.write_settings()

    def write_settings(self) -> None:
        lines = [f"{name} = {value}\n" for name, value in self.settings.items()]
        path = self.data_dir / _CONF_FILE
        path.write_text("".join(lines), encoding="utf-8")
        _give_to_service_user([path])

    def start(self) -> None:
        if self.is_running():
            raise PostgresClusterError(f"the cluster in {self.data_dir} is already running")
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            log_offset = _size_of(self.log_file)
            result = self.pg_ctl("start", "-w", "-t", str(_PG_CTL_TIMEOUT_S),
                                 "-l", str(self.log_file))  # fmt: skip
            if result.returncode == 0:
                return
            new_log = _read_from(self.log_file, log_offset).lower()
            port_clash = any(marker in new_log for marker in _PORT_CLASH_MARKERS)
            if port_clash and not self.port_is_fixed and attempt < _PORT_ATTEMPTS:
                log.info("port %d was taken meanwhile; trying another", self.port)
                self.change_port(pick_free_port())
                continue
            raise self.failure("start", result)

    def change_port(self, port: int) -> None:
        self.port = port
        self.settings["port"] = str(port)
        self.write_settings()

    def stop(self, mode: StopMode) -> None:
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"unknown stop mode {mode!r}")
        if not self.is_running():
            return
        result = self.pg_ctl("stop", "-m", mode, "-w", "-t", str(_PG_CTL_TIMEOUT_S))
        if result.returncode != 0:
            raise self.failure("stop", result)

    def kill(self) -> None:
        pid = self.postmaster_pid()
        if pid is None or not _is_alive(pid):
            raise PostgresClusterError(f"the cluster in {self.data_dir} is not running")
        # Stopped, the postmaster cannot fork a backend we would miss.
        _send_signal(pid, signal.SIGSTOP)
        children = _child_pids(pid)
        for child in children:
            _send_signal(child, signal.SIGKILL)
        _send_signal(pid, signal.SIGKILL)
        _wait_until_dead([pid, *children])
        # Until somebody reaps the dead postmaster (in a container PID 1 may do so late or
        # never), its zombie keeps the pid recorded in the lock files alive in the eyes of the
        # next postmaster, which would refuse to start. After a real crash the pid is free.
        self.pid_file.unlink(missing_ok=True)
        for lock_file in self.socket_dir.glob(".s.PGSQL.*.lock"):
            lock_file.unlink(missing_ok=True)

    def is_running(self) -> bool:
        pid = self.postmaster_pid()
        return pid is not None and _is_alive(pid)

    def postmaster_pid(self) -> int | None:
        try:
            first_line = self.pid_file.read_text(encoding="utf-8").splitlines()[0]
            return int(first_line)
        except (FileNotFoundError, IndexError, ValueError):
            return None

    def destroy(self) -> None:
        if self.destroyed:
            return
        if self.is_running():
            try:
                self.stop("immediate")
            except PostgresClusterError:
                log.warning("immediate stop failed; killing", exc_info=True)
                self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        self.log_file.unlink(missing_ok=True)
        for directory in self.owned_dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self.destroyed = True

    def pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run([str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), *args])

    def run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        command = _as_service_user(args)
        log.debug("running %s", shlex.join(command))
        return subprocess.run(
            command,
            cwd=self.home,
            env=_server_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )

    def failure(
        self, operation: str, result: subprocess.CompletedProcess[str]
    ) -> PostgresClusterError:
        return PostgresClusterError(
            f"pg_ctl {operation} failed (exit {result.returncode}) for {self.data_dir} "
            f"on port {self.port}:\n{result.stdout}{result.stderr}"
            f"--- last lines of {self.log_file} ---\n{_tail(self.log_file)}"
        )


# --- binaries and settings ----------------------------------------------------------------------


def find_bindir() -> Path:
    """The directory holding initdb/pg_ctl/postgres: pg_config's, else the newest Debian one."""
    from_pg_config = _bindir_from_pg_config()
    if from_pg_config is not None:
        return from_pg_config
    debian_bindirs = [Path(p) for p in glob.glob(_DEBIAN_BINDIR_GLOB)]
    with_initdb = [d for d in debian_bindirs if (d / "initdb").is_file()]
    if not with_initdb:
        raise PostgresClusterError(
            "no PostgreSQL server binaries: pg_config --bindir has no initdb and "
            f"nothing matches {_DEBIAN_BINDIR_GLOB}/initdb (apt-get install postgresql)"
        )
    return max(with_initdb, key=lambda d: _version_key(d.parent.name))


def _bindir_from_pg_config() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
    bindir = Path(result.stdout.strip())
    if result.returncode == 0 and (bindir / "initdb").is_file():
        return bindir
    return None


def _version_key(name: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in name.split("."))
    except ValueError:
        return (-1,)


def _initdb_locale() -> str:
    """C.UTF-8 when the system has it: byte-order collation but Unicode-aware upper()/lower()."""
    result = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False)
    available = {name.lower().replace("-", "") for name in result.stdout.split()}
    return "C.UTF-8" if "c.utf8" in available else "C"


def _test_settings(
    port: int,
    socket_dir: Path,
    preload_pg_stat_statements: bool,
    synchronous_commit: bool,
) -> dict[str, str]:
    settings = {
        "listen_addresses": "'127.0.0.1'",
        "port": str(port),
        "unix_socket_directories": _conf_string(str(socket_dir)),
        "fsync": "off",
        "synchronous_commit": "on" if synchronous_commit else "off",
        "full_page_writes": "off",
        "max_connections": "200",
        # English server messages, whatever the environment: start() looks for port clashes.
        "lc_messages": "'C'",
    }
    if preload_pg_stat_statements:
        settings["shared_preload_libraries"] = "'pg_stat_statements'"
        settings["pg_stat_statements.track"] = "all"
    return settings


def _conf_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def pick_free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (start() retries if it is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tcp_url(port: int, dbname: str) -> str:
    return f"postgresql://{SERVICE_USER}@127.0.0.1:{port}/{quote(dbname, safe='')}"


def _with_dbname(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(dbname, safe="")))


# --- running as the service user ----------------------------------------------------------------


def _must_switch_user() -> bool:
    return os.geteuid() == 0


def _service_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise PostgresClusterError(
            f"running as root, PostgreSQL must run as the {SERVICE_USER!r} user, which does "
            "not exist (the Debian postgresql package creates it)"
        ) from None


def _as_service_user(args: list[str]) -> list[str]:
    if not _must_switch_user():
        return args
    # CI environments often leave /usr/sbin out of PATH.
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return [runuser, "-u", SERVICE_USER, "--", *args]


def _server_environment() -> dict[str, str]:
    return {**os.environ, "LC_ALL": "C"}


def _prepare_home(base_dir: Path) -> tuple[Path, list[Path]]:
    """The directory the cluster lives in, and the directories destroy() must delete whole."""
    if not _must_switch_user():
        base_dir.mkdir(parents=True, exist_ok=True)
        return base_dir, []
    _service_user()
    base_dir.mkdir(parents=True, exist_ok=True)
    if _service_user_can_reach(base_dir.parent):
        _give_to_service_user(_walk(base_dir))
        return base_dir, []
    # e.g. pytest's /tmp/pytest-of-root is 0700: the postgres user cannot get in.
    home = Path(tempfile.mkdtemp(prefix="umt-pg-", dir="/tmp"))
    log.info("%s is not reachable by %s; the cluster lives in %s", base_dir, SERVICE_USER, home)
    _give_to_service_user([home])
    return home, [home]


def _socket_dir_for(home: Path, owned_dirs: list[Path]) -> Path:
    socket_dir = home / "socket"
    if len(str(socket_dir / ".s.PGSQL.65535.lock")) > _MAX_SOCKET_PATH:
        socket_dir = Path(tempfile.mkdtemp(prefix="umt-pgsock-", dir="/tmp"))
        owned_dirs.append(socket_dir)
    socket_dir.mkdir(exist_ok=True)
    _give_to_service_user([socket_dir])
    return socket_dir


def _service_user_can_reach(directory: Path) -> bool:
    """Whether the service user can traverse every directory down to (and into) `directory`."""
    probe = subprocess.run(
        _as_service_user(["test", "-x", str(directory)]),
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def _give_to_service_user(paths: Iterable[Path]) -> None:
    if not _must_switch_user():
        return
    user = _service_user()
    for path in paths:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def _walk(root: Path) -> Iterator[Path]:
    yield root
    for directory, subdirs, files in os.walk(root):
        for name in (*subdirs, *files):
            yield Path(directory, name)


# --- processes and files ------------------------------------------------------------------------


def _proc_stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may itself contain spaces and parentheses.
    return stat.rpartition(")")[2].split()


def _is_alive(pid: int) -> bool:
    fields = _proc_stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _child_pids(parent: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _proc_stat_fields(int(entry.name))
        if fields is not None and int(fields[1]) == parent:
            children.append(int(entry.name))
    return children


def _send_signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_until_dead(pids: list[int]) -> None:
    deadline = time.monotonic() + _PROCESS_EXIT_TIMEOUT_S
    while any(_is_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            survivors = [pid for pid in pids if _is_alive(pid)]
            raise PostgresClusterError(f"processes {survivors} survived SIGKILL")
        time.sleep(0.01)


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    text = _read_from(path, max(0, _size_of(path) - 64 * 1024))
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"
