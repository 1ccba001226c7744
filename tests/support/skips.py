"""Skips that a full run accepts (a pytest plugin, loaded by ``tests/conftest.py``).

``scripts/test`` without pytest arguments (a full run, as in CI) sets ``TESTS_FULL_RUN=1``;
then every other skip fails the run, because it hides missing set-up that
``scripts/lib/bootstrap.sh`` should have installed.

- :func:`skip_by_design`: the test does not apply to this parametrization (a PostgreSQL-only
  test on the SQLite backend, …).
- :func:`skip_unavailable`: what the test needs cannot exist on this machine (a container that
  refuses ``mount``, no second filesystem); the run's summary names the acceptance point left
  unexercised, and why.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any, NoReturn

import pytest

FULL_RUN_ENV = "TESTS_FULL_RUN"
BY_DESIGN = "by design: "
UNAVAILABLE = "not on this machine: "


def full_run() -> bool:
    return os.environ.get(FULL_RUN_ENV) == "1"


def skip_by_design(reason: str) -> NoReturn:
    __tracebackhide__ = True  # the skip is reported at the caller's line
    pytest.skip(BY_DESIGN + reason)


def unavailable(acceptance: str, why: str) -> str:
    """The skip reason of :func:`skip_unavailable` (also for ``skipif`` markers)."""
    return f"{UNAVAILABLE}{acceptance} not exercised: {why}"


def skip_unavailable(acceptance: str, why: str) -> NoReturn:
    __tracebackhide__ = True
    pytest.skip(unavailable(acceptance, why))


# ---------------------------------------------------------------------- hooks

_not_exercised = pytest.StashKey[list[str]]()


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _judge(report: pytest.TestReport | pytest.CollectReport, config: pytest.Config) -> None:
    """In a full run, turns a skip for missing set-up into a failure."""
    if not full_run() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if reason.startswith(BY_DESIGN):
        return
    if reason.startswith(UNAVAILABLE):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped in a full run, which must exercise everything this machine "
                       f"can: {reason} (missing set-up? see scripts/lib/bootstrap.sh)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None],
) -> Generator[None, Any, None]:
    outcome = yield
    _judge(outcome.get_result(), item.config)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    """A whole module skipped at import (``allow_module_level``) is judged the same way."""
    outcome = yield
    _judge(outcome.get_result(), collector.config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A PostgreSQL-only test is not generated for SQLite (nor a test of SQLite's limits for
    PostgreSQL): it does not apply there, so it is neither run nor reported as skipped."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        other = {"sqlite": "postgres_only", "postgresql": "sqlite_only"}.get(str(backend))
        (dropped if other and item.get_closest_marker(other) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _note_unexercised(report: pytest.TestReport | pytest.CollectReport,
                      config: pytest.Config) -> None:
    """Records the acceptance points this machine cannot exercise. Reports reach these hooks in
    the process that prints the summary (pytest-xdist's controller, too)."""
    if not full_run() or not report.skipped:
        return
    reason = _skip_reason(report)
    if reason.startswith(UNAVAILABLE):
        config.stash.setdefault(_not_exercised, []).append(
            f"{report.nodeid}: {reason.removeprefix(UNAVAILABLE)}")


#: the configs of the sessions in progress, innermost last (pytester nests one in a test)
_CONFIGS: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIGS.append(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    _CONFIGS.remove(config)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note_unexercised(report, _CONFIGS[-1])


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note_unexercised(report, _CONFIGS[-1])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    missing = config.stash.get(_not_exercised, [])
    if missing:
        terminalreporter.section("acceptance points not exercised on this machine")
        for line in missing:
            terminalreporter.line(line)
