"""Workflows the spikes register next to umt's own ``acquire``, for engine-level scenarios where
the acquire workflow is awkward (retries to exhaustion, version upgrade and drift, bursts,
thousands of sleepers, a step held while its worker is frozen).

Their step bodies write umt's side-effect ledger (``ledger`` in the business schema) the way the
acquire steps do: ``intent`` at once through a fenced transaction (the body ran), ``done``
committed together with the step's result (the business effect, exactly once). ``umt show RUN``
prints those rows like any other run's.

Names are ``<workflow>@<version>`` with an optional ``+drift`` (the same version whose code
gained a step: a deploy that forgot to bump the version).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from umt.engine import RetryPolicy, StepContext, Workflow, WorkflowContext
from umt.records import ledger

FLAKY = "spike-flaky"
UPGRADE = "spike-upgrade"
BURST = "spike-burst"
SLEEPER = "spike-sleeper"
SHARED = "spike-shared"
HOLDER = "spike-holder"
NAPPER = "spike-napper"

QUERIES = "spikes"  # spikes/sql/<dialect>.sql


def effect(step: StepContext, what: str, **detail: Any) -> dict[str, Any]:
    """The step's business effect: a ledger row committed with the step's result."""
    values = {"pid": os.getpid(), **detail}
    ledger.record_with_result(step, f"{what}:{step.run_id}", ledger.DONE, values)
    return {"step": step.step_name, "attempt": step.attempt, "epoch": step.lease_epoch, **values}


def ran(step: StepContext, what: str, **detail: Any) -> None:
    """The body started: a ledger row written at once, fenced."""
    ledger.record(step, f"{what}:{step.run_id}", ledger.INTENT, {"pid": os.getpid(), **detail})


# ---------------------------------------------------------------------- (e) retries


def flaky(version: str) -> Workflow:
    """``{"fail_times": n, "max_attempts": m}``: the step fails its first n attempts."""

    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> Any:
        policy = RetryPolicy(max_attempts=int(spec["max_attempts"]),
                             initial_interval=timedelta(seconds=0.3), backoff_coefficient=2.0)

        def body(step: StepContext) -> Any:
            if step.attempt <= int(spec["fail_times"]):
                ledger.record(step, f"flaky:{step.run_id}", ledger.FAILED,
                              {"attempt": step.attempt})
                raise RuntimeError(f"boom attempt {step.attempt}")
            return effect(step, "flaky")

        return ctx.step("flaky-step", body, retry=policy)

    return Workflow(FLAKY, version, run)


# ---------------------------------------------------------------------- (g) versions


def upgrade(version: str, drift: bool) -> Workflow:
    """prepare → wait for ``go:<run id>`` → finish; ``+drift`` inserts ``extra-verify``."""

    def run(ctx: WorkflowContext, _: Any) -> Any:
        ctx.step("prepare", lambda step: effect(step, "prepare", version=version))
        if drift:
            ctx.step("extra-verify", lambda step: effect(step, "extra-verify", version=version))
        ctx.wait_for_signal("wait-go", f"go:{ctx.run_id}")
        return ctx.step("finish", lambda step: effect(step, "finish", version=version))

    return Workflow(UPGRADE, version, run)


# ---------------------------------------------------------------------- (i), restarts


def burst(version: str) -> Workflow:
    """``{"steps": n, "nap": seconds}``: n steps; each writes intent (at once), naps (an
    interruptible wait), and writes done (with its result)."""
    retry = RetryPolicy(max_attempts=30, initial_interval=timedelta(seconds=0.2),
                        backoff_coefficient=1.5, max_interval=timedelta(seconds=2))

    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> Any:
        def body(step: StepContext) -> Any:
            ran(step, "burst")
            if spec.get("nap"):
                step.sleep(float(spec["nap"]))
            return effect(step, "burst")

        return [ctx.step(f"s{index}", body, retry=retry)
                for index in range(1, int(spec.get("steps", 1)) + 1)]

    return Workflow(BURST, version, run)


def sleeper(version: str) -> Workflow:
    """``{"duration": "1h"}``: one durable sleep, nothing else."""

    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> Any:
        ctx.sleep("nap", spec.get("duration", "1h"))
        return None

    return Workflow(SLEEPER, version, run)


# ---------------------------------------------------------------------- (h) shared database


def shared(version: str) -> Workflow:
    """``{"order_key": k}``: one step whose business row (another application's table) commits
    in the step's own transaction, together with its result."""
    retry = RetryPolicy(max_attempts=10, initial_interval=timedelta(seconds=0.5),
                        backoff_coefficient=1.0)

    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> Any:
        def body(step: StepContext) -> Any:
            query = step.query_set(QUERIES)["insert_order"]
            step.step_transaction.execute(query, {
                "order_key": spec["order_key"], "run_id": step.run_id, "attempt": step.attempt,
            })
            return effect(step, "order", order_key=spec["order_key"])

        return ctx.step("order", body, retry=retry)

    return Workflow(SHARED, version, run)


# ---------------------------------------------------------------------- (b) frozen worker


def holder(version: str) -> Workflow:
    """before → hold → after. ``hold`` writes intent, then sleeps ``{"hold": seconds}`` without
    ever checking (a body stuck in a system call), then returns: its result and its ``done`` row
    are committed by the engine's fenced step transaction, the one write a frozen worker makes
    when it wakes up."""

    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> Any:
        ctx.step("before", lambda step: effect(step, "before"))

        def hold(step: StepContext) -> Any:
            ran(step, "hold", epoch=step.lease_epoch)
            time.sleep(float(spec["hold"]))
            return effect(step, "hold", epoch=step.lease_epoch)

        ctx.step("hold", hold)
        return ctx.step("after", lambda step: effect(step, "after"))

    return Workflow(HOLDER, version, run)


# ---------------------------------------------------------------------- (skew) skewed clocks


def server_time(step: StepContext) -> str:
    """The database server's clock now (evidence that does not trust the worker's clock)."""
    with step.transaction() as session:
        [row] = session.execute(step.query_set(QUERIES)["server_time"])
    return str(row["server_time"])


def napper(version: str) -> Workflow:
    """s1 → nap (a durable sleep of ``{"nap": "2s"}``) → s2 → s3. Each body writes intent with
    the server's time when it started; s1 then waits ``{"hold": seconds}`` without checking,
    when executed at lease epoch 1 (a step in flight to kill its worker in)."""

    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> Any:
        def body(step: StepContext) -> Any:
            ran(step, step.step_name, at=server_time(step), epoch=step.lease_epoch)
            if step.step_name == "s1" and spec.get("hold") and step.lease_epoch == 1:
                time.sleep(float(spec["hold"]))
            return effect(step, step.step_name)

        first = ctx.step("s1", body)
        ctx.sleep("nap", spec.get("nap", "2s"))
        return [first, ctx.step("s2", body), ctx.step("s3", body)]

    return Workflow(NAPPER, version, run)


BUILDERS = {
    FLAKY: flaky, BURST: burst, SLEEPER: sleeper, SHARED: shared, HOLDER: holder,
    NAPPER: napper,
}


def build(name: str) -> Workflow:
    """A workflow from ``name@version[+drift]``."""
    key, _, variant = name.partition("+")
    workflow_name, _, version = key.partition("@")
    version = version or "1"
    if workflow_name == UPGRADE:
        return upgrade(version, drift=variant == "drift")
    if variant:
        raise ValueError(f"{name}: only {UPGRADE} has a +drift variant")
    try:
        return BUILDERS[workflow_name](version)
    except KeyError:
        raise ValueError(f"unknown spike workflow {workflow_name!r}") from None
