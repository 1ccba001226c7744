"""umt doctor: check the setup, each failure with its fix."""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from umt.cli.application import Application, cli_environment, get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.params import JsonOption
from umt.textsafe import printable

if TYPE_CHECKING:
    from umt.config import Settings
    from umt.media.qbittorrent import QbtClient

Verdict = Literal["ok", "warn", "fail", "skip"]
_STYLES = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


@dataclass
class Check:
    name: str
    verdict: Verdict
    detail: str
    fix: str | None = None


def doctor(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Check the setup: the config file, the database (reachable, migrated), qBittorrent
    (reachable, credentials accepted), the finish hook (installed, pointing at this umt), the
    library folder (writable), hardlinks between the download and library folders, each media
    server (reachable, token accepted) and each notification URL (understood by Apprise; nothing
    is sent).

    Prints every check with the fix for each failure; exit 1 if any check fails. Writes
    nothing except a temporary file in each folder it tests.

    Example: umt doctor --json
    """
    app = get_app(ctx, json_output=json_output)
    app.print_load_warnings = False
    checks = run_checks(app)
    failed = [check for check in checks if check.verdict == "fail"]
    if app.json:
        app.print_json({
            "ok": not failed,
            "checks": [{"name": c.name, "status": c.verdict, "detail": c.detail, "fix": c.fix}
                       for c in checks],
        })
    else:
        _print(app, checks)
    if failed:
        app.abort(f"{len(failed)} check(s) failed: " + ", ".join(c.name for c in failed),
                  EXIT_FAILED)


def run_checks(app: Application) -> list[Check]:
    from umt.config import ConfigError, env_warnings, permission_warnings

    try:
        settings = app.settings
    except ConfigError as exc:
        return [Check("config", "fail", str(exc),
                      "fix the file (see config.example.toml) or the UMT_* variable it names")]
    warnings = [*permission_warnings(settings), *env_warnings(cli_environment())]
    checks = [_config_check(settings, warnings)]
    checks.append(_database_check(app))
    checks.append(_clock_check(app))
    qbt, qbt_check = _qbittorrent_check(app)
    checks.append(qbt_check)
    checks.append(_hook_check(app, qbt))
    checks.append(_paths_check(settings, qbt))
    checks.append(_library_check(settings))
    checks.append(_hardlink_check(settings, qbt))
    checks.append(_group_read_check(settings, qbt))
    checks.extend(_media_server_checks(app))
    checks.extend(_notify_checks(settings))
    return checks


def _config_check(settings: Settings, warnings: list[str]) -> Check:
    where = (f"{settings.config_file}" if settings.config_file
             else "no config file (defaults and UMT_* variables)")
    if warnings:
        return Check("config", "warn", f"{where}; " + "; ".join(warnings),
                     "see the warnings: chmod 600 the file, fix misspelt variables")
    return Check("config", "ok", f"loaded {where}")


def _database_check(app: Application) -> Check:
    from umt.engine import EngineError

    settings = app.settings
    target = settings.database_target()
    if target.kind == "sqlite" and target.sqlite_path and not target.sqlite_path.exists():
        return Check("database", "ok",
                     f"{target.sqlite_path} does not exist yet; it is created on first use")
    try:
        engine = app.app.engine(migrate_embedded=False, check_schema=False)
        states = engine.schema_state()
    except EngineError as exc:
        return Check("database", "fail", str(exc),
                     "check database.url / UMT_DATABASE_URL and that the server is running")
    behind = [s for s in states if s.applied < s.known]
    ahead = [s for s in states if s.applied > s.known]
    where = settings.database_url_for_display()
    if ahead:
        return Check("database", "fail", f"{where}: schema is newer than this umt",
                     "upgrade umt")
    if behind:
        verdict: Verdict = "warn" if target.kind == "sqlite" else "fail"
        return Check("database", verdict, f"{where}: schema needs migrating",
                     "run 'umt db migrate'")
    return Check("database", "ok", f"{where}: reachable, schema current")


def _clock_check(app: Application) -> Check:
    """On PostgreSQL the fleet coordinates on the server's clock; a host far off it still works
    but its logs and local times mislead, and it is worth fixing."""
    from umt.engine import SKEW_FIX, EngineError, skew_bound

    if app.settings.database_target().kind == "sqlite":
        return Check("clock", "ok", "SQLite: workers use this machine's clock")
    try:
        measured = app.app.engine(migrate_embedded=False, check_schema=False).clock_offset()
    except EngineError as exc:
        return Check("clock", "skip", f"database unreachable: {exc}")
    if measured is None:
        return Check("clock", "ok", "workers use this machine's clock")
    offset, round_trip = measured
    bound = skew_bound(app.settings.engine.lease)
    detail = (f"this host's clock is {-offset.total_seconds():+.3f}s off the database "
              f"server's (measured with a {round_trip.total_seconds() * 1000:.1f} ms round "
              f"trip); leases and timers follow the server's clock")
    if abs(offset) > bound:
        return Check("clock", "warn", f"{detail}; more than {bound.total_seconds():g}s "
                     "(a quarter of engine.lease)", SKEW_FIX)
    return Check("clock", "ok", detail)


def _qbittorrent_check(app: Application) -> tuple[QbtClient | None, Check]:
    from umt.media.qbittorrent import QbtAdapterError, QbtAuthFailed, QbtClient, QbtUnavailable
    from umt.textsafe import redact_url

    section = app.settings.qbittorrent
    url = redact_url(section.url)
    # One try: doctor reports an unreachable qBittorrent itself, at once.
    qbt = QbtClient(section.url, section.username, section.password or "",
                    timeout=section.timeout.total_seconds(), attempts=1,
                    path_map=app.app.path_map())
    try:
        version = qbt.version()
    except QbtAuthFailed as exc:
        return None, Check("qbittorrent", "fail", str(exc),
                           "set qbittorrent.username and qbittorrent.password "
                           "(or UMT_QBITTORRENT_PASSWORD) to the Web UI's credentials")
    except QbtUnavailable as exc:
        return None, Check("qbittorrent", "fail", str(exc),
                           f"start qBittorrent with its Web UI enabled at {url}, "
                           "or set qbittorrent.url")
    except QbtAdapterError as exc:
        return None, Check("qbittorrent", "fail", str(exc), "check qBittorrent's log")
    return qbt, Check("qbittorrent", "ok", f"{url}: qBittorrent {version}, login accepted")


def _hook_check(app: Application, qbt: QbtClient | None) -> Check:
    from umt.cli.hookprogram import plan_hook, read_program_line
    from umt.media.qbittorrent import QbtAdapterError

    if qbt is None:
        return Check("finish hook", "skip", "qBittorrent is not reachable")
    plan = plan_hook(app.settings)
    try:
        current = qbt.finish_hook()
    except QbtAdapterError as exc:
        return Check("finish hook", "fail", str(exc), "check qBittorrent")
    if plan.problems:
        return Check("finish hook", "fail", "; ".join(plan.problems),
                     "fix the configuration, then run 'umt qbittorrent install-hook'")
    if read_program_line(current).umt_part != plan.program:
        shown = current or "no finish program"
        return Check("finish hook", "fail", f"qBittorrent runs: {shown}",
                     "run 'umt qbittorrent install-hook' (until then 'umt resume' from cron "
                     "notices finished downloads)")
    return Check("finish hook", "ok", current or plan.program)


def _library_check(settings: Settings) -> Check:
    library = settings.library.dir
    if not library.is_dir():
        # The importer never creates the root: a missing one usually is an unmounted disk.
        return Check("library", "fail", f"{library} does not exist (is its disk mounted?)",
                     f"mkdir -p {shlex.quote(str(library))} (or set library.dir / "
                     "UMT_LIBRARY_DIR)")
    try:
        with tempfile.NamedTemporaryFile(dir=library, prefix=".umt-doctor-"):
            pass
    except OSError as exc:
        return Check("library", "fail", f"cannot write in {library}: {exc.strerror or exc}",
                     f"give this user write access to {library} (or set library.dir)")
    return Check("library", "ok", f"{library} is writable")


def _hardlink_check(settings: Settings, qbt: QbtClient | None) -> Check:
    mode = settings.library.import_mode
    if mode == "copy":
        return Check("hardlinks", "skip", "library.import_mode is copy")
    download_dir = _download_dir(settings, qbt)
    if download_dir is None:
        return Check("hardlinks", "skip", "qBittorrent's download folder is unknown "
                     "(set qbittorrent.download_dir)")
    library = settings.library.dir
    if not library.is_dir():
        return Check("hardlinks", "skip", "the library folder does not exist")
    if not download_dir.is_dir():
        return Check("hardlinks", "warn" if mode == "auto" else "fail",
                     f"{download_dir} is not visible from here",
                     "run umt on the machine (or in the container) that sees qBittorrent's "
                     "downloads under the same path")
    from umt.media.importing import probe_hardlink

    problem = probe_hardlink(download_dir, library)
    if problem is None:
        return Check("hardlinks", "ok", f"{download_dir} -> {library}: hardlinks work")
    if mode == "auto":
        return Check("hardlinks", "warn", f"{problem}: imports will be copied (reflink if "
                     "possible), which takes time and space",
                     "put the download and library folders on one filesystem")
    return Check("hardlinks", "fail", problem,
                 "put the download and library folders on one filesystem, or set "
                 "library.import_mode = \"auto\"")


def _group_read_check(settings: Settings, qbt: QbtClient | None) -> Check:
    """A hardlinked import keeps the download's mode: can ``library.group`` read downloads?"""
    library = settings.library
    if library.group is None:
        return Check("library group", "skip", "library.group is not set")
    if library.import_mode == "copy":
        return Check("library group", "ok", "copies get library.file_mode and library.group")
    download_dir = _download_dir(settings, qbt)
    if download_dir is None or not download_dir.is_dir():
        return Check("library group", "skip", "qBittorrent's download folder is not visible here")
    from umt.config import group_id
    from umt.media.importing import unreadable_by_group

    looked, unreadable = unreadable_by_group(download_dir, group_id(library.group))
    if not unreadable:
        return Check("library group", "ok", f"group {printable(library.group)} can read the "
                     f"{looked} file(s) looked at in {download_dir}")
    example = unreadable[0]
    mode = f"{example.lstat().st_mode & 0o7777:04o}"
    return Check(
        "library group", "warn",
        f"group {printable(library.group)} cannot read {len(unreadable)} of {looked} file(s) in "
        f"{download_dir} (e.g. {printable(str(example))}, mode {mode}); hardlinked imports "
        "share the download's mode and group",
        "make qBittorrent create group-readable files (UMask=0002 in its service, the folder "
        "chgrp'ed to the group with chmod 2775), or set library.import_mode = \"copy\"",
    )


def _download_dir(settings: Settings, qbt: QbtClient | None) -> Path | None:
    if settings.qbittorrent.download_dir:
        return Path(settings.qbittorrent.download_dir)
    if qbt is None:
        return None
    from umt.media.qbittorrent import QbtAdapterError

    try:
        save_path = qbt.preferences().get("save_path")
    except QbtAdapterError:
        return None
    return Path(qbt.path_map.to_local(save_path)) if save_path else None


def _paths_check(settings: Settings, qbt: QbtClient | None) -> Check:
    """qBittorrent's default save path and each category's must exist here once mapped (as
    Radarr's "remote path mapping" health check): otherwise umt cannot read what it downloads."""
    from umt.media.qbittorrent import QbtAdapterError

    if qbt is None:
        return Check("paths", "skip", "qBittorrent is not reachable")
    try:
        save_paths = qbt.save_paths()
    except QbtAdapterError as exc:
        return Check("paths", "fail", str(exc), "check qBittorrent")
    missing = {name: remote for name, remote in save_paths.items()
               if remote and not Path(qbt.path_map.to_local(remote)).is_dir()}
    seen = ", ".join(f"{remote} -> {qbt.path_map.to_local(remote)}"
                     if qbt.path_map.to_local(remote) != remote else remote
                     for remote in sorted(set(save_paths.values())) if remote)
    if not missing:
        return Check("paths", "ok", f"qBittorrent's save paths are visible here: {seen}")
    where = "; ".join(f"{'default' if not name else f'category {name!r}'}: "
                      f"{printable(remote)} (here: {printable(qbt.path_map.to_local(remote))})"
                      for name, remote in sorted(missing.items()))
    remote = sorted(missing.values(), key=len)[0]
    local = settings.qbittorrent.download_dir or "/where/this/machine/sees/it"
    return Check(
        "paths", "fail", f"qBittorrent saves where umt cannot see: {where}",
        f"add to the config file: [[qbittorrent.path_map]] remote = \"{remote}\" "
        f"local = \"{local}\" (or UMT_QBITTORRENT_PATH_MAP={remote}={local}), with local "
        "the folder where this machine sees qBittorrent's downloads",
    )


def _media_server_checks(app: Application) -> list[Check]:
    """Each media server answers a request that needs its token (the token is never shown)."""
    from umt.media.mediaservers import MediaServerError

    checks: list[Check] = []
    for server in app.app.media_servers():
        name = f"media server {server.name}"
        try:
            said = server.check()
        except MediaServerError as exc:
            checks.append(Check(name, "fail", str(exc),
                                f"check url and token of [[media_servers]] {server.name!r} "
                                "(a Jellyfin/Emby API key, or Plex's X-Plex-Token)"))
            continue
        checks.append(Check(name, "ok", f"{server.kind} at {server.shown_url}: {said}"))
    return checks


def _notify_checks(settings: Settings) -> list[Check]:
    """Each Apprise URL parses (nothing is sent; the URLs hold tokens and are not shown)."""
    from umt.media.notifier import syntax_problem, targets

    urls = [url.get_secret_value() for url in settings.notify.urls]
    if not urls:
        return []
    problems = [f"{target.label}: {problem}" for target in targets(urls)
                if (problem := syntax_problem(target.url)) is not None]
    if problems:
        return [Check("notifications", "fail", "; ".join(problems),
                      "fix notify.urls (UMT_NOTIFY_URLS); the forms are in Apprise's wiki")]
    labels = ", ".join(target.label for target in targets(urls))
    return [Check("notifications", "ok", f"{len(urls)} Apprise URL(s) understood: {labels}")]


def _print(app: Application, checks: list[Check]) -> None:
    from rich.table import Table  # here: --json never loads rich
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for check in checks:
        detail = Text(check.detail)
        if check.fix and check.verdict in ("fail", "warn"):
            detail.append(f"\nfix: {check.fix}", style="bold")
        table.add_row(Text(check.verdict.upper(), style=_STYLES[check.verdict]), check.name,
                      detail)
    app.out.print(table)
