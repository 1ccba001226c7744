"""umt doctor's clock check: the host's offset from the PostgreSQL server's clock, a warning
with the fix when it is large; on SQLite the machine's clock is the only one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.support.faketime import shifted


@pytest.fixture
def pg_cli(cli: Cli, pg_url: str) -> Cli:
    cli.env["UMT_DATABASE_URL"] = pg_url
    return cli


def _clock_check(stdout: str) -> dict[str, Any]:
    checks: list[dict[str, Any]] = json.loads(stdout)["checks"]
    return next(check for check in checks if check["name"] == "clock")


def test_doctor_measures_the_offset_from_the_postgresql_server(pg_cli: Cli) -> None:
    clock = _clock_check(pg_cli.run("doctor", "--json").stdout)
    assert clock["status"] == "ok", clock
    assert "off the database server's" in clock["detail"] and "round trip" in clock["detail"]


def test_doctor_warns_about_a_host_45s_ahead_with_the_fix(pg_cli: Cli) -> None:
    clock = _clock_check(pg_cli.run("doctor", "--json", env=shifted(+45)).stdout)
    assert clock["status"] == "warn", clock
    assert "clock is +45." in clock["detail"]
    assert "NTP" in clock["fix"] and "chrony" in clock["fix"]


def test_doctor_on_sqlite_uses_this_machines_clock(cli: Cli) -> None:
    clock = _clock_check(cli.invoke("doctor", "--json").stdout)
    assert clock["status"] == "ok" and "this machine's clock" in clock["detail"]
