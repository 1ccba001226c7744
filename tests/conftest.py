"""Suite-wide plugins: PostgreSQL fixtures, the rule of full runs (a skip fails the run unless
it is by design or the component cannot exist on this machine: ``tests/support/skips.py``) and
pytester (tests of that rule)."""

pytest_plugins = ["tests.support.pg_fixtures", "tests.support.skips", "pytester"]
