"""Steps that tell the outside world about a run: media servers scan what was imported, the
user gets a message (imported, failed, stalled, canceled).

Neither may undo or fail the acquisition. Each is a durable step retried with backoff; its last
attempt gives up with a warning (in the step's result, the ledger and the run's output) instead
of failing. Each server and each notification service is one ledger operation, so a retried
attempt only asks those that did not answer yet.

A message is sent at most once per event: the intent is recorded before sending, and an attempt
that finds an intent without an outcome (its worker died while sending) does not send again. A
message lost that way is the price of never getting the same message twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from umt.engine import RetryPolicy, StepContext
from umt.media.importing.failures import human
from umt.media.mediaservers import MediaServer, MediaServerError
from umt.media.notifier import NotifyFailed, NotifyTarget
from umt.records import ledger
from umt.textsafe import printable

#: A stranger's title is cut to this many characters in a message.
TITLE_CHARS = 120
#: A message names at most this many library paths.
SHOWN_PATHS = 5

IMPORTED = "imported"
FAILED = "failed"
STALLED = "stalled"
CANCELED = "canceled"


class Announced(BaseModel):
    model_config = ConfigDict(frozen=True)

    done: list[str] = []
    warnings: list[str] = []


class _NotYet(Exception):
    """Some servers or services did not answer; the step is retried after its backoff."""


def retry_policy(attempts: int, first_interval: timedelta) -> RetryPolicy:
    return RetryPolicy(max_attempts=attempts, initial_interval=first_interval,
                       backoff_coefficient=3.0, max_interval=timedelta(minutes=30))


def notify_library(
    step: StepContext, paths: Sequence[str], servers: Sequence[MediaServer], policy: RetryPolicy,
) -> Announced:
    """Asks each media server to scan ``paths``: idempotent (a scan asked twice is one scan)."""

    def scan(server: MediaServer) -> dict[str, Any]:
        return {"paths": server.scan(paths)}

    return _each(step, policy, [(f"notify-library:{s.name}", s.name, scan, s) for s in servers],
                 "media server", ambiguous_is_done=False)


def notify_user(
    step: StepContext, event: str, title: str, body: str, targets: Sequence[NotifyTarget],
    policy: RetryPolicy,
) -> Announced:
    """Sends one message about ``event`` through each target, once."""

    def send(target: NotifyTarget) -> dict[str, Any]:
        target.send(title, body)
        return {"event": event}

    return _each(step, policy,
                 [(f"notify:{event}:{t.label}", t.label, send, t) for t in targets],
                 "notification", ambiguous_is_done=True)


def _each(
    step: StepContext, policy: RetryPolicy,
    jobs: Sequence[tuple[str, str, Callable[[Any], dict[str, Any]], Any]], what: str, *,
    ambiguous_is_done: bool,
) -> Announced:
    done: list[str] = []
    failures: list[str] = []
    for operation, label, act, target in jobs:
        entries = ledger.entries_of_operation(step, operation)
        last = entries[-1] if entries else None
        if last is not None and last.phase in (ledger.DONE, ledger.SKIPPED):
            done.append(label)
            continue
        if last is not None and last.phase == ledger.INTENT and ambiguous_is_done:
            ledger.record(step, operation, ledger.SKIPPED,
                          {"reason": "an interrupted attempt may have sent it"})
            done.append(label)
            continue
        # Recording checks whether the run is still this execution's; nothing checks again
        # before the send, so an intent without an outcome only follows a death mid-send.
        ledger.record(step, operation, ledger.INTENT, {"attempt": step.attempt})
        try:
            detail = act(target)
        except (MediaServerError, NotifyFailed) as exc:
            ledger.record(step, operation, ledger.FAILED, {"error": str(exc)})
            failures.append(str(exc))
            continue
        except Exception as exc:  # a library's own error: still never the run's failure
            message = f"{label}: {type(exc).__name__}: {printable(exc)}"
            ledger.record(step, operation, ledger.FAILED, {"error": message})
            failures.append(message)
            continue
        ledger.record(step, operation, ledger.DONE, detail)
        done.append(label)
    if failures and step.attempt < policy.max_attempts:
        raise _NotYet("; ".join(failures))
    warnings = [f"{what} gave up after {step.attempt} attempt(s): {failure}"
                for failure in failures]
    return Announced(done=done, warnings=warnings)


# --------------------------------------------------------------------------- messages


def short_title(title: str) -> str:
    """A stranger's title, made printable and bounded."""
    shown = printable(title)
    return shown if len(shown) <= TITLE_CHARS else shown[: TITLE_CHARS - 1] + "…"


def message(
    event: str, *, title: str, run_id: str, size: int | None, paths: Sequence[str],
    reason: str | None = None,
) -> tuple[str, str]:
    """The (title, body) of the message about ``event``."""
    name = short_title(title)
    lines = [f"{name}: {event}"]
    if size is not None:
        lines.append(f"size: {human(size)}")
    shown = [printable(path) for path in paths[:SHOWN_PATHS]]
    if len(paths) > SHOWN_PATHS:
        shown.append(f"and {len(paths) - SHOWN_PATHS} more")
    if shown:
        lines.append("library: " + ", ".join(shown))
    if reason:
        lines.append(f"reason: {short_reason(reason)}")
    lines.append(f"run: {run_id}")
    return f"umt: {name} {event}", "\n".join(lines)


def short_reason(reason: str) -> str:
    shown = printable(reason)
    return shown if len(shown) <= 400 else shown[:399] + "…"


def outcome_event(run_status: str, run_error: dict[str, Any] | None) -> str:
    """canceled, stalled (the download made no progress for acquire.stall_timeout) or failed."""
    if run_status == CANCELED:
        return CANCELED
    text = str((run_error or {}).get("message") or "")
    if "'check-progress'" in text and "no progress for" in text:
        return STALLED
    return FAILED
