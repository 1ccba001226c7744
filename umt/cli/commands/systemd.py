"""umt systemd: print one of the systemd units (contrib/systemd) with ExecStart naming this umt."""

from __future__ import annotations

import re
import shutil
import sys
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer

from umt.cli.application import get_app

UNITS = ("umt-worker.service", "umt-resume.service", "umt-resume.timer")
_EXEC_START = re.compile(r"^ExecStart=\S*/umt(?= )", re.MULTILINE)


def systemd(
    ctx: typer.Context,
    unit: Annotated[str, typer.Argument(metavar="UNIT", show_default=False,
                                        help=f"One of {', '.join(UNITS)}.")],
    system: Annotated[bool, typer.Option(
        "--system", help="The system unit (runs as the user umt, settings in "
                         "/etc/umt/config.toml) instead of the user unit.")] = False,
) -> None:
    """Print a systemd unit whose ExecStart runs this umt: umt-worker.service (a resident
    worker that stops gracefully on SIGTERM and restarts on failure), or umt-resume.timer
    with umt-resume.service (a 'umt resume' pass every 5 minutes, instead of cron).

    Example: umt systemd umt-worker.service > ~/.config/systemd/user/umt-worker.service
    """
    app = get_app(ctx)
    if unit not in UNITS:
        app.usage_error(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")
    variant = "system" if system else "user"
    text = files("umt.cli").joinpath("systemd", variant, unit).read_text(encoding="utf-8")
    executable = _this_umt()
    if executable is None:
        app.abort("cannot tell where this umt is installed: no umt beside "
                  f"{sys.executable} nor on PATH")
    sys.stdout.write(_EXEC_START.sub(lambda _: f"ExecStart={_quoted(executable)}", text))


def _this_umt() -> str | None:
    beside = Path(sys.executable).parent / "umt"  # a virtual environment's console script
    if beside.is_file():
        return str(beside.absolute())
    found = shutil.which("umt")
    return str(Path(found).absolute()) if found else None


def _quoted(path: str) -> str:
    """``path`` as systemd reads it in ExecStart: ``%`` starts a specifier, spaces split."""
    escaped = path.replace("%", "%%")
    if any(ch.isspace() or ch in "\"'\\" for ch in escaped):
        return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return escaped
