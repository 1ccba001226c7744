"""Fixtures shared by the media tests that need real qbittorrent-nox processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.media.pipeline import Pipeline
from tests.support.mediaservers import Stand
from tests.support.qbittorrent import QbtInstance, Swarm


@pytest.fixture(scope="module")
def swarm(base: Path) -> Iterator[Swarm]:
    """A seeding qbittorrent-nox with an embedded tracker, in the module's own ``base`` folder."""
    swarm = Swarm.start(base / "swarm")
    yield swarm
    swarm.destroy()


@pytest.fixture
def fresh_client(tmp_path: Path) -> Iterator[QbtInstance]:
    """umt's own qbittorrent-nox, fresh for one test."""
    instance = QbtInstance.create(tmp_path / "client", local_host_auth=True)
    instance.start()
    yield instance
    instance.destroy()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_pipeline(
    request: pytest.FixtureRequest, tmp_path: Path, fresh_client: QbtInstance,
) -> Iterator[Pipeline]:
    """A umt installation on each backend in turn, with ``fresh_client``."""
    url = (f"sqlite:///{tmp_path}/umt.db" if request.param == "sqlite"
           else str(request.getfixturevalue("pg_url")))
    pipeline = Pipeline(tmp_path / "umt", fresh_client, url)
    yield pipeline
    pipeline.close()


@pytest.fixture
def stands() -> Iterator[list[Stand]]:
    """Media-server and Apprise stand-ins a test starts; stopped after it."""
    started: list[Stand] = []
    yield started
    for stand in started:
        stand.stop()
