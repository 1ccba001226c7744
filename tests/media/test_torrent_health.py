"""Torrent health against real qbittorrent-nox, on both backends: a torrent removed outside umt
or in an error state fails its run at the next reconcile pass with a clear reason; a stalled
download fails after ``acquire.stall_timeout``; a done signal that comes before qBittorrent
reports completion is confirmed, waited out and finished once; a qBittorrent killed and
restarted mid-download (its sessions gone) costs neither the run nor a second torrent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.media.pipeline import REPO, Pipeline
from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    make_payload,
    make_torrent,
    sha256_file,
    wait_until,
)
from umt.app import App
from umt.engine import Run
from umt.media import downloads
from umt.media.reconcile import reconcile

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("health")


@pytest.fixture(scope="module")
def film(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded"
    make_payload(folder, "Health.Film.2026.mkv", 4 * MiB, seed=23)
    return swarm.seed(folder / "Health.Film.2026.mkv")


@pytest.fixture
def pipeline(any_pipeline: Pipeline) -> Pipeline:
    return any_pipeline


@pytest.fixture
def client(fresh_client: QbtInstance) -> QbtInstance:
    return fresh_client


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return (f"sqlite:///{tmp_path}/stall.db" if request.param == "sqlite"
            else str(request.getfixturevalue("pg_url")))


def magnet(seeded: SeededTorrent) -> str:
    """No tracker: qBittorrent holds it in metaDL until the test hands it the seeder."""
    return f"magnet:?xt=urn:btih:{seeded.info_hash}&dn={seeded.path.name}"


def waiting(pipeline: Pipeline, run_id: str) -> Run:
    return wait_until(lambda: (run := pipeline.engine.get(run_id)).status == "waiting" and run,
                      timeout=60, what="the run to wait for its download")


def show(pipeline: Pipeline, run_id: str) -> str:
    done = subprocess.run(pipeline.umt_command("show", run_id), cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def finish_reconciling(pipeline: Pipeline, run_id: str) -> None:
    """Reconcile passes (the hook may have fired while the run was between waits) until done."""
    # Another connection, as 'umt resume' would be: the worker notices its writes.
    other = App(pipeline.settings)
    qbt = other.qbittorrent()

    def finished() -> bool:
        if pipeline.engine.get(run_id).finished:
            return True
        reconcile(other.engine(), qbt)
        return False

    try:
        wait_until(finished, timeout=180, interval=1.0, what="the run to finish")
    finally:
        other.close()


def resume(pipeline: Pipeline) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pipeline.umt_command("resume", "--json"), cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_torrent_removed_outside_umt_fails_its_run_at_the_next_resume(
    pipeline: Pipeline, film: SeededTorrent,
) -> None:
    run_id = pipeline.start(magnet(film))
    with pipeline.worker():
        waiting(pipeline, run_id)
        pipeline.client.client().torrents_delete(delete_files=True,
                                                 torrent_hashes=film.info_hash)
    resume(pipeline)
    run = pipeline.wait(run_id, timeout=60)
    assert run.status == "failed", run
    assert run.error is not None and run.error["message"].endswith(
        ": torrent removed outside umt")
    assert "torrent removed outside umt" in show(pipeline, run_id)


def test_missing_files_fail_the_run_with_qbittorrents_reason(
    pipeline: Pipeline, tmp_path: Path,
) -> None:
    """Data deleted under a paused qBittorrent: after its restart it says missingFiles."""
    client = pipeline.client
    folder = client.download_dir / "Vanishing Film"
    make_payload(folder, "film.mkv", 512 * 1024, seed=5)
    torrent_file = tmp_path / "vanishing.torrent"
    torrent_file.write_bytes(make_torrent(folder))
    run_id = pipeline.start(str(torrent_file))
    qbt = pipeline.app.qbittorrent()
    with pipeline.worker():
        waiting(pipeline, run_id)
    [info] = qbt.find_by_tag(f"umt-{run_id}")
    wait_until(lambda: qbt.find(info.info_hash).is_complete, timeout=60, what="the check")
    client.stop()
    for path in folder.iterdir():
        path.unlink()
    client.start()
    wait_until(lambda: (found := qbt.find(info.info_hash)) and found.state == "missingFiles",
               timeout=60, what="qBittorrent to report missing files")
    report = reconcile(pipeline.engine, qbt)
    assert report.errored == [run_id]
    with pipeline.worker():
        run = pipeline.wait(run_id, timeout=60)
    assert run.status == "failed", run
    assert run.error is not None and run.error["message"].endswith(
        ": qBittorrent: missing files")
    assert "qBittorrent: missing files" in show(pipeline, run_id)


def test_a_stalled_download_fails_after_the_stall_timeout(
    tmp_path: Path, client: QbtInstance, database_url: str, film: SeededTorrent,
) -> None:
    pipeline = Pipeline(tmp_path / "stall", client, database_url, stall_timeout="2s")
    try:
        run_id = pipeline.start(magnet(film))  # no peer ever: no progress
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=90)
        assert run.status == "failed", run
        assert run.error is not None
        assert ": no progress for 0:00:02 (acquire.stall_timeout)" in run.error["message"]
        names = [step.name for step in pipeline.engine.steps(run_id)]
        assert names.count("check-progress") == 1 and "copy-file" not in names
    finally:
        pipeline.close()


def test_a_done_signal_before_completion_is_waited_out_and_finishes_once(
    pipeline: Pipeline, film: SeededTorrent, swarm: Swarm, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(downloads, "CONFIRM_WINDOW_SECONDS", 1.0)
    run_id = pipeline.start(magnet(film))
    with pipeline.worker():
        waiting(pipeline, run_id)
        # the hook, early: qBittorrent has not even the metadata yet
        hook = subprocess.run(pipeline.umt_command("hook", "download-done", film.info_hash),
                              cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
        assert hook.returncode == 0 and "delivered to run" in hook.stderr, hook.stderr
        wait_until(lambda: [(s.name, s.status) for s in pipeline.engine.steps(run_id)][1:] == [
            ("wait-download", "succeeded"), ("confirm-download", "succeeded"),
            ("wait-download#2", "waiting")], timeout=60, what="the run to wait again")
        swarm.connect(pipeline.client, film.info_hash)
        finish_reconciling(pipeline, run_id)
        run = pipeline.wait(run_id, timeout=120)
    assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))
    confirms = [s for s in pipeline.engine.steps(run_id)
                if s.name.startswith("confirm-download")]
    assert [s.result["complete"] for s in confirms] == [False, True]
    assert [s.name for s in pipeline.engine.steps(run_id)].count("copy-file") == 1
    [item] = pipeline.catalog()
    assert sha256_file(Path(item.library_paths[0])) == sha256_file(film.path)


def test_qbittorrent_killed_and_restarted_mid_download(
    pipeline: Pipeline, film: SeededTorrent, swarm: Swarm,
) -> None:
    """SIGKILL (no state saved), a restart (every session cookie void: umt logs in again), then
    the download: one run, one torrent, one import."""
    pipeline.client.set_finish_hook(pipeline.hook_program())
    run_id = pipeline.start(magnet(film))
    qbt = pipeline.app.qbittorrent()
    with pipeline.worker():
        waiting(pipeline, run_id)
        assert qbt.find(film.info_hash) is not None  # this client is logged in
        pipeline.client.kill()
        assert resume(pipeline).returncode == 1  # qBittorrent unreachable: reported, not fatal
        pipeline.client.start()
        assert pipeline.engine.get(run_id).status == "waiting"
        wait_until(lambda: qbt.find(film.info_hash), timeout=60, what="the torrent back")
        swarm.connect(pipeline.client, film.info_hash)
        finish_reconciling(pipeline, run_id)
    run = pipeline.wait(run_id, timeout=60)
    assert run.status == "succeeded", run.error
    adds = [e for e in pipeline.ledger(run_id) if e.operation.startswith("qbt-add:")]
    assert [e.phase for e in adds] == ["intent", "done"]
    assert len(pipeline.catalog()) == 1


def test_a_session_qbittorrent_refuses_is_logged_in_again(
    client: QbtInstance, film: SeededTorrent,
) -> None:
    qbt = client.adapter()
    assert qbt.find(film.info_hash) is None
    client.client().auth_log_out()  # not this client's session: a sanity check of the harness
    qbt._api.auth_log_out()  # qBittorrent forgets this client's session
    assert qbt.find(film.info_hash) is None
    assert qbt.version().startswith("v")


def test_the_worker_notices_a_removed_torrent_by_itself(
    pipeline: Pipeline, film: SeededTorrent, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No 'umt resume': the worker's own look at qBittorrent (reconcile_interval) fails it."""
    monkeypatch.setenv("UMT_QBITTORRENT_RECONCILE_INTERVAL", "1s")
    run_id = pipeline.start(magnet(film))
    worker = pipeline.spawn_worker()
    try:
        waiting(pipeline, run_id)
        pipeline.client.client().torrents_delete(delete_files=True,
                                                 torrent_hashes=film.info_hash)
        run = pipeline.wait(run_id, timeout=60)
    finally:
        pipeline.kill(worker)
    assert run.status == "failed", run
    assert run.error is not None
    assert run.error["message"].endswith(": torrent removed outside umt")


def test_with_a_stall_timeout_a_finish_without_hook_is_noticed_by_the_run(
    tmp_path: Path, client: QbtInstance, database_url: str, film: SeededTorrent,
) -> None:
    """No finish hook, no reconcile: the progress check after stall_timeout finds the torrent
    complete and the run goes on to import it."""
    pipeline = Pipeline(tmp_path / "stall", client, database_url, stall_timeout="8s")
    try:
        torrent_file = tmp_path / "film.torrent"
        torrent_file.write_bytes(film.torrent_bytes)  # its tracker is the seeder: it downloads
        run_id = pipeline.start(str(torrent_file))
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=120)
        assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))
        checks = [s.result for s in pipeline.engine.steps(run_id)
                  if s.name.startswith("check-progress")]
        assert checks and checks[-1]["complete"] is True
        assert not any(s.name.startswith("wait-download") and s.result and s.result.get("data")
                       for s in pipeline.engine.steps(run_id))
        [item] = pipeline.catalog()
        assert sha256_file(Path(item.library_paths[0])) == sha256_file(film.path)
    finally:
        pipeline.close()
