"""Running a piece of a test as an unprivileged user, for real: root reads and writes every file
whatever its mode, so a refusal by the kernel can only be tested without root's powers.

``as_nobody(function)`` runs ``function()`` in a forked child that became ``nobody`` (member of
``groups`` besides its own) and sends its JSON result back (run as is when the tests do not run
as root). Files it must reach go in ``reachable_folder()``: pytest's ``tmp_path`` is root's
alone.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def as_nobody(function: Callable[[], Any], *, groups: Sequence[int] = ()) -> Any:
    if os.geteuid() != 0:
        return json.loads(json.dumps(function()))
    nobody = pwd.getpwnam("nobody")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges, report as JSON, never return into pytest
        code = 1
        try:
            os.close(read)
            os.setgroups(list(groups))
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(write, json.dumps(function()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    return json.loads(output)


@contextmanager
def reachable_folder(prefix: str = "umt-test-") -> Iterator[Path]:
    """A new folder (mode 755) that ``nobody`` can reach; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        path.chmod(0o755)  # a test may have made it read-only
        shutil.rmtree(path, ignore_errors=True)
