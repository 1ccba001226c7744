"""Processes whose wall clock is shifted (Debian's libfaketime), for the tests of skewed hosts."""

from __future__ import annotations

import glob
import threading
import time

import pytest


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        # Not skip_unavailable: scripts/lib/bootstrap.sh installs it, so a full run fails here.
        pytest.skip("libfaketime is not installed (Debian package faketime)")
    return found[0]


def shifted(seconds: int) -> dict[str, str]:
    """The environment of a process whose wall clock is ``seconds`` off (monotonic time is left
    alone, as a real host's would be)."""
    return {"LD_PRELOAD": libfaketime(), "FAKETIME": f"{seconds:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def sleep_on_condition_variables() -> None:
    """For a process under libfaketime (0.9.10) with FAKETIME_DONT_FAKE_MONOTONIC, where
    clock_nanosleep on the monotonic clock, which ``time.sleep`` uses, fails with EINVAL: waits on
    condition variables (``threading.Event.wait``, what umt's worker waits on otherwise) work."""
    def sleep(seconds: float) -> None:
        threading.Event().wait(seconds)

    time.sleep = sleep  # type: ignore[assignment]
