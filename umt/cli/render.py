"""Small formatting helpers for human output (JSON output never goes through here)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from umt.textsafe import printable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.text import Text

    from umt.engine import Run, Step

STATUS_STYLES = {
    "pending": "cyan",
    "running": "bold blue",
    "waiting": "magenta",
    "sleeping": "magenta",
    "retrying": "yellow",
    "succeeded": "green",
    "failed": "bold red",
    "timed_out": "red",
    "canceled": "yellow",
    "interrupted": "yellow",
    "lease_lost": "yellow",
    "handed_back": "yellow",
}


def status_text(status: str | None) -> Text:
    from rich.text import Text  # here: a command printing JSON never loads rich

    if status is None:
        return Text("-")
    return Text(status, style=STATUS_STYLES.get(status, ""))


def when(moment: datetime | None) -> str:
    """Local time to the second, or '-'."""
    if moment is None:
        return "-"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def seconds_text(seconds: float) -> str:
    """1.2s, 45s, 4m05s, 2h03m, 3d04h."""
    if seconds < 10:
        return f"{max(seconds, 0):.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def span(start: datetime | None, end: datetime | None, now: datetime) -> str:
    if start is None:
        return "-"
    text = seconds_text(((end or now) - start).total_seconds())
    return text if end is not None else f"{text}…"


def size_text(size: float | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def run_title(run: Run) -> str:
    """The title an acquire run was started with (other workflows: '')."""
    value = run.input.get("title") if isinstance(run.input, dict) else None
    return str(value) if value is not None else ""


def compact_json(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_message(error: dict[str, Any] | None) -> str | None:
    if not error:
        return None
    return str(error.get("message") or error.get("type") or error)


def run_warnings(run: Run, steps: Sequence[Step] = ()) -> list[str]:
    """What went wrong without failing the run (a media server or a notification service that
    gave up): from the steps' results while it runs, from its output once it succeeded."""
    found: list[str] = []
    results = [step.result for step in steps]
    for value in [*results, run.output]:
        listed = value.get("warnings") if isinstance(value, dict) else None
        if isinstance(listed, list):
            found.extend(printable(item) for item in listed if printable(item) not in found)
    return found
