"""The acquire workflow end to end against real qbittorrent-nox processes on loopback."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import qbittorrentapi
import torf

from tests.media.pipeline import Pipeline
from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    make_payload,
    sha256_file,
    wait_until,
)
from tests.support.skips import skip_unavailable
from umt.engine import IdempotencyConflict
from umt.media.reconcile import reconcile

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

MiB = 1024 * 1024
SEEDING = ("uploading", "stalledUP", "forcedUP", "queuedUP")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("acquire")


@pytest.fixture(scope="module")
def movie(swarm: Swarm, base: Path) -> tuple[SeededTorrent, str]:
    """A 56 MiB "movie" the seeder serves (tracker in the torrent)."""
    folder = base / "seeded"
    digest = make_payload(folder, "Sample.Movie.2026.1080p.mkv", 56 * MiB, seed=7)
    return swarm.seed(folder / "Sample.Movie.2026.1080p.mkv"), digest


@pytest.fixture
def client(base: Path, tmp_path: Path) -> Iterator[QbtInstance]:
    """umt's own qBittorrent, fresh for each test (nothing left from another test)."""
    instance = QbtInstance.create(tmp_path / "client", local_host_auth=True)
    instance.start()
    yield instance
    instance.destroy()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/umt.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def pipeline(tmp_path: Path, client: QbtInstance, database_url: str) -> Iterator[Pipeline]:
    pipeline = Pipeline(tmp_path / "umt", client, database_url)
    yield pipeline
    pipeline.close()


def torrent_file(tmp_path: Path, seeded: SeededTorrent) -> str:
    path = tmp_path / f"{seeded.path.name}.torrent"
    path.write_bytes(seeded.torrent_bytes)
    return str(path)


def steps_by_name(pipeline: Pipeline, run_id: str) -> dict[str, str]:
    return {step.name: step.status for step in pipeline.engine.steps(run_id)}


# ---------------------------------------------------------------------- acceptance 1


def test_real_download_through_the_finish_hook(
    pipeline: Pipeline, movie: tuple[SeededTorrent, str], tmp_path: Path
) -> None:
    seeded, digest = movie
    pipeline.client.set_finish_hook(pipeline.hook_program())
    run_id = pipeline.start(torrent_file(tmp_path, seeded), title="Sample Movie (2026)")
    with pipeline.worker():
        run = pipeline.wait(run_id, timeout=180)
    assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))

    [library_file] = pipeline.library_files()
    assert library_file == pipeline.library / "Sample Movie (2026)" / seeded.path.name
    assert sha256_file(library_file) == digest
    [item] = pipeline.catalog()
    assert item.run_id == run_id and item.library_paths == [str(library_file)]
    # Downloads and library share a filesystem: a hardlink, whose bytes umt never reads.
    assert item.import_method == "hardlink" and item.content_hash is None
    # The hook, not a reconcile pass, delivered the signal.
    [wait_step] = [s for s in pipeline.engine.steps(run_id) if s.name == "wait-download"]
    assert wait_step.result["data"]["source"] == "hook"
    # After the 2 s retention the torrent and its data are gone; the library file stays.
    assert pipeline.client.adapter().find(seeded.info_hash) is None
    assert not (pipeline.client.download_dir / seeded.path.name).exists()
    assert library_file.exists()


# ---------------------------------------------------------------------- acceptance 2


def test_lost_hook_is_made_up_for_by_reconcile(
    pipeline: Pipeline, movie: tuple[SeededTorrent, str], tmp_path: Path
) -> None:
    seeded, digest = movie
    pipeline.client.set_finish_hook(None)
    run_id = pipeline.start(torrent_file(tmp_path, seeded))
    qbt = pipeline.app.qbittorrent()
    with pipeline.worker():
        deadline = time.monotonic() + 180
        while pipeline.engine.get(run_id).status in ("pending", "running", "waiting"):
            assert time.monotonic() < deadline, steps_by_name(pipeline, run_id)
            reconcile(pipeline.engine, qbt)
            time.sleep(1)
        run = pipeline.wait(run_id, timeout=60)
    assert run.status == "succeeded", run.error
    [wait_step] = [s for s in pipeline.engine.steps(run_id) if s.name == "wait-download"]
    assert wait_step.result["data"]["source"] == "reconcile"
    [library_file] = pipeline.library_files()
    assert sha256_file(library_file) == digest
    assert len(pipeline.catalog()) == 1


# ---------------------------------------------------------------------- acceptance 5


def test_same_source_twice_is_one_run_and_a_changed_retention_conflicts(
    pipeline: Pipeline, movie: tuple[SeededTorrent, str], tmp_path: Path
) -> None:
    seeded, _ = movie
    source = torrent_file(tmp_path, seeded)
    first = pipeline.app.start_acquire(_parse(source))
    again = pipeline.app.start_acquire(_parse(source))
    assert again.run.id == first.run.id and first.created and not again.created
    from datetime import timedelta

    with pytest.raises(IdempotencyConflict):
        pipeline.app.start_acquire(_parse(source), retention=timedelta(days=30))
    assert len(pipeline.engine.list_runs()) == 1


def _parse(text: str):  # type: ignore[no-untyped-def]
    from umt.media.sources import parse_source

    return parse_source(text)


# ---------------------------------------------------------------------- acceptance 7


def test_qbittorrent_down_at_submit_is_retried_until_it_is_back(
    pipeline: Pipeline, movie: tuple[SeededTorrent, str], tmp_path: Path
) -> None:
    seeded, digest = movie
    pipeline.client.stop()
    run_id = pipeline.start(torrent_file(tmp_path, seeded))
    with pipeline.worker():
        wait_until(
            lambda: any(s.failures >= 1 for s in pipeline.engine.steps(run_id)),
            timeout=60, what="a failed submit attempt",
        )
        assert pipeline.engine.get(run_id).status in ("pending", "running")
        pipeline.client.start()
        pipeline.client.set_finish_hook(pipeline.hook_program())
        run = pipeline.wait(run_id, timeout=240)
    assert run.status == "succeeded", run.error
    [submit] = [s for s in pipeline.engine.steps(run_id) if s.name == "submit-download"]
    assert submit.failures >= 1 and submit.status == "succeeded"
    failed = [a for a in pipeline.engine.attempts(run_id)
              if a.step_name == "submit-download" and a.status == "failed"]
    assert failed and "QbtUnavailable" in failed[0].error["type"]
    assert sha256_file(pipeline.library_files()[0]) == digest


# ---------------------------------------------------------------------- acceptance 6


def test_hostile_names_never_write_outside_the_library(
    tmp_path: Path, client: QbtInstance, swarm: Swarm
) -> None:
    pipeline = Pipeline(tmp_path / "umt", client, f"sqlite:///{tmp_path}/umt.db",
                        library_dir=tmp_path / "jail" / "library")
    try:
        hostile = _hostile_torrent(tmp_path, swarm)
        before = _listing(tmp_path / "jail")
        client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(str(hostile), title="../../../escaped")
        info_hash = pipeline.engine.get(run_id).input["info_hash"]
        with pipeline.worker():
            wait_until(lambda: client.adapter().find(info_hash) is not None, timeout=60,
                       what="umt to add the hostile torrent")
            swarm.connect(client, info_hash)  # the tracker does not list a renamed torrent
            run = pipeline.wait(run_id, timeout=180)
        after = _listing(tmp_path / "jail")
        new = sorted(after - before)
        assert run.status == "succeeded", run.error
        assert new, "the import wrote nothing"
        assert all(path.startswith("library/") for path in new), new
        [library_file] = pipeline.library_files()
        assert library_file.name == "Evil.Movie.2026.mkv"
    finally:
        pipeline.close()


def _hostile_torrent(tmp_path: Path, swarm: Swarm) -> Path:
    """A torrent whose name and file path climb out: ``..`` parts and an absolute part.

    torf refuses to write such names, so a clean torrent is made and renamed afterwards (the
    piece hashes only cover the data). The seeder stores the data wherever qBittorrent's own
    sanitising puts it, so the swarm can serve it.
    """
    folder = tmp_path / "hostile-src" / "clean"
    make_payload(folder, "sample.mkv", 3 * MiB, seed=3)
    torrent = torf.Torrent(path=folder, trackers=[swarm.announce_url], private=False)
    torrent.generate()
    torrent.metainfo["info"]["name"] = "../../escape"
    torrent.metainfo["info"]["files"][0]["path"] = ["..", "..", "/etc", "Evil.Movie.2026.mkv"]
    data = torrent.dump(validate=False)
    info_hash = parse_source_bytes(data)
    seed_root = tmp_path / "hostile-seed"
    seed_root.mkdir()
    seeder = swarm.seeder.client()
    seeder.torrents_add(torrent_files=data, save_path=str(seed_root), is_paused=True)

    def listed() -> bool:
        # qBittorrent adds asynchronously: until it has, the torrent is unknown (HTTP 404).
        try:
            return bool(seeder.torrents_files(torrent_hash=info_hash))
        except qbittorrentapi.NotFound404Error:
            return False

    wait_until(listed, timeout=30,
               what="the seeder to list the hostile torrent's files")
    [entry] = seeder.torrents_files(torrent_hash=info_hash)
    placed = (seed_root / entry.name).resolve()
    assert placed.is_relative_to(seed_root.resolve()), f"qBittorrent wrote {placed}"
    placed.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / "sample.mkv", placed)
    seeder.torrents_recheck(torrent_hashes=info_hash)
    wait_until(lambda: seeder.torrents_info(torrent_hashes=info_hash)[0].progress >= 1,
               timeout=60, what="the seeder to check the hostile torrent's data")

    def seeding() -> bool:
        seeder.torrents_resume(torrent_hashes=info_hash)  # a resume during the check is lost
        return seeder.torrents_info(torrent_hashes=info_hash)[0].state in SEEDING

    wait_until(seeding, timeout=60, what="the seeder to seed the hostile torrent")
    path = tmp_path / "hostile.torrent"
    path.write_bytes(data)
    return path


def parse_source_bytes(data: bytes) -> str:
    from umt.media.sources import parse_torrent_bytes

    return parse_torrent_bytes(data).info_hash


def _listing(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


# ---------------------------------------------------------------------- acceptance 8


def test_hardlink_mode_across_filesystems_fails_clearly(
    tmp_path: Path, client: QbtInstance, movie: tuple[SeededTorrent, str]
) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        skip_unavailable("hardlink mode across filesystems fails clearly (acceptance 8)",
                         "/dev/shm is not a filesystem other than the downloads'")
    library = Path(shm / f"umt-test-library-{tmp_path.name}")
    pipeline = Pipeline(tmp_path / "umt", client, f"sqlite:///{tmp_path}/umt.db",
                        import_mode="hardlink", library_dir=library)
    try:
        seeded, _ = movie
        client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(torrent_file(tmp_path, seeded))
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "failed"
        assert run.error is not None
        assert "filesystem" in run.error["message"] or "device" in run.error["message"]
        assert pipeline.library_files() == []
        [copy] = [s for s in pipeline.engine.steps(run_id) if s.name == "copy-file"]
        assert copy.failures == 1, "a cross-device hardlink is not retried"
    finally:
        pipeline.close()
        shutil.rmtree(library, ignore_errors=True)
