"""Property: whatever a user types, as arguments or as settings, umt answers with exit 0, 1
or 2, never says "unexpected", refuses in one line on stderr, and a refusal (exit 2) leaves the
database absent or byte for byte unchanged."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.conftest import INFO_HASH, Cli, isolated_env, magnet
from umt.config import ENV_VARS

pytestmark = pytest.mark.slow

#: Text as hostile as argv can carry: controls, NUL, bidi overrides, undecodable bytes.
HOSTILE_TEXT = st.lists(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\0", "\x1b", "\u202e", "\udce9", "\n", "%00", "-", "=", "{", "["]),
    ),
    max_size=40,
).map("".join)
NUMBERISH = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["0", "1", "-1", "NaN", "1e999", "99999999999999999999", "0x10"]),
)
DURATIONISH = st.one_of(
    st.sampled_from(["0", "30s", "7d", "P7D", "PT15M", "9999999d", "-1d", "1e30", "3650d",
                     "36501d", "P99999999D", "1:30", ""]),
    HOSTILE_TEXT,
)
JSONISH = st.one_of(
    st.sampled_from(["NaN", "1e999", '{"a":', "[" * 3000 + "]" * 3000, '"\\u0000"', "null",
                     '{"k": [1, 2.5, "x"]}', str(10**25)]),
    HOSTILE_TEXT,
)
#: What library.file_mode, .dir_mode and .group may be given: modes, names, gids, nonsense.
MODEISH = st.sampled_from(["0640", "640", "0o2775", "2750", "0648", "7777", "0000", "0040", "rwx",
                           "users", "root", "no-such-group", "65534", "99999999999", "-1", " "])
RUN_IDS = st.one_of(st.uuids().map(str), HOSTILE_TEXT)
SOURCES = st.one_of(
    st.builds(magnet, st.just(INFO_HASH), HOSTILE_TEXT.filter(lambda t: "&" not in t)),
    st.sampled_from([f"magnet:?xt=urn:btih:{INFO_HASH.upper()}", "magnet:?dn=x",
                     "ftp://x/y.torrent", "/nonexistent.torrent", "", "a\0b", "x" * 5000]),
    HOSTILE_TEXT,
)


def _option(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.tuples(st.just(name), values).map(list), max_size=1).map(
        lambda pairs: list(itertools.chain.from_iterable(pairs))
    )


# Commands that return by themselves (no worker, no --wait/--follow on a live run).
COMMANDS = st.one_of(
    st.tuples(st.just(["start-acquire"]), SOURCES.map(lambda s: [s]),
              _option("--retention", DURATIONISH), _option("--name", HOSTILE_TEXT),
              _option("--idempotency-key", HOSTILE_TEXT)),
    st.tuples(st.just(["signal"]), HOSTILE_TEXT.map(lambda s: [s]), _option("--data", JSONISH),
              _option("--run", RUN_IDS), _option("--idempotency-key", HOSTILE_TEXT)),
    st.tuples(st.sampled_from([["status"], ["show"], ["cancel"]]), RUN_IDS.map(lambda s: [s])),
    st.tuples(st.just(["runs"]), _option("--status", HOSTILE_TEXT),
              _option("--limit", NUMBERISH)),
    st.tuples(st.just(["catalog"]), _option("--limit", NUMBERISH)),
    st.tuples(st.sampled_from([["db", "gc"]]), _option("--older-than", DURATIONISH)),
    st.tuples(st.sampled_from([["tables"], ["db", "status"], ["db", "migrate"],
                               ["hook", "download-done", INFO_HASH]])),
    st.tuples(st.just(["hook", "download-done"]), HOSTILE_TEXT.map(lambda s: [s])),
    st.tuples(st.sampled_from([["qbittorrent", "install-hook", "--dry-run"],
                               ["qbittorrent", "install-hook", "--replace"],
                               ["qbittorrent", "show-hook"], ["qbittorrent", "uninstall-hook"]])),
    # --show-token: the command answers and exits instead of serving.
    st.tuples(st.just(["web", "--show-token"]), _option("--host", HOSTILE_TEXT),
              _option("--port", NUMBERISH)),
).map(lambda parts: list(itertools.chain.from_iterable(parts)))

SETTINGS = st.dictionaries(
    st.sampled_from(sorted(set(ENV_VARS.values()) - {"UMT_DATABASE_URL"})),
    st.one_of(HOSTILE_TEXT.filter(lambda t: "\0" not in t), NUMBERISH, DURATIONISH.filter(
        lambda t: "\0" not in t), MODEISH),
    max_size=2,
)
_counter = itertools.count()


def _database_state(path: Path) -> Any:
    if not path.exists():
        return None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        tables = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = {t: connection.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    connection.close()
    return path.read_bytes(), rows


def _check(cli: Cli, args: list[str], env: dict[str, str | None]) -> None:
    before = _database_state(cli.db_path)
    result = cli.invoke(*args, env=env)
    output = result.stdout + result.stderr
    assert result.exit_code in (0, 1, 2), (args, output)
    assert "umt: error: unexpected" not in output, (args, output)
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("umt: error: "), (args, result.stderr)
        assert len(lines[0]) <= 1100, args
        assert _database_state(cli.db_path) == before, args
    elif result.exit_code == 1:
        assert result.stderr.splitlines()[-1].startswith("umt: error: "), (args, output)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(args=COMMANDS)
def test_every_command_line_gets_a_documented_answer(workspace: Path, args: list[str]) -> None:
    cli = _fresh_cli(workspace, shared_database=True)
    _check(cli, args, {})


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=SETTINGS, args=st.sampled_from([["runs"], ["tables"], ["start-acquire", magnet()]]))
def test_every_setting_gets_a_documented_answer(
    workspace: Path, values: dict[str, str], args: list[str]
) -> None:
    cli = _fresh_cli(workspace, shared_database=False)
    env: dict[str, str | None] = dict(values)
    _check(cli, args, env)


@pytest.mark.parametrize(("variable", "value"), [
    ("UMT_LIBRARY_FILE_MODE", "0648"), ("UMT_LIBRARY_FILE_MODE", "u=rw"),
    ("UMT_LIBRARY_FILE_MODE", "0200"), ("UMT_LIBRARY_DIR_MODE", "0600"),
    ("UMT_LIBRARY_GROUP", "no-such-group"), ("UMT_LIBRARY_GROUP", "99999999999"),
])
@pytest.mark.parametrize("args", [["runs"], ["start-acquire", magnet()]])
def test_a_bad_permission_setting_is_refused_and_writes_nothing(
    workspace: Path, variable: str, value: str, args: list[str],
) -> None:
    cli = _fresh_cli(workspace, shared_database=False)
    result = cli.invoke(*args, env={variable: value})
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("umt: error: ") and variable in result.stderr
    assert _database_state(cli.db_path) is None
def _toml_string(text: str) -> str:
    return '"' + "".join(
        ch if ch.isprintable() and ch not in '"\\' else f"\\u{ord(ch):04x}" for ch in text
        if not 0xD800 <= ord(ch) <= 0xDFFF
    ) + '"'


TOKEN = "tok-" + "7" * 20
#: A [[media_servers]] table: a usable one with one key changed to something hostile, dropped,
#: or repeated (two servers of one name).
MEDIA_SERVER_TABLES = st.tuples(
    st.sampled_from(["kind", "url", "token", "name", "library_path", "extra"]),
    st.one_of(HOSTILE_TEXT, NUMBERISH, st.sampled_from(
        ["plex", "emby", "jellyfin", "JELLYFIN", "http://127.0.0.1:1", "ftp://x", "http://u:p@h",
         "/media", "media", "", "a" * 41, "tok\x00en"])),
    st.sampled_from(["replace", "drop", "twice"]),
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(table=MEDIA_SERVER_TABLES, urls=st.lists(st.one_of(HOSTILE_TEXT, st.sampled_from(
           ["json://127.0.0.1:1/", "ntfys://ntfy.sh/t", "x", "a:b", "://"])), max_size=3),
       args=st.sampled_from([["runs"], ["tables"], ["start-acquire", magnet()]]))
def test_every_media_server_and_notify_setting_gets_a_documented_answer(
    workspace: Path, table: tuple[str, str, str], urls: list[str], args: list[str]
) -> None:
    key, value, how = table
    server = {"kind": '"jellyfin"', "url": '"http://127.0.0.1:8096"', "token": f'"{TOKEN}"'}
    if how == "drop":
        server.pop(key, None)
    else:
        server[key] = _toml_string(value)
    lines = ["[notify]", "urls = [" + ", ".join(_toml_string(u) for u in urls) + "]"]
    for _ in range(2 if how == "twice" else 1):
        lines += ["[[media_servers]]", *(f"{k} = {v}" for k, v in server.items())]
    cli = _fresh_cli(workspace, shared_database=False)
    cli.write_config("\n".join(lines) + "\n")
    result = cli.invoke(*args)
    # The token is never repeated back, whatever else is wrong.
    assert TOKEN not in result.stdout + result.stderr
    _check(cli, args, {})


def _fresh_cli(workspace: Path, *, shared_database: bool) -> Cli:
    """A CLI of its own; the command-line examples share one database, so that some find
    runs (and ids) made by earlier examples."""
    folder = workspace / f"example-{next(_counter)}"
    folder.mkdir()
    if not shared_database:
        return Cli(folder, isolated_env(folder))
    cli = _SharedCli(folder, isolated_env(folder))
    cli.env["UMT_DATABASE_URL"] = f"sqlite:///{cli.db_path}"
    return cli


class _SharedCli(Cli):
    @property
    def db_path(self) -> Path:
        return self.tmp_path.parent / "shared.db"
