"""Stand-ins for Jellyfin/Emby and Plex (their documented HTTP endpoints), and for an Apprise
``json://`` receiver: threaded ``http.server`` instances on loopback that check each request
(method, path, token header, body) and keep what they were sent.

Real media servers cannot be installed here; these answer as the API documentation says:
- Jellyfin/Emby: ``GET /System/Info`` and ``POST /Library/Media/Updated`` with
  ``{"Updates": [{"Path": ..., "UpdateType": "Created"}]}``, authenticated by ``X-Emby-Token``
  (or ``X-MediaBrowser-Token``, or ``Authorization: MediaBrowser Token="..."``).
- Plex: ``GET /library/sections`` (XML with each section's ``Location`` paths) and
  ``GET /library/sections/{key}/refresh?path=<folder>``, authenticated by ``X-Plex-Token``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import quoteattr


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Stand:
    kind: str
    token: str
    #: Plex: section key -> its folders.
    sections: dict[str, list[str]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    #: Answers that broke the documented contract (asserted empty by the tests).
    violations: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Stand:
        stand = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stand._handle(self, "GET")

            def do_POST(self) -> None:
                stand._handle(self, "POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def requests_to(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path == path]

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        request = Received(method, parts.path, parse_qs(parts.query),
                           {k.lower(): v for k, v in handler.headers.items()},
                           handler.rfile.read(length) if length else b"")
        with self._lock:
            self.received.append(request)
        status, content_type, body = self._answer(request)
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _answer(self, request: Received) -> tuple[int, str, bytes]:
        if self.kind == "plex":
            return self._plex(request)
        if self.kind == "sink":
            return self._sink(request)
        return self._jellyfin(request)

    # ------------------------------------------------------------------ Jellyfin / Emby

    def _jellyfin_token(self, request: Received) -> str | None:
        headers = request.headers
        if "x-emby-token" in headers or "x-mediabrowser-token" in headers:
            return headers.get("x-emby-token") or headers.get("x-mediabrowser-token")
        found = re.search(r'Token="([^"]*)"', headers.get("authorization", ""))
        return found[1] if found else None

    def _jellyfin(self, request: Received) -> tuple[int, str, bytes]:
        if self._jellyfin_token(request) != self.token:
            return 401, "text/plain", b"Unauthorized"
        if request.method == "GET" and request.path == "/System/Info":
            return 200, "application/json", json.dumps(
                {"ServerName": "stand-in", "Version": "10.9.11", "Id": "0" * 32}).encode()
        if request.method == "POST" and request.path == "/Library/Media/Updated":
            try:
                updates = request.json()["Updates"]
                valid = bool(updates) and all(
                    isinstance(u["Path"], str) and u["UpdateType"] in
                    ("Created", "Modified", "Deleted") for u in updates)
            except (ValueError, KeyError, TypeError):
                valid = False
            if not valid or request.headers.get("content-type") != "application/json":
                self.violations.append(f"bad body {request.body!r}")
                return 400, "text/plain", b"bad request"
            return 204, "text/plain", b""
        self.violations.append(f"{request.method} {request.path}")
        return 404, "text/plain", b"not found"

    # ------------------------------------------------------------------ Plex

    def _plex(self, request: Received) -> tuple[int, str, bytes]:
        if request.method == "GET" and request.path == "/identity":
            return 200, "application/xml", b'<MediaContainer machineIdentifier="stand-in"/>'
        token = request.headers.get("x-plex-token") or request.query.get("X-Plex-Token", [""])[0]
        if token != self.token:
            return 401, "text/html", b"<html><body>401 Unauthorized</body></html>"
        if request.method != "GET":
            self.violations.append(f"{request.method} {request.path}")
            return 405, "text/plain", b""
        if request.path == "/library/sections":
            directories = "".join(
                f'<Directory key="{key}" type="movie" title="Section {key}">'
                + "".join(f'<Location id="{i}" path={quoteattr(p)}/>'
                          for i, p in enumerate(paths))
                + "</Directory>"
                for key, paths in self.sections.items())
            return 200, "application/xml", (
                f'<MediaContainer size="{len(self.sections)}">{directories}</MediaContainer>'
            ).encode()
        refresh = re.fullmatch(r"/library/sections/([^/]+)/refresh", request.path)
        if refresh and refresh[1] in self.sections:
            folder = request.query.get("path", [""])[0]
            if not any(folder == p or folder.startswith(p.rstrip("/") + "/")
                       for p in self.sections[refresh[1]]):
                self.violations.append(f"{folder!r} is not in section {refresh[1]}")
            return 200, "text/plain", b""
        self.violations.append(f"{request.method} {request.path}")
        return 404, "text/plain", b""

    # ------------------------------------------------------------------ Apprise json://

    def _sink(self, request: Received) -> tuple[int, str, bytes]:
        if request.method != "POST":
            self.violations.append(f"{request.method} {request.path}")
            return 405, "text/plain", b""
        return 200, "application/json", b"{}"

    def messages(self) -> list[dict[str, Any]]:
        """What Apprise's ``json://`` sent: ``{"title", "message", "type", "version"}`` each."""
        with self._lock:
            return [r.json() for r in self.received if r.method == "POST"]


def jellyfin(token: str) -> Stand:
    return Stand("jellyfin", token).start()


def plex(token: str, sections: dict[str, list[str]]) -> Stand:
    return Stand("plex", token, sections=sections).start()


def message_sink() -> Stand:
    """An HTTP endpoint for Apprise's ``json://127.0.0.1:PORT/``."""
    return Stand("sink", "").start()


