"""What the user hands to ``umt start-acquire``: a magnet link, a .torrent file or its URL.

qBittorrent 4.x does not tell which torrent an add created, so the v1 info-hash is computed
here, before anything is added.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from umt.media import bencode

MAX_TORRENT_BYTES = 10 * 1024 * 1024
#: More files than any real release has; parsing this many takes well under a second.
MAX_TORRENT_FILES = 100_000
#: A name or one path component (filesystems allow 255 bytes; leave room for a UTF-8 tail).
MAX_NAME_BYTES = 1024
#: A magnet link carries a hash, a name and trackers: 64 KiB is generous.
MAX_MAGNET_CHARS = 65_536
FETCH_TIMEOUT_SECONDS = 30.0

SourceKind = Literal["magnet", "torrent"]

_HEX_HASH = re.compile(r"[0-9a-fA-F]{40}")
_BASE32_HASH = re.compile(r"[A-Za-z2-7]{32}")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class InvalidSource(ValueError):
    """The text given as a source is not a usable magnet link, .torrent file or URL."""

    exit_code = 2  # bad input, as the command line reports it


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
    if "\0" in text:
        raise InvalidSource("the source contains a NUL character")
    if text.lower().startswith("magnet:"):
        return parse_magnet(text)
    if text.lower().startswith(("http://", "https://")):
        return parse_torrent_bytes(_fetch(text, fetch_url or fetch_torrent_url), origin=text)
    if _URL_SCHEME.match(text):
        raise InvalidSource(
            f"unsupported source {shown(text)}: not a magnet link, .torrent file or http(s) URL"
        )
    return parse_torrent_bytes(_read_file(Path(text).expanduser()), origin=text)


def parse_magnet(magnet: str) -> TorrentSource:
    """A magnet link; every spelling of one torrent gives the same info-hash.

    Parameter names are matched without regard to case, the v1 hash may be hex in either
    case or base32, and a hybrid link may carry a v2 hash (``urn:btmh``) beside it.
    """
    if len(magnet) > MAX_MAGNET_CHARS:
        raise InvalidSource(f"magnet link longer than {MAX_MAGNET_CHARS} characters")
    params: dict[str, list[str]] = {}
    for key, values in parse_qs(urlsplit(magnet).query).items():
        params.setdefault(key.lower(), []).extend(values)
    hashes = {
        normalize_info_hash(xt[len("urn:btih:") :])
        for xt in params.get("xt", [])
        if xt.lower().startswith("urn:btih:")
    }
    if not hashes:
        raise InvalidSource("magnet link has no BitTorrent v1 info-hash (xt=urn:btih:...)")
    if len(hashes) > 1:
        raise InvalidSource("magnet link names several different v1 info-hashes")
    names = params.get("dn")
    name = names[0] if names else None
    if name is not None:
        if "\0" in name:
            raise InvalidSource("magnet link's name (dn) contains a NUL character")
        if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise InvalidSource(f"magnet link's name (dn) is longer than {MAX_NAME_BYTES} bytes")
    return TorrentSource(kind="magnet", info_hash=hashes.pop(), name=name or None, magnet=magnet)


def normalize_info_hash(value: str) -> str:
    """A v1 info-hash as 40 lowercase hex digits, from hex or 32-character base32."""
    if _HEX_HASH.fullmatch(value):
        return value.lower()
    if _BASE32_HASH.fullmatch(value):
        return base64.b32decode(value.upper()).hex()
    if len(value) in (32, 40):
        raise InvalidSource(f"invalid characters in info-hash {shown(value)}")
    raise InvalidSource(
        f"info-hash {shown(value)} has {len(value)} characters; expected 40 hex or 32 base32"
    )


def shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters (it is a stranger's)."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def parse_torrent_bytes(data: bytes, *, origin: str = "torrent") -> TorrentSource:
    if not data:
        raise InvalidSource(f"{origin}: empty file, not a torrent")
    if len(data) > MAX_TORRENT_BYTES:
        raise InvalidSource(f"{origin}: larger than {MAX_TORRENT_BYTES} bytes, not a torrent")
    try:
        decoded = bencode.decode(data)
        name, files = _torrent_contents(decoded)
    except bencode.BencodeError as exc:
        raise InvalidSource(f"{origin}: not a valid torrent file ({exc})") from None
    assert decoded.info_span is not None
    info_start, info_end = decoded.info_span
    return TorrentSource(
        kind="torrent",
        info_hash=hashlib.sha1(data[info_start:info_end]).hexdigest(),
        name=name,
        torrent_bytes=bytes(data),
        files=files,
        total_size=sum(f.size for f in files),
    )


def _torrent_contents(decoded: bencode.Decoded) -> tuple[str, tuple[SourceFile, ...]]:
    """The torrent's name and files, checked the way a BitTorrent v1 client needs them."""
    top = decoded.value
    info = top.get(b"info") if isinstance(top, dict) else None
    if not isinstance(info, dict) or decoded.info_span is None:
        raise bencode.BencodeError("no info dictionary")
    pieces = info.get(b"pieces")
    piece_length = info.get(b"piece length")
    if pieces is None and info.get(b"meta version") == 2:
        raise bencode.BencodeError(
            "a BitTorrent v2-only torrent; umt needs a v1 or hybrid torrent"
        )
    if not isinstance(piece_length, int) or piece_length <= 0:
        raise bencode.BencodeError("no valid 'piece length'")
    if not isinstance(pieces, bytes) or len(pieces) % 20:
        raise bencode.BencodeError("no valid 'pieces'")
    name = _text(info.get(b"name.utf-8") or info.get(b"name"), "name")
    if b"files" in info:
        files = _file_list(info[b"files"], name)
    else:
        files = (SourceFile(name, _size(info.get(b"length"))),)
    total = sum(f.size for f in files)
    if len(pieces) // 20 != -(-total // piece_length):
        raise bencode.BencodeError(
            f"{len(pieces) // 20} piece hashes for {total} bytes in pieces of {piece_length}"
        )
    return name, files


def _file_list(entries: object, name: str) -> tuple[SourceFile, ...]:
    if not isinstance(entries, list) or not entries:
        raise bencode.BencodeError("'files' is not a list of files")
    if len(entries) > MAX_TORRENT_FILES:
        raise bencode.BencodeError(
            f"{len(entries)} files; umt accepts at most {MAX_TORRENT_FILES} per torrent"
        )
    files = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise bencode.BencodeError("a file entry is not a dictionary")
        parts = entry.get(b"path.utf-8") or entry.get(b"path")
        if not isinstance(parts, list) or not parts:
            raise bencode.BencodeError("a file entry has no path")
        path = "/".join([name, *(_text(part, "file path") for part in parts)])
        files.append(SourceFile(path, _size(entry.get(b"length"))))
    return tuple(files)


def _text(value: object, what: str) -> str:
    if not isinstance(value, bytes) or not value:
        raise bencode.BencodeError(f"no valid {what}")
    if len(value) > MAX_NAME_BYTES:
        raise bencode.BencodeError(f"{what} longer than {MAX_NAME_BYTES} bytes")
    text = value.decode("utf-8", "replace")
    if "\0" in text:
        raise bencode.BencodeError(f"{what} contains a NUL character")
    return text


def _size(value: object) -> int:
    if not isinstance(value, int) or value < 0:
        raise bencode.BencodeError("a file has no valid length")
    return value


def fetch_torrent_url(url: str) -> bytes:
    """Download ``url`` with a timeout, refusing bodies over MAX_TORRENT_BYTES."""
    # Imported here: urllib.request brings http.client, ssl and email, which every command
    # reading a request (the finish hook included) paid for one that is a URL.
    import urllib.error
    import urllib.request

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


__all__ = [
    "MAX_MAGNET_CHARS",
    "MAX_NAME_BYTES",
    "MAX_TORRENT_BYTES",
    "MAX_TORRENT_FILES",
    "InvalidSource",
    "SourceFile",
    "TorrentSource",
    "fetch_torrent_url",
    "normalize_info_hash",
    "parse_magnet",
    "parse_source",
    "parse_torrent_bytes",
]
