"""Where qBittorrent's paths are, seen from here: ``[[qbittorrent.path_map]]``.

qBittorrent in a container reports ``/downloads/...`` where umt sees ``/srv/torrents/...``; a
worker on another host sees the same share under yet another mount. Each mapping pairs
qBittorrent's (``remote``) prefix with umt's (``local``) one; the longest matching prefix wins,
whole path components only (``/downloads`` does not map ``/downloads2``). Paths no mapping
covers pass through unchanged.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class PathMap:
    #: (remote, local) prefixes, normalised, without a trailing slash (except "/").
    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> PathMap:
        return cls(tuple((_normal(remote), _normal(local)) for remote, local in pairs))

    def to_local(self, remote_path: str) -> str:
        """A path qBittorrent reported, as umt sees it."""
        return _translate(remote_path, [(r, loc) for r, loc in self.pairs])

    def to_remote(self, local_path: str) -> str:
        """A path umt sends to qBittorrent, as qBittorrent sees it."""
        return _translate(local_path, [(loc, r) for r, loc in self.pairs])

    def __bool__(self) -> bool:
        return bool(self.pairs)


def _normal(path: str) -> str:
    normal = posixpath.normpath(path)
    return "/" if normal in ("/", "//") else normal


def _translate(path: str, pairs: list[tuple[str, str]]) -> str:
    if not path or not posixpath.isabs(path):
        return path  # relative paths (qBittorrent while checking) are not where anything is
    best: tuple[str, str] | None = None
    for source, target in pairs:
        inside = path == source or path.startswith(source.rstrip("/") + "/")
        if inside and (best is None or len(source) > len(best[0])):
            best = (source, target)
    if best is None:
        return path
    source, target = best
    rest = path[len(source):].lstrip("/")
    return posixpath.join(target, rest) if rest else target
