"""A small fake of qBittorrent's Web API for the spikes, where qBittorrent is not the point.

It implements exactly the endpoints umt's adapter (``umt/media/qbittorrent.py``, through
qbittorrent-api) calls, in qBittorrent 4.5's dialect (``Ok.`` / ``Fails.`` answers, Web API
2.8.19): ``auth/login``, ``app/version``, ``app/webapiVersion``, ``app/preferences``,
``app/setPreferences``, ``torrents/info``, ``torrents/add``, ``torrents/addTags``,
``torrents/categories``, ``torrents/createCategory``, ``torrents/delete``, ``torrents/files``,
``torrents/addPeers``. Anything else answers 404 and is listed in ``unknown``.

A torrent added here "downloads" at once (its files are written under the save path and its
state becomes ``uploading``), or when ``complete()`` is called. Faults are injected per
endpoint: ``fail_next`` answers HTTP errors, ``drop_after`` performs the request and then closes
the connection without an answer ("qBittorrent accepted the torrent, then the connection
dropped"). Every request is recorded in ``calls``.

Listens on 127.0.0.1 only. In-process: ``FakeQbittorrent(root).start()``; standalone:
``python -m spikes.fake_qbittorrent --dir DIR [--port N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import email.policy
import hashlib
import json
import random
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import torf

from spikes.loopback import LoopbackServer

APP_VERSION = "v4.5.2"
WEB_API_VERSION = "2.8.19"
PREFIX = "/api/v2/"


@dataclass
class TorrentSpec:
    """What a torrent holds: (relative path, size) per file. One file: no folder."""

    name: str
    files: list[tuple[str, int]]
    complete_at_once: bool = True


@dataclass
class FakeTorrent:
    info_hash: str
    spec: TorrentSpec
    save_path: str
    category: str
    tags: list[str]
    added_on: float
    complete: bool = False
    deleted: bool = False

    @property
    def content_path(self) -> str:
        if len(self.spec.files) == 1:
            return str(Path(self.save_path) / self.spec.files[0][0])
        return str(Path(self.save_path) / self.spec.name)

    @property
    def size(self) -> int:
        return sum(size for _, size in self.spec.files)

    def info(self) -> dict[str, Any]:
        return {
            "hash": self.info_hash, "infohash_v1": self.info_hash, "infohash_v2": "",
            "name": self.spec.name, "state": "uploading" if self.complete else "downloading",
            "progress": 1.0 if self.complete else 0.5, "size": self.size,
            "total_size": self.size, "save_path": self.save_path,
            "content_path": self.content_path, "category": self.category,
            "tags": ", ".join(self.tags), "added_on": int(self.added_on),
            "amount_left": 0 if self.complete else self.size // 2,
        }


@dataclass
class Call:
    at: float
    endpoint: str
    params: dict[str, str]
    status: int | str

    def line(self) -> str:
        shown = {k: (v if len(v) < 60 else v[:57] + "...") for k, v in self.params.items()
                 if k in ("hashes", "hash", "urls", "category", "tags", "tag", "deleteFiles")}
        return f"{self.endpoint} {json.dumps(shown, sort_keys=True)} -> {self.status}"


@dataclass
class _Fault:
    kind: str  # "status" | "drop"
    times: int
    status: int = 500


@dataclass
class FakeQbittorrent(LoopbackServer):
    root: Path
    username: str = "umt"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    port: int = 0

    def __post_init__(self) -> None:
        self.download_dir = self.root / "downloads"
        self.download_dir.mkdir(parents=True, exist_ok=True)
        self.torrents: dict[str, FakeTorrent] = {}
        self.specs: dict[str, TorrentSpec] = {}
        self.categories: dict[str, dict[str, str]] = {}
        self.preferences: dict[str, Any] = {"autorun_enabled": False, "autorun_program": "",
                                            "save_path": str(self.download_dir)}
        self.calls: list[Call] = []
        self.unknown: list[str] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._sessions: set[str] = set()
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeQbittorrent:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._serve(Handler, "fake-qbittorrent")
        return self

    # ------------------------------------------------------------------ control (the spikes)

    def prepare(self, info_hash: str, name: str, size: int, *, complete_at_once: bool = True,
                files: list[tuple[str, int]] | None = None) -> None:
        """What the torrent with this hash will hold once added (default: one file)."""
        with self._lock:
            self.specs[info_hash.lower()] = TorrentSpec(
                name, files or [(f"{name}.mkv", size)], complete_at_once
            )

    def complete(self, info_hash: str) -> None:
        with self._lock:
            torrent = self.torrents[info_hash.lower()]
            self._write_files(torrent)
            torrent.complete = True

    def fail_next(self, endpoint: str, times: int = 1, status: int = 500) -> None:
        with self._lock:
            self._faults.setdefault(endpoint, []).append(_Fault("status", times, status))

    def drop_after(self, endpoint: str, times: int = 1) -> None:
        """Perform the next ``times`` requests to ``endpoint``, then drop the connection."""
        with self._lock:
            self._faults.setdefault(endpoint, []).append(_Fault("drop", times))

    def calls_to(self, endpoint: str) -> list[Call]:
        with self._lock:
            return [call for call in self.calls if call.endpoint == endpoint]

    def live_torrents(self) -> list[FakeTorrent]:
        with self._lock:
            return [t for t in self.torrents.values() if not t.deleted]

    # ------------------------------------------------------------------ behaviour

    def _take_fault(self, endpoint: str) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(endpoint) or []
            if not queue:
                return None
            fault = queue[0]
            fault.times -= 1
            if fault.times <= 0:
                queue.pop(0)
            return fault

    def content_sha256(self, info_hash: str, index: int = 0) -> str:
        """The SHA-256 of a file this fake writes (its bytes depend only on hash and index)."""
        spec = self.specs[info_hash.lower()]
        digest = hashlib.sha256()
        for chunk in _content(info_hash.lower(), index, spec.files[index][1]):
            digest.update(chunk)
        return digest.hexdigest()

    def _write_files(self, torrent: FakeTorrent) -> None:
        base = Path(torrent.save_path)
        prefix = [] if len(torrent.spec.files) == 1 else [torrent.spec.name]
        for index, (relative, size) in enumerate(torrent.spec.files):
            path = base.joinpath(*prefix, relative)
            if path.exists() and path.stat().st_size == size:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as out:
                for chunk in _content(torrent.info_hash, index, size):
                    out.write(chunk)

    def _add(self, fields: dict[str, str], files: list[bytes]) -> str:
        sources: list[tuple[str, TorrentSpec]] = []
        for url in filter(None, (fields.get("urls") or "").split("\n")):
            sources.append(self._from_magnet(url.strip()))
        for data in files:
            sources.append(_from_torrent(data))
        if not sources:
            return "Fails."
        added = 0
        with self._lock:
            for info_hash, spec in sources:
                existing = self.torrents.get(info_hash)
                if existing is not None and not existing.deleted:
                    continue  # qBittorrent 4.x: a torrent already present is not added again
                save_path = fields.get("savepath") or str(self.download_dir)
                tags = [t.strip() for t in (fields.get("tags") or "").split(",") if t.strip()]
                torrent = FakeTorrent(info_hash, spec, save_path, fields.get("category") or "",
                                      tags, time.time())
                self.torrents[info_hash] = torrent
                added += 1
                if spec.complete_at_once:
                    self._write_files(torrent)
                    torrent.complete = True
        return "Ok." if added else "Fails."

    def _from_magnet(self, url: str) -> tuple[str, TorrentSpec]:
        query = parse_qs(urlsplit(url).query)
        xt = next((v for v in query.get("xt", []) if v.startswith("urn:btih:")), "")
        info_hash = xt[len("urn:btih:"):].lower()
        name = (query.get("dn") or [info_hash])[0]
        with self._lock:
            spec = self.specs.get(info_hash) or TorrentSpec(name, [(f"{name}.mkv", 1 << 20)])
        return info_hash, spec

    def _delete(self, hashes: list[str], delete_files: bool) -> None:
        with self._lock:
            for info_hash in hashes:
                torrent = self.torrents.get(info_hash)
                if torrent is None or torrent.deleted:
                    continue
                torrent.deleted = True
                if delete_files:
                    content = Path(torrent.content_path)
                    if content.is_dir():
                        shutil.rmtree(content, ignore_errors=True)
                    else:
                        content.unlink(missing_ok=True)

    def handle(self, endpoint: str, fields: dict[str, str], files: list[bytes],
               cookie: str | None) -> tuple[int, Any, dict[str, str]]:
        """(status, body, extra headers) for one request."""
        if endpoint == "auth/login":
            if fields.get("username") == self.username and fields.get("password") == self.password:
                sid = secrets.token_hex(16)
                with self._lock:
                    self._sessions.add(sid)
                return 200, "Ok.", {"Set-Cookie": f"SID={sid}; HttpOnly; path=/"}
            return 200, "Fails.", {}
        if cookie not in self._sessions:
            return 403, "Forbidden", {}
        hashes = [h.lower() for h in (fields.get("hashes") or fields.get("hash") or "").split("|")
                  if h]
        with self._lock:
            if endpoint == "app/version":
                return 200, APP_VERSION, {}
            if endpoint == "app/webapiVersion":
                return 200, WEB_API_VERSION, {}
            if endpoint == "app/preferences":
                return 200, dict(self.preferences), {}
            if endpoint == "app/setPreferences":
                self.preferences.update(json.loads(fields.get("json") or "{}"))
                return 200, "", {}
            if endpoint == "torrents/info":
                found = [t for t in self.torrents.values() if not t.deleted]
                if hashes:
                    found = [t for t in found if t.info_hash in hashes]
                if fields.get("tag"):
                    found = [t for t in found if fields["tag"] in t.tags]
                if "category" in fields:
                    found = [t for t in found if t.category == fields["category"]]
                return 200, [t.info() for t in found], {}
            if endpoint == "torrents/add":
                return 200, self._add(fields, files), {}
            if endpoint == "torrents/addTags":
                new = [t.strip() for t in (fields.get("tags") or "").split(",") if t.strip()]
                for info_hash in hashes:
                    torrent = self.torrents.get(info_hash)
                    if torrent is not None:
                        torrent.tags.extend(t for t in new if t not in torrent.tags)
                return 200, "", {}
            if endpoint == "torrents/categories":
                return 200, dict(self.categories), {}
            if endpoint == "torrents/createCategory":
                name = fields.get("category") or ""
                if not name or name in self.categories:
                    return 409, "Conflict", {}
                self.categories[name] = {"name": name, "savePath": fields.get("savePath", "")}
                return 200, "", {}
            if endpoint == "torrents/delete":
                self._delete(hashes, (fields.get("deleteFiles") or "").lower() == "true")
                return 200, "", {}
            if endpoint == "torrents/files":
                torrent = self.torrents.get(hashes[0]) if hashes else None
                if torrent is None or torrent.deleted:
                    return 404, "Not Found", {}
                prefix = "" if len(torrent.spec.files) == 1 else f"{torrent.spec.name}/"
                return 200, [
                    {"index": i, "name": prefix + path, "size": size,
                     "progress": 1.0 if torrent.complete else 0.5, "priority": 1}
                    for i, (path, size) in enumerate(torrent.spec.files)
                ], {}
            if endpoint == "torrents/addPeers":
                return 200, "", {}
        self.unknown.append(endpoint)
        return 404, "Not Found", {}


def _content(info_hash: str, index: int, size: int) -> Iterator[bytes]:
    rng = random.Random(f"{info_hash}:{index}")
    remaining = size
    while remaining > 0:
        chunk = min(remaining, 4 * 1024 * 1024)
        yield rng.randbytes(chunk)
        remaining -= chunk


def _from_torrent(data: bytes) -> tuple[str, TorrentSpec]:
    torrent = torf.Torrent.read_stream(data)
    name = str(torrent.name)
    files = [("/".join(f.parts[1:]) if len(f.parts) > 1 else str(f), int(f.size))
             for f in torrent.files]
    if len(files) == 1:
        files = [(name, files[0][1])]
    return str(torrent.infohash).lower(), TorrentSpec(name, files)


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeQbittorrent
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._serve(self.rfile.read(length) if length else b"")

    def _serve(self, body: bytes) -> None:
        fake = self.server_fake
        parts = urlsplit(self.path)
        endpoint = parts.path[len(PREFIX):] if parts.path.startswith(PREFIX) else parts.path
        fields = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        files: list[bytes] = []
        content_type = self.headers.get("Content-Type") or ""
        if content_type.startswith("multipart/form-data"):
            more, files = _multipart(content_type, body)
            fields.update(more)
        elif body:
            fields.update({k: v[-1] for k, v in
                           parse_qs(body.decode("utf-8", "replace"),
                                    keep_blank_values=True).items()})
        cookie = _sid(self.headers.get("Cookie") or "")
        fault = fake._take_fault(endpoint)
        if fault is not None and fault.kind == "status":
            fake.calls.append(Call(time.time(), endpoint, fields, fault.status))
            self._answer(fault.status, "injected failure", {})
            return
        status, answer, headers = fake.handle(endpoint, fields, files, cookie)
        if fault is not None and fault.kind == "drop":
            fake.calls.append(Call(time.time(), endpoint, fields,
                                   f"{status} {answer!s} (performed, connection dropped)"))
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        shown = answer if isinstance(answer, str) else "json"
        fake.calls.append(Call(time.time(), endpoint, fields, f"{status} {shown}"))
        self._answer(status, answer, headers)

    def _answer(self, status: int, answer: Any, headers: dict[str, str]) -> None:
        if isinstance(answer, str):
            payload, kind = answer.encode(), "text/plain; charset=UTF-8"
        else:
            payload, kind = json.dumps(answer).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def _sid(cookie_header: str) -> str | None:
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "SID":
            return value
    return None


def _multipart(content_type: str, body: bytes) -> tuple[dict[str, str], list[bytes]]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, str] = {}
    files: list[bytes] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        raw = part.get_payload(decode=True)
        payload = raw if isinstance(raw, bytes) else b""
        if part.get_param("filename", header="content-disposition"):
            files.append(payload)
        elif isinstance(name, str):
            fields[name] = payload.decode("utf-8", "replace")
    return fields, files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A fake qBittorrent Web API on 127.0.0.1.")
    parser.add_argument("--dir", required=True, type=Path, help="downloads go to DIR/downloads")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--username", default="umt")
    parser.add_argument("--password", default="umt")
    args = parser.parse_args(argv)
    fake = FakeQbittorrent(args.dir, args.username, args.password, args.port).start()
    print(f"fake qBittorrent on {fake.url} (user {fake.username}); Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
