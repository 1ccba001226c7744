"""What the pages show, worked out from the engine's records (the CLI's words and formats)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from umt.cli.render import seconds_text, size_text
from umt.engine import Attempt, Step

#: The step whose result lists the library paths (as ``umt start-acquire --wait`` reads them).
REGISTER_STEP = "register"


@dataclass(frozen=True)
class CopyProgress:
    step: str
    file: str | None
    done: str
    total: str | None
    percent: int | None
    rate: str | None
    eta: str | None


def copy_progress(attempt: Attempt, now: datetime) -> CopyProgress | None:
    progress = attempt.progress
    if attempt.status != "running" or not isinstance(progress, dict):
        return None
    done = float(progress.get("done") or 0)
    total = float(progress["total"]) if progress.get("total") else None
    elapsed = ((attempt.progress_at or now) - attempt.started_at).total_seconds()
    rate = done / elapsed if elapsed > 0 and done > 0 else None
    eta = seconds_text((total - done) / rate) if rate and total and total > done else None
    return CopyProgress(
        step=attempt.step_name, file=str(progress["file"]) if progress.get("file") else None,
        done=size_text(done), total=size_text(total) if total else None,
        percent=min(100, int(done * 100 / total)) if total else None,
        rate=f"{size_text(rate)}/s" if rate else None, eta=eta,
    )


def age(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "-"
    return seconds_text(max((now - moment).total_seconds(), 0)) + " ago"


def library_paths(steps: list[Step]) -> list[str]:
    for step in steps:
        if step.phase == "main" and step.name == REGISTER_STEP and step.status == "succeeded":
            result: Any = step.result
            if isinstance(result, dict):
                return [str(path) for path in result.get("library_paths", [])]
    return []


def awaited_signals(steps: list[Step]) -> list[str]:
    return [step.signal_name for step in steps
            if step.kind == "signal" and step.status == "waiting" and step.signal_name]
