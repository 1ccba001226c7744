"""Library path claims: one library path, one owner.

A run claims every destination of its import, in one fenced transaction, before it writes a
byte. The claim is the path's primary key, so of two runs racing for one path exactly one gets
it, whatever the filesystem does; the other learns which run holds it. A claim stays as long as
the file it names is in the library; a run that gives up an import before publishing releases
it.
"""

from __future__ import annotations

from collections.abc import Sequence

from umt.engine import StepContext
from umt.records import PACKAGE


class PathHeld(Exception):
    """A library path is held by another run (nothing was claimed)."""

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(f"library path {path} is held by run {holder}")
        self.path = path
        self.holder = holder


def claim(step: StepContext, paths: Sequence[str]) -> None:
    """Claims ``paths`` for this run, all or none; raises :class:`PathHeld` if one is taken.

    Claiming a path this run already holds is a no-op, so a re-executed step claims again
    safely. Fenced: a worker that lost the run claims nothing (``LeaseLost``).
    """
    queries = step.query_set(PACKAGE)
    with step.transaction() as session:  # raising inside rolls every claim of the call back
        for path in paths:
            session.execute(queries["claim_library_path"],
                            {"path": path, "run_id": step.run_id, "now": step.now()})
            # A statement of its own: it sees a claim that a concurrent run committed while
            # the insert above waited for it.
            rows = session.execute(queries["library_path_holder"], {"path": path})
            holder = str(rows[0]["run_id"])
            if holder != step.run_id:
                raise PathHeld(path, holder)


def claims_of_this_run(step: StepContext) -> list[str]:
    query = step.query_set(PACKAGE)["library_claims_of_run"]
    with step.reader() as session:
        return [row["path"] for row in session.execute(query, {"run_id": step.run_id})]


def release(step: StepContext, paths: Sequence[str]) -> None:
    """Gives up this run's claims on ``paths`` (fenced)."""
    query = step.query_set(PACKAGE)["release_library_path"]
    with step.transaction() as session:
        for path in paths:
            session.execute(query, {"path": path, "run_id": step.run_id})
