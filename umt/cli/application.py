"""The one object every command gets: settings, consoles, JSON mode and (lazily) the App.

Nothing heavy is imported here at module level: ``umt --help`` must not load the engine,
psycopg, qbittorrent-api or torf, and the finish hook (``umt.cli.entry``) loads neither typer
nor rich for a torrent umt does not track.
"""

from __future__ import annotations

import json
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from umt.cli.errors import EXIT_FAILED, EXIT_USAGE, CliError, add_secret

if TYPE_CHECKING:
    import typer
    from rich.console import Console

    from umt.app import App
    from umt.config import Settings
    from umt.engine import Engine


class Application:
    def __init__(self, config_path: Path | None = None, *, json_output: bool = False) -> None:
        self.config_path = config_path
        self.json = json_output
        self._settings: Settings | None = None
        self._app: App | None = None
        #: Doctor reports warnings itself instead of printing them on load.
        self.print_load_warnings = True

    # ------------------------------------------------------------------ configuration

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from umt.config import env_warnings, load_settings, permission_warnings

            settings = load_settings(self.config_path)
            add_secret(_url_password(settings.database_url()))
            password = settings.qbittorrent.password
            add_secret(password.get_secret_value() if password else None)
            if self.print_load_warnings:
                for warning in [*permission_warnings(settings), *env_warnings(cli_environment())]:
                    self.warn(warning)
            self._settings = settings
        return self._settings

    @property
    def app(self) -> App:
        if self._app is None:
            from umt.app import App

            self._app = App(self.settings)
        return self._app

    # ------------------------------------------------------------------ database

    def engine(self) -> Engine:
        """The engine; the embedded SQLite database is created and migrated on first use."""
        return self.app.engine()

    def existing_engine(self) -> Engine | None:
        """The engine, or None when the embedded database does not exist yet (read-only
        commands must not create it)."""
        target = self.settings.database_target()
        if target.kind == "sqlite" and target.sqlite_path and not target.sqlite_path.exists():
            return None
        return self.app.engine()

    def close(self) -> None:
        if self._app is not None:
            self._app.close()
            self._app = None

    # ------------------------------------------------------------------ output

    @cached_property
    def out(self) -> Console:
        from umt.cli.console import console

        return console(stderr=False)

    @cached_property
    def err(self) -> Console:
        from umt.cli.console import console

        return console(stderr=True)

    def print_json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=_json_default))
        sys.stdout.write("\n")
        sys.stdout.flush()

    def info(self, message: str) -> None:
        """A diagnostic line on stderr (never on stdout, which belongs to results)."""
        self.err.print(message, soft_wrap=True)

    def warn(self, message: str) -> None:
        self.err.print(f"umt: warning: {message}", soft_wrap=True)

    def abort(self, message: str, code: int = EXIT_FAILED) -> NoReturn:
        raise CliError(message, code)

    def usage_error(self, message: str) -> NoReturn:
        raise CliError(message, EXIT_USAGE)


#: Variables read by the command line itself rather than by the settings (UMT_ENGINE_BREAK:
#: the spikes' breakages, installed by spikes/umt_cli.py).
CLI_ENV_VARS = frozenset({"UMT_DEBUG", "UMT_ENGINE_BREAK"})


def cli_environment() -> dict[str, str]:
    """The environment without the command line's own variables (for ``env_warnings``)."""
    return {name: value for name, value in os.environ.items() if name not in CLI_ENV_VARS}


def _url_password(url: str) -> str | None:
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        return parts.password or next(iter(parse_qs(parts.query).get("password", [])), None)
    except ValueError:
        return None


def _json_default(value: object) -> object:
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    return str(value)


def get_app(ctx: typer.Context, *, json_output: bool = False) -> Application:
    """The application of the root command; ``--json`` given to a command turns JSON on."""
    application = ctx.find_root().obj
    if not isinstance(application, Application):
        raise RuntimeError("the umt root callback did not run")
    application.json = application.json or json_output
    return application
