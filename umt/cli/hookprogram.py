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
#: What ends umt's own part of the program line; the rest, after " -- ", is the program the
#: user had before, kept verbatim so that qBittorrent splits and substitutes it as before.
HOOK_TAIL = f" hook download-done {PLACEHOLDER}"
CHAIN_SEPARATOR = " -- "


@dataclass(frozen=True)
class InstalledHook:
    """qBittorrent's finish program, read: umt's part (if any) and the program it chains."""

    umt_part: str | None
    previous: str | None

    @property
    def is_umt(self) -> bool:
        return self.umt_part is not None


def read_program_line(line: str | None) -> InstalledHook:
    """Splits a finish program line into umt's hook and the user's program it runs after."""
    if not line:
        return InstalledHook(None, None)
    head, tail, rest = line.partition(HOOK_TAIL)
    if not tail or not (rest == "" or rest.startswith(CHAIN_SEPARATOR)):
        return InstalledHook(None, line)
    previous = rest[len(CHAIN_SEPARATOR):] if rest else None
    return InstalledHook(head + tail, previous or None)


def chained(program: str, previous: str | None) -> str:
    """umt's hook line followed by the user's program line, which umt runs after its part."""
    return f"{program}{CHAIN_SEPARATOR}{previous}" if previous else program


def chain_problem(previous: str) -> str | None:
    """Why ``previous`` cannot be carried after umt's hook unchanged (None: it can).

    qBittorrent splits the whole line at spaces (double quotes group) before it substitutes
    placeholders in each argument, so a line appended after umt's complete arguments splits
    into the same arguments as before, except where the quoting itself is in doubt.
    """
    if previous.count('"') % 2:
        return ("its double quotes are unbalanced, so qBittorrent may not split it into "
                "the same arguments after umt's hook")
    if any(ord(character) < 32 or ord(character) == 127 for character in previous):
        return "it contains control characters"
    return None


def previous_program(current: str | None, program: str) -> str | None:
    """The finish program umt's hook ``program`` must run after its own part: the one this
    umt's hook already runs, or whatever qBittorrent runs now (another umt's hook included)."""
    hook = read_program_line(current)
    if hook.umt_part == program:
        return hook.previous
    return current or None


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
