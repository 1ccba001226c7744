"""Several workers, one qBittorrent, one library, on PostgreSQL: two ``umt worker`` processes
that are two hosts (each its own hostname and its own mount of the shared download folder,
with its own path mapping) finish 50 acquisitions exactly once each; one host killed with
SIGKILL in the middle of a copy leaves its runs to the other once their lease expires.

qBittorrent is the fake (spikes/fake_qbittorrent.py); the real download with two hosts and a
real qbittorrent-nox is test_path_map.py::test_two_hosts_one_real_qbittorrent."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spikes.fake_qbittorrent import FakeQbittorrent
from tests.media.hosts import Host
from tests.support.qbittorrent import wait_until
from umt.app import App
from umt.config import load_settings
from umt.media.reconcile import reconcile
from umt.media.sources import parse_source

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                       reason="needs root for hostnames and mounts of its own"),
]

MiB = 1024 * 1024
RUNS = 50
#: A few big ones, so that a copy is in flight when a host is killed.
BIG = {7, 19, 33}


def config_text(pg_url: str, qbt: FakeQbittorrent, library: Path, download_dir: Path,
                mapping: tuple[Path, Path] | None) -> str:
    lines = [
        "[database]", f'url = "{pg_url}"',
        "[qbittorrent]", f'url = "{qbt.url}"', f'username = "{qbt.username}"',
        f'password = "{qbt.password}"', f'download_dir = "{download_dir}"',
    ]
    if mapping is not None:
        lines += ["[[qbittorrent.path_map]]", f'remote = "{mapping[0]}"',
                  f'local = "{mapping[1]}"']
    lines += [
        "[library]", f'dir = "{library}"', 'import_mode = "copy"',
        "[acquire]", 'retention = "0s"',
        "[engine]", 'lease = "3s"', 'poll_interval = "0.5s"', "",
    ]
    return "\n".join(lines)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeQbittorrent]:
    qbt = FakeQbittorrent(tmp_path / "nas").start()
    yield qbt
    qbt.stop()


def copies_in_flight(pg_url: str, hostname: str) -> list[str]:
    """Copies a worker of ``hostname`` began and has not finished."""
    with psycopg.connect(pg_url) as connection:
        rows = connection.execute(
            "SELECT l.operation FROM umt_media.ledger l JOIN umt.workers w"
            " ON w.id = l.worker_id"
            " WHERE w.hostname = %s AND l.operation LIKE 'copy:%%' AND l.phase = 'intent'"
            " AND NOT EXISTS (SELECT 1 FROM umt_media.ledger d WHERE d.run_id = l.run_id"
            "   AND d.operation = l.operation AND d.phase IN ('verified', 'done'))",
            (hostname,)).fetchall()
    return [str(row[0]) for row in rows]


def test_two_hosts_one_qbittorrent_fifty_runs_and_a_host_killed_mid_copy(
    tmp_path: Path, pg_url: str, fake: FakeQbittorrent,
) -> None:
    shared = fake.download_dir  # the NAS share, as qBittorrent (and the test) see it
    library = tmp_path / "library"
    library.mkdir()
    configs = {}
    for name in ("host-a", "host-b"):
        (tmp_path / name).mkdir()  # empty here: the share is mounted there for that host only
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text(config_text(pg_url, fake, library, tmp_path / name,
                                             (shared, tmp_path / name)))
    starter = tmp_path / "starter.toml"
    starter.write_text(config_text(pg_url, fake, library, shared, None))
    app = App(load_settings(starter, env={}))
    app.engine(migrate_embedded=True, check_schema=False).migrate()

    run_ids = []
    for number in range(RUNS):
        info_hash = hashlib.sha1(f"film {number}".encode()).hexdigest()
        size = 48 * MiB if number in BIG else 256 * 1024
        fake.prepare(info_hash, f"Film {number:03}", size)
        source = parse_source(f"magnet:?xt=urn:btih:{info_hash}&dn=Film+{number:03}")
        run_ids.append(app.start_acquire(source).run.id)
    # the same magnets again: no second run
    again = parse_source(f"magnet:?xt=urn:btih:{hashlib.sha1(b'film 0').hexdigest()}")
    assert app.start_acquire(again).run.id == run_ids[0]

    # host-a's disk is slow, so that the copy it is killed in cannot finish before the kill
    # lands (at 1 MB/s even a small film's copy takes a quarter of a second)
    hosts = {name: Host(name, tmp_path, shared, configs[name],
                        faults="slow-copy=1" if name == "host-a" else None)
             for name in configs}
    stop_reconciling = threading.Event()

    def reconcile_like_cron() -> None:  # the finish hook of the fake never fires
        while not stop_reconciling.wait(0.5):
            reconcile(app.engine(), app.qbittorrent())

    cron = threading.Thread(target=reconcile_like_cron, daemon=True)
    cron.start()
    try:
        killed = wait_until(lambda: copies_in_flight(pg_url, "host-a") or None, timeout=120,
                            interval=0.02, what="host-a to copy")
        hosts["host-a"].kill()
        engine = app.engine()

        def all_final() -> bool:
            return all(engine.get(run_id).finished for run_id in run_ids)

        wait_until(all_final, timeout=300, interval=1.0, what="every run to finish")
    finally:
        stop_reconciling.set()
        cron.join(30)
        for host in hosts.values():
            host.stop()

    runs = [engine.get(run_id) for run_id in run_ids]
    assert [r.status for r in runs] == ["succeeded"] * RUNS, [
        (r.id, r.error) for r in runs if r.status != "succeeded"]
    from umt.records import catalog

    items = catalog.items(engine.database, limit=1000)
    assert sorted(item.run_id for item in items) == sorted(run_ids)  # exactly once each
    files = sorted(path for path in library.rglob("*") if path.is_file())
    assert len(files) == RUNS  # no second copy, no temporary file left
    for number in range(RUNS):
        info_hash = hashlib.sha1(f"film {number}".encode()).hexdigest()
        [path] = [f for f in files if f.parent.name == f"Film {number:03}"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.content_sha256(info_hash)
    # the copy host-a was killed in was finished by host-b
    with psycopg.connect(pg_url) as connection:
        finishers = connection.execute(
            "SELECT DISTINCT w.hostname FROM umt_media.ledger l JOIN umt.workers w"
            " ON w.id = l.worker_id WHERE l.operation = %s AND l.phase = 'done'",
            (killed[0],)).fetchall()
    assert finishers == [("host-b",)]
    assert len(fake.live_torrents()) == 0  # every torrent removed after its retention
    app.close()
