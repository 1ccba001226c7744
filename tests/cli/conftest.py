"""Fixtures for CLI tests: an isolated environment (embedded SQLite in tmp_path, a config file
of its own, no stray UMT_* variables) and helpers to invoke umt in-process or as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.support.qbittorrent import QbtInstance, free_port
from umt.cli.main import app

UMT = str(Path(sys.executable).parent / "umt")
INFO_HASH = "0123456789abcdef0123456789abcdef01234567"
OTHER_HASH = "89abcdef0123456789abcdef0123456789abcdef"


def magnet(info_hash: str = INFO_HASH, name: str = "Some Film [2160p]") -> str:
    return f"magnet:?xt=urn:btih:{info_hash}&dn={name.replace(' ', '+')}"


@dataclass
class Cli:
    """umt in an environment of its own."""

    tmp_path: Path
    env: dict[str, str | None] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.tmp_path / "data" / "umt.db"

    @property
    def config_path(self) -> Path:
        return Path(str(self.env["UMT_CONFIG"]))

    def write_config(self, text: str) -> None:
        self.config_path.write_text(text)

    def invoke(self, *args: str, env: dict[str, str | None] | None = None) -> Result:
        return CliRunner().invoke(app, list(args), env={**self.env, **(env or {})},
                                  catch_exceptions=False)

    def ok(self, *args: str) -> Result:
        result = self.invoke(*args)
        assert result.exit_code == 0, result.output
        return result

    def json(self, *args: str) -> Any:
        result = self.ok(*args, "--json")
        return json.loads(result.stdout)

    def start(self, info_hash: str = INFO_HASH, *extra: str) -> str:
        return str(self.json("start-acquire", magnet(info_hash), *extra)["run_id"])

    def subprocess_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("UMT_")}
        env.update({k: v for k, v in self.env.items() if v is not None})
        return env

    def run(self, *args: str, timeout: float = 60, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([UMT, *args], env={**self.subprocess_env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout, check=False)


_PROBE = """
import json, sys
sys.argv = ["umt", *sys.argv[1:]]
from umt.cli.entry import main
try:
    main()
except SystemExit as exit:
    code = exit.code
loaded = sorted({name for name in sys.modules for prefix in PREFIXES
                 if name == prefix or name.startswith(prefix + ".")})
sys.stderr.write(json.dumps({"code": code, "loaded": loaded}) + "\\n")
"""


def loaded_modules(args: list[str], prefixes: tuple[str, ...],
                   env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    """Runs the console script's ``main`` with ``args`` in a fresh interpreter: its exit code,
    the modules named by (or inside) ``prefixes`` it loaded, and what else it printed."""
    done = subprocess.run([sys.executable, "-c", f"PREFIXES = {prefixes!r}\n{_PROBE}", *args],
                          capture_output=True, text=True, timeout=60, check=False, env=env)
    *before, last = done.stderr.strip().splitlines() or [""]
    try:
        report = json.loads(last)
    except json.JSONDecodeError:
        raise AssertionError(f"the probe did not report: {done.stderr}") from None
    return report["code"], report["loaded"], "\n".join(before) + done.stdout


def isolated_env(tmp_path: Path) -> dict[str, str | None]:
    """No inherited UMT_* variable, XDG folders inside tmp_path, a closed qBittorrent port."""
    config = tmp_path / "config.toml"
    config.write_text("")
    (tmp_path / "library").mkdir()
    env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("UMT_")}
    env.update({
        "UMT_CONFIG": str(config),
        "UMT_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'umt.db'}",
        "UMT_LIBRARY_DIR": str(tmp_path / "library"),
        "UMT_QBITTORRENT_URL": f"http://127.0.0.1:{free_port()}",
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "COLUMNS": "200",
    })
    return env


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    yield Cli(tmp_path, isolated_env(tmp_path))


@pytest.fixture(scope="session")
def qbittorrent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QbtInstance]:
    """A real qbittorrent-nox on loopback that checks passwords, shared by the CLI tests."""
    instance = QbtInstance.create(tmp_path_factory.mktemp("qbt-cli"), local_host_auth=True)
    instance.start()
    yield instance
    instance.destroy()


@pytest.fixture(scope="session")
def qbittorrent_for_bad_logins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QbtInstance]:
    """Another instance, so that failed logins (qBittorrent bans after a few) hit only it."""
    instance = QbtInstance.create(tmp_path_factory.mktemp("qbt-cli-bad"), local_host_auth=True)
    instance.start()
    yield instance
    instance.destroy()


def qbittorrent_env(instance: QbtInstance, *, password: str | None = None) -> dict[str, str | None]:
    return {
        "UMT_QBITTORRENT_URL": instance.url,
        "UMT_QBITTORRENT_USERNAME": instance.username,
        "UMT_QBITTORRENT_PASSWORD": password if password is not None else instance.password,
    }


@pytest.fixture
def qbt_cli(cli: Cli, qbittorrent: QbtInstance) -> Cli:
    """Everything the hook needs is in the config file (mode 600), nothing in UMT_* variables."""
    cli.write_config(
        f'[database]\nurl = "sqlite:///{cli.db_path}"\n\n'
        f'[qbittorrent]\nurl = "{qbittorrent.url}"\nusername = "{qbittorrent.username}"\n'
        f'password = "{qbittorrent.password}"\ncategory = "umt-cli-tests"\n'
    )
    cli.config_path.chmod(0o600)
    for name in ("UMT_DATABASE_URL", "UMT_QBITTORRENT_URL"):
        cli.env[name] = None
    qbittorrent.set_finish_hook(None)
    return cli
