"""Who this process is, and whether another process on this host is still alive.

A worker records its host key, pid and process start time. Another worker with the same host
key can then tell for certain that it died (no such process, a zombie, or the pid now belongs
to a process started at another time) and take its runs over without waiting for the lease.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessIdentity:
    host_key: str
    hostname: str
    pid: int
    process_start: str


def current_process() -> ProcessIdentity:
    pid = os.getpid()
    return ProcessIdentity(host_key(), socket.gethostname(), pid, process_start_time(pid) or "")


def host_key() -> str:
    """Same key ⇔ same kernel boot and pid namespace, so pids are comparable."""
    boot_id = _read("/proc/sys/kernel/random/boot_id") or "no-boot-id"
    try:
        pid_namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pid_namespace = "no-pid-ns"
    return f"{socket.gethostname()}/{boot_id.strip()}/{pid_namespace}"


def process_start_time(pid: int) -> str | None:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # Field 2 (the command) may contain spaces and parentheses: parse after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def process_alive(pid: int, process_start: str) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        if Path("/proc/self/stat").exists():
            return False
        return _signal_zero(pid)  # no procfs: cannot detect pid reuse
    fields = stat[stat.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):
        return False
    return not process_start or (len(fields) > 19 and fields[19] == process_start)


def _signal_zero(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None
