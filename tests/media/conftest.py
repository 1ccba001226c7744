"""Fixtures shared by the media tests that need real qbittorrent-nox processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.qbittorrent import Swarm


@pytest.fixture(scope="module")
def swarm(base: Path) -> Iterator[Swarm]:
    """A seeding qbittorrent-nox with an embedded tracker, in the module's own ``base`` folder."""
    swarm = Swarm.start(base / "swarm")
    yield swarm
    swarm.destroy()
