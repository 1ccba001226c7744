"""The lease fence on the Python side: run a fenced operation's query and, when it wrote nothing,
read why and raise the precise error.

Methods that a worker calls while executing a run take a ``Fence``. Each is one named query
(``Database.operation``: fence check, writes and notification in one statement on PostgreSQL, a
few in one transaction on SQLite) that returns no row when the worker no longer holds the run's
lease at the epoch it claimed; nothing was written then. A step body's own transactions
(``StepContext.transaction``) run in ``fenced``, which starts with the same check."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import NoReturn

from umt.engine.errors import LeaseLost, RunCanceled, StoreError
from umt.engine.models import MAIN, RunStatus
from umt.engine.store.base import StoreBase
from umt.engine.store.database import Row, Session
from umt.engine.store.values import Fence


class Fencing(StoreBase):
    """Runs fenced queries and transactions; raises why a fence failed."""

    @contextmanager
    def fenced(self, fence: Fence) -> Iterator[Session]:
        """A transaction that commits only if ``fence`` still holds the run."""
        with self.database.transaction() as session:
            if session.row("lock_fence", **self._fence_key(fence)) is None:
                self._refused(session, fence)
            yield session

    def _fenced_operation(self, query_name: str, fence: Fence, /, **params: object) -> Row:
        """The first row of a fenced operation's query, run as one ``Database.operation``."""
        with self.database.operation() as session:
            return self._fenced_row(session, query_name, fence, params)

    def _fenced_row(
        self, session: Session, query_name: str, fence: Fence, params: Mapping[str, object]
    ) -> Row:
        row = session.row(query_name, **self._fence_key(fence), phase=fence.phase, **params,
                          work_channel=self._work_channel)
        if row is None:
            self._refused(session, fence)
        return row

    def _refused(self, session: Session, fence: Fence) -> NoReturn:
        """Raises why ``fence`` no longer holds its run (its operation wrote nothing)."""
        row = session.row("lease_of_run", run_id=fence.run_id)
        if row is None:
            raise LeaseLost(f"run {fence.run_id} no longer exists")
        if row["lease_owner"] == fence.worker_id and row["lease_epoch"] == fence.epoch:
            raise StoreError(f"run {fence.run_id}: a fenced write found nothing to change")
        if row["status"] == RunStatus.CANCELED and fence.phase == MAIN:
            raise RunCanceled(f"run {fence.run_id} was canceled")
        raise LeaseLost(
            f"run {fence.run_id} is no longer held by this worker at epoch {fence.epoch}"
        )
