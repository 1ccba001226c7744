"""Titles and file names come from strangers: a magnet's ``dn`` or a file name with ESC
sequences must not reach the terminal raw through ``runs``, ``show``, ``catalog`` or
``status``. No control character other than a newline may appear in their human output."""

from __future__ import annotations

import re
import urllib.parse
from datetime import UTC, datetime

import pytest

from tests.cli.conftest import INFO_HASH, Cli

HOSTILE = "Film\x1b[2J\x1b]0;owned\x07\x9b31m\u202egnp.exe\rEvil"
#: Any control character but a newline; also the bidirectional override.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def hostile_run(cli: Cli) -> str:
    source = f"magnet:?xt=urn:btih:{INFO_HASH}&dn={urllib.parse.quote(HOSTILE)}"
    run_id = str(cli.json("start-acquire", source)["run_id"])
    _add_hostile_records(cli, run_id)
    return run_id


def _add_hostile_records(cli: Cli, run_id: str) -> None:
    """A catalog row and a ledger entry naming hostile files, as an import would write them."""
    from umt.app import App
    from umt.config import load_settings
    from umt.engine.jsonvalues import canonical_json
    from umt.records import PACKAGE

    env = {k: v for k, v in cli.env.items() if v is not None}
    app = App(load_settings(None, env=env))
    try:
        database = app.engine().database
        queries = database.query_set(PACKAGE)
        path = f"/library/{HOSTILE}/{HOSTILE}.mkv"
        now = datetime.now(UTC)
        with database.transaction() as session:
            session.execute(queries["insert_catalog_item"], {
                "run_id": run_id, "title": HOSTILE, "info_hash": INFO_HASH,
                "library_paths": canonical_json([path]), "size": 1, "content_hash": None,
                "import_method": "copy", "imported_at": now,
            })
            session.execute(queries["insert_ledger_entry"], {
                "run_id": run_id, "step": "copy-file", "attempt": 1,
                "worker_id": "00000000-0000-0000-0000-000000000001", "lease_epoch": 1,
                "operation": f"copy:{path}", "phase": "intent",
                "detail": canonical_json({"source": f"/downloads/{HOSTILE}.mkv"}),
                "recorded_at": now,
            })
    finally:
        app.close()


@pytest.mark.parametrize("command", ["runs", "show", "status", "catalog"])
def test_no_control_character_reaches_the_terminal(
    cli: Cli, hostile_run: str, command: str
) -> None:
    args = [command, hostile_run] if command in ("show", "status") else [command]
    result = cli.ok(*args)
    assert "Film" in result.stdout  # the title is shown...
    assert not CONTROL.findall(result.stdout), repr(result.stdout)  # ...escaped
    assert "\\x1b" in result.stdout
    assert not CONTROL.findall(result.stderr), repr(result.stderr)


def test_json_output_keeps_the_exact_text(cli: Cli, hostile_run: str) -> None:
    [run] = cli.json("runs")
    assert run["title"] == HOSTILE
