"""The library's invariants against real qbittorrent-nox, on SQLite and PostgreSQL.

- One library path, one owner, never overwritten (path claims, a publish that never replaces).
- Success means the bytes are there; a download is deleted only when its content is in the
  library or the user canceled.
- Every spelling of one torrent is one run.
"""

from __future__ import annotations

import base64
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.media.pipeline import Pipeline
from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    make_payload,
    sha256_file,
    wait_until,
)
from umt.media import library
from umt.media.sources import parse_source

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("integrity")


@pytest.fixture(scope="module")
def twins(swarm: Swarm, base: Path) -> list[tuple[SeededTorrent, str]]:
    """Two torrents, each one file named ``Film.2026.mkv``, of the same size, other content."""
    seeded = []
    for index in (1, 2):
        folder = base / f"release-{index}"
        digest = make_payload(folder, "Film.2026.mkv", 3 * MiB, seed=100 + index)
        seeded.append((swarm.seed(folder / "Film.2026.mkv"), digest))
    return seeded


@pytest.fixture(scope="module")
def disc(swarm: Swarm, base: Path) -> tuple[SeededTorrent, dict[str, str]]:
    """A DVD-like torrent: ``DISC1/VTS_01_1.VOB`` and ``DISC2/VTS_01_1.VOB``, equal sizes."""
    folder = base / "disc" / "Film"
    digests = {
        f"DISC{index}/VTS_01_1.VOB": make_payload(folder / f"DISC{index}", "VTS_01_1.VOB",
                                                  2 * MiB, seed=200 + index)
        for index in (1, 2)
    }
    return swarm.seed(folder), digests


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/umt.db"
    return str(request.getfixturevalue("pg_url"))


def _pipeline(tmp_path: Path, client: QbtInstance, database_url: str, **options: Any) -> Pipeline:
    pipeline = Pipeline(tmp_path / "umt", client, database_url, **options)
    client.set_finish_hook(pipeline.hook_program())
    return pipeline


def _torrent_file(tmp_path: Path, seeded: SeededTorrent, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(seeded.torrent_bytes)
    return str(path)


def test_two_runs_for_one_library_path_one_wins_and_the_other_keeps_its_download(
    tmp_path: Path, fresh_client: QbtInstance, database_url: str,
    twins: list[tuple[SeededTorrent, str]],
) -> None:
    pipeline = _pipeline(tmp_path, fresh_client, database_url)
    try:
        (first, first_digest), (second, _) = twins
        winner = pipeline.start(_torrent_file(tmp_path, first, "1.torrent"), title="Film")
        with pipeline.worker():
            assert pipeline.wait(winner, timeout=180).status == "succeeded"
            loser = pipeline.start(_torrent_file(tmp_path, second, "2.torrent"), title="Film")
            run = pipeline.wait(loser, timeout=180)
        destination = pipeline.library / "Film" / "Film.2026.mkv"
        assert run.status == "failed" and run.compensation == "succeeded"
        assert f"library path {destination} is held by run {winner}" in run.error["message"]
        assert pipeline.library_files() == [destination]
        assert sha256_file(destination) == first_digest
        [item] = pipeline.catalog()
        assert item.run_id == winner
        # The loser's download is still there: it failed, nobody canceled it.
        kept = pipeline.client.adapter().find(second.info_hash)
        assert kept is not None and kept.content_path is not None
        assert Path(kept.content_path).exists()
        assert [s.name for s in pipeline.engine.steps(loser) if s.phase == "compensation"] == [
            "discard-partial-imports", "catalog-kept-imports", "notify-outcome",
        ]
    finally:
        pipeline.close()


def test_a_multi_file_import_keeps_the_torrents_layout(
    tmp_path: Path, fresh_client: QbtInstance, database_url: str,
    disc: tuple[SeededTorrent, dict[str, str]],
) -> None:
    pipeline = _pipeline(tmp_path, fresh_client, database_url, all_files=True)
    try:
        seeded, digests = disc
        run_id = pipeline.start(_torrent_file(tmp_path, seeded, "disc.torrent"), title="Film")
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "succeeded", run.error
        imported = {str(p.relative_to(pipeline.library / "Film")): sha256_file(p)
                    for p in pipeline.library_files()}
        assert imported == digests
    finally:
        pipeline.close()


def test_two_files_of_one_run_mapping_to_one_path_are_refused_before_any_copy(
    tmp_path: Path,
) -> None:
    from umt.engine import PermanentError
    from umt.media.packs import choose_files
    from umt.media.request import AcquireRequest

    content = tmp_path / "Film"
    for disc_name in ("DISC1", "DISC2"):
        (content / disc_name).mkdir(parents=True)
        (content / disc_name / "VTS_01_1.VOB").write_bytes(os.urandom(100))
    request = AcquireRequest(
        source={}, info_hash="a" * 40, title="Film", retention_seconds=0,
        download_timeout_seconds=60, category="umt", save_path=None,
        library_dir=str(tmp_path / "library"), import_mode="copy",
        naming_template="{title}/{filename}", all_files=True, verify="sha256",
    )
    chosen = choose_files(content, "Film", template=request.naming_template, all_files=True)
    with pytest.raises(PermanentError, match="would both be imported as"):
        library.plan_destinations(request, "Film", chosen, tmp_path / "library")


def test_cancel_during_retention_stops_seeding_and_keeps_the_library_file(
    tmp_path: Path, fresh_client: QbtInstance, database_url: str,
    twins: list[tuple[SeededTorrent, str]],
) -> None:
    pipeline = _pipeline(tmp_path, fresh_client, database_url)
    try:
        seeded, digest = twins[0]
        run_id = pipeline.start(_torrent_file(tmp_path, seeded, "1.torrent"),
                                retention=timedelta(hours=1))
        with pipeline.worker():
            assert pipeline.wait(run_id, timeout=180, until=("sleeping",)).status == "sleeping"
            downloaded = pipeline.client.adapter().find(seeded.info_hash)
            assert downloaded is not None and downloaded.content_path is not None
            pipeline.engine.cancel(run_id)
            run = pipeline.wait(run_id, timeout=120)
        assert run.status == "canceled" and run.compensation == "succeeded"
        assert pipeline.client.adapter().find(seeded.info_hash) is None
        assert not Path(downloaded.content_path).exists()
        [library_file] = pipeline.library_files()
        assert sha256_file(library_file) == digest
        [item] = pipeline.catalog()
        assert item.run_id == run_id and item.library_paths == [str(library_file)]
    finally:
        pipeline.close()


def test_a_cancel_before_the_copys_result_is_committed_ends_like_one_after_it(
    tmp_path: Path, fresh_client: QbtInstance, database_url: str,
    twins: list[tuple[SeededTorrent, str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """copy-file finished, its result not yet committed (it commits with the next step's
    start), and the run is canceled: compensation decides from the ledger, so the library
    file stays, is catalogued, and the torrent goes, exactly as after a later cancel."""
    pipeline = _pipeline(tmp_path, fresh_client, database_url)
    real_import = library.import_download

    def import_then_cancel(step: Any, request: Any, qbt: Any) -> Any:
        imported = real_import(step, request, qbt)
        pipeline.engine.cancel(step.run_id)
        return imported

    monkeypatch.setattr(library, "import_download", import_then_cancel)
    try:
        seeded, digest = twins[1]
        run_id = pipeline.start(_torrent_file(tmp_path, seeded, "2.torrent"))
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "canceled" and run.compensation == "succeeded"
        steps = {s.name: s.status for s in pipeline.engine.steps(run_id) if s.phase == "main"}
        assert steps.get("copy-file") != "succeeded", steps  # the window really was hit
        [library_file] = pipeline.library_files()
        assert sha256_file(library_file) == digest
        [item] = pipeline.catalog()
        assert item.library_paths == [str(library_file)]
        wait_until(lambda: pipeline.client.adapter().find(seeded.info_hash) is None,
                   timeout=30, what="the canceled run's torrent to be removed")
    finally:
        pipeline.close()


def test_every_spelling_of_one_torrent_is_one_run(
    tmp_path: Path, fresh_client: QbtInstance, database_url: str,
    twins: list[tuple[SeededTorrent, str]],
) -> None:
    from umt.engine import IdempotencyConflict

    pipeline = Pipeline(tmp_path / "umt", fresh_client, database_url)
    try:
        seeded, _ = twins[0]
        hex_hash = seeded.info_hash
        base32 = base64.b32encode(bytes.fromhex(hex_hash)).decode()
        spellings = [
            f"magnet:?xt=urn:btih:{hex_hash.upper()}&dn=Film&tr=http%3A%2F%2F127.0.0.1%3A1%2Fa",
            f"magnet:?dn=Another+Name&xt=urn:btih:{base32}",
            f"magnet:?xt=urn:btmh:1220{'ab' * 32}&xt=urn:btih:{base32.lower()}",
            _torrent_file(tmp_path, seeded, "film.torrent"),
        ]
        results = [pipeline.app.start_acquire(parse_source(text)) for text in spellings]
        assert [r.created for r in results] == [True, False, False, False]
        assert {r.run.id for r in results} == {results[0].run.id}
        assert len(pipeline.engine.list_runs()) == 1
        # An option that changes what the run does is still a conflict.
        with pytest.raises(IdempotencyConflict):
            pipeline.app.start_acquire(parse_source(spellings[1]), retention=timedelta(days=30))
        with pytest.raises(IdempotencyConflict):
            pipeline.app.start_acquire(parse_source(spellings[1]), title="Another Title")
    finally:
        pipeline.close()
