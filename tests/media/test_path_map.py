"""qBittorrent that sees its downloads under another path than umt, against real
qbittorrent-nox: it runs in a private mount namespace where the download folder is mounted at
a path that does not exist for umt (as in a container, or on another host). With a
``[[qbittorrent.path_map]]`` the run goes end to end through the finish hook, in hardlink and
copy modes; without one, ``umt doctor`` names the mapping to add."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.media.hosts import Host
from tests.media.pipeline import REPO, Pipeline
from tests.support.qbittorrent import QbtInstance, SeededTorrent, Swarm, make_payload, sha256_file
from umt.app import App
from umt.config import load_settings
from umt.media.sources import parse_source
from umt.records import catalog, ledger

pytestmark = [
    pytest.mark.qbittorrent, pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                       reason="needs root for a private mount namespace"),
]

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pathmap")


@pytest.fixture(scope="module")
def film(swarm: Swarm, base: Path) -> SeededTorrent:
    folder = base / "seeded"
    make_payload(folder, "Mapped.Film.2026.mkv", 4 * MiB, seed=31)
    return swarm.seed(folder / "Mapped.Film.2026.mkv")


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    """The download folder as umt sees it."""
    path = tmp_path / "srv" / "torrents"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def container_root(tmp_path: Path) -> Path:
    """Empty for umt; inside qBittorrent's namespace a tmpfs holding ``downloads``."""
    path = tmp_path / "container"
    path.mkdir()
    return path


@pytest.fixture
def client(tmp_path: Path, storage: Path, container_root: Path) -> Iterator[QbtInstance]:
    remote = container_root / "downloads"
    instance = QbtInstance.create(tmp_path / "client", download_dir=remote)
    instance.namespace_setup = (f"mount -t tmpfs tmpfs '{container_root}'\n"
                                f"mkdir -p '{remote}'\nmount --bind '{storage}' '{remote}'")
    instance.start()
    yield instance
    instance.destroy()


def mapping(client: QbtInstance, storage: Path) -> str:
    return (f'[[qbittorrent.path_map]]\nremote = "{client.download_dir}"\n'
            f'local = "{storage}"\n')


def doctor(pipeline: Pipeline, *, without: str = "") -> dict[str, dict[str, str]]:
    """``umt doctor`` on the pipeline's config, less the text ``without``."""
    config = pipeline.root / "doctor.toml"
    config.write_text(pipeline.config_path.read_text().replace(without, "") if without
                      else pipeline.config_path.read_text())
    command = pipeline.umt_command("doctor", "--json")
    command[command.index("--config") + 1] = str(config)
    done = subprocess.run(command, cwd=REPO, text=True, capture_output=True, timeout=60,
                          check=False)
    return {check["name"]: check for check in json.loads(done.stdout)["checks"]}


@pytest.mark.parametrize("import_mode", ["hardlink", "copy"])
def test_a_download_umt_sees_under_another_path(
    tmp_path: Path, client: QbtInstance, storage: Path, film: SeededTorrent, import_mode: str,
) -> None:
    assert not client.download_dir.exists()  # qBittorrent's path does not exist for umt
    pipeline = Pipeline(tmp_path / "umt", client, f"sqlite:///{tmp_path}/umt.db",
                        import_mode=import_mode, download_dir=storage,
                        extra_config=mapping(client, storage))
    try:
        unmapped = doctor(pipeline, without=mapping(client, storage))["paths"]
        assert unmapped["status"] == "fail"
        assert f'remote = "{client.download_dir}" local = "{storage}"' in unmapped["fix"]
        assert doctor(pipeline)["paths"]["status"] == "ok"

        torrent_file = tmp_path / "film.torrent"
        torrent_file.write_bytes(film.torrent_bytes)
        client.set_finish_hook(pipeline.hook_program())
        run_id = pipeline.start(str(torrent_file), title="Mapped Film (2026)")
        with pipeline.worker():
            run = pipeline.wait(run_id, timeout=180)
        assert run.status == "succeeded", (run.error, pipeline.ledger(run_id))

        [wait] = [s for s in pipeline.engine.steps(run_id) if s.name == "wait-download"]
        assert wait.result["data"]["source"] == "hook"
        [library_file] = pipeline.library_files()
        assert sha256_file(library_file) == sha256_file(film.path)
        [item] = pipeline.catalog()
        assert item.import_method == import_mode
        [copy] = [e for e in pipeline.ledger(run_id) if e.operation.startswith("copy:")
                  and e.phase == "done"]
        assert copy.detail["source"] == str(storage / film.path.name)
        # the save path umt sent was qBittorrent's own; cleanup removed the data umt sees
        assert not (storage / film.path.name).exists()
        assert library_file.exists()
    finally:
        pipeline.close()


def test_two_hosts_one_real_qbittorrent(
    tmp_path: Path, client: QbtInstance, storage: Path, film: SeededTorrent, pg_url: str,
) -> None:
    """Two workers that are two hosts (PostgreSQL), each seeing qBittorrent's downloads under
    its own mount, and one finish hook: the real download is imported once, by one of them."""
    remote = client.download_dir

    def config(download_dir: Path, local: Path) -> str:
        return "\n".join([
            "[database]", f'url = "{pg_url}"',
            "[qbittorrent]", f'url = "{client.url}"', f'username = "{client.username}"',
            f'password = "{client.password}"', f'download_dir = "{download_dir}"',
            "[[qbittorrent.path_map]]", f'remote = "{remote}"', f'local = "{local}"',
            "[library]", f'dir = "{tmp_path / "library"}"', 'import_mode = "copy"',
            "[acquire]", 'retention = "0s"',
            "[engine]", 'lease = "3s"', 'poll_interval = "0.5s"', "",
        ])

    (tmp_path / "library").mkdir()
    starter = tmp_path / "starter.toml"  # this machine: the test, and the hook's config
    starter.write_text(config(storage, storage))
    app = App(load_settings(starter, env={}))
    app.engine(migrate_embedded=True, check_schema=False).migrate()
    hosts = []
    for name in ("host-a", "host-b"):
        (tmp_path / name).mkdir()
        host_config = tmp_path / f"{name}.toml"
        host_config.write_text(config(tmp_path / name, tmp_path / name))
        hosts.append(Host(name, tmp_path, storage, host_config))
    try:
        client.set_finish_hook(" ".join([sys.executable, "-m", "umt.cli.main", "--config",
                                         str(starter), "hook", "download-done", "%I"]))
        torrent_file = tmp_path / "film.torrent"
        torrent_file.write_bytes(film.torrent_bytes)
        run_id = app.start_acquire(parse_source(str(torrent_file))).run.id
        run = app.engine().wait(run_id, timeout=180)
        assert run.status == "succeeded", run.error
        steps = app.engine().steps(run_id)
        assert [s.result["data"]["source"] for s in steps if s.name == "wait-download"] == [
            "hook"]
        [item] = catalog.items(app.engine().database)
        [library_file] = [Path(path) for path in item.library_paths]
        assert sha256_file(library_file) == sha256_file(film.path)
        [copy] = [e for e in ledger.entries_of_run(app.engine().database, run_id)
                  if e.operation.startswith("copy:") and e.phase == "done"]
        assert Path(copy.detail["source"]).parent in (tmp_path / "host-a", tmp_path / "host-b")
    finally:
        for host in hosts:
            host.stop()
        app.close()
