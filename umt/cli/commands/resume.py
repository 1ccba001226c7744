"""umt resume: one pass for cron: reconcile with qBittorrent, then execute every due run."""

from __future__ import annotations

import logging
from typing import Any

import typer

from umt.cli.application import Application, get_app
from umt.cli.errors import EXIT_FAILED
from umt.cli.logs import use_options
from umt.cli.params import JsonOption, LogFileOption, QuietOption, VerboseOption


def resume(
    ctx: typer.Context, json_output: JsonOption = False, verbose: VerboseOption = 0,
    quiet: QuietOption = 0, log_file: LogFileOption = None,
) -> None:
    """One pass, for cron: tell waiting runs whose torrent finished in qBittorrent, report
    missing or errored torrents, execute every run that is due, and exit when nothing is due.

    Exit 0, or 1 if a run failed during the pass, or qBittorrent was unreachable (due runs are
    executed anyway) or refused the credentials (then nothing runs). Overlapping passes are
    safe.

    Logs warnings only (quiet under cron); -v adds a line per run event (claimed, sleeping,
    waiting, succeeded, failed, canceled, released), -vv the steps (started, finished).

    Example: umt resume --json -v --log-file ~/umt-resume.log
    """
    use_options(logging.WARNING, verbose, quiet, log_file)
    app = get_app(ctx, json_output=json_output)
    summary, qbt_error, failed = _pass(app)
    if app.json:
        app.print_json(summary)
    else:
        _print_summary(app, summary)
    if qbt_error is not None:
        raise qbt_error
    if failed:
        app.abort(f"{failed} run(s) failed during this pass (see 'umt runs --status failed')",
                  EXIT_FAILED)


def _pass(app: Application) -> tuple[dict[str, Any], Exception | None, int]:
    from umt.media.qbittorrent import QbtUnavailable
    from umt.media.reconcile import reconcile

    qbt = app.app.qbittorrent()
    qbt_error: Exception | None = None
    try:
        # Wrong credentials stop the pass before anything runs: steps would only burn their
        # retries on them. An unreachable qBittorrent may be restarting: runs still execute.
        qbt.login()
    except QbtUnavailable as exc:
        qbt_error = exc
    engine = app.engine()
    reconciled: dict[str, Any] | None = None
    if qbt_error is None:
        try:
            report = reconcile(engine, qbt)
            reconciled = {
                "signaled": report.signaled, "missing": report.missing,
                "errored": report.errored, "downloading": report.downloading,
            }
        except QbtUnavailable as exc:
            qbt_error = exc
    drained = engine.worker(app.app.registry(), app.app.worker_options()).drain()
    summary = {
        "reconciled": reconciled,
        "qbittorrent_error": str(qbt_error) if qbt_error is not None else None,
        "executed": drained.executed,
        "outcomes": dict(drained.outcomes),
        "failed": drained.failed,
    }
    return summary, qbt_error, drained.failed


def _print_summary(app: Application, summary: dict[str, Any]) -> None:
    reconciled = summary["reconciled"]
    if reconciled is not None:
        counts = ", ".join(f"{len(runs)} {what}" for what, runs in reconciled.items())
        app.out.print(f"qBittorrent: {counts}")
        for what in ("missing", "errored"):
            for run_id in reconciled[what]:
                app.out.print(f"  run {run_id}: torrent {what} (see 'umt status {run_id}')")
    outcomes = ", ".join(f"{count} {outcome}" for outcome, count in summary["outcomes"].items())
    app.out.print(f"executed {summary['executed']} run(s)"
                  + (f": {outcomes}" if outcomes else ""))
