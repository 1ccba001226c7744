"""Suite-wide plugins: PostgreSQL fixtures, the rule of full runs (a skip fails the run unless
it is by design or the component cannot exist on this machine: ``tests/support/skips.py``) and
pytester (tests of that rule)."""

import pytest

pytest_plugins = ["tests.support.pg_fixtures", "tests.support.skips", "pytester"]

#: Files that take minutes on their own: run first, so that with pytest-xdist (which hands out
#: files in collection order) they do not become the tail of a full run.
LONGEST_FIRST = ("tests/test_spikes.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in LONGEST_FIRST)
