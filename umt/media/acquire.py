"""The acquire workflow: submit-download → wait-download → copy-file → register →
notify-library → notify-imported → retention → cleanup, with compensation (and a message to
the user) after a cancel or a final failure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from umt.engine import RetryPolicy, RunStatus, StepContext, Workflow, WorkflowContext
from umt.media import announce, downloads, library
from umt.media.request import AcquireRequest
from umt.media.results import (
    Cleaned,
    Confirmation,
    Imported,
    ImportedFile,
    Progress,
    Submitted,
)
from umt.media.services import AcquireServices
from umt.records import catalog, ledger

WORKFLOW_NAME = "acquire"
WORKFLOW_VERSION = "2"
#: Every version this code still runs. A run started by an earlier umt finishes with the steps
#: it started with after an upgrade (version 1: without notify-library, notify-imported and
#: notify-outcome); a worker claims only the versions it registers.
WORKFLOW_VERSIONS = ("1", WORKFLOW_VERSION)

#: qBittorrent may be restarting or briefly unreachable: keep trying for about an hour.
QBITTORRENT_RETRY = RetryPolicy(
    max_attempts=12, initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
    max_interval=timedelta(minutes=10),
)
#: A full disk or a permission problem may be fixed by the user in the meantime.
IMPORT_RETRY = RetryPolicy(
    max_attempts=6, initial_interval=timedelta(seconds=10), backoff_coefficient=3.0,
    max_interval=timedelta(minutes=30),
)


class DownloadTimedOut(Exception):
    pass


#: Media servers and notification services: about ten minutes, then a warning.
ANNOUNCE_RETRY = announce.retry_policy(5, timedelta(seconds=10))


def build_acquire_workflow(
    services: Callable[[], AcquireServices], announce_retry: RetryPolicy = ANNOUNCE_RETRY,
    version: str = WORKFLOW_VERSION,
) -> Workflow:
    """The workflow, with ``services`` called (lazily) only by steps that need qBittorrent,
    a media server or a notification service."""
    if version not in WORKFLOW_VERSIONS:
        raise ValueError(f"unknown acquire workflow version {version!r}")
    announces = version != "1"

    def tell_user(
        ctx: WorkflowContext, name: str, event: str, request: AcquireRequest,
        files: Callable[[StepContext], list[ImportedFile]], reason: str | None = None,
    ) -> announce.Announced:
        def send(step: StepContext) -> announce.Announced:
            shown = files(step)
            title, body = announce.message(
                event, title=request.title, run_id=step.run_id, reason=reason,
                size=sum(item.size for item in shown) if shown else None,
                paths=[item.path for item in shown],
            )
            return announce.notify_user(step, event, title, body, services().notify_targets,
                                        announce_retry)

        return ctx.step(name, send, retry=announce_retry, result_type=announce.Announced)

    def qbt_step(
        body: Callable[[StepContext, AcquireRequest, Any], Any], request: AcquireRequest
    ) -> Callable[[StepContext], Any]:
        return lambda step: body(step, request, services().qbittorrent)

    def acquire(ctx: WorkflowContext, raw_input: Any) -> dict[str, Any]:
        request = AcquireRequest.model_validate(raw_input)
        submitted = ctx.step("submit-download", qbt_step(downloads.submit_download, request),
                             retry=QBITTORRENT_RETRY, result_type=Submitted)
        stall_timeout = request.stall_timeout
        while True:
            signal = ctx.wait_for_signal("wait-download", request.done_signal,
                                         timeout=stall_timeout or request.download_timeout)
            if signal is None and stall_timeout is not None:
                # No done signal for stall_timeout: the download must have moved meanwhile
                # (or finished without a hook, then it is confirmed as if signaled).
                progress = ctx.step("check-progress", qbt_step(downloads.check_progress, request),
                                    retry=QBITTORRENT_RETRY, result_type=Progress)
                if not progress.complete:
                    continue
            elif signal is None:
                raise DownloadTimedOut(
                    f"the download did not finish within {request.download_timeout}"
                )
            confirmation = ctx.step(
                "confirm-download", qbt_step(downloads.confirm_download, request),
                retry=QBITTORRENT_RETRY, result_type=Confirmation,
            )
            if confirmation.complete:
                break
        imported = ctx.step("copy-file", qbt_step(library.import_download, request),
                            retry=IMPORT_RETRY, result_type=Imported)
        ctx.step("register", lambda step: register(step, request, imported))
        warnings: list[str] = []
        if announces:
            scanned = ctx.step("notify-library", lambda step: announce.notify_library(
                step, [item.path for item in imported.files], services().media_servers,
                announce_retry,
            ), retry=announce_retry, result_type=announce.Announced)
            told = tell_user(ctx, "notify-imported", announce.IMPORTED, request,
                             lambda step: imported.files)
            warnings = [*scanned.warnings, *told.warnings]
        ctx.sleep("retention", request.retention)
        cleaned = ctx.step("cleanup", qbt_step(downloads.cleanup_download, request),
                           retry=QBITTORRENT_RETRY, result_type=Cleaned)
        return {
            "title": request.title,
            "info_hash": request.info_hash,
            "torrent": submitted.name,
            "library_paths": [item.path for item in imported.files],
            "size": imported.total_size,
            "torrent_removed": cleaned.removed,
            "warnings": warnings,
        }

    def compensate(ctx: WorkflowContext, raw_input: Any) -> None:
        """Decided from the ledger alone: a copy that finished but whose result was never
        committed counts as the finished import it is."""
        request = AcquireRequest.model_validate(raw_input)
        ctx.step("discard-partial-imports", library.discard_partial_imports)
        ctx.step("catalog-kept-imports", lambda step: catalog_kept_imports(step, request))
        if ctx.run_status == RunStatus.CANCELED:
            # The user asked to stop: the torrent this run added goes, seeding or not. A run
            # that failed keeps its download (the user decides what to do with it).
            ctx.step("remove-torrent", qbt_step(downloads.remove_own_torrent, request),
                     retry=QBITTORRENT_RETRY)
        if not announces:
            return
        event = announce.outcome_event(ctx.run_status, ctx.run_error)
        # The files this run leaves in the library (a cancel after the import keeps them).
        tell_user(ctx, "notify-outcome", event, request, library.published_imports,
                  reason=None if event == announce.CANCELED else _error_text(ctx.run_error))

    return Workflow(WORKFLOW_NAME, version, acquire, compensate)


def register(step: StepContext, request: AcquireRequest, imported: Imported) -> dict[str, Any]:
    """Records the import in the catalog, in the same transaction as this step's result."""
    item = catalog.CatalogItem(
        run_id=step.run_id, title=request.title, info_hash=request.info_hash,
        library_paths=[file.path for file in imported.files], size=imported.total_size,
        content_hash=library.manifest_hash(imported.files),
        import_method=",".join(sorted({file.method for file in imported.files})),
        imported_at=step.now(),
    )
    catalog.add_with_result(step, item)
    ledger.record_with_result(step, f"catalog:{step.run_id}", ledger.DONE, {
        "title": item.title, "paths": item.library_paths,
    })
    return {"title": item.title, "library_paths": item.library_paths}


def catalog_kept_imports(step: StepContext, request: AcquireRequest) -> dict[str, Any]:
    """Compensation: files this run published stay in the library, so they are catalogued
    (unless ``register`` already did it) — the outcome of a cancel does not depend on whether
    it came just before or just after ``register``."""
    files = library.published_imports(step)
    if not files or catalog.item_of_this_run(step) is not None:
        return {"cataloged": False}
    register(step, request, Imported(files=files))
    return {"cataloged": True, "library_paths": [item.path for item in files]}


def _error_text(error: dict[str, Any] | None) -> str | None:
    return str(error.get("message") or error.get("type")) if error else None
