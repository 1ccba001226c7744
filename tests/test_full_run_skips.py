"""In a full run (TESTS_FULL_RUN=1, set by scripts/test without arguments) a skip fails the
run unless it is by design or names what this machine cannot have; a targeted run skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.skips import FULL_RUN_ENV

REPO = Path(__file__).resolve().parents[1]

TESTS = """
import pytest
from tests.support.skips import skip_by_design, skip_unavailable, unavailable

def test_missing_setup():
    pytest.skip("needs mkfs.btrfs")

def test_other_backend():
    skip_by_design("PostgreSQL only")

def test_no_mount_here():
    skip_unavailable("reflink import", "mount refused")

@pytest.mark.skipif(True, reason=unavailable("the root code path", "not root"))
def test_marked():
    pass

def test_runs():
    pass
"""


MODULES_SKIPPED = {
    "test_no_browser": """
import pytest
pytest.skip("chromium is missing", allow_module_level=True)

def test_page():
    pass
""",
    "test_no_browser_here": """
import pytest
from tests.support.skips import unavailable
pytest.skip(unavailable("the browser tests", "not root"), allow_module_level=True)

def test_page():
    pass
""",
}


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, full: bool,
         *options: str, **modules: str) -> pytest.RunResult:
    if full:
        monkeypatch.setenv(FULL_RUN_ENV, "1")
    else:
        monkeypatch.delenv(FULL_RUN_ENV, raising=False)
    pytester.makepyfile(**(modules or {"test_example": TESTS}))
    if options:  # pytest-xdist's workers are processes
        return pytester.runpytest_subprocess("-p", "tests.support.skips", "-rA", *options)
    return pytester.runpytest_inprocess("-p", "tests.support.skips", "-rA")


@pytest.mark.parametrize("options", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_in_a_full_run_only_a_skip_for_missing_setup_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, options: tuple[str, ...],
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = _run(pytester, monkeypatch, True, *options)
    result.assert_outcomes(passed=1, failed=1, skipped=3)
    result.stdout.fnmatch_lines([
        "skipped in a full run*needs mkfs.btrfs*",
        "*acceptance points not exercised on this machine*",
        "*test_no_mount_here: reflink import not exercised: mount refused",
        "*test_marked: the root code path not exercised: not root",
        "FAILED test_example.py::test_missing_setup*",
    ])


def test_a_targeted_run_skips_as_usual(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run(pytester, monkeypatch, full=False).assert_outcomes(passed=1, skipped=4)


def test_a_module_skipped_for_missing_setup_fails_a_full_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = _run(pytester, monkeypatch, True, **MODULES_SKIPPED)
    result.assert_outcomes(errors=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*skipped in a full run*chromium is missing*",
        "*test_no_browser_here.py: the browser tests not exercised: not root",
    ])
    _run(pytester, monkeypatch, False, **MODULES_SKIPPED).assert_outcomes(skipped=2)
