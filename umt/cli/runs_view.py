"""What runs, status and show share: an engine whose dead local workers were reaped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from umt.cli.application import Application

if TYPE_CHECKING:
    from umt.engine import Engine, Run


def inspecting_engine(app: Application) -> Engine | None:
    """The engine (None if the embedded database does not exist yet), after taking back the
    runs of workers on this host whose process is gone, so that "running" is only what runs."""
    engine = app.existing_engine()
    if engine is not None:
        from umt.engine import host_key

        engine.reap_dead_workers(host_key())
    return engine


def get_run(app: Application, run_id: str) -> tuple[Engine, Run]:
    from umt.engine import UnknownRun

    engine = inspecting_engine(app)
    if engine is None:
        raise UnknownRun(run_id)
    return engine, engine.get(run_id)
