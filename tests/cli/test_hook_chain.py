"""The finish hook beside other tools, against a real qbittorrent-nox: install-hook keeps the
program the user had (umt's hook runs it after its own part), uninstall-hook puts it back, and
a torrent umt does not track costs one silent exit."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.conftest import INFO_HASH, UMT, Cli
from tests.support.qbittorrent import QbtInstance, make_payload, make_torrent, wait_until
from umt.cli.hookprogram import chain_problem, chained, read_program_line

pytestmark = pytest.mark.qbittorrent

RECORDER = """\
import json, sys
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(sys.argv[2:]) + "\\n")
print("recorder ran")
sys.exit(3)
"""


def _recorder(tmp_path: Path) -> tuple[str, Path]:
    """A user's finish program (as Sonarr users have): records its arguments, prints, exits 3."""
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    calls = tmp_path / "calls.jsonl"
    return f'{sys.executable} {script} {calls} "%N" %L --hash=%I', calls


def _calls(calls: Path) -> list[list[str]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def _preferences(qbittorrent: QbtInstance) -> tuple[bool, str]:
    preferences = qbittorrent.client().app_preferences()
    return bool(preferences["autorun_enabled"]), str(preferences["autorun_program"])


def test_install_hook_chains_the_users_program_and_uninstall_puts_it_back(
    qbt_cli: Cli, qbittorrent: QbtInstance, tmp_path: Path,
) -> None:
    previous, _ = _recorder(tmp_path)
    qbittorrent.set_finish_hook(previous)
    umt_part = qbt_cli.ok("qbittorrent", "install-hook", "--dry-run").stdout.split(" -- ")[0]
    assert _preferences(qbittorrent) == (True, previous)  # the dry run changed nothing

    installed = qbt_cli.json("qbittorrent", "install-hook")
    assert installed["program"] == f"{umt_part} -- {previous}"
    assert (installed["previous"], installed["chained"]) == (previous, previous)
    assert _preferences(qbittorrent) == (True, installed["program"])
    # installing again keeps one umt hook and one chained program
    assert qbt_cli.json("qbittorrent", "install-hook")["program"] == installed["program"]

    shown = qbt_cli.json("qbittorrent", "show-hook")
    assert (shown["installed"], shown["umt_hook"], shown["chained"]) == (True, umt_part, previous)
    human = qbt_cli.ok("qbittorrent", "show-hook").stdout
    assert f"runs after umt's hook: {previous}" in human and "the hook is installed" in human
    doctor = json.loads(qbt_cli.invoke("doctor", "--json").stdout)["checks"]
    assert next(c for c in doctor if c["name"] == "finish hook")["status"] == "ok"

    removed = qbt_cli.json("qbittorrent", "uninstall-hook")
    assert removed == {"removed": True, "restored": previous, "program": previous}
    assert _preferences(qbittorrent) == (True, previous)
    again = qbt_cli.invoke("qbittorrent", "uninstall-hook")
    assert again.exit_code == 0 and "not installed" in again.stderr
    assert _preferences(qbittorrent) == (True, previous)


def test_uninstall_without_a_previous_program_disables_the_hook(
    qbt_cli: Cli, qbittorrent: QbtInstance,
) -> None:
    qbt_cli.ok("qbittorrent", "install-hook")
    assert qbt_cli.json("qbittorrent", "uninstall-hook")["restored"] is None
    assert _preferences(qbittorrent) == (False, "")


def test_install_hook_replace_drops_the_previous_program(
    qbt_cli: Cli, qbittorrent: QbtInstance, tmp_path: Path,
) -> None:
    previous, _ = _recorder(tmp_path)
    qbittorrent.set_finish_hook(previous)
    installed = qbt_cli.json("qbittorrent", "install-hook", "--replace")
    assert " -- " not in installed["program"] and installed["chained"] is None
    assert _preferences(qbittorrent) == (True, installed["program"])


def test_install_hook_refuses_a_program_it_cannot_carry_unchanged(
    qbt_cli: Cli, qbittorrent: QbtInstance,
) -> None:
    previous = '/usr/local/bin/notify "%N'
    qbittorrent.set_finish_hook(previous)
    refused = qbt_cli.invoke("qbittorrent", "install-hook")
    assert refused.exit_code == 2, refused.output
    assert refused.stdout == "" and len(refused.stderr.splitlines()) == 1
    assert "unbalanced" in refused.stderr and "--replace" in refused.stderr
    assert _preferences(qbittorrent) == (True, previous)


def test_umt_failing_does_not_stop_the_users_program(tmp_path: Path) -> None:
    """The chained line as qBittorrent starts it, with umt's part broken (a config file that
    is not TOML): the user's program still runs, with its output and its exit status."""
    broken = tmp_path / "broken.toml"
    broken.write_text("this is [not toml\n")
    script = "import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(7)"
    line = chained(f"{UMT} --config {broken} hook download-done %I",
                   f'{sys.executable} -c "{script}"')
    argv = shlex.split(line.replace("%I", INFO_HASH))
    done = subprocess.run(argv, env={}, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 7
    assert done.stdout == "to stdout\n"
    assert done.stderr.startswith("umt: error: ") and done.stderr.endswith("to stderr\n")
    missing = subprocess.run(
        [UMT, "--config", str(broken), "hook", "download-done", INFO_HASH, "--",
         str(tmp_path / "no-such-program")],
        env={}, capture_output=True, text=True, timeout=60, check=False,
    )
    assert missing.returncode == 127 and "program not found" in missing.stderr


def _add_complete_torrent(qbittorrent: QbtInstance, name: str, category: str) -> str:
    """A torrent whose data is already there: qBittorrent checks it and runs the finish hook."""
    folder = qbittorrent.download_dir / name
    make_payload(folder, "film.mkv", 64 * 1024, seed=len(name))
    torrent = make_torrent(folder)
    import torf

    info_hash = str(torf.Torrent.read_stream(torrent).infohash)
    qbittorrent.client().torrents_add(torrent_files=torrent, category=category,
                                      save_path=str(qbittorrent.download_dir))
    return info_hash


def test_qbittorrent_runs_umts_hook_then_the_users_program(
    qbt_cli: Cli, qbittorrent: QbtInstance, tmp_path: Path,
) -> None:
    """End to end through qBittorrent: another tool's torrent leaves no trace in umt (not even
    a database) and the user's program gets its arguments; a torrent umt tracks gets its
    signal, and the user's program runs for it too."""
    previous, calls = _recorder(tmp_path)
    qbittorrent.set_finish_hook(previous)
    qbt_cli.ok("qbittorrent", "install-hook")

    foreign = _add_complete_torrent(qbittorrent, "Another Tool's Film", "sonarr tv")
    wait_until(lambda: _calls(calls) or None, timeout=30, what="the user's program to run")
    assert _calls(calls) == [["Another Tool's Film", "sonarr tv", f"--hash={foreign}"]]
    assert not qbt_cli.db_path.exists()

    folder = qbittorrent.download_dir / "Tracked Film"
    make_payload(folder, "film.mkv", 64 * 1024, seed=99)
    torrent_file = tmp_path / "tracked.torrent"
    torrent_file.write_bytes(make_torrent(folder))
    assert qbt_cli.json("start-acquire", str(torrent_file))["run_id"]  # pending: no worker
    qbittorrent.client().torrents_add(torrent_files=torrent_file.read_bytes(),
                                      category="umt-cli-tests",
                                      save_path=str(qbittorrent.download_dir))
    wait_until(lambda: len(_calls(calls)) == 2, timeout=30, what="the second finish hook")
    assert _calls(calls)[1][:2] == ["Tracked Film", "umt-cli-tests"]
    signals = wait_until(lambda: _signals(qbt_cli) or None, timeout=30, what="the kept signal")
    assert [(name.split(":")[0], status) for name, status in signals] == [
        ("download-done", "kept")]
    assert signals[0][0] == f"download-done:{_calls(calls)[1][2].split('=')[1]}"


def _signals(cli: Cli) -> list[tuple[str, str]]:
    import sqlite3

    database = Path(str(cli.env.get("UMT_DATABASE_URL") or "")[len("sqlite:///"):])
    with sqlite3.connect(database if database.name else cli.db_path) as connection:
        rows = connection.execute("SELECT name, status FROM signals").fetchall()
    connection.close()
    return [(str(name), str(status)) for name, status in rows]


_LINE_CHARACTERS = st.characters(
    codec="utf-8", exclude_categories=("Cc", "Cs"), include_characters=' "%\'\\'
)


@given(previous=st.text(_LINE_CHARACTERS, min_size=1, max_size=60))
def test_any_program_line_reads_back_from_the_chained_line(previous: str) -> None:
    umt_part = f"{UMT} --config /etc/umt/config.toml hook download-done %I"
    line = chained(umt_part, previous)
    hook = read_program_line(line)
    assert (hook.umt_part, hook.previous) == (umt_part, previous)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(previous=st.text(_LINE_CHARACTERS, min_size=1, max_size=60).filter(
    lambda line: line.strip() and chain_problem(line) is None))
def test_a_users_program_line_survives_install_and_uninstall(
    qbt_cli: Cli, qbittorrent: QbtInstance, previous: str,
) -> None:
    qbittorrent.set_finish_hook(previous)
    qbt_cli.ok("qbittorrent", "install-hook")
    assert read_program_line(_preferences(qbittorrent)[1]).previous == previous
    qbt_cli.ok("qbittorrent", "uninstall-hook")
    assert _preferences(qbittorrent) == (True, previous)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_cli(request: pytest.FixtureRequest, cli: Cli) -> Cli:
    if request.param == "postgresql":
        cli.env["UMT_DATABASE_URL"] = request.getfixturevalue("pg_url")
        assert cli.run("db", "migrate").returncode == 0
    return cli


def _signal_names(cli: Cli) -> list[str]:
    """The signals in the database, on either backend."""
    url = cli.env.get("UMT_DATABASE_URL") or ""
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as connection:
            rows = connection.execute("SELECT name FROM umt.signals ORDER BY name").fetchall()
        return [str(row[0]) for row in rows]
    return [name for name, _ in _signals(cli)]


def test_the_hook_for_a_torrent_umt_does_not_track_is_a_silent_exit(backend_cli: Cli) -> None:
    """Another tool's torrent: exit 0, no output, no signal kept; a tracked one still gets its
    signal kept for a run that does not wait yet (both backends)."""
    from tests.cli.conftest import OTHER_HASH

    backend_cli.start(INFO_HASH)  # a run for another torrent
    foreign = backend_cli.run("hook", "download-done", OTHER_HASH.upper())
    assert (foreign.returncode, foreign.stdout, foreign.stderr) == (0, "", "")
    assert _signal_names(backend_cli) == []
    tracked = backend_cli.run("hook", "download-done", INFO_HASH)
    assert tracked.returncode == 0 and "signal kept" in tracked.stderr
    assert _signal_names(backend_cli) == [f"download-done:{INFO_HASH}"]


def test_the_hook_creates_no_database(cli: Cli) -> None:
    done = cli.run("hook", "download-done", INFO_HASH)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not cli.db_path.exists() and not cli.db_path.parent.exists()


def test_a_dry_run_without_qbittorrent_still_prints_the_line(cli: Cli) -> None:
    cli.write_config(f'[database]\nurl = "sqlite:///{cli.db_path}"\n')
    cli.env["UMT_DATABASE_URL"] = None
    result = cli.invoke("qbittorrent", "install-hook", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("hook download-done %I")
    assert "unreachable" in result.stderr and "' -- '" in result.stderr


def test_the_hook_on_a_postgresql_database_not_migrated_yet_is_silent(
    cli: Cli, pg_url: str,
) -> None:
    cli.env["UMT_DATABASE_URL"] = pg_url
    done = cli.run("hook", "download-done", INFO_HASH)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert cli.run("db", "status", "--json").returncode in (0, 1)  # still not migrated
    assert "umt db migrate" in cli.run("runs").stderr
