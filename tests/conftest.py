pytest_plugins = ["tests.support.pg_fixtures"]
