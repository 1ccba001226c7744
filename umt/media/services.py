"""What the acquire workflow's steps use on a worker: the qBittorrent client, the media
servers to tell about imports and the user's notification services.

Built lazily from the worker's configuration, so starting a run needs no qBittorrent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from umt.media.mediaservers import MediaServer
from umt.media.notifier import NotifyTarget
from umt.media.qbittorrent import QbtClient


@dataclass(frozen=True)
class AcquireServices:
    qbittorrent: QbtClient
    media_servers: tuple[MediaServer, ...] = ()
    notify_targets: tuple[NotifyTarget, ...] = ()


class LazyServices:
    def __init__(self, build: Callable[[], AcquireServices]) -> None:
        self._build = build
        self._services: AcquireServices | None = None
        self._lock = threading.Lock()

    def __call__(self) -> AcquireServices:
        with self._lock:
            if self._services is None:
                self._services = self._build()
            return self._services
