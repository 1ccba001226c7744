"""Signals from clients: delivered to the runs waiting on their name now, or kept for later."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from umt.engine.errors import RunFinished, SignalKeyConflict, UnknownRun
from umt.engine.jsonvalues import canonical_json
from umt.engine.models import FINAL_STATUSES, SignalResult, WaitingRun
from umt.engine.store.base import StoreBase
from umt.engine.store.database import Row
from umt.engine.store.driver_errors import UniqueViolation
from umt.engine.store.values import valid_run_id, validate_signal_name


class Signals(StoreBase):
    """Sending signals (part of ``Engine``); receiving them is ``Steps.wait_for_signal``."""

    def signal(
        self,
        name: str,
        data: Any = None,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        ttl: timedelta | None = None,
    ) -> SignalResult:
        validate_signal_name(name)
        if run_id is not None and not valid_run_id(run_id):
            raise UnknownRun(run_id)
        try:
            return self._send_signal(name, data, run_id, idempotency_key, ttl)
        except UniqueViolation:
            # A sender of another name (which holds another name lock) used the same key
            # meanwhile and everything here was rolled back; decide again, seeing its signal.
            return self._send_signal(name, data, run_id, idempotency_key, ttl)

    def _send_signal(
        self, name: str, data: Any, run_id: str | None, idempotency_key: str | None,
        ttl: timedelta | None,
    ) -> SignalResult:
        data_json = canonical_json(data)
        now = self.clock.now()
        expires_at = now + (ttl or self.signal_ttl)
        signal_id = str(uuid.uuid4())
        payload = canonical_json({"signal_id": signal_id, "name": name, "data": data})
        with self.database.operation() as session:
            row = session.row(
                "send_signal", id=signal_id, signal_name=name, target_run_id=run_id,
                data=data_json, idempotency_key=idempotency_key, payload=payload, now=now,
                expires_at=expires_at, work_channel=self._work_channel,
            )
        assert row is not None
        if row["earlier_id"] is not None:
            assert idempotency_key is not None
            return _duplicate_outcome(row, name, run_id, data_json, idempotency_key)
        if run_id is not None and not row["target_found"]:
            raise UnknownRun(run_id)
        if run_id is not None and row["target_status"] in FINAL_STATUSES:
            raise RunFinished(run_id, row["target_status"], "signal")
        delivered = tuple(row["delivered_to"])
        return SignalResult(signal_id, name, delivered, kept=not delivered, duplicate=False)

    def runs_waiting_on(self, prefix: str) -> list[WaitingRun]:
        with self.database.autocommit() as session:
            rows = session.rows("runs_waiting_on_prefix", prefix=prefix)
        return [
            WaitingRun(row["run_id"], row["position"], row["workflow_name"], row["signal_name"],
                       row["wake_at"], row["detail"])
            for row in rows
        ]


def _duplicate_outcome(
    row: Row, name: str, run_id: str | None, data_json: str, key: str
) -> SignalResult:
    """The outcome of the earlier signal that holds ``key`` (its columns are ``earlier_*``)."""
    same = (
        row["earlier_name"] == name
        and row["earlier_target_run_id"] == run_id
        and canonical_json(row["earlier_data"]) == data_json
    )
    if not same:
        raise SignalKeyConflict(key)
    return SignalResult(
        row["earlier_id"], name, tuple(row["earlier_delivered_to"]),
        kept=row["earlier_status"] == "kept", duplicate=True,
    )
