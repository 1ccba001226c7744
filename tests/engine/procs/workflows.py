"""Workflows run by the worker program of the multi-process tests, steered by their input.

Every step body writes two rows:

* ``executions`` (written at once, outside any fence): the body started. Counts how often a
  body really ran, including runs whose results were rejected.
* ``effects`` (in the step's fenced transaction, committed with its result): the business
  side effect, which must exist exactly once per step.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from umt.engine import LeaseLost, StepContext, Workflow, WorkflowContext
from umt.engine.store.database import Database

log = logging.getLogger("tests.engine.procs")

#: ``steps`` input: {"steps": 6, "hold": {...} | [{...}, ...] | None,
#: "nap": {"after": 1, "duration": "3s"}}.
#: hold: {"step": "s2", "seconds": 30, "epoch": 1 | None, "check": bool} makes that step's body
#: wait (in 0.1 s chunks, calling check() between them if "check") when executed at that lease
#: epoch (None: always), then try progress and a direct fenced write, logging what was refused.
STEPS = "steps"
VERSIONED = "versioned"


class Bodies:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.queries = database.query_set("tests.engine")

    def executed(self, step: StepContext) -> None:
        with self.database.autocommit() as session:
            session.execute(self.queries["insert_execution"], {
                "run_id": step.run_id, "step": step.step_name, "lease_epoch": step.lease_epoch,
                "worker_pid": os.getpid(),
            })

    def effect(self, step: StepContext, note: str) -> dict[str, object]:
        return {"run_id": step.run_id, "step": step.step_name, "attempt": step.attempt,
                "lease_epoch": step.lease_epoch, "worker_pid": os.getpid(), "note": note}

    def step(
        self, step: StepContext, hold: dict[str, Any] | list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        self.executed(step)
        log.info("step %s of run %s starts (attempt %d, epoch %d)", step.step_name, step.run_id,
                 step.attempt, step.lease_epoch)
        holds = hold if isinstance(hold, list) else [hold] if hold else []
        for one in holds:
            if one["step"] == step.step_name and one.get("epoch") in (None, step.lease_epoch):
                self.hold(step, one)
        step.step_transaction.execute(self.queries["insert_worker_effect"],
                                      self.effect(step, "with the result"))
        return {"step": step.step_name, "pid": os.getpid(), "epoch": step.lease_epoch}

    def hold(self, step: StepContext, hold: dict[str, Any]) -> None:
        log.info("holding in step %s for %ss", step.step_name, hold["seconds"])
        deadline = time.monotonic() + float(hold["seconds"])
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if hold.get("check"):
                step.check()
        log.info("hold over in step %s", step.step_name)
        try:
            step.progress(1, 1)
            log.info("progress accepted")
        except LeaseLost:
            log.info("refused: progress")
        try:
            with step.transaction() as session:
                session.execute(self.queries["insert_worker_effect"],
                                self.effect(step, "direct"))
            log.info("direct transaction accepted")
        except LeaseLost:
            log.info("refused: direct transaction")


def steps_workflow(bodies: Bodies) -> Workflow:
    def run(ctx: WorkflowContext, spec: dict[str, Any]) -> list[Any]:
        results = []
        nap = spec.get("nap")
        for index in range(1, int(spec.get("steps", 6)) + 1):
            results.append(ctx.step(f"s{index}", lambda step: bodies.step(step, spec.get("hold"))))
            if nap and nap["after"] == index:
                ctx.sleep("nap", nap["duration"])
        return results

    return Workflow(STEPS, "1", run)


def versioned_workflow(bodies: Bodies, version: str, variant: str) -> Workflow:
    """submit, wait for ``go:<run id>``, finish. The ``renamed`` variant renames the completed
    "submit" step without changing the version: a deploy that forgot to bump it."""
    first = "submit-renamed" if variant == "renamed" else "submit"

    def run(ctx: WorkflowContext, _: Any) -> Any:
        ctx.step(first, lambda step: bodies.step(step, None))
        ctx.wait_for_signal("wait", f"go:{ctx.run_id}")
        return ctx.step("finish", lambda step: bodies.step(step, None))

    return Workflow(VERSIONED, version, run)


def build(names: list[str], database: Database, variant: str = "") -> list[Workflow]:
    """``steps`` and ``versioned@<version>``."""
    bodies = Bodies(database)
    workflows = []
    for name in names:
        if name == STEPS:
            workflows.append(steps_workflow(bodies))
        elif name.startswith(VERSIONED + "@"):
            workflows.append(versioned_workflow(bodies, name.partition("@")[2], variant))
        else:
            raise ValueError(f"unknown test workflow {name!r}")
    return workflows


def definition(name: str) -> Workflow:
    """The definition a client needs to start a run (the body is never executed there)."""
    workflow_name, _, version = name.partition("@")
    return Workflow(workflow_name, version or "1", lambda ctx, _: None)
