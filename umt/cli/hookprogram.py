"""The program line qBittorrent runs when a torrent finishes, and whether it can work.

qBittorrent starts it without a shell and without the user's environment: it substitutes the
placeholders (%I: v1 info-hash) in the whole string, splits it into arguments (double quotes
group), and starts the program detached. So the line names this umt by absolute path and
passes the config file, which must hold everything the hook needs to find the database.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from umt.config import Settings

PLACEHOLDER = "%I"


@dataclass
class HookPlan:
    program: str
    #: Reasons the hook would not reach this umt's database; install-hook refuses if any.
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def umt_command() -> list[str]:
    """This umt, as absolute paths: the ``umt`` script that runs now, or python -m."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "umt" and argv0.is_file():
        return [str(argv0.absolute())]
    beside_python = Path(sys.executable).parent / "umt"
    if beside_python.is_file():
        return [str(beside_python.absolute())]
    found = shutil.which("umt")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "umt.cli.main"]


def quote(argument: str) -> str:
    if any(character.isspace() for character in argument):
        return f'"{argument}"'
    return argument


def plan_hook(settings: Settings) -> HookPlan:
    from umt.config import ConfigError, load_settings

    config_file = settings.config_file
    arguments = umt_command()
    if config_file is not None:
        arguments += ["--config", str(config_file.absolute())]
    arguments += ["hook", "download-done", PLACEHOLDER]
    plan = HookPlan(" ".join(quote(argument) for argument in arguments))
    for argument in arguments[:-1]:
        if '"' in argument or "%" in argument:
            plan.problems.append(
                f"{argument!r} contains '\"' or '%', which qBittorrent's program line "
                "cannot carry; install umt and its config file under plain paths"
            )
    try:
        # What the hook will see: the config file alone, no environment.
        seen = load_settings(config_file, env={})
    except ConfigError as exc:
        plan.problems.append(f"the hook cannot load the configuration: {exc}")
        return plan
    where = f"in {config_file}" if config_file else "in a config file (none is used now)"
    if seen.database_url() != settings.database_url():
        plan.problems.append(
            "the database URL comes from UMT_DATABASE_URL, which qBittorrent's hook does not "
            f"see: set database.url {where} (chmod 600 if it holds a password)"
        )
    elif config_file is not None and _relative_sqlite_url(config_file):
        plan.problems.append(
            f"database.url in {config_file} is relative to the current directory, which "
            "differs for the hook: use sqlite:////absolute/path.db"
        )
    if seen.engine.db_schema != settings.engine.db_schema:
        plan.problems.append(
            "the engine schema comes from UMT_ENGINE_SCHEMA, which the hook does not see: "
            f"set engine.schema {where}"
        )
    if config_file is None:
        plan.notes.append(
            "no config file: the hook uses the default database of the user qBittorrent runs "
            f"as ({settings.database_url_for_display()} for this user)"
        )
    return plan


def _relative_sqlite_url(config_file: Path) -> bool:
    try:
        with config_file.open("rb") as handle:
            url = tomllib.load(handle).get("database", {}).get("url")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return (isinstance(url, str) and url.lower().startswith("sqlite:///")
            and not url.lower().startswith("sqlite:////"))
