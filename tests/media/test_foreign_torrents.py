"""Torrents umt did not add, beside umt's own, against real qbittorrent-nox: umt's worker,
reconcile (``umt resume``) and cleanup never delete, move, re-categorize or re-tag them, in
another category or in umt's; one umt adopts (it was there before) is imported and left seeding,
and one adopted by a run that is then canceled stays too."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import torf

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

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("foreign")


@pytest.fixture(scope="module")
def film(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded"
    make_payload(folder, "Own.Film.2026.mkv", 4 * MiB, seed=11)
    return swarm.seed(folder / "Own.Film.2026.mkv")


@pytest.fixture
def pipeline(any_pipeline: Pipeline) -> Pipeline:
    return any_pipeline


def add_foreign(client: QbtInstance, name: str, *, category: str, tags: str) -> tuple[str, Path]:
    """Another tool's complete, seeding torrent; returns its info-hash and .torrent file."""
    folder = client.download_dir / category / name
    make_payload(folder, f"{name}.mkv", 256 * 1024, seed=len(name))
    torrent = make_torrent(folder)
    torrent_file = client.base_dir / f"{name}.torrent"
    torrent_file.write_bytes(torrent)
    client.client().torrents_add(torrent_files=torrent, category=category, tags=tags,
                                 save_path=str(folder.parent))
    return str(torf.Torrent.read_stream(torrent).infohash), torrent_file


def snapshot(client: QbtInstance, hashes: list[str]) -> dict[str, tuple[object, ...]]:
    found = {str(t["hash"]): t for t in client.client().torrents_info(torrent_hashes=hashes)}
    return {h: (found[h]["name"], found[h]["category"], found[h]["tags"], found[h]["save_path"],
                found[h]["content_path"]) if h in found else ("gone",) for h in hashes}


def resume(pipeline: Pipeline) -> None:
    done = subprocess.run(pipeline.umt_command("resume"), cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr


def test_foreign_torrents_are_never_touched(
    pipeline: Pipeline, film: SeededTorrent, swarm: Swarm, tmp_path: Path,
) -> None:
    client = pipeline.client
    other, _ = add_foreign(client, "Sonarr Show S01E01", category="tv-sonarr", tags="sonarr")
    same_category, canceled_file = add_foreign(client, "Manual Film", category="umt",
                                               tags="mine")
    adopted, adopted_file = add_foreign(client, "Radarr Film 2025", category="umt",
                                        tags="radarr")
    foreign = [other, same_category, adopted]
    wait_until(lambda: len(client.client().torrents_info(
        torrent_hashes=foreign, status_filter="seeding")) == 3, timeout=60,
        what="the foreign torrents to seed")
    before = snapshot(client, foreign)

    own_file = tmp_path / "own.torrent"
    own_file.write_bytes(film.torrent_bytes)
    client.set_finish_hook(pipeline.hook_program())
    own = pipeline.start(str(own_file))
    adopting = pipeline.start(str(adopted_file), title="Radarr Film (2025)")
    canceled = pipeline.start(str(canceled_file))  # adopts it, then is canceled
    with pipeline.worker():
        wait_until(lambda: any(e.operation.startswith("qbt-add:") and e.phase == "done"
                               for e in pipeline.ledger(canceled)), timeout=60,
                   what="the canceled run to adopt its torrent")
        pipeline.engine.cancel(canceled)
        assert pipeline.wait(canceled, timeout=60).compensation == "succeeded"
        # The adopted torrent finished before its run existed: reconcile passes signal it.
        deadline = time.monotonic() + 180
        while not pipeline.engine.get(adopting).finished and time.monotonic() < deadline:
            resume(pipeline)
            time.sleep(0.5)
        for run_id in (own, adopting):
            run = pipeline.wait(run_id, timeout=180)
            assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))
        resume(pipeline)

    assert snapshot(client, foreign) == before
    cleanups = {run_id: [e.detail for e in pipeline.ledger(run_id)
                         if e.operation.startswith("qbt-delete:")] for run_id in (own, adopting)}
    assert cleanups[adopting] == [{"reason": "not added by umt (category 'umt')"}]
    assert [e.detail for e in pipeline.ledger(canceled) if e.operation.startswith("qbt-delete:")
            ] == [{"reason": "not added by this run"}]
    assert client.adapter().find(film.info_hash) is None  # umt's own torrent went
    assert [entry.library_paths for entry in pipeline.catalog()
            if entry.run_id == adopting] != []
    library = {path.name: path for path in pipeline.library_files()}
    assert sha256_file(library["Radarr Film 2025.mkv"]) == sha256_file(
        client.download_dir / "umt" / "Radarr Film 2025" / "Radarr Film 2025.mkv")
