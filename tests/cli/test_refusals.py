"""Inputs that used to reach "unexpected" errors, some after creating the database: each is now
refused with exit 2 and one line on stderr, before any database is opened, alike on SQLite and
PostgreSQL; and no configuration error echoes a credential.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import INFO_HASH, Cli, magnet

SURROGATE = "caf\udce9"  # how Python hands over the bytes b"caf\xe9" (not UTF-8) in argv

REFUSED = [
    ("signal NaN", ("signal", "s", "--data", "NaN"), "not valid JSON"),
    ("signal Infinity", ("signal", "s", "--data", '{"a": -Infinity}'), "not valid JSON"),
    ("signal huge float", ("signal", "s", "--data", "1e999"), "too large for a double"),
    ("signal huge int", ("signal", "s", "--data", "1" + "0" * 30), "beyond 64 bits"),
    ("signal big fraction", ("signal", "s", "--data", "1.5e300"), "beyond 1e15"),
    ("signal deep JSON", ("signal", "s", "--data", "[" * 5000 + "]" * 5000), "nested deeper"),
    ("signal NUL in data", ("signal", "s", "--data", '"a\\u0000b"'), "NUL character"),
    ("signal long data", ("signal", "s", "--data", '"' + "x" * 70_000 + '"'), "longer than"),
    ("signal empty key", ("signal", "s", "--idempotency-key", ""), "must not be empty"),
    ("start empty key", ("start-acquire", magnet(), "--idempotency-key", ""),
     "--idempotency-key must not be empty"),
    ("start NUL key", ("start-acquire", magnet(), "--idempotency-key", "a\0b"),
     "control characters"),
    ("start NUL name", ("start-acquire", magnet(), "--name", "Film\0"), "control characters"),
    ("start ESC name", ("start-acquire", magnet(), "--name", "Film\x1b[2J"),
     "control characters"),
    ("start NUL in magnet name", ("start-acquire", magnet(name="a%00b")), "NUL character"),
    ("start huge retention", ("start-acquire", magnet(), "--retention", "9999999d"),
     "longer than 36500 days"),
    ("start long retention", ("start-acquire", magnet(), "--retention", "4000d"),
     "at most 3650 days"),
    ("start non-UTF-8 name", ("start-acquire", magnet(), "--name", SURROGATE),
     "argument 4 is not valid UTF-8"),
    ("signal non-UTF-8 name", ("signal", SURROGATE), "argument 2 is not valid UTF-8"),
    ("runs huge limit", ("runs", "--limit", "9" * 20), "--limit"),
    ("catalog huge limit", ("catalog", "--limit", "9" * 20), "--limit"),
    ("gc huge duration", ("db", "gc", "--older-than", "P99999999D"), "longer than"),
    ("status long id", ("status", "x" * 100_000), "is not a run id"),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_cli(request: pytest.FixtureRequest, cli: Cli) -> Cli:
    if request.param == "postgresql":
        cli.env["UMT_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        cli.ok("db", "migrate")
    return cli


def _state(cli: Cli) -> object:
    if cli.db_path.exists() or "sqlite" in str(cli.env["UMT_DATABASE_URL"]):
        return cli.db_path.read_bytes() if cli.db_path.exists() else None
    return cli.json("runs", "--limit", "10000"), cli.json("catalog")


@pytest.mark.parametrize(("name", "args", "says"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_exit_2_one_line_and_nothing_written(
    backend_cli: Cli, name: str, args: tuple[str, ...], says: str
) -> None:
    before = _state(backend_cli)
    result = backend_cli.invoke(*args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("umt: error: "), result.stderr
    assert says in lines[0]
    assert "unexpected" not in result.stderr
    assert len(lines[0]) < 400
    assert _state(backend_cli) == before


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("UMT_ENGINE_LEASE", "9999999d", "longer than 36500 days"),
        ("UMT_ENGINE_LEASE", "2h", "at most 1h"),
        ("UMT_ENGINE_SIGNAL_TTL", "9999999d", "longer than 36500 days"),
        ("UMT_ENGINE_SIGNAL_TTL", "4000d", "at most 3650d"),
        ("UMT_RETENTION", "5000d", "at most 3650d"),
        ("UMT_ENGINE_CONCURRENCY", "100000", "less than or equal to 64"),
        ("UMT_ENGINE_SCHEMA", "s" * 60, "longer than 55 characters"),
        ("UMT_QBITTORRENT_URL", "http://[::1", "not an http(s) URL"),
    ],
)
def test_settings_beyond_their_bounds_are_refused_before_the_database_exists(
    cli: Cli, variable: str, value: str, says: str
) -> None:
    result = cli.invoke("runs", env={variable: value})
    assert result.exit_code == 2, result.output
    assert says in result.stderr and variable in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not cli.db_path.exists()


def test_a_nul_in_a_config_file_value_is_refused(cli: Cli) -> None:
    cli.write_config('[library]\ndir = "/srv/a\\u0000b"\n')
    result = cli.invoke("runs", env={"UMT_LIBRARY_DIR": None})
    assert result.exit_code == 2, result.output
    assert "library.dir" in result.stderr and "NUL character" in result.stderr
    assert not cli.db_path.exists()


@pytest.mark.parametrize("origin", ["env", "file"])
def test_a_url_with_credentials_is_refused_without_echoing_them(cli: Cli, origin: str) -> None:
    url = "http://admin:hunter2-secret@127.0.0.1:8080/?token=tok-secret"
    if origin == "env":
        result = cli.invoke("runs", env={"UMT_QBITTORRENT_URL": url})
    else:
        cli.write_config(f'[qbittorrent]\nurl = "{url}"\n')
        result = cli.invoke("runs", env={"UMT_QBITTORRENT_URL": None})
    assert result.exit_code == 2, result.output
    assert "qbittorrent.url" in result.stderr and "***" in result.stderr
    assert "hunter2" not in result.output and "tok-secret" not in result.output


def test_an_environment_variable_that_is_not_utf8_is_refused(cli: Cli) -> None:
    result = cli.invoke("runs", env={"UMT_CATEGORY": SURROGATE})
    assert result.exit_code == 2
    assert "UMT_CATEGORY is not valid UTF-8" in result.stderr


def test_an_accepted_json_value_round_trips_on_both_backends(backend_cli: Cli) -> None:
    value = {"n": 2**63 - 1, "f": 1.5e14, "g": 1e-9, "s": "é\u202e", "deep": [[[[1]]]]}
    data = json.dumps(value)
    run_id = backend_cli.start(INFO_HASH)
    sent = backend_cli.json("signal", "probe", "--data", data, "--idempotency-key", "k1")
    assert sent["kept"] is True
    again = backend_cli.json("signal", "probe", "--data", data, "--idempotency-key", "k1")
    assert again["duplicate"] is True and again["signal_id"] == sent["signal_id"]
    assert backend_cli.json("status", run_id)["status"] == "pending"


def test_a_magnet_torrent_of_another_spelling_is_the_same_run_on_the_command_line(
    cli: Cli, tmp_path: Path
) -> None:
    first = cli.json("start-acquire", magnet(INFO_HASH.upper(), "A"))
    second = cli.json("start-acquire", magnet(INFO_HASH, "B") + "&tr=http%3A%2F%2Ft%2Fa")
    assert first["created"] and not second["created"]
    assert first["run_id"] == second["run_id"]
