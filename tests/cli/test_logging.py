"""umt worker and umt resume log a line per run event: -v/-q choose how much, --log-file
where; no secret ever reaches a line and strangers' text is escaped."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.cli.conftest import Cli, magnet, qbittorrent_env
from tests.support.qbittorrent import QbtInstance
from umt.cli.errors import add_secret
from umt.cli.logs import logging_to_stderr, use_options

LOGGED_HASH = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"


@pytest.mark.parametrize("command", ["worker", "resume"])
@pytest.mark.parametrize("flags", [
    ["-v", "-q"],
    ["-vv", "--quiet"],
    ["--log-file", "{tmp}/missing/umt.log"],
    ["--log-file", "{tmp}"],
    ["-q", "--verbose", "--log-file", "{tmp}/umt.log"],
])
def test_bad_logging_flags_exit_2_and_write_nothing(
    cli: Cli, command: str, flags: list[str]
) -> None:
    before = sorted(cli.tmp_path.rglob("*"))
    result = cli.invoke(command, *[flag.format(tmp=cli.tmp_path) for flag in flags])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("umt: error: -")
    assert sorted(cli.tmp_path.rglob("*")) == before


def test_a_log_line_escapes_strangers_text_and_masks_secrets(tmp_path: Path) -> None:
    log_file = tmp_path / "umt.log"
    add_secret("s3cret-for-the-log")
    with logging_to_stderr():
        use_options(logging.INFO, 0, 0, log_file)
        logging.getLogger("umt.test").info(
            "torrent %s\nFORGED LINE, password s3cret-for-the-log", "Film\x1b[2J\u202e.mkv")
        logging.getLogger("umt.test").debug("not shown at the default level")
        try:
            raise ValueError("bad name Film\x1b]0;title\x07 s3cret-for-the-log")
        except ValueError:
            logging.getLogger("umt.test").exception("a traceback keeps its lines")
    text = log_file.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].endswith(
        r"INFO umt.test: torrent Film\x1b[2J\u202e.mkv\x0aFORGED LINE, password ***")
    assert lines[1].endswith("ERROR umt.test: a traceback keeps its lines")
    assert lines[2] == "Traceback (most recent call last):"
    assert lines[-1] == r"ValueError: bad name Film\x1b]0;title\x07 ***"
    assert "\x1b" not in text and "s3cret" not in text
    assert [h for h in logging.getLogger().handlers
            if getattr(h, "baseFilename", None) == str(log_file)] == []


def _with_password(url: str, password: str) -> tuple[str, str]:
    """``url`` carrying a password (the test server trusts everyone, so any will do), and it."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    return url.replace("@", f":{password}@", 1), password


def test_a_verbose_acquisition_logs_its_events_and_no_secret(
    cli: Cli, pg_url: str, qbittorrent: QbtInstance
) -> None:
    database_url, database_password = _with_password(pg_url, "pg-pass-W0rd-in-url")
    cli.env.update(qbittorrent_env(qbittorrent))
    cli.env.update({"UMT_DATABASE_URL": database_url, "UMT_CATEGORY": "umt-log-tests"})
    assert cli.run("db", "migrate").returncode == 0
    run_id = cli.json("start-acquire", magnet(LOGGED_HASH, "Film \x1b[31m red"))["run_id"]
    log_file = cli.tmp_path / "resume.log"

    first = cli.run("resume", "-vv", "--log-file", str(log_file))
    assert first.returncode == 0, first.stderr
    assert cli.json("cancel", run_id)["status"] == "canceled"
    second = cli.run("resume", "-v", "--log-file", str(log_file))
    assert second.returncode == 0, second.stderr

    text = log_file.read_text(encoding="utf-8")
    run = f"run {run_id}: "
    for event in (r"claimed \(acquire \S+, main phase, lease epoch 1\)",
                  r"step submit-download started \(attempt 1\)",
                  r"step submit-download finished \(attempt 1\)",
                  f"waiting in wait-download for signal download-done:{LOGGED_HASH} until ",
                  r"claimed \(acquire \S+, compensation phase, lease epoch \d+\)",
                  "compensation finished"):
        assert re.search(f"(INFO|DEBUG) umt[.a-z]+: {run}{event}", text), (event, text)
    everything = text + first.stderr + second.stderr + first.stdout + second.stdout
    for secret in (qbittorrent.password, database_password, database_url):
        assert secret not in everything
    assert "\x1b" not in text
