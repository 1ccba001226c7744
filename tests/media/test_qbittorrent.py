"""umt's qBittorrent adapter against real qbittorrent-nox processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.qbittorrent import (
    QbtInstance,
    SeededTorrent,
    Swarm,
    free_port,
    make_payload,
    make_torrent,
    sha256_file,
    wait_until,
)
from umt.media.qbittorrent import (
    QbtAuthFailed,
    QbtClient,
    QbtNotFound,
    QbtUnavailable,
    TorrentInfo,
)
from umt.media.sources import TorrentSource, parse_source

pytestmark = pytest.mark.qbittorrent

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("qbt")


@pytest.fixture(scope="module")
def leecher(base: Path) -> Iterator[QbtInstance]:
    instance = QbtInstance.create(base / "leecher", local_host_auth=True)
    instance.start()
    yield instance
    instance.destroy()


@pytest.fixture(scope="module")
def qbt(leecher: QbtInstance) -> QbtClient:
    return leecher.adapter()


@pytest.fixture
def small(tmp_path: Path) -> tuple[TorrentSource, Path]:
    """A 1 MiB single-file torrent (no tracker, no seeder) and its data."""
    name = f"small-{tmp_path.name}.bin"
    make_payload(tmp_path / "data", name, MiB, seed=1)
    torrent_file = tmp_path / "small.torrent"
    torrent_file.write_bytes(make_torrent(tmp_path / "data" / name))
    return parse_source(str(torrent_file)), tmp_path / "data" / name


def _count(leecher: QbtInstance, info_hash: str) -> int:
    return len(leecher.client().torrents_info(torrent_hashes=info_hash))


# --- connection and authentication -------------------------------------------------------


def test_instance_starts_and_answers(qbt: QbtClient) -> None:
    assert qbt.version().startswith("v")
    assert qbt.api_version().startswith("2.")


def test_wrong_password_is_auth_failed(leecher: QbtInstance) -> None:
    wrong = "not-the-password-" + leecher.password
    client = QbtClient(leecher.url, leecher.username, wrong)
    with pytest.raises(QbtAuthFailed) as info:
        client.version()
    message = str(info.value)
    assert leecher.username in message and leecher.url in message
    assert wrong not in message and wrong not in repr(client)
    with pytest.raises(QbtAuthFailed):
        client.login()
    leecher.adapter().login()  # the right password still gets in (no ban after 2 failures)


def test_local_host_auth_off_accepts_any_password(tmp_path: Path) -> None:
    """Why wrong-password tests need LocalHostAuth=true (QBITTORRENT.md)."""
    instance = QbtInstance.create(tmp_path / "open", local_host_auth=False)
    instance.start()
    try:
        assert QbtClient(instance.url, "umt", "anything at all").version().startswith("v")
    finally:
        instance.destroy()


def test_stopped_instance_is_unavailable_then_recovers(tmp_path: Path) -> None:
    instance = QbtInstance.create(tmp_path / "spare")
    instance.start()
    try:
        slept: list[float] = []
        client = instance.adapter(sleep=slept.append)
        assert client.version()
        instance.stop()
        with pytest.raises(QbtUnavailable, match="unreachable") as info:
            client.find("0" * 40)
        assert slept == [0.5, 1.0, 2.0], "four attempts, then it gives up (no endless retry)"
        assert instance.password not in str(info.value)
        instance.start()
        assert client.version()  # the old session is gone: the adapter logs in again
        instance.restart()
        assert client.version()
    finally:
        instance.destroy()


# --- adding, finding, adopting -----------------------------------------------------------


def test_add_torrent_found_by_hash_and_by_tag(
    qbt: QbtClient, leecher: QbtInstance, small: tuple[TorrentSource, Path]
) -> None:
    source, _ = small
    outcome = qbt.add(source, category="umt-add", tags=["run-add"], save_path=None)
    try:
        assert outcome.status == "added" and not outcome.adopted
        found = qbt.find(source.info_hash)
        assert found is not None
        assert found.info_hash == source.info_hash
        assert found.category == "umt-add"
        assert found.tags == ("run-add",)
        assert found.name == source.name
        assert qbt.find_by_tag("run-add") == [qbt.find(source.info_hash)]
        assert "umt-add" in leecher.client().torrents_categories()
        assert [(f.path, f.size) for f in qbt.files(source.info_hash)] == [
            (f.path, f.size) for f in source.files
        ]
    finally:
        qbt.delete(source.info_hash, delete_files=True)


def test_adding_the_same_hash_twice_adopts(
    qbt: QbtClient, leecher: QbtInstance, small: tuple[TorrentSource, Path]
) -> None:
    source, _ = small
    first = qbt.add(source, category="umt", tags=["run-1"])
    try:
        second = qbt.add(source, category="other", tags=["run-2"])
        assert (first.status, second.status) == ("added", "adopted")
        assert second.adopted
        assert _count(leecher, source.info_hash) == 1
        assert set(second.torrent.tags) == {"run-1", "run-2"}
        assert second.torrent.category == "umt"  # an adopted torrent keeps its category
        assert [t.info_hash for t in qbt.find_by_tag("run-2")] == [source.info_hash]
    finally:
        qbt.delete(source.info_hash, delete_files=True)


def test_unknown_hash(qbt: QbtClient) -> None:
    assert qbt.find("f" * 40) is None
    assert qbt.find_by_tag("no-such-tag") == []
    assert qbt.delete("f" * 40, delete_files=True) is False
    with pytest.raises(QbtNotFound):
        qbt.files("f" * 40)
    with pytest.raises(QbtNotFound):
        qbt.add_peers("f" * 40, ["127.0.0.1:1"])


def test_delete_removes_data_and_a_second_delete_is_false(
    qbt: QbtClient, small: tuple[TorrentSource, Path]
) -> None:
    source, data = small
    # saved where the data already is: qBittorrent checks it and seeds
    qbt.add(source, category="umt", tags=["run-del"], save_path=str(data.parent))
    wait_until(lambda: _complete(qbt, source.info_hash), timeout=20, what="the check")
    assert qbt.delete(source.info_hash, delete_files=True) is True
    wait_until(lambda: not data.exists(), timeout=5, what="the data to be removed")
    assert qbt.find(source.info_hash) is None
    assert qbt.delete(source.info_hash, delete_files=True) is False


def _complete(qbt: QbtClient, info_hash: str) -> TorrentInfo | None:
    torrent = qbt.find(info_hash)
    return torrent if torrent is not None and torrent.is_complete else None


# --- a real download ---------------------------------------------------------------------


@dataclass
class Download:
    seeded: SeededTorrent
    payload_sha256: str
    torrent: TorrentInfo
    snapshots: list[TorrentInfo]
    hook_dir: Path
    #: The content file's hash taken the moment ``is_complete`` first said yes.
    sha256_when_complete: str


@pytest.fixture(scope="module")
def download(base: Path, swarm: Swarm, leecher: QbtInstance, qbt: QbtClient) -> Download:
    """A 50 MiB file goes from the seeder to the leecher through the embedded tracker."""
    sha = make_payload(base / "payload", "Big Movie (2024).mkv", 50 * MiB, seed=2024)
    seeded = swarm.seed(base / "payload" / "Big Movie (2024).mkv")
    torrent_file = base / "big.torrent"
    torrent_file.write_bytes(seeded.torrent_bytes)
    hook_dir = base / "hook"
    hook_dir.mkdir()
    qbt.set_finish_hook(f"/usr/bin/touch {hook_dir}/done-%I")

    source = parse_source(str(torrent_file))
    assert qbt.add(source, category="umt", tags=["run-big"]).status == "added"
    snapshots: list[TorrentInfo] = []

    def poll() -> TorrentInfo | None:
        torrent = qbt.find(source.info_hash)
        assert torrent is not None
        snapshots.append(torrent)
        return torrent if torrent.is_complete else None

    torrent = wait_until(poll, timeout=60, interval=0.05, what="the download")
    sha_when_complete = sha256_file(Path(torrent.content_path))
    return Download(seeded, sha, torrent, snapshots, hook_dir, sha_when_complete)


def test_real_download_matches_the_payload(download: Download) -> None:
    torrent = download.torrent
    assert torrent.info_hash == download.seeded.info_hash
    assert Path(torrent.content_path).name == "Big Movie (2024).mkv"
    assert sha256_file(Path(torrent.content_path)) == download.payload_sha256


def test_is_complete_only_once_the_data_is_all_there(download: Download) -> None:
    """Checked against the bytes on disk, not against the property's own expression: while
    qBittorrent was still fetching pieces it said no, and when it first said yes the file already
    held the whole payload."""
    *before, final = download.snapshots
    assert final.is_complete
    assert not any(s.is_complete for s in before), [(s.state, s.progress) for s in before]
    assert any(s.progress < 1 for s in before), "the download was never observed in progress"
    assert download.sha256_when_complete == download.payload_sha256


def test_finish_hook_runs_with_the_v1_hash(download: Download) -> None:
    marker = download.hook_dir / f"done-{download.seeded.info_hash}"
    wait_until(marker.exists, timeout=10, what="the finish hook to run")
    assert [p.name for p in download.hook_dir.iterdir()] == [marker.name]


def test_magnet_download_with_added_peers(
    base: Path, swarm: Swarm, qbt: QbtClient, leecher: QbtInstance
) -> None:
    make_payload(base / "magnet", "clip.mkv", 4 * MiB, seed=7)
    seeded = swarm.seed(base / "magnet" / "clip.mkv")
    source = parse_source(f"magnet:?xt=urn:btih:{seeded.info_hash.upper()}&dn=clip.mkv")
    qbt.add(source, category="umt", tags=["run-magnet"])
    try:
        found = qbt.find(source.info_hash)
        assert found is not None and found.name == "clip.mkv"
        qbt.add_peers(source.info_hash, [f"127.0.0.1:{swarm.seeder.bt_port}"])
        torrent = wait_until(
            lambda: _complete(qbt, source.info_hash), timeout=30, what="the magnet download"
        )
        assert sha256_file(Path(torrent.content_path)) == sha256_file(seeded.path)
        assert [(f.path, f.size) for f in qbt.files(source.info_hash)] == [("clip.mkv", 4 * MiB)]
    finally:
        qbt.delete(source.info_hash, delete_files=True)


# --- finish hook -------------------------------------------------------------------------


def test_set_and_read_finish_hook(qbt: QbtClient) -> None:
    before = qbt.finish_hook()
    try:
        qbt.set_finish_hook("/usr/bin/umt signal download-done:%I")
        assert qbt.finish_hook() == "/usr/bin/umt signal download-done:%I"
        assert qbt.preferences()["autorun_enabled"] is True
        qbt.set_finish_hook(None)
        assert qbt.finish_hook() is None
    finally:
        qbt.set_finish_hook(before)


# --- without qBittorrent -----------------------------------------------------------------


def _info(state: str, progress: float) -> TorrentInfo:
    return TorrentInfo.from_api(
        {"hash": "A" * 40, "name": "x", "state": state, "progress": progress, "tags": "a, b"}
    )


@pytest.mark.parametrize(
    ("state", "progress", "complete"),
    [
        ("uploading", 1.0, True),
        ("stalledUP", 1.0, True),
        ("pausedUP", 1.0, True),
        ("stoppedUP", 1.0, True),
        ("queuedUP", 1.0, True),
        ("forcedUP", 1.0, True),
        ("moving", 1.0, False),
        ("checkingUP", 1.0, False),
        ("checkingResumeData", 1.0, False),
        ("metaDL", 0.0, False),
        ("downloading", 0.99, False),
        ("stalledUP", 0.5, False),  # files deselected or recheck in progress: not done
        ("missingFiles", 1.0, False),
    ],
)
def test_is_complete(state: str, progress: float, complete: bool) -> None:
    assert _info(state, progress).is_complete is complete


def test_torrent_info_from_api() -> None:
    info = _info("missingFiles", 1.0)
    assert info.info_hash == "a" * 40 and info.tags == ("a", "b")
    assert info.is_errored and not _info("checkingDL", 0.1).is_errored
    assert _info("checkingDL", 0.1).is_checking
    hybrid = TorrentInfo.from_api({"hash": "B" * 40, "infohash_v1": "c" * 40, "tags": ""})
    assert (hybrid.info_hash, hybrid.torrent_id, hybrid.tags) == ("c" * 40, "b" * 40, ())


def test_repr_hides_the_password() -> None:
    client = QbtClient("http://user:pw-in-url@127.0.0.1:1", "umt", "s3cret-value")
    assert "s3cret-value" not in repr(client) and "pw-in-url" not in repr(client)
    assert client.url == "http://***@127.0.0.1:1"


def test_unreachable_port_is_unavailable_quickly() -> None:
    sleeps: list[float] = []
    url = f"http://127.0.0.1:{free_port()}"
    client = QbtClient(url, "umt", "pw", attempts=3, sleep=sleeps.append)
    with pytest.raises(QbtUnavailable):
        client.version()
    assert sleeps == [0.5, 1.0]
