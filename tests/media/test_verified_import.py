"""Imports verified against the torrent's own piece hashes, with real qbittorrent-nox processes:
a good copy, a byte flipped in the download after qBittorrent finished it, a multi-file torrent
whose files straddle 16 KiB pieces, ``umt verify`` of a hardlinked import, and the piece hashes
of a magnet."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torf

from tests.media.pipeline import REPO, Pipeline
from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    flip_byte,
    make_payload,
    sha256_file,
    torrent_file,
    wait_until,
)
from umt.media.importing import check_file_pieces
from umt.media.reconcile import reconcile
from umt.media.sources import parse_source
from umt.media.torrent_pieces import layout_of, pieces_of_file
from umt.records import ledger

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

MiB = 1024 * 1024
PIECE = 16 * 1024
#: Sizes that are not multiples of 16 KiB: each file shares its edge pieces with a neighbour.
SHOW_FILES = {"Show.S01E01.mkv": 300_001, "Show.S01E02.mkv": 5 * PIECE + 7,
              "Show.S01E03.mkv": 123_457}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verified")


@pytest.fixture(scope="module")
def film(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded-film"
    make_payload(folder, "Verified.Film.2026.mkv", 3 * MiB + 1234, seed=21)
    return swarm.seed(folder / "Verified.Film.2026.mkv")


@pytest.fixture(scope="module")
def show(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded-show" / "Show.S01"
    for number, (name, size) in enumerate(SHOW_FILES.items()):
        make_payload(folder, name, size, seed=30 + number)
    return swarm.seed(folder, piece_size=PIECE)


def pipeline_with(tmp_path: Path, client: QbtInstance, **options: object) -> Pipeline:
    return Pipeline(tmp_path / "umt", client, f"sqlite:///{tmp_path}/umt.db", **options)  # type: ignore[arg-type]


@pytest.fixture
def copying(tmp_path: Path, fresh_client: QbtInstance) -> Iterator[Pipeline]:
    pipeline = pipeline_with(tmp_path, fresh_client, import_mode="copy", all_files=True)
    yield pipeline
    pipeline.close()




def copy_entries(pipeline: Pipeline, run_id: str, phase: str) -> list[ledger.LedgerEntry]:
    return [entry for entry in pipeline.ledger(run_id)
            if entry.operation.startswith("copy:") and entry.phase == phase]




def test_a_good_copy_is_verified_piece_by_piece(
    copying: Pipeline, film: SeededTorrent, tmp_path: Path, swarm: Swarm
) -> None:
    copying.client.set_finish_hook(copying.hook_program())
    run_id = copying.start(torrent_file(tmp_path, film), title="Verified Film (2026)")
    with copying.worker():
        run = copying.wait(run_id, timeout=180)
    assert run.status == "succeeded", (run.error, copying.ledger(run_id))
    [library_file] = copying.library_files()
    assert sha256_file(library_file) == sha256_file(film.path)
    [done] = copy_entries(copying, run_id, ledger.DONE)
    assert done.detail["method"] == "copy"
    assert done.detail["pieces"] == len(film_piece_hashes(swarm, film))
    [intent] = copy_entries(copying, run_id, ledger.INTENT)
    assert intent.detail["verify"] == "pieces"


def film_piece_hashes(swarm: Swarm, seeded: SeededTorrent) -> list[str]:
    return list(swarm.seeder.client().torrents_piece_hashes(torrent_hash=seeded.info_hash))


def test_a_byte_flipped_after_qbittorrent_finished_fails_the_run_without_publishing(
    copying: Pipeline, film: SeededTorrent, tmp_path: Path
) -> None:
    copying.client.set_finish_hook(None)  # the run waits until the flip is done
    run_id = copying.start(torrent_file(tmp_path, film))
    qbt = copying.app.qbittorrent()
    with copying.worker():
        torrent = wait_until(lambda: _complete(qbt, film.info_hash), timeout=120,
                             what="the download")
        flip_byte(Path(torrent.content_path), 2 * MiB + 77)
        reconcile(copying.engine, qbt)  # sends the done signal the hook did not
        run = copying.wait(run_id, timeout=120)
    assert run.status == "failed", (run.status, copying.ledger(run_id))
    assert "does not match its torrent" in json.dumps(run.error)
    assert copying.library_files() == []  # neither the file nor a temporary one
    assert copying.catalog() == []
    [failed] = copy_entries(copying, run_id, ledger.FAILED)
    assert "piece" in failed.detail["reason"]
    # It failed for good: one attempt of copy-file, not retried.
    attempts = [a for a in copying.engine.attempts(run_id) if a.step_name == "copy-file"]
    assert len(attempts) == 1


def _complete(qbt: object, info_hash: str) -> object:
    torrent = qbt.find(info_hash)  # type: ignore[attr-defined]
    return torrent if torrent is not None and torrent.is_complete else None


def test_files_straddling_16_kib_pieces_of_a_multi_file_torrent_are_verified(
    copying: Pipeline, show: SeededTorrent, tmp_path: Path
) -> None:
    copying.client.set_finish_hook(copying.hook_program())
    run_id = copying.start(torrent_file(tmp_path, show), title="Show")
    with copying.worker():
        run = copying.wait(run_id, timeout=180)
    assert run.status == "succeeded", (run.error, copying.ledger(run_id))
    done = {Path(e.detail["path"]).name: e.detail for e in copy_entries(copying, run_id, "done")}
    assert set(done) == set(SHOW_FILES)
    for name, size in SHOW_FILES.items():
        assert Path(done[name]["path"]).read_bytes() == (show.path / name).read_bytes()
        # every piece the file touches, the shared edge pieces included
        assert done[name]["pieces"] >= -(-size // PIECE)
    assert sum(detail["pieces"] for detail in done.values()) > -(-sum(SHOW_FILES.values())
                                                                 // PIECE)


def test_umt_verify_rechecks_a_hardlinked_import(
    tmp_path: Path, fresh_client: QbtInstance, film: SeededTorrent
) -> None:
    pipeline = pipeline_with(tmp_path, fresh_client, import_mode="hardlink", retention="1h")
    try:
        pipeline.client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(torrent_file(tmp_path, film))
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180, until=("sleeping",))
        assert run.status == "sleeping", (run.error, pipeline.ledger(run_id))
        [done] = copy_entries(pipeline, run_id, ledger.DONE)
        assert done.detail["method"] == "hardlink" and done.detail["pieces"] is None

        good = umt_verify(pipeline, run_id)
        assert good.returncode == 0, good.stderr
        [checked] = json.loads(good.stdout)["files"]
        assert (checked["status"], checked["by"]) == ("ok", "pieces") and checked["pieces"] > 0

        flip_byte(Path(done.detail["path"]), 1000)
        bad = umt_verify(pipeline, run_id)
        assert bad.returncode == 1, bad.stderr
        [checked] = json.loads(bad.stdout)["files"]
        assert checked["status"] == "mismatch" and "piece 0 " in checked["reason"]
        assert bad.stderr.startswith("umt: error: 1 of 1 files")

        unknown = umt_verify(pipeline, "0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90")
        assert unknown.returncode == 2, unknown.stderr
    finally:
        pipeline.close()


def umt_verify(pipeline: Pipeline, run_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pipeline.umt_command("--json", "verify", run_id), cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_magnets_piece_hashes_come_from_qbittorrent_once_it_has_the_metadata(
    fresh_client: QbtInstance, film: SeededTorrent, swarm: Swarm
) -> None:
    qbt = fresh_client.adapter()
    qbt.add(parse_source(f"magnet:?xt=urn:btih:{film.info_hash}"), category="umt", tags=[])
    qbt.add_peers(film.info_hash, [f"127.0.0.1:{swarm.seeder.bt_port}"])
    torrent = wait_until(lambda: _complete(qbt, film.info_hash), timeout=60, what="the magnet")
    layout = layout_of(qbt, torrent)
    assert layout.hashes == tuple(torf.Torrent.read_stream(film.torrent_bytes).hashes)
    content = Path(torrent.content_path)
    pieces = pieces_of_file(layout, content)
    assert check_file_pieces(content, pieces, check=lambda: None) == len(layout.hashes)
