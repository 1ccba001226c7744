"""The finish hook runs for every torrent qBittorrent finishes: its plain form starts without the
command-line framework (``umt.cli.entry``) and does exactly what the full command line does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import INFO_HASH, OTHER_HASH, UMT, Cli, loaded_modules
from umt.cli.entry import hook_call

#: What an untracked torrent's hook must not import: the CLI framework, the terminal renderer,
#: the settings models (it reads its settings with ``umt.config_hook``), duration parsers (it
#: parses none), an HTTP client (it fetches nothing), the PostgreSQL driver and the qBittorrent
#: client (umt's adapter included), the import and naming code the models name, and (no program
#: to chain) subprocess.
NOT_NEEDED = ("typer", "click", "rich", "pydantic", "pydantic_core", "pydantic_settings",
              "asyncio", "pytimeparse", "isodate", "platformdirs", "urllib.request", "http",
              "ssl", "psycopg", "psycopg_pool", "qbittorrentapi", "requests", "urllib3",
              "umt.cli.main", "umt.cli.commands", "umt.config", "umt.media.qbittorrent",
              "umt.media.downloads", "umt.media.sources", "umt.media.importing",
              "umt.media.naming", "subprocess")
EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"

def _probe(cli: Cli, *args: str) -> tuple[dict[str, object], str]:
    code, loaded, output = loaded_modules(list(args), NOT_NEEDED, cli.subprocess_env())
    return {"code": code, "loaded": loaded}, output


@pytest.mark.parametrize("config_option", [False, True], ids=["UMT_CONFIG", "--config"])
def test_hook_for_an_untracked_torrent_loads_no_cli_framework(cli: Cli,
                                                              config_option: bool) -> None:
    cli.start(OTHER_HASH)  # the database exists, with a run for another torrent
    args = ["--config", str(cli.config_path)] if config_option else []
    report, output = _probe(cli, *args, "hook", "download-done", INFO_HASH)
    assert report == {"code": 0, "loaded": []}, output
    assert output == ""


def test_hook_reads_the_example_config_without_the_settings_models(cli: Cli) -> None:
    cli.start(OTHER_HASH)
    cli.write_config(EXAMPLE.read_text())
    cli.config_path.chmod(0o600)
    # it sets durations, which are parsed (and checked) as the full settings would
    not_needed = tuple(name for name in NOT_NEEDED if name not in ("pytimeparse", "isodate"))
    code, loaded, output = loaded_modules(["hook", "download-done", INFO_HASH], not_needed,
                                          cli.subprocess_env())
    assert (code, loaded) == (0, []), output
    assert output == ""


def test_hook_without_a_database_loads_no_cli_framework_and_creates_nothing(cli: Cli) -> None:
    report, output = _probe(cli, "hook", "download-done", INFO_HASH)
    assert report == {"code": 0, "loaded": []}, output
    assert output == "" and not cli.db_path.exists()


def test_console_script_hook_keeps_the_signal_of_a_tracked_torrent(cli: Cli) -> None:
    cli.start()
    done = cli.run("hook", "download-done", INFO_HASH.upper())
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert done.stderr == f"umt hook: download-done:{INFO_HASH}: no run waits yet, signal kept\n"


CHAINED = ["--", sys.executable, "-c", "import sys; print('previous ran'); sys.exit(3)"]


#: A config the hook's own reading leaves to the full settings, by case (``umt.config_hook``).
ELSEWHERE = {"bad setting elsewhere": '[library]\nverify = "bogus"\n',
             "bad duration": '[engine]\nlease = "2h"\n',
             "unknown section": "[libary]\n",
             "readable password": '[qbittorrent]\npassword = "hunter2-s3cret"\n'}


@pytest.mark.parametrize("case", ["untracked", "missing config", "bad config", "no v1 hash",
                                  "chained, untracked", "chained, tracked",
                                  "chained, bad config", "chained, missing program",
                                  "bad setting elsewhere", "bad duration", "unknown section",
                                  "readable password", "unknown variable", "example config",
                                  "tracked, example config", "bad database url in variable",
                                  "chained, bad setting elsewhere",
                                  "chained, readable password"])
def test_console_script_answers_as_the_full_command_line(cli: Cli, tmp_path: Path,
                                                         case: str) -> None:
    cli.start(OTHER_HASH)
    args = ["hook", "download-done", INFO_HASH]
    if "tracked" in case.split(", ")[-1:]:
        args[-1] = OTHER_HASH  # its signal is kept (for the full command line: again)
    if case == "missing config":
        args = ["--config", str(tmp_path / "absent.toml"), *args]
    if case.endswith("bad config"):
        cli.write_config("[database]\nurl = 'mysql://nowhere'\n")
        cli.env["UMT_DATABASE_URL"] = None
    for name, text in ELSEWHERE.items():
        if case.endswith(name):
            cli.write_config(text)
            cli.config_path.chmod(0o644)
    if case == "unknown variable":
        cli.env["UMT_DATABSE_URL"] = "sqlite:///elsewhere.db"
    if case.endswith("example config"):
        cli.write_config(EXAMPLE.read_text())
    if case == "tracked, example config":
        args[-1] = OTHER_HASH
    if case == "bad database url in variable":
        cli.env["UMT_DATABASE_URL"] = "sqlite://"
    if case == "no v1 hash":
        args[-1] = "-"
    if case.startswith("chained"):
        args += CHAINED
    if case.endswith("missing program"):
        args[-3:] = [str(tmp_path / "no-such-program")]
    fast = cli.run(*args)
    full = subprocess.run([sys.executable, "-m", "umt.cli.main", *args],
                          env=cli.subprocess_env(), capture_output=True, text=True, timeout=60,
                          check=False)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr)
    expected = {"missing config": 2, "bad config": 2, "chained, missing program": 127,
                "bad setting elsewhere": 2, "bad duration": 2, "unknown section": 2,
                "bad database url in variable": 2}
    assert fast.returncode == expected.get(case, 3 if case.startswith("chained") else 0), (
        fast.stderr)
    warned = case.endswith(("readable password", "unknown variable"))
    assert ("umt: warning:" in fast.stderr) == warned, fast.stderr
    assert ("umt: error: invalid setting" in fast.stderr) == case.endswith(
        ("bad config", "bad setting elsewhere", "bad duration", "in variable")), fast.stderr
    assert ("previous ran" in fast.stdout) == (case.startswith("chained")
                                               and not case.endswith("missing program"))


@pytest.mark.parametrize("words", [
    ["hook", "download-done", INFO_HASH],
    ["hook", "download-done", "-"],
    ["--config", "/etc/umt.toml", "hook", "download-done", INFO_HASH],
    ["-c", "umt.toml", "hook", "download-done", INFO_HASH.upper()],
    ["--config=/etc/umt.toml", "hook", "download-done", INFO_HASH],
    ["--config", "/etc/umt.toml", "hook", "download-done", INFO_HASH, "--", "/bin/true"],
    ["hook", "download-done", INFO_HASH, "--", "prog", "--", "-x", "%N"],
])
def test_the_hooks_own_forms(words: list[str]) -> None:
    call = hook_call(words)
    assert call is not None
    head = words[:words.index("--")] if "--" in words else words
    assert call.info_hash == head[-1]
    assert call.config == (Path(head[1]) if len(head) == 5 else
                           Path(head[0].partition("=")[2]) if len(head) == 4 else None)
    assert call.previous == (words[len(head) + 1:] or None)


@pytest.mark.parametrize("words", [
    [],
    ["hook", "download-done"],
    ["hook", "download-done", INFO_HASH[:-1]],
    ["hook", "download-done", INFO_HASH, "--"],
    ["hook", "download-done", INFO_HASH, "/bin/true"],
    ["--json", "hook", "download-done", INFO_HASH],
    ["hook", "download-done", "--help"],
    ["--config", "", "hook", "download-done", INFO_HASH],
    ["--config", "--json", "hook", "download-done", INFO_HASH],
    ["--config", "caf\udce9.toml", "hook", "download-done", INFO_HASH],
    ["hook", "download-done", INFO_HASH, "--", "caf\udce9"],
    ["-cumt.toml", "hook", "download-done", INFO_HASH],
    ["start-acquire", "magnet:?xt=urn:btih:" + INFO_HASH],
])
def test_every_other_command_line_goes_to_the_full_cli(words: list[str]) -> None:
    assert hook_call(words) is None


def test_the_console_script_is_the_entry_module() -> None:
    assert Path(UMT).read_text().count("from umt.cli.entry import main") == 1


def test_start_acquire_json_loads_no_terminal_renderer(cli: Cli) -> None:
    # rich is imported when a command first prints for a person; JSON goes to stdout directly.
    report, output = _probe(cli, "--json", "start-acquire",
                            f"magnet:?xt=urn:btih:{INFO_HASH}&dn=Film")
    assert report["code"] == 0, output
    assert [name for name in report["loaded"]  # type: ignore[union-attr]
            if name == "rich" or name.startswith("rich.")] == []
    assert json.loads(output)["created"] is True
