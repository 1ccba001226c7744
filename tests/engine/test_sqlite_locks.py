"""SQLite's POSIX locks must survive a new thread's connection.

Python's ``open()``/``close()`` of a database file drops every POSIX lock SQLite holds on that
file for the whole process (SQLite's "How To Corrupt An SQLite Database File", 2.2). Another
process that then closes its last connection believes nobody else has the file open and
deletes the WAL under this process's connections: their later writes go to an unlinked file
(lost), or fail with "disk I/O error" (what every ``umt worker`` on SQLite hit on its first
run, once a second thread had connected and a ``umt`` command had exited).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from umt.engine import Engine, Workflow, open_database

NOOP = Workflow("noop", "1", lambda ctx, _: None)

READ_AND_CLOSE = (
    "import sqlite3, sys\n"
    "connection = sqlite3.connect(sys.argv[1])\n"
    "print(connection.execute(sys.argv[2], sys.argv[3:]).fetchone()[0])\n"
    "connection.close()\n"
)


def _other_process(path: Path, query: str, *params: str) -> str:
    done = subprocess.run([sys.executable, "-c", READ_AND_CLOSE, str(path), query, *params],
                          capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.strip()


def test_a_second_threads_connection_keeps_the_wal_of_the_first(tmp_path: Path) -> None:
    path = tmp_path / "umt.db"
    engine = Engine(open_database(f"sqlite:///{path}"))
    try:
        engine.migrate()
        engine.list_runs()  # this thread's connection
        thread = threading.Thread(target=engine.list_runs)  # a second connection, like a worker
        thread.start()
        thread.join()

        assert _other_process(path, "SELECT count(*) FROM runs") == "0"

        run = engine.start(NOOP, {}).run
        wal = path.with_name(path.name + "-wal")
        assert wal.exists(), "another process deleted the WAL this process still writes to"
        assert _other_process(path, "SELECT count(*) FROM runs WHERE id = ?", run.id) == "1"
    finally:
        engine.close()
