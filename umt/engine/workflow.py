"""Workflow definitions: a name, a version, a function, and optionally a compensation."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from umt.engine.context import WorkflowContext

WorkflowFunction = Callable[["WorkflowContext", Any], Any]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")


@dataclass(frozen=True)
class Workflow:
    """A durable workflow.

    ``run(ctx, input)`` is executed again from the top on every claim: it must make the same
    ``ctx.step`` / ``ctx.sleep`` / ``ctx.wait_for_signal`` calls in the same order for the same
    recorded results, and do its side effects only inside steps.

    ``compensate(ctx, input)`` runs as durable steps after the run was canceled or failed for
    good; ``ctx.main_results`` holds the results of the steps that had succeeded.
    """

    name: str
    version: str
    run: WorkflowFunction
    compensate: WorkflowFunction | None = None

    def __post_init__(self) -> None:
        for label, value in (("name", self.name), ("version", self.version)):
            if not _NAME.match(value):
                raise ValueError(
                    f"workflow {label} {value!r} must be 1-100 characters of letters, digits, "
                    "'_', '.', ':' or '-'"
                )

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"


def workflow(
    name: str, *, version: str = "1", compensate: WorkflowFunction | None = None
) -> Callable[[WorkflowFunction], Workflow]:
    """Decorator form: ``@workflow("acquire", version="2")``."""

    def define(function: WorkflowFunction) -> Workflow:
        return Workflow(name, version, function, compensate)

    return define


class Registry:
    """The workflows (name and version) a worker executes. It claims no other runs."""

    def __init__(self, workflows: Iterable[Workflow] = ()) -> None:
        self._by_key: dict[str, Workflow] = {}
        for definition in workflows:
            self.add(definition)

    def add(self, definition: Workflow) -> None:
        if definition.key in self._by_key:
            raise ValueError(f"workflow {definition.key} is registered twice")
        self._by_key[definition.key] = definition

    def get(self, name: str, version: str) -> Workflow | None:
        return self._by_key.get(f"{name}@{version}")

    def keys(self) -> list[str]:
        return sorted(self._by_key)

    def __iter__(self) -> Iterator[Workflow]:
        return iter(self._by_key.values())
