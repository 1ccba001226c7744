"""``umt verify`` on imports recorded in the ledger, with a real qBittorrent that no longer has
the torrent (the check against piece hashes itself is in tests/media/test_verified_import.py):
the fallback to a recorded SHA-256, missing files, escaped names, exit codes."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_hostile_text import CONTROL, HOSTILE
from tests.support.qbittorrent import flip_byte

#: A torrent no other test gives the shared qBittorrent.
ABSENT_HASH = "5e7e4f1a0c0ffee5e7e4f1a0c0ffee5e7e4f1a0c"


def record_import(cli: Cli, run_id: str, path: str, sha256: str | None) -> None:
    """A ``done`` copy entry in the run's ledger, as the copy-file step writes it."""
    from umt.app import App
    from umt.config import load_settings
    from umt.engine.jsonvalues import canonical_json
    from umt.records import PACKAGE

    env = {k: v for k, v in cli.env.items() if v is not None}
    app = App(load_settings(cli.config_path, env=env))
    try:
        database = app.engine().database
        with database.transaction() as session:
            session.execute(database.query_set(PACKAGE)["insert_ledger_entry"], {
                "run_id": run_id, "step": "copy-file", "attempt": 1,
                "worker_id": "00000000-0000-0000-0000-000000000001", "lease_epoch": 1,
                "operation": f"copy:{path}", "phase": "done", "recorded_at": datetime.now(UTC),
                "detail": canonical_json({"source": "/downloads/x.mkv", "path": path, "size": 3,
                                          "sha256": sha256, "method": "copy", "pieces": None}),
            })
    finally:
        app.close()


def imported_film(cli: Cli, tmp_path: Path, *, recorded: bool) -> tuple[str, Path]:
    """A run of a torrent qBittorrent does not have, that imported one small file (with its
    SHA-256 recorded or not)."""
    run_id = cli.start(ABSENT_HASH)
    library_file = tmp_path / "library" / "Film.mkv"
    library_file.write_bytes(b"abc")
    record_import(cli, run_id, str(library_file),
                  hashlib.sha256(b"abc").hexdigest() if recorded else None)
    return run_id, library_file


@pytest.mark.qbittorrent
def test_a_file_imported_with_sha256_is_checked_against_it_once_the_torrent_is_gone(
    qbt_cli: Cli, tmp_path: Path
) -> None:
    run_id, library_file = imported_film(qbt_cli, tmp_path, recorded=True)
    [checked] = qbt_cli.json("verify", run_id)["files"]
    assert (checked["status"], checked["by"]) == ("ok", "sha256")

    flip_byte(library_file, 1)
    result = qbt_cli.invoke("--json", "verify", run_id)
    assert result.exit_code == 1, result.output
    [checked] = json.loads(result.stdout)["files"]
    assert (checked["status"], checked["by"]) == ("mismatch", "sha256")


@pytest.mark.qbittorrent
def test_without_pieces_or_a_recorded_hash_a_file_is_unverifiable(
    qbt_cli: Cli, tmp_path: Path
) -> None:
    run_id, _ = imported_film(qbt_cli, tmp_path, recorded=False)
    result = qbt_cli.invoke("--json", "verify", run_id)
    assert result.exit_code == 1, result.output
    [checked] = json.loads(result.stdout)["files"]
    assert checked["status"] == "unverifiable"
    assert checked["reason"] == "the torrent is no longer in qBittorrent"


def test_a_missing_file_with_a_hostile_name_is_reported_escaped(cli: Cli) -> None:
    run_id = cli.start()
    path = f"/library/{HOSTILE}/{HOSTILE}.mkv"
    record_import(cli, run_id, path, None)
    human = cli.invoke("verify", run_id)
    assert human.exit_code == 1, human.output
    assert "missing" in human.stdout and "\\x1b" in human.stdout
    assert not CONTROL.findall(human.stdout + human.stderr), repr(human.output)
    as_json = cli.invoke("--json", "verify", run_id)
    assert json.loads(as_json.stdout)["files"][0]["path"] == path


def test_a_run_that_imported_nothing_or_an_unknown_run_is_bad_input(cli: Cli) -> None:
    run_id = cli.start()
    nothing = cli.invoke("verify", run_id)
    assert nothing.exit_code == 2 and "has no imported file" in nothing.stderr
    unknown = cli.invoke("verify", "0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90")
    assert unknown.exit_code == 2 and "no run with id" in unknown.stderr
    assert cli.invoke("verify", "not-a-run-id").exit_code == 2
