"""Every command documents itself with an example; help loads no heavy module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer

from tests.cli.conftest import Cli, loaded_modules, magnet
from umt.cli.main import app

# (pydantic is not listed: typer itself imports it to convert parameters)
HEAVY = ("psycopg", "psycopg_pool", "qbittorrentapi", "requests", "torf", "umt.engine",
         "umt.media", "umt.records", "umt.config", "umt.app", "guessit")


def _command_paths() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    paths: list[tuple[str, ...]] = [()]

    def walk(command: object, prefix: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            paths.append((*prefix, name))
            walk(sub, (*prefix, name))

    walk(root, ())
    return paths


COMMANDS = _command_paths()


def test_every_command_is_listed() -> None:
    names = {" ".join(path) for path in COMMANDS}
    assert {"start-acquire", "signal", "cancel", "worker", "resume", "tables", "runs", "status",
            "show", "catalog", "doctor", "db migrate", "db status", "db gc",
            "qbittorrent install-hook", "qbittorrent show-hook", "qbittorrent uninstall-hook",
            "hook download-done", "web"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "umt" for p in COMMANDS])
def test_help_has_an_example(cli: Cli, path: tuple[str, ...]) -> None:
    result = cli.ok(*path, "--help")
    examples = [line.strip() for line in result.stdout.splitlines()
                if line.strip().startswith("Example: umt")]
    assert examples, result.stdout
    assert not cli.db_path.exists()


def test_root_help_documents_the_exit_codes(cli: Cli) -> None:
    text = " ".join(cli.ok("--help").stdout.split())
    assert "Exit codes: 0 success; 1 the operation failed" in text
    assert "2 invalid input or usage" in text


@pytest.mark.parametrize("args", [["--help"], ["start-acquire", "--help"], ["db", "--help"],
                                  ["--version"]])
def test_help_loads_no_heavy_module(args: list[str]) -> None:
    code, heavy, output = loaded_modules(args, HEAVY)
    assert (code, heavy) == (0, []), output


def test_importtime_of_help_names_no_heavy_module() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "umt.cli.main", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "umt.cli.application" in imported
    assert not {name for name in imported for prefix in HEAVY
                if name == prefix or name.startswith(prefix + ".")}


def test_start_acquire_of_a_magnet_on_sqlite_loads_no_postgresql_or_qbittorrent_module(
    cli: Cli,
) -> None:
    # A magnet needs neither: the run is written to the embedded database and a worker talks to
    # qBittorrent later. Importing them cost this command a third of its start-up.
    not_needed = ("psycopg", "psycopg_pool", "qbittorrentapi", "requests")
    code, heavy, output = loaded_modules(["--json", "start-acquire", magnet()], not_needed,
                                         cli.subprocess_env())
    assert (code, heavy) == (0, []), output
    assert json.loads(output)["created"] is True
