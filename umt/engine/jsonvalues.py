"""JSON values: what steps return, what runs take as input, what signals carry."""

from __future__ import annotations

import json
from typing import Any

from umt.engine.errors import WorkflowDefinitionError


def to_json_value(value: object, *, what: str) -> Any:
    """``value`` as plain JSON data (pydantic models are dumped); refuses what JSON cannot hold.

    The result is what a replay will return, so a first execution returns it too.
    """
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise WorkflowDefinitionError(f"{what} is not JSON-serializable: {exc}") from exc


def canonical_json(value: object) -> str:
    """One text per JSON value (sorted keys), so that equal inputs compare equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
