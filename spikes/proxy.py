"""A loopback HTTP proxy in front of a real qBittorrent that can drop a connection after
forwarding a request: qBittorrent performs it, umt never hears the answer.

Each request is forwarded on a fresh connection with its cookies and body unchanged (Host,
Origin and Referer name qBittorrent itself, as its Host and CSRF checks require);
``drop_after(path)`` makes the
next request to ``path`` be forwarded, its answer read and recorded, and the client's connection
closed without a byte of it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from spikes.loopback import LoopbackServer

HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer",
                        "upgrade", "proxy-authorization", "proxy-authenticate"})


@dataclass
class Forwarded:
    at: float
    method: str
    path: str
    status: int
    answer: str
    dropped: bool

    def line(self) -> str:
        what = "answer dropped, connection closed" if self.dropped else "relayed"
        return f"{self.method} {self.path} -> qBittorrent answered {self.status} " \
               f"{self.answer!r} ({what})"


@dataclass
class DroppingProxy(LoopbackServer):
    target: str
    port: int = 0
    log: list[Forwarded] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = urlsplit(self.target)
        self._host = parts.hostname or "127.0.0.1"
        self._target_port = parts.port or 80
        self._drops: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def drop_after(self, path: str, times: int = 1) -> None:
        with self._lock:
            self._drops[path] = self._drops.get(path, 0) + times

    def requests_to(self, path: str) -> list[Forwarded]:
        return [entry for entry in self.log if entry.path.split("?")[0] == path]

    def start(self) -> DroppingProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._serve(Handler, "dropping-proxy")
        return self

    def _take_drop(self, path: str) -> bool:
        with self._lock:
            left = self._drops.get(path, 0)
            if left <= 0:
                return False
            self._drops[path] = left - 1
            return True

    def forward(self, method: str, path: str, headers: list[tuple[str, str]],
                body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(self._host, self._target_port, timeout=30)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            target = f"{self._host}:{self._target_port}"
            for name, value in headers:
                lower = name.lower()
                if lower in HOP_BY_HOP or lower == "content-length":
                    continue
                if lower == "host":  # qBittorrent refuses a Host whose port is not its own
                    value = target
                elif lower in ("referer", "origin"):  # and a cross-site Origin/Referer
                    value = f"http://{target}"
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            payload = response.read()
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP
                    and k.lower() != "content-length"]
            return response.status, kept, payload
        finally:
            connection.close()


class _Handler(BaseHTTPRequestHandler):
    owner: DroppingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def _relay(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0]
        drop = self.owner._take_drop(path)
        status, headers, payload = self.owner.forward(
            self.command, self.path, list(self.headers.items()), body)
        self.owner.log.append(Forwarded(time.time(), self.command, self.path, status,
                                        payload[:40].decode("utf-8", "replace"), drop))
        if drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
