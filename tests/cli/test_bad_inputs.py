"""Bad inputs: the documented exit code, one clear line on stderr, nothing on stdout, and
nothing written (the database is not created, or its bytes and rows are unchanged).

Errors are never printed as JSON: with --json, stdout stays empty and the line on stderr is
the whole report (doctor is the exception: its JSON report is its result).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer.main

from tests.cli.conftest import INFO_HASH, Cli, magnet, qbittorrent_env
from tests.support.unprivileged import as_nobody, reachable_folder
from umt.cli.main import app

UNKNOWN_RUN = "0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90"
COUNTED_TABLES = ("runs", "steps", "attempts", "signals", "workers", "ledger", "catalog")


@dataclass(frozen=True)
class Bad:
    id: str
    args: tuple[str, ...]
    code: int
    says: str
    env: dict[str, str | None] = field(default_factory=dict)
    #: None: no database yet (it must not be created); "run" / "canceled": one run exists.
    setup: str | None = None
    qbittorrent: bool = False
    #: doctor prints its report on stdout even when a check fails.
    reports: bool = False
    #: Run as an unprivileged user (root reads a mode-000 file).
    unprivileged: bool = False


BAD_INPUTS = [
    Bad("magnet without info-hash", ("start-acquire", "magnet:?dn=film"), 2,
        "magnet link has no BitTorrent v1 info-hash"),
    Bad("magnet with a malformed hash", ("start-acquire", "magnet:?xt=urn:btih:xyz"), 2,
        "info-hash 'xyz' has 3 characters"),
    Bad("empty torrent file", ("start-acquire", "{tmp}/empty.torrent"), 2, "empty file"),
    Bad("not a torrent file", ("start-acquire", "{tmp}/notes.torrent"), 2,
        "not a valid torrent file"),
    Bad("missing torrent file", ("start-acquire", "{tmp}/missing.torrent"), 2, "no such file"),
    Bad("directory as source", ("start-acquire", "{tmp}"), 2, "is a directory"),
    Bad("unsupported URL scheme", ("start-acquire", "ftp://example.org/film.torrent"), 2,
        "unsupported source"),
    Bad("negative duration", ("start-acquire", magnet(), "--retention=-1d"), 2,
        "--retention: invalid duration '-1d': must not be negative"),
    Bad("unknown duration", ("start-acquire", magnet(), "--retention", "3 fortnights"), 2,
        "--retention: invalid duration '3 fortnights'"),
    Bad("malformed --wait", ("start-acquire", magnet(), "--wait=soon"), 2,
        "--wait: invalid duration 'soon'"),
    Bad("malformed gc duration", ("db", "gc", "--older-than", "forever"), 2,
        "--older-than: invalid duration 'forever'"),
    Bad("malformed JSON for --data", ("signal", "greeting", "--data", "{oops"), 2,
        "--data: not valid JSON"),
    Bad("malformed signal name", ("signal", "two words"), 2, "must not contain spaces"),
    Bad("empty signal name", ("signal", ""), 2, "signal name must be 1 to"),
    Bad("malformed run id", ("show", "run-42"), 2, "'run-42' is not a run id"),
    Bad("malformed run id for --run", ("signal", "greeting", "--run", "42"), 2,
        "'42' is not a run id"),
    Bad("unknown run id, no database", ("cancel", UNKNOWN_RUN), 2,
        f"no run with id {UNKNOWN_RUN}"),
    Bad("unknown run id", ("status", UNKNOWN_RUN), 2, f"no run with id {UNKNOWN_RUN}",
        setup="run"),
    Bad("unknown run id for --run", ("signal", "greeting", "--run", UNKNOWN_RUN), 2,
        f"no run with id {UNKNOWN_RUN}", setup="run"),
    Bad("unknown run id for --run, no database", ("signal", "greeting", "--run", UNKNOWN_RUN),
        2, f"no run with id {UNKNOWN_RUN}"),
    Bad("malformed info-hash from the hook", ("hook", "download-done", "1234"), 2,
        "'1234' is not a v1 info-hash"),
    Bad("malformed run id to verify", ("verify", "run-42"), 2, "'run-42' is not a run id"),
    Bad("verify of a run that imported nothing", ("verify", "{run}"), 2,
        "run {run} has no imported file to verify", setup="run"),
    Bad("unknown status", ("runs", "--status", "done"), 2, "--status: unknown status 'done'"),
    Bad("zero --limit", ("catalog", "--limit", "0"), 2,
        "Invalid value for '--limit': Input should be greater than or equal to 1"),
    Bad("port 0 for the dashboard", ("web", "--port", "0"), 2,
        "Invalid value for '--port': Input should be greater than or equal to 1"),
    Bad("unknown option", ("runs", "--bogus"), 2, "No such option: --bogus"),
    Bad("concurrency 0", ("worker", "--concurrency", "0"), 2, "Invalid value for '--concurrency'"),
    Bad("-v with -q", ("worker", "-v", "-q"), 2,
        "-v/--verbose and -q/--quiet cannot be used together"),
    Bad("log file in a missing folder", ("resume", "--log-file", "{tmp}/nope/umt.log"), 2,
        "--log-file: folder"),
    Bad("unknown systemd unit", ("systemd", "umt.service"), 2, "unknown unit 'umt.service'"),
    Bad("missing argument", ("cancel",), 2, "Missing argument 'RUN_ID'"),
    Bad("unreadable config file", ("runs",), 2, "cannot read config file",
        env={"UMT_CONFIG": "{shared}/unreadable.toml"}, unprivileged=True),
    Bad("config with an unknown key", ("runs",), 2,
        "unknown setting 'qbittorrent.passwd' (did you mean 'qbittorrent.password'?)",
        env={"UMT_CONFIG": "{tmp}/unknown-key.toml"}),
    Bad("config that is not TOML", ("runs",), 2, "invalid TOML",
        env={"UMT_CONFIG": "{tmp}/broken.toml"}),
    Bad("missing config file", ("--config", "{tmp}/nope.toml", "runs"), 2,
        "config file {tmp}/nope.toml (given by --config) does not exist"),
    Bad("bad setting in the environment", ("runs",), 2,
        "invalid setting acquire.retention = 'soon' (from UMT_RETENTION)",
        env={"UMT_RETENTION": "soon"}),
    Bad("unsupported database URL", ("runs",), 2, "unsupported database URL",
        env={"UMT_DATABASE_URL": "mysql://umt:secret-pw@db/umt"}),
    Bad("unreachable database", ("start-acquire", magnet()), 1,
        "PostgreSQL at postgresql://nobody:***@127.0.0.1:1/x is not reachable",
        env={"UMT_DATABASE_URL": "postgresql://nobody:secret-pw@127.0.0.1:1/x"}),
    Bad("idempotency conflict", ("start-acquire", magnet(), "--name", "Another title"), 1,
        "which was started with a different input", setup="run"),
    Bad("cancel of a finished run", ("cancel", "{run}"), 1,
        "cannot cancel run {run}: it is already canceled", setup="canceled"),
    Bad("signal to a canceled run", ("signal", f"download-done:{INFO_HASH}", "--run", "{run}"), 1,
        "cannot signal run {run}: it is already canceled", setup="canceled"),
    Bad("wrong qBittorrent password (doctor)", ("doctor",), 1,
        "1 check(s) failed: qbittorrent", qbittorrent=True, reports=True),
    Bad("wrong qBittorrent password (resume)", ("resume",), 1,
        "rejected the login of user", qbittorrent=True),
]


def _commands_taking_values() -> set[tuple[str, ...]]:
    """Every command path of the real CLI that takes a value (argument or non-flag option)."""
    found: set[tuple[str, ...]] = set()

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        elif any(p.param_type_name == "argument" or not p.is_flag for p in command.params):
            found.add(path)

    walk(typer.main.get_command(app), ())
    return found


def _command_path(args: tuple[str, ...]) -> tuple[str, ...]:
    words = [arg for arg in args if not arg.startswith("-") and "{" not in arg]
    return tuple(words[:2]) if words and words[0] in ("db", "hook", "qbittorrent") else (
        tuple(words[:1]))


def test_every_command_that_takes_a_value_has_a_bad_input() -> None:
    """Measured against the CLI itself, so a new command or option without a row fails here."""
    covered = {_command_path(bad.args) for bad in BAD_INPUTS}
    assert _commands_taking_values() - covered == set()
    assert {bad.code for bad in BAD_INPUTS} == {1, 2}
    assert len({bad.id for bad in BAD_INPUTS}) == len(BAD_INPUTS)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "empty.torrent").write_bytes(b"")
    (tmp_path / "notes.torrent").write_text("these are notes, not a torrent\n")
    (tmp_path / "unknown-key.toml").write_text("[qbittorrent]\npasswd = 'hunter2-secret'\n")
    (tmp_path / "broken.toml").write_text("[library\ndir = '/srv'\n")
    return tmp_path


def _database_state(path: Path) -> tuple[Any, ...] | None:
    if not path.exists():
        return None
    with sqlite3.connect(path) as connection:
        counts = tuple(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                       for table in COUNTED_TABLES)
    connection.close()
    return counts


def _file_state(path: Path) -> tuple[bytes, int] | None:
    return (path.read_bytes(), path.stat().st_mtime_ns) if path.exists() else None


def _fill(text: str, tmp: Path, run_id: str, shared: Path) -> str:
    return text.replace("{tmp}", str(tmp)).replace("{run}", run_id).replace("{shared}",
                                                                             str(shared))


@pytest.fixture
def shared() -> Iterator[Path]:
    """Files an unprivileged user can reach but not read (tmp_path is root's alone)."""
    with reachable_folder() as folder:
        (folder / "unreadable.toml").write_text("[acquire]\nretention = '1d'\n")
        (folder / "unreadable.toml").chmod(0)
        yield folder


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _invoke(cli: Cli, args: list[str], env: dict[str, str | None], unprivileged: bool) -> Outcome:
    def invoke() -> list[Any]:
        result = cli.invoke(*args, env=env)
        return [result.exit_code, result.stdout, result.stderr]

    return Outcome(*(as_nobody(invoke) if unprivileged else invoke()))


#: Every bad input in both output modes, but the unreachable database only in JSON mode: its
#: 5 s connect timeout is paid once.
BAD_CASES = [
    pytest.param(bad, json_mode, id=f"{bad.id}-{'json' if json_mode else 'human'}")
    for bad in BAD_INPUTS for json_mode in (True, False)
    if json_mode or bad.id != "unreachable database"
]


@pytest.mark.parametrize(("bad", "json_mode"), BAD_CASES)
def test_bad_input(
    bad: Bad, json_mode: bool, cli: Cli, files: Path, shared: Path,
    request: pytest.FixtureRequest,
) -> None:
    run_id = ""
    if bad.setup is not None:
        run_id = cli.start()
        if bad.setup == "canceled":
            cli.ok("cancel", run_id)
    env = {key: _fill(value, files, run_id, shared) if value else value
           for key, value in bad.env.items()}
    if bad.qbittorrent:
        instance = request.getfixturevalue("qbittorrent_for_bad_logins")
        env.update(qbittorrent_env(instance, password="wrong-password"))
    args = [_fill(arg, files, run_id, shared) for arg in bad.args]
    if json_mode:
        args.insert(0, "--json")

    rows_before = _database_state(cli.db_path)
    file_before = _file_state(cli.db_path)
    result = _invoke(cli, args, env, bad.unprivileged)
    file_after = _file_state(cli.db_path)

    assert result.exit_code == bad.code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("umt: error: "), lines[0]
    assert _fill(bad.says, files, run_id, shared) in lines[0]
    assert "secret-pw" not in result.output and "hunter2" not in result.output
    if bad.reports:
        if json_mode:
            assert json.loads(result.stdout)["ok"] is False
    else:
        assert result.stdout == ""
    assert file_after == file_before, "the database file changed"
    assert _database_state(cli.db_path) == rows_before
