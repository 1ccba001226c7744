"""Crash and cancel in the middle of a large library copy, with a real qbittorrent-nox.

The download is not the point here: the payload is placed in the client's download folder
before the run adds the torrent, so qBittorrent finds it complete at once (and its finish
hook fires, possibly before the run waits: the signal is kept).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.media.pipeline import Pipeline
from tests.support.qbittorrent import QbtInstance, make_payload, make_torrent, sha256_file
from umt.media import library

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

GiB = 1024 * 1024 * 1024
NAME = "Big.Sample.2026.2160p.mkv"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[QbtInstance]:
    instance = QbtInstance.create(tmp_path / "client", local_host_auth=True)
    instance.start()
    yield instance
    instance.destroy()


@pytest.fixture
def pipeline(tmp_path: Path, client: QbtInstance) -> Iterator[Pipeline]:
    pipeline = Pipeline(tmp_path / "umt", client, f"sqlite:///{tmp_path}/umt.db",
                        import_mode="copy", lease="60s")
    client.set_finish_hook(pipeline.hook_program())
    yield pipeline
    pipeline.close()


@pytest.fixture
def big_download(client: QbtInstance, tmp_path: Path) -> tuple[Path, str]:
    """A 1 GiB payload already in the client's download folder, and its .torrent."""
    digest = make_payload(client.download_dir, NAME, GiB, seed=11)
    torrent = tmp_path / f"{NAME}.torrent"
    torrent.write_bytes(make_torrent(client.download_dir / NAME, piece_size=4 * 1024 * 1024))
    return torrent, digest


def partial_of(pipeline: Pipeline, name: str) -> list[Path]:
    return [p for p in pipeline.library.rglob("*") if p.is_file() and p.name != name]


def wait_for_copy_in_progress(pipeline: Pipeline, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        partials = [p for p in partial_of(pipeline, NAME) if p.stat().st_size > 0]
        if partials:
            return partials[0]
        time.sleep(0.005)
    raise AssertionError("the copy never started")


def test_kill_during_copy_then_restart_imports_exactly_once(
    pipeline: Pipeline, big_download: tuple[Path, str]
) -> None:
    torrent, digest = big_download
    run_id = pipeline.start(str(torrent), title="Big Sample")
    # A disk of 100 MB/s: the 1 GiB copy lasts 10 s or more, so it is still running at the kill
    # however quick the machine.
    first = pipeline.spawn_worker(faults="slow-copy=100")
    partial = wait_for_copy_in_progress(pipeline)
    Pipeline.kill(first)
    assert partial.exists(), "killed mid-copy: the temporary file is still there"

    pipeline.spawn_worker()
    run = pipeline.wait(run_id, timeout=240)
    assert run.status == "succeeded", run.error

    files = pipeline.library_files()
    assert [f.name for f in files] == [NAME], files
    assert sha256_file(files[0]) == digest
    copy_attempts = [a for a in pipeline.engine.attempts(run_id) if a.step_name == "copy-file"]
    assert [a.status for a in copy_attempts] == ["interrupted", "succeeded"]
    copies = [e for e in pipeline.ledger(run_id) if e.operation.startswith("copy:")]
    killed, restarted = sorted({e.lease_epoch for e in copies})
    assert [e.phase for e in copies if e.lease_epoch == killed] == ["intent"]
    assert [e.phase for e in copies if e.lease_epoch == restarted] == [
        "intent", "verified", "done"]
    assert {e.worker_id for e in copies if e.lease_epoch == killed} != {
        e.worker_id for e in copies if e.lease_epoch == restarted}
    assert len(pipeline.catalog()) == 1


def test_cancel_during_copy_removes_everything_but_never_a_finished_file(
    pipeline: Pipeline, big_download: tuple[Path, str], client: QbtInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torrent, _ = big_download
    run_id = pipeline.start(str(torrent), title="Big Sample")
    real_import_file = library.import_file

    def import_file(*args: Any, check: Callable[[], None], **kwargs: Any) -> Any:
        chunks = itertools.count()

        def cancel_mid_copy_then_check() -> None:
            if next(chunks) == 2:  # two chunks written: the cancel lands mid-copy, for sure
                pipeline.engine.cancel(run_id)
            check()

        return real_import_file(*args, check=cancel_mid_copy_then_check, **kwargs)

    monkeypatch.setattr(library, "import_file", import_file)
    with pipeline.worker():
        run = pipeline.wait(run_id, timeout=240)
    assert run.status == "canceled"
    assert run.compensation == "succeeded", run.error
    assert pipeline.library_files() == [], "no file (and no temporary file) in the library"
    assert client.adapter().find(run.input["info_hash"]) is None
    assert not (client.download_dir / NAME).exists(), "the torrent's data was removed"
    attempts = {(a.step_name, a.status) for a in pipeline.engine.attempts(run_id)}
    assert ("copy-file", "canceled") in attempts
    assert ("discard-partial-imports", "succeeded") in attempts
    assert ("register", "succeeded") not in attempts
