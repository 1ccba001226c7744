"""The spike report: one section per scenario and backend, PASS or FAIL, with its evidence.

Shaped like the manual spike (``spike-w0b-openworkflow.md``): what was done, the commands with
their JSON output, the ledger rows, and what that shows; here each conclusion is a check that
can fail.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

PASS = "PASS"
FAIL = "FAIL"

MAX_JSON = 700


def compact(value: Any, limit: int = MAX_JSON) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Section:
    key: str
    title: str
    backend: str
    summary: str = ""
    setup: str = ""
    checks: list[tuple[bool, str]] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def status(self) -> str:
        if self.error is not None or not self.checks:
            return FAIL
        return PASS if all(ok for ok, _ in self.checks) else FAIL

    # ------------------------------------------------------------------ recording

    def check(self, ok: bool, text: str) -> bool:
        self.checks.append((bool(ok), text))
        return bool(ok)

    def say(self, text: str) -> None:
        self.evidence.append(text)

    def block(self, lines: list[str] | str) -> None:
        body = lines if isinstance(lines, str) else "\n".join(lines)
        self.evidence.append(f"```\n{body.rstrip()}\n```")

    def failed_with(self, exc: BaseException) -> None:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        self.error = "".join(lines[-6:]).rstrip()

    # ------------------------------------------------------------------ rendering

    def markdown(self) -> str:
        parts = [f"## ({self.key}) {self.title} — {self.backend}: {self.status}", ""]
        meta = f"{self.seconds:.1f} s"
        if self.setup:
            meta += f" · {self.setup}"
        parts += [f"_{meta}_", ""]
        if self.summary:
            parts += [self.summary, ""]
        for chunk in self.evidence:
            parts += [chunk, ""]
        if self.checks:
            parts.append("Checks:")
            parts += [f"- {'PASS' if ok else 'FAIL'}: {text}" for ok, text in self.checks]
            parts.append("")
        if self.error is not None:
            parts += ["Error (the scenario could not finish):", "", "```", self.error, "```", ""]
        return "\n".join(parts)


@dataclass
class Report:
    header: list[str]
    sections: list[Section] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[Section]:
        return [s for s in self.sections if s.status != PASS]

    def summary_table(self) -> str:
        lines = ["| scenario | backend | result | time |", "| --- | --- | --- | --- |"]
        for s in self.sections:
            lines.append(f"| ({s.key}) {s.title} | {s.backend} | {s.status} | {s.seconds:.1f} s |")
        return "\n".join(lines)

    def failure_digest(self) -> str:
        """What failed, in a few lines: printed last, so a log's tail names it."""
        lines = [f"spikes: {len(self.failed)} of {len(self.sections)} FAIL"]
        for s in self.failed:
            lines.append(f"- ({s.key}) {s.backend} in {s.seconds:.1f} s")
            lines += [f"    FAIL: {text[:300]}" for ok, text in s.checks if not ok]
            if not s.checks and s.error is None:
                lines.append("    no checks were recorded")
            if s.error is not None:
                lines += [f"    {line}" for line in s.error.splitlines()[-6:]]
        return "\n".join(lines)

    def markdown(self) -> str:
        verdict = "all scenarios PASS" if not self.failed else (
            f"{len(self.failed)} of {len(self.sections)} FAIL: "
            + ", ".join(f"({s.key}) {s.backend}" for s in self.failed)
        )
        parts = ["# umt spikes: the spike scenarios, run for real", ""]
        parts += [*self.header, ""]
        parts += [f"Result: **{verdict}** in {self.seconds:.0f} s.", ""]
        parts += [self.summary_table(), ""]
        parts += [section.markdown() for section in self.sections]
        return "\n".join(parts).rstrip() + "\n"
