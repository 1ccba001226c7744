"""What the user hands to ``umt start-acquire``: a magnet link, a .torrent file or its URL.

qBittorrent 4.x does not tell which torrent an add created, so the v1 info-hash is computed
here, before anything is added.
"""

from __future__ import annotations

import base64
import hashlib
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import torf

MAX_TORRENT_BYTES = 10 * 1024 * 1024
FETCH_TIMEOUT_SECONDS = 30.0

SourceKind = Literal["magnet", "torrent"]

_HEX_HASH = re.compile(r"[0-9a-fA-F]{40}")
_BASE32_HASH = re.compile(r"[A-Za-z2-7]{32}")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class InvalidSource(ValueError):
    """The text given as a source is not a usable magnet link, .torrent file or URL."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a torrent; ``path`` is relative and starts with the torrent's name."""

    path: str
    size: int


@dataclass(frozen=True)
class TorrentSource:
    kind: SourceKind
    info_hash: str
    name: str | None
    magnet: str | None = None
    torrent_bytes: bytes | None = None
    files: tuple[SourceFile, ...] = ()
    total_size: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable form (workflow inputs must be JSON)."""
        return {
            "kind": self.kind,
            "info_hash": self.info_hash,
            "name": self.name,
            "magnet": self.magnet,
            "torrent_b64": (
                base64.b64encode(self.torrent_bytes).decode("ascii")
                if self.torrent_bytes is not None
                else None
            ),
            "files": [{"path": f.path, "size": f.size} for f in self.files],
            "total_size": self.total_size,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TorrentSource:
        encoded = data.get("torrent_b64")
        return cls(
            kind=data["kind"],
            info_hash=data["info_hash"],
            name=data.get("name"),
            magnet=data.get("magnet"),
            torrent_bytes=base64.b64decode(encoded) if encoded is not None else None,
            files=tuple(SourceFile(f["path"], int(f["size"])) for f in data.get("files", ())),
            total_size=data.get("total_size"),
        )


def parse_source(text: str, *, fetch_url: Callable[[str], bytes] | None = None) -> TorrentSource:
    """Parse a magnet link, a path to a .torrent file, or an http(s) URL of a .torrent.

    ``fetch_url`` downloads a URL and returns its bytes (injectable for tests); it may raise
    ``InvalidSource`` or ``OSError``. Every bad input raises ``InvalidSource``.
    """
    text = text.strip()
    if not text:
        raise InvalidSource("empty source: give a magnet link, a .torrent file or its URL")
    if text.lower().startswith("magnet:"):
        return parse_magnet(text)
    if text.lower().startswith(("http://", "https://")):
        return parse_torrent_bytes(_fetch(text, fetch_url or fetch_torrent_url), origin=text)
    if _URL_SCHEME.match(text):
        raise InvalidSource(
            f"unsupported source {text!r}: not a magnet link, .torrent file or http(s) URL"
        )
    return parse_torrent_bytes(_read_file(Path(text).expanduser()), origin=text)


def parse_magnet(magnet: str) -> TorrentSource:
    params = parse_qs(urlsplit(magnet).query)
    btih = [
        xt[len("urn:btih:") :] for xt in params.get("xt", []) if xt.lower().startswith("urn:btih:")
    ]
    if not btih:
        raise InvalidSource("magnet link has no BitTorrent v1 info-hash (xt=urn:btih:...)")
    names = params.get("dn")
    return TorrentSource(
        kind="magnet",
        info_hash=normalize_info_hash(btih[0]),
        name=names[0] if names else None,
        magnet=magnet,
    )


def normalize_info_hash(value: str) -> str:
    """A v1 info-hash as 40 lowercase hex digits, from hex or 32-character base32."""
    if _HEX_HASH.fullmatch(value):
        return value.lower()
    if _BASE32_HASH.fullmatch(value):
        return base64.b32decode(value.upper()).hex()
    if len(value) in (32, 40):
        raise InvalidSource(f"invalid characters in info-hash {value!r}")
    raise InvalidSource(
        f"info-hash {value!r} has {len(value)} characters; expected 40 hex or 32 base32"
    )


def parse_torrent_bytes(data: bytes, *, origin: str = "torrent") -> TorrentSource:
    if not data:
        raise InvalidSource(f"{origin}: empty file, not a torrent")
    if len(data) > MAX_TORRENT_BYTES:
        raise InvalidSource(f"{origin}: larger than {MAX_TORRENT_BYTES} bytes, not a torrent")
    try:
        torrent = torf.Torrent.read_stream(data)
        info_start, info_end = info_dict_span(data)
    except (torf.TorfError, ValueError, RecursionError) as exc:
        raise InvalidSource(f"{origin}: not a valid torrent file ({exc})") from None
    files = tuple(SourceFile(str(f), int(f.size)) for f in torrent.files)
    return TorrentSource(
        kind="torrent",
        info_hash=hashlib.sha1(data[info_start:info_end]).hexdigest(),
        name=torrent.name,
        torrent_bytes=bytes(data),
        files=files,
        total_size=sum(f.size for f in files),
    )


def fetch_torrent_url(url: str) -> bytes:
    """Download ``url`` with a timeout, refusing bodies over MAX_TORRENT_BYTES."""
    request = urllib.request.Request(url, headers={"User-Agent": "umt"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > MAX_TORRENT_BYTES:
                raise InvalidSource(f"{url}: {length} bytes is too large for a .torrent file")
            data: bytes = response.read(MAX_TORRENT_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise InvalidSource(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise InvalidSource(f"{url}: could not fetch ({exc.reason})") from None
    except (OSError, ValueError) as exc:
        raise InvalidSource(f"{url}: could not fetch ({exc})") from None
    return data


def _fetch(url: str, fetch_url: Callable[[str], bytes]) -> bytes:
    try:
        data = fetch_url(url)
    except InvalidSource:
        raise
    except (OSError, ValueError) as exc:
        raise InvalidSource(f"{url}: could not fetch ({exc})") from None
    if len(data) > MAX_TORRENT_BYTES:
        raise InvalidSource(f"{url}: more than {MAX_TORRENT_BYTES} bytes, not a .torrent file")
    return data


def _read_file(path: Path) -> bytes:
    try:
        if path.is_dir():
            raise InvalidSource(f"{path}: is a directory, not a .torrent file")
        size = path.stat().st_size
        if size > MAX_TORRENT_BYTES:
            raise InvalidSource(f"{path}: {size} bytes is too large for a .torrent file")
        return path.read_bytes()
    except FileNotFoundError:
        raise InvalidSource(
            f"{path}: no such file (expected a magnet link, .torrent file or http(s) URL)"
        ) from None
    except PermissionError:
        raise InvalidSource(f"{path}: permission denied") from None
    except OSError as exc:
        raise InvalidSource(f"{path}: cannot read ({exc.strerror or exc})") from None


def info_dict_span(data: bytes) -> tuple[int, int]:
    """Byte range of the top-level ``info`` value, exactly as encoded.

    The info-hash is the SHA-1 of those bytes; re-encoding a decoded dict (as torf's
    ``infohash`` does) gives another hash for non-canonical or non-UTF-8 torrents.
    """
    if data[:1] != b"d":
        raise ValueError("top level is not a dictionary")
    pos = 1
    while data[pos : pos + 1] != b"e":
        key_start = pos
        pos = _skip(data, pos)
        key = data[data.index(b":", key_start) + 1 : pos]
        value_start = pos
        pos = _skip(data, pos)
        if key == b"info":
            return value_start, pos
    raise ValueError("no info dictionary")


def _skip(data: bytes, pos: int) -> int:
    """Position just after the bencoded value starting at ``pos``."""
    head = data[pos : pos + 1]
    if head == b"i":
        return data.index(b"e", pos) + 1
    if head in (b"l", b"d"):
        pos += 1
        while data[pos : pos + 1] != b"e":
            if pos >= len(data):
                raise ValueError("truncated bencode")
            pos = _skip(data, pos)
        return pos + 1
    if head.isdigit():
        colon = data.index(b":", pos)
        end = colon + 1 + int(data[pos:colon])
        if end > len(data):
            raise ValueError("truncated bencode")
        return end
    raise ValueError(f"bad bencode at byte {pos}")


__all__ = [
    "MAX_TORRENT_BYTES",
    "InvalidSource",
    "SourceFile",
    "TorrentSource",
    "fetch_torrent_url",
    "normalize_info_hash",
    "parse_magnet",
    "parse_source",
    "parse_torrent_bytes",
]
