"""The scenarios: each a function of a ``Case`` that drives umt processes and records checks.

``SCENARIOS`` holds them in report order; ``spikes.scenarios.acquire`` has those that run the
acquire workflow (real or fake qBittorrent), ``spikes.scenarios.engine`` the engine-level ones
that use the spike workflows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spikes.harness import POSTGRESQL, SQLITE, Case

BOTH = (POSTGRESQL, SQLITE)
PG_ONLY = (POSTGRESQL,)


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    backends: tuple[str, ...]
    run: Callable[[Case], None]
    #: How the scenario drives umt, printed under its title.
    setup: str = ""
    #: Run without --only. False for a scenario that shows a known, open bug of another layer
    #: (it FAILs until that is fixed; see spikes/README.md).
    default: bool = True


SCENARIOS: list[Scenario] = []


def scenario(key: str, title: str, *, backends: tuple[str, ...] = BOTH, setup: str = "",
             default: bool = True) -> Callable[[Callable[[Case], None]], Callable[[Case], None]]:
    def register(function: Callable[[Case], None]) -> Callable[[Case], None]:
        SCENARIOS.append(Scenario(key, title, backends, function, setup, default))
        return function

    return register


# ---------------------------------------------------------------------- shared helpers


def info_hash(label: str) -> str:
    """A made-up v1 info-hash (the fake qBittorrent needs no real torrent behind it)."""
    return hashlib.sha1(f"umt-spike:{label}".encode()).hexdigest()


def magnet(hash_hex: str, name: str) -> str:
    return f"magnet:?xt=urn:btih:{hash_hex}&dn={name.replace(' ', '+')}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def timestamp(value: Any) -> float:
    """Seconds since the epoch of a timestamp from ``umt show --json``, the database or a run
    (ISO text or datetime; naive means UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return float(value.timestamp())


def library_files(case: Case) -> list[Path]:
    return sorted(p for p in case.library.rglob("*") if p.is_file())


def attempts_block(case: Case, show: dict[str, Any], *, phases: tuple[str, ...] = (
        "main", "compensation")) -> None:
    """The run's steps and attempts from ``umt show --json``, one line each."""
    labels = case.worker_labels()
    lines = [f"steps of run {str(show.get('run_id'))[:8]} ({show.get('status')}):"]
    for step in show.get("steps", []):
        if step["phase"] not in phases:
            continue
        name = step["name"] + (" (compensation)" if step["phase"] == "compensation" else "")
        lines.append(f"  {name:<28} {step['kind']:<6} {step['status']}")
        for attempt in step.get("attempts", []):
            error = (attempt.get("error") or {}).get("message", "")
            worker = labels.get(str(attempt["worker_id"]), str(attempt["worker_id"])[:8])
            lines.append(f"      attempt {attempt['attempt']} {attempt['status']:<12} worker "
                         f"{worker} epoch {attempt['lease_epoch']}"
                         + (f": {case.shorten(error)[:110]}" if error else ""))
    case.section.block(lines)


def step_of(show: dict[str, Any], name: str, phase: str = "main") -> dict[str, Any]:
    for step in show.get("steps", []):
        if step["name"] == name and step["phase"] == phase:
            return dict(step)
    return {"name": name, "status": "(never started)", "attempts": []}


def migrate(case: Case, *, show: bool = False) -> None:
    result = case.umt("db", "migrate", show=show)
    if result.code != 0:
        raise RuntimeError(f"umt db migrate failed: {result.stderr.strip()}")


def register_all() -> list[Scenario]:
    from spikes.scenarios import acquire, engine, partitions  # noqa: F401 - registers them

    order = ["a", "b-kill", "b-freeze", "c", "d", "e", "f", "g", "h", "i",
             "pg-sleep", "pg-500", "sleepers-10k", "qbt-drop", "qbt-drop-real", "rename-kill",
             "copy-freeze", "partition", "partition-listen"]
    return sorted(SCENARIOS, key=lambda s: order.index(s.key) if s.key in order else 99)
