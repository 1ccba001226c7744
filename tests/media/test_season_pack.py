"""A season pack end to end through real qbittorrent-nox: each episode to its own path, its
subtitle beside it, sample and .nfo left out; modes and group set before the publish, as
another uid sees them."""

from __future__ import annotations

import grp
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.media.pipeline import Pipeline
from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    make_payload,
    sha256_file,
)
from tests.support.skips import skip_unavailable
from tests.support.unprivileged import as_nobody, reachable_folder

pytestmark = [pytest.mark.qbittorrent, pytest.mark.slow]

PACK = "Agent.327.S01.720p.HDTV.x264-GRP"
PLEX_SERIES = ("{title} ({year})/Season {season:02}/{title} ({year}) - s{season:02}e{episode:02}"
               " - {episode_title}.{ext}")
KiB = 1024
#: A group the reader below joins; the other uid is ``nobody``.
GROUP = "users"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("season-pack")


@pytest.fixture(scope="module")
def pack(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded" / PACK
    make_payload(folder, "Agent.327.S01E01.Operation.Barbershop.720p.HDTV.x264-GRP.mkv",
                 300 * KiB, seed=1)
    make_payload(folder, "Agent.327.S01E02.720p.HDTV.x264-GRP.mkv", 300 * KiB, seed=2)
    make_payload(folder / "Sample", "agent.327.s01e01.sample.mkv", 20 * KiB, seed=3)
    (folder / "Subs").mkdir()
    (folder / "Subs" / "Agent.327.S01E01.English.srt").write_text("1\n00:00:01,000 --> 2\nHi\n")
    (folder / f"{PACK}.nfo").write_text("release notes\n")
    return swarm.seed(folder)


@pytest.fixture
def shared_place() -> Iterator[Path]:
    if os.geteuid() != 0:
        skip_unavailable("permissions as seen by another uid", "needs root to become nobody")
    with reachable_folder("umt-season-pack-") as place:
        yield place


def read_as_nobody(path: Path, *, groups: list[int]) -> str:
    """What ``nobody``, member of ``groups``, gets reading ``path``: its sha256 or the error."""

    def read() -> str:
        try:
            return sha256_file(path)
        except PermissionError as exc:
            return f"refused: {exc.strerror}"

    return str(as_nobody(read, groups=groups))


def test_a_season_pack_lands_episode_by_episode_readable_by_the_group(
    tmp_path: Path, fresh_client: QbtInstance, pack: SeededTorrent, shared_place: Path,
) -> None:
    library = shared_place / "library"
    library.mkdir()
    library.chmod(0o755)
    pipeline = Pipeline(
        tmp_path / "umt", fresh_client, f"sqlite:///{tmp_path}/umt.db", import_mode="copy",
        library_dir=library,
        library_extra="\n".join([f'naming_template = "{PLEX_SERIES}"', 'file_mode = "0640"',
                                 'dir_mode = "2750"', f'group = "{GROUP}"']),
    )
    try:
        torrent = tmp_path / "pack.torrent"
        torrent.write_bytes(pack.torrent_bytes)
        pipeline.client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(str(torrent))
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))

        season = library / "Agent 327" / "Season 01"
        expected = [
            season / "Agent 327 - s01e01 - Operation Barbershop.en.srt",
            season / "Agent 327 - s01e01 - Operation Barbershop.mkv",
            season / "Agent 327 - s01e02.mkv",
        ]
        assert pipeline.library_files() == expected
        assert sorted(pipeline.catalog()[0].library_paths) == [str(p) for p in expected]
        assert (expected[0].read_text() ==
                (pack.path / "Subs" / "Agent.327.S01E01.English.srt").read_text())

        gid = grp.getgrnam(GROUP).gr_gid
        for folder in (library / "Agent 327", season):
            info = folder.stat()
            assert (stat.S_IMODE(info.st_mode), info.st_gid) == (0o2750, gid), folder
        for path in expected:
            info = path.stat()
            assert (stat.S_IMODE(info.st_mode), info.st_gid) == (0o640, gid), path
            assert read_as_nobody(path, groups=[gid]) == sha256_file(path)
            assert read_as_nobody(path, groups=[]) == "refused: Permission denied"
    finally:
        pipeline.close()
