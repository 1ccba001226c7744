"""``python -m spikes.umt_cli [umt arguments]``: umt's own command line plus what the spikes need.

Everything is umt's CLI (``umt.cli.main``: same commands, same JSON, same exit codes), with:

- ``SPIKE_WORKFLOWS=acquire,spike-burst@1,…``: the workflows ``worker`` registers (``acquire``
  is umt's own, as ``umt.app.App`` builds it; the others come from ``spikes.workflows``).
  Unset: umt's registry, unchanged.
- ``SPIKE_FAULTS``: faults injected into this process, comma separated:
  ``slow-copy=MBPS``: writes to ``*.umt-partial`` files go at most MBPS MB/s (a slow disk), so
  that a copy lasts long enough to be killed, frozen or canceled in the middle;
  ``stop-after-rename``: right after the first publish of a ``*.umt-partial`` file under its
  library name the process stops itself (SIGSTOP), so that the spike can kill it between the
  publish and the commit of the step; ``other-host=NAME``: the worker poses as one on host NAME.
- ``FAKETIME`` (libfaketime preloaded: a host whose clock is off): ``time.sleep`` waits on a
  condition variable instead (see ``tests/support/faketime.py``).
- ``UMT_ENGINE_BREAK=name,…``: the named breakages of ``spikes/breakages.py`` (each removes
  one guarantee of umt, to show that the scenario guarding it fails).
- one more command, ``spike-start WORKFLOW@VERSION``, which starts runs of a spike workflow
  (``start-acquire`` only starts acquisitions).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Annotated, Any

import typer

from spikes.breakages import BREAK_ENV
from spikes.breakages import install as install_breakages

WORKFLOWS_ENV = "SPIKE_WORKFLOWS"
FAULTS_ENV = "SPIKE_FAULTS"
PARTIAL_SUFFIX = ".umt-partial"


# ---------------------------------------------------------------------- faults


def install_faults(spec: str) -> list[str]:
    installed = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = item.partition("=")
        if name == "slow-copy":
            _slow_copy(float(value or "16") * 1024 * 1024)
        elif name == "stop-after-rename":
            _stop_after_rename()
        elif name == "other-host":
            _other_host(value or "elsewhere")
        else:
            raise SystemExit(f"{FAULTS_ENV}: unknown fault {name!r}")
        installed.append(item)
    return installed


def _other_host(hostname: str) -> None:
    """The worker poses as one on another host: a sibling takes its runs over only when their
    leases expire, not as soon as its process is gone."""
    import umt.engine.worker
    from umt.engine.hostinfo import ProcessIdentity, current_process

    me = current_process()
    posed = ProcessIdentity(f"{hostname}/spike", hostname, me.pid, me.process_start)
    umt.engine.worker.current_process = lambda: posed  # type: ignore[attr-defined]


def _writes_partial(fd: int) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(PARTIAL_SUFFIX)
    except OSError:
        return False


def _slow_copy(bytes_per_second: float) -> None:
    """Every way the importer writes a partial file (``sendfile``, and ``pwrite`` or ``write``
    where a filesystem cannot ``sendfile``) is slowed down."""
    real_write, real_pwrite, real_sendfile = os.write, os.pwrite, os.sendfile

    def pause(fd: int, written: int) -> int:
        if _writes_partial(fd):
            time.sleep(written / bytes_per_second)
        return written

    def write(fd: int, data: Any) -> int:
        return pause(fd, real_write(fd, data))

    def pwrite(fd: int, data: Any, offset: int) -> int:
        return pause(fd, real_pwrite(fd, data, offset))

    def sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        return pause(out_fd, real_sendfile(out_fd, in_fd, offset, count))

    os.write, os.pwrite, os.sendfile = write, pwrite, sendfile


def _stop_after_rename() -> None:
    from umt.media.importing import publish as publishing

    real_publish = publishing.publish_no_replace
    fired = threading.Event()

    def publish(partial: Any, dest: Any) -> None:
        real_publish(partial, dest)
        if not fired.is_set():
            fired.set()
            sys.stderr.write(f"spike fault: published {partial} as {dest}; stopping (SIGSTOP)\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSTOP)

    publishing.publish_no_replace = publish  # type: ignore[assignment]


# ---------------------------------------------------------------------- registry


def install_registry(names: list[str]) -> None:
    from spikes.workflows import build
    from umt.app import App
    from umt.engine import Registry

    def registry(self: App) -> Registry:
        return Registry([self.acquire_workflow if name == "acquire" else build(name)
                         for name in names])

    App.registry = registry  # type: ignore[method-assign]


# ---------------------------------------------------------------------- spike-start


def spike_start(
    ctx: typer.Context,
    workflow: Annotated[str, typer.Argument(metavar="WORKFLOW@VERSION")],
    input_json: Annotated[str, typer.Option("--input", metavar="JSON")] = "{}",
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key")] = None,
    count: Annotated[int, typer.Option("--count", min=1)] = 1,
    key_prefix: Annotated[str | None, typer.Option("--key-prefix")] = None,
    one_transaction: Annotated[bool, typer.Option("--one-transaction")] = False,
    retry_for: Annotated[float, typer.Option("--retry-for", metavar="SECONDS")] = 0.0,
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Start runs of a spike workflow (one, or --count of them, keyed --key-prefix-N).

    --retry-for keeps retrying each start while the database is unreachable (the idempotency
    key makes a retried start return the run the lost answer had created).
    """
    from spikes.workflows import build
    from umt.cli.application import get_app
    from umt.cli.params import parse_json_option
    from umt.engine import StoreUnavailable

    app = get_app(ctx, json_output=json_output)
    definition = build(workflow)
    value = parse_json_option(input_json, "--input")
    engine = app.engine()

    def key(index: int) -> str | None:
        if count == 1 and idempotency_key is not None:
            return idempotency_key
        return f"{key_prefix}-{index}" if key_prefix else None

    began = time.monotonic()
    results = []
    if one_transaction:
        with engine.database.transaction() as session:
            results = [engine.start(definition, value, idempotency_key=key(i), session=session)
                       for i in range(1, count + 1)]
    else:
        retries = 0
        for index in range(1, count + 1):
            deadline = time.monotonic() + retry_for
            while True:
                try:
                    results.append(engine.start(definition, value, idempotency_key=key(index)))
                    break
                except StoreUnavailable:
                    if time.monotonic() > deadline:
                        raise
                    retries += 1
                    time.sleep(0.2)
    elapsed = round(time.monotonic() - began, 2)
    if count == 1:
        run = results[0].run
        app.print_json({"run_id": run.id, "status": run.status, "created": results[0].created,
                        "workflow": run.workflow, "version": run.version})
        return
    app.print_json({
        "workflow": definition.key, "started": sum(r.created for r in results),
        "existing": sum(not r.created for r in results), "seconds": elapsed,
        "run_ids": [r.run.id for r in results] if count <= 100 else "(omitted)",
    })


def main() -> None:
    broken = install_breakages(os.environ.get(BREAK_ENV, ""))
    if broken:
        sys.stderr.write(f"spike breakages in pid {os.getpid()}: {', '.join(broken)}\n")
    if os.environ.get("FAKETIME"):
        from tests.support.faketime import sleep_on_condition_variables

        sleep_on_condition_variables()
    installed = install_faults(os.environ.get(FAULTS_ENV, ""))
    if installed:
        sys.stderr.write(f"spike faults in pid {os.getpid()}: {', '.join(installed)}\n")
    names = [n.strip() for n in os.environ.get(WORKFLOWS_ENV, "").split(",") if n.strip()]
    if names:
        install_registry(names)
    from umt.cli.main import app

    app.command("spike-start")(spike_start)
    app()


if __name__ == "__main__":
    main()
