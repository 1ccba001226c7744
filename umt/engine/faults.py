"""Test-only switches that break the engine on purpose.

The spikes (``python -m spikes``) use them to show that each scenario really fails when the
property it checks is gone. ``UMT_ENGINE_BREAK=fencing,mailbox,determinism`` (any subset) is
read once, here, when the engine is imported; unset or empty it changes nothing.

- ``fencing``: ``Fencing._refused`` lets a worker that lost the run write as if it held it.
- ``mailbox``: a kept signal is never consumed by a run that starts waiting for it.
- ``determinism``: ``RunExecution._next`` does not compare the code's steps with the recorded
  ones (no replay drift is detected there).
"""

from __future__ import annotations

import os

ENV_VAR = "UMT_ENGINE_BREAK"
SWITCHES = frozenset({"fencing", "mailbox", "determinism"})


def parse(value: str) -> frozenset[str]:
    names = frozenset(part.strip() for part in value.split(",") if part.strip())
    unknown = names - SWITCHES
    if unknown:
        raise ValueError(
            f"{ENV_VAR}: unknown switch(es) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(SWITCHES))}"
        )
    return names


BROKEN: frozenset[str] = parse(os.environ.get(ENV_VAR, ""))


def broken(switch: str) -> bool:
    return switch in BROKEN
