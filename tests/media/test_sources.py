from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torf

from tests.support.unprivileged import as_nobody, reachable_folder
from umt.media.sources import (
    MAX_TORRENT_BYTES,
    InvalidSource,
    SourceFile,
    TorrentSource,
    parse_source,
)

HEX = "c12fe1c06bba254a9dc9f519b335aa7c1367a88a"
BASE32 = base64.b32encode(bytes.fromhex(HEX)).decode()


def _torrent(path: Path, trackers: list[str] | None = None) -> torf.Torrent:
    torrent = torf.Torrent(path=path, trackers=trackers, private=False, created_by="umt-tests")
    torrent.generate()
    return torrent


@pytest.fixture
def single(tmp_path: Path) -> tuple[Path, torf.Torrent]:
    payload = tmp_path / "Movie (2024).mkv"
    payload.write_bytes(os.urandom(300_000))
    torrent = _torrent(payload, trackers=["http://127.0.0.1:1/announce"])
    torrent_file = tmp_path / "single.torrent"
    torrent_file.write_bytes(torrent.dump())
    return torrent_file, torrent


@pytest.fixture
def multi(tmp_path: Path) -> tuple[Path, torf.Torrent]:
    folder = tmp_path / "Show S01"
    (folder / "Extras").mkdir(parents=True)
    (folder / "E01.mkv").write_bytes(os.urandom(70_000))
    (folder / "Extras" / "cut.mkv").write_bytes(os.urandom(20_000))
    torrent = _torrent(folder)
    torrent_file = tmp_path / "multi.torrent"
    torrent_file.write_bytes(torrent.dump())
    return torrent_file, torrent


# --- magnets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("magnet", "info_hash", "name"),
    [
        (f"magnet:?xt=urn:btih:{HEX}", HEX, None),
        (f"magnet:?xt=urn:btih:{HEX.upper()}&dn=Some+Movie", HEX, "Some Movie"),
        (f"magnet:?xt=urn:btih:{BASE32}&dn=a%20b%5B1%5D", HEX, "a b[1]"),
        (f"magnet:?xt=urn:btih:{BASE32.lower()}", HEX, None),
        (f"  MAGNET:?dn=x&tr=http%3A%2F%2Ft%2Fa&xt=urn:BTIH:{HEX}  ", HEX, "x"),
        # hybrid magnet: v2 multihash first, the v1 hash is still found
        (f"magnet:?xt=urn:btmh:1220{'ab' * 32}&xt=urn:btih:{HEX}", HEX, None),
    ],
)
def test_magnet(magnet: str, info_hash: str, name: str | None) -> None:
    source = parse_source(magnet)
    assert source.kind == "magnet"
    assert source.info_hash == info_hash
    assert source.name == name
    assert source.magnet == magnet.strip()
    assert source.torrent_bytes is None
    assert source.files == ()
    assert source.total_size is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty source"),
        ("   ", "empty source"),
        ("magnet:?dn=nothing", "no BitTorrent v1 info-hash"),
        (f"magnet:?xt=urn:btmh:1220{'ab' * 32}", "no BitTorrent v1 info-hash"),
        ("magnet:?xt=urn:btih:abc123", "has 6 characters"),
        (f"magnet:?xt=urn:btih:{HEX}0", "has 41 characters"),
        (f"magnet:?xt=urn:btih:{'g' * 40}", "invalid characters"),
        (f"magnet:?xt=urn:btih:{'1' * 32}", "invalid characters"),
        ("ftp://example.org/a.torrent", "not a magnet link, .torrent file or http(s) URL"),
        ("/nonexistent/dir/file.torrent", "no such file"),
    ],
)
def test_invalid_text(text: str, message: str) -> None:
    with pytest.raises(InvalidSource, match=re.escape(message)):
        parse_source(text)


# --- .torrent files ----------------------------------------------------------------------


def test_single_file_torrent(single: tuple[Path, torf.Torrent]) -> None:
    torrent_file, torrent = single
    source = parse_source(str(torrent_file))
    assert source.kind == "torrent"
    assert source.info_hash == torrent.infohash
    assert source.name == "Movie (2024).mkv"
    assert source.magnet is None
    assert source.torrent_bytes == torrent_file.read_bytes()
    assert source.files == (SourceFile("Movie (2024).mkv", 300_000),)
    assert source.total_size == 300_000


def test_multi_file_torrent(multi: tuple[Path, torf.Torrent]) -> None:
    torrent_file, torrent = multi
    source = parse_source(str(torrent_file))
    assert source.info_hash == torrent.infohash
    assert source.name == "Show S01"
    assert sorted(source.files, key=lambda f: f.path) == [
        SourceFile("Show S01/E01.mkv", 70_000),
        SourceFile("Show S01/Extras/cut.mkv", 20_000),
    ]
    assert source.total_size == 90_000


def test_info_hash_is_sha1_of_the_encoded_info_bytes(tmp_path: Path) -> None:
    # keys out of order: re-encoding the decoded dict would give another hash
    info = b"d4:name1:a6:lengthi5e12:piece lengthi16384e6:pieces20:" + b"\x01" * 20 + b"e"
    path = tmp_path / "odd.torrent"
    path.write_bytes(b"d7:comment2:hi4:info" + info + b"e")
    source = parse_source(str(path))
    assert source.info_hash == hashlib.sha1(info).hexdigest()
    assert source.files == (SourceFile("a", 5),)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"this is not bencode", "not a valid torrent file"),
        (b"<html><body>login required</body></html>", "not a valid torrent file"),
        (b"d4:infod4:name1:aee", "not a valid torrent file"),  # bencode, but no pieces
        (b"li1ei2ee", "not a valid torrent file"),
        (b"d4:infod6:lengthi5e4:name1:a12:piece lengthi16384e6:pieces99:", "not a valid torrent"),
        (b"l" * 100_000, "not a valid torrent file"),
    ],
)
def test_bad_torrent_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.torrent"
    path.write_bytes(content)
    with pytest.raises(InvalidSource, match=message) as info:
        parse_source(str(path))
    assert str(path) in str(info.value)


def test_directory_is_not_a_torrent(tmp_path: Path) -> None:
    with pytest.raises(InvalidSource, match="is a directory"):
        parse_source(str(tmp_path))


def test_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "huge.torrent"
    with path.open("wb") as f:
        f.truncate(MAX_TORRENT_BYTES + 1)
    with pytest.raises(InvalidSource, match="too large"):
        parse_source(str(path))


def test_unreadable_file(single: tuple[Path, torf.Torrent]) -> None:
    """The kernel's own refusal, as an unprivileged user (root reads a mode-000 file), of a
    file in a folder that user can reach: refused for its mode, nothing else."""
    torrent_file, _ = single
    with reachable_folder() as folder:
        readable = folder / "readable.torrent"
        unreadable = folder / "unreadable.torrent"
        for path, mode in ((readable, 0o644), (unreadable, 0)):
            path.write_bytes(torrent_file.read_bytes())
            path.chmod(mode)

        def outcome(path: Path) -> str:
            try:
                return parse_source(str(path)).info_hash
            except InvalidSource as exc:
                return str(exc)

        seen = as_nobody(lambda: [outcome(readable), outcome(unreadable)])
    assert seen[0] == parse_source(str(torrent_file)).info_hash
    assert "permission denied" in seen[1]


# --- URLs --------------------------------------------------------------------------------


Route = Callable[[http.server.BaseHTTPRequestHandler], None]


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, Route] = {}

    def do_GET(self) -> None:
        route = self.routes.get(self.path)
        if route is None:
            self.send_error(404, "Not Found")
        else:
            route(self)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _reply(body: bytes) -> Route:
    def send(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return send


def _streaming(size: int) -> Route:
    """A body without Content-Length, so only the read limit can stop it."""

    def send(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.end_headers()
        chunk = b"x" * 65536
        with contextlib.suppress(OSError):
            for _ in range(size // len(chunk) + 1):
                handler.wfile.write(chunk)

    return send


@pytest.fixture
def http_base(single: tuple[Path, torf.Torrent]) -> Iterator[str]:
    torrent_file, _ = single
    _Handler.routes = {
        "/movie.torrent": _reply(torrent_file.read_bytes()),
        "/page.html": _reply(b"<html>nope</html>"),
        "/big.torrent": _reply(b"d" + b"0" * MAX_TORRENT_BYTES),
        "/stream.torrent": _streaming(MAX_TORRENT_BYTES + 200_000),
        "/empty.torrent": _reply(b""),
    }
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_url_downloads_torrent(http_base: str, single: tuple[Path, torf.Torrent]) -> None:
    _, torrent = single
    source = parse_source(f"{http_base}/movie.torrent")
    assert source.kind == "torrent"
    assert source.info_hash == torrent.infohash
    assert source.name == "Movie (2024).mkv"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/missing.torrent", "HTTP 404"),
        ("/page.html", "not a valid torrent file"),
        ("/big.torrent", "too large"),
        ("/stream.torrent", f"more than {MAX_TORRENT_BYTES} bytes"),
        ("/empty.torrent", "empty"),
    ],
)
def test_url_errors(http_base: str, path: str, message: str) -> None:
    with pytest.raises(InvalidSource, match=message) as info:
        parse_source(http_base + path)
    assert http_base in str(info.value)


def test_url_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(InvalidSource, match="could not fetch"):
        parse_source(f"http://127.0.0.1:{port}/a.torrent")


@pytest.mark.parametrize(
    ("fetch", "message"),
    [
        (lambda url: (_ for _ in ()).throw(TimeoutError("timed out")), "could not fetch"),
        (lambda url: (_ for _ in ()).throw(OSError("network down")), "network down"),
        (lambda url: b"x" * (MAX_TORRENT_BYTES + 1), "more than"),
        (lambda url: b"not bencode", "not a valid torrent file"),
    ],
)
def test_injected_fetch_errors(fetch: Callable[[str], bytes], message: str) -> None:
    with pytest.raises(InvalidSource, match=message):
        parse_source("https://example.invalid/x.torrent", fetch_url=fetch)


def test_injected_fetch_success(single: tuple[Path, torf.Torrent]) -> None:
    torrent_file, torrent = single
    seen: list[str] = []

    def fetch(url: str) -> bytes:
        seen.append(url)
        return torrent_file.read_bytes()

    source = parse_source("https://example.invalid/x.torrent", fetch_url=fetch)
    assert seen == ["https://example.invalid/x.torrent"]
    assert source.info_hash == torrent.infohash


# --- JSON round trip ---------------------------------------------------------------------


def test_json_round_trip(
    single: tuple[Path, torf.Torrent], multi: tuple[Path, torf.Torrent]
) -> None:
    sources = [
        parse_source(str(single[0])),
        parse_source(str(multi[0])),
        parse_source(f"magnet:?xt=urn:btih:{HEX}&dn=x"),
        parse_source(f"magnet:?xt=urn:btih:{HEX}"),
    ]
    for source in sources:
        encoded = json.loads(json.dumps(source.to_json()))
        assert TorrentSource.from_json(encoded) == source


def test_source_is_frozen() -> None:
    source = parse_source(f"magnet:?xt=urn:btih:{HEX}")
    with pytest.raises(AttributeError):
        source.name = "changed"  # type: ignore[misc]


# --- every spelling of one torrent, bounds of the parser -----------------------------------


def _bencode(value: object) -> bytes:
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, list):
        return b"l" + b"".join(_bencode(item) for item in value) + b"e"
    assert isinstance(value, dict)
    return b"d" + b"".join(_bencode(k) + _bencode(v) for k, v in sorted(value.items())) + b"e"


def _many_files_torrent(count: int) -> bytes:
    files = [{b"length": 1000 + i, b"path": [b"d%d" % (i % 50), b"f%06d.mkv" % i]}
             for i in range(count)]
    total = sum(f[b"length"] for f in files)
    piece = 1 << 20
    info = {b"name": b"Big", b"piece length": piece, b"files": files,
            b"pieces": b"\1" * 20 * -(-total // piece)}
    return _bencode({b"announce": b"http://127.0.0.1:1/a", b"info": info})


@pytest.mark.timeout(60)
def test_a_torrent_of_100000_files_parses_in_one_linear_pass(tmp_path: Path) -> None:
    """torf took more than ten minutes on this; the bound is a hang guard, not a speed test."""
    data = _many_files_torrent(100_000)
    source = parse_source(_write(tmp_path, data))
    assert len(source.files) == 100_000
    assert source.files[99_999] == SourceFile("Big/d49/f099999.mkv", 100_999)
    assert source.total_size == sum(1000 + i for i in range(100_000))


def test_more_files_than_the_limit_are_refused(tmp_path: Path) -> None:
    from umt.media.sources import MAX_TORRENT_FILES

    with pytest.raises(InvalidSource, match=f"at most {MAX_TORRENT_FILES} per torrent"):
        parse_source(_write(tmp_path, _many_files_torrent(MAX_TORRENT_FILES + 1)))


def _write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "t.torrent"
    path.write_bytes(data)
    return str(path)


def _single_info(**extra: object) -> dict[bytes, object]:
    info: dict[bytes, object] = {b"name": b"a.mkv", b"length": 5, b"piece length": 16384,
                                 b"pieces": b"\1" * 20}
    info.update({key.replace("_", " ").encode(): value for key, value in extra.items()})
    return info


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"l" * 40 + b"e" * 40, "nested deeper than"),
        (b"d4:infod4:name1:a4:name1:bee", "duplicate dictionary key"),
        (_bencode({b"info": {b"name": b"a", b"meta version": 2, b"piece length": 16384,
                             b"file tree": {}}}), "v2-only torrent"),
        (_bencode({b"info": _single_info(pieces=b"\1" * 40)}), "2 piece hashes for 5 bytes"),
        (_bencode({b"info": _single_info(name=b"a\0b")}), "contains a NUL character"),
        (_bencode({b"info": _single_info(name=b"x" * 1025)}), "longer than 1024 bytes"),
        (_bencode({b"info": _single_info(length=-1)}), "no valid length"),
        (b"d4:infoi9999999999999999999999e", "bad integer"),
        (b"d4:info99999999999999:e", "bad bencode"),
    ],
)
def test_hostile_torrents_are_refused(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(InvalidSource, match=message):
        parse_source(_write(tmp_path, data))


def test_hybrid_torrent_keeps_its_v1_hash(tmp_path: Path) -> None:
    info = _single_info(meta_version=2, file_tree={b"a.mkv": {b"": {b"length": 5}}})
    source = parse_source(_write(tmp_path, _bencode({b"info": info})))
    assert source.info_hash == hashlib.sha1(_bencode(info)).hexdigest()


@pytest.mark.parametrize(
    "magnet",
    [
        f"magnet:?xt=urn:btih:{HEX}",
        f"magnet:?xt=urn:btih:{HEX.upper()}",
        f"magnet:?xt=urn:btih:{BASE32}",
        f"magnet:?xt=urn:btih:{BASE32.lower()}&dn=Other+Name",
        f"magnet:?tr=http%3A%2F%2Ft1%2Fa&dn=x&xt=urn:btih:{HEX}&tr=udp%3A%2F%2Ft2",
        f"magnet:?XT=urn:BtIh:{HEX}&DN=x",
        f"magnet:?xt=urn:btmh:1220{'cd' * 32}&xt=urn:btih:{HEX}&xt=urn:btih:{BASE32}",
    ],
)
def test_every_spelling_of_a_magnet_gives_one_info_hash(magnet: str) -> None:
    assert parse_source(magnet).info_hash == HEX


@pytest.mark.parametrize(
    ("magnet", "message"),
    [
        (f"magnet:?xt=urn:btih:{HEX}&xt=urn:btih:{'a' * 40}", "several different v1"),
        (f"magnet:?xt=urn:btih:{HEX}&dn=a%00b", "NUL character"),
        (f"magnet:?xt=urn:btih:{HEX}&dn={'x' * 1025}", "longer than 1024 bytes"),
        (f"magnet:?xt=urn:btih:{HEX}&tr={'x' * 70_000}", "longer than 65536 characters"),
    ],
)
def test_hostile_magnets_are_refused(magnet: str, message: str) -> None:
    with pytest.raises(InvalidSource, match=message):
        parse_source(magnet)


def test_error_messages_do_not_echo_a_whole_hostile_argument() -> None:
    with pytest.raises(InvalidSource) as info:
        parse_source("gopher://" + "y" * 10_000)
    assert len(str(info.value)) < 200
