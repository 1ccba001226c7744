"""The engine's operations on its tables, written once for every backend.

Each public method is one transaction (or one statement). One module per subject: ``runs``,
``signals`` and ``maintenance`` (what clients do, which ``Engine`` exposes), ``workers`` and
``steps`` (what workers do; ``fencing`` holds the lease fence's Python side).
"""

from __future__ import annotations

from umt.engine.store.maintenance import Maintenance
from umt.engine.store.runs import Runs
from umt.engine.store.signals import Signals
from umt.engine.store.steps import Steps
from umt.engine.store.workers import Workers


class Store(Runs, Signals, Maintenance, Workers, Steps):
    """Every operation on the engine's tables; workers and their executions use it."""
