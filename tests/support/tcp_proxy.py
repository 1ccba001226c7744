"""A TCP proxy on 127.0.0.1 that can fail the way networks fail, for PostgreSQL's connections.

- ``lose_server_side(marker)``: the connections whose client sent ``marker`` (e.g. ``b"LISTEN"``)
  lose their server side, as behind a failover, a NAT or proxy timeout: the server sees the
  client go, the client sees nothing (its bytes are acknowledged and discarded, no answer comes).
- ``cut()`` / ``heal()``: nothing is forwarded in either direction, and no new connection
  reaches the server, until healed; what was sent meanwhile is delivered then, as TCP's
  retransmissions do after a partition.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket | None = None
    sent: bytearray = field(default_factory=bytearray)
    server_lost: bool = False


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listening = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listening.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    def url_for(self, url: str) -> str:
        """``url`` (postgresql://user@host:port/db) through this proxy."""
        host_port = f"{self._target[0]}:{self._target[1]}"
        assert host_port in url, f"{url!r} does not name {host_port}"
        return url.replace(host_port, f"127.0.0.1:{self.port}", 1)

    def lose_server_side(self, marker: bytes) -> int:
        """Drops the server side of every connection whose client sent ``marker``; returns how
        many connections that was."""
        with self._lock:
            links = [link for link in self._links if marker in link.sent and not link.server_lost]
        for link in links:
            link.server_lost = True
            if link.server is not None:
                with contextlib.suppress(OSError):
                    link.server.shutdown(socket.SHUT_RDWR)
                link.server.close()
        return len(links)

    def cut(self) -> None:
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listening.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            for sock in (link.client, link.server):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listening.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(_Link(client),), daemon=True).start()

    def _serve(self, link: _Link) -> None:
        self._flowing.wait()
        try:
            link.server = socket.create_connection(self._target, timeout=10)
        except OSError:
            link.client.close()
            return
        link.server.settimeout(None)
        with self._lock:
            self._links.append(link)
        threading.Thread(target=self._pump, args=(link, True), daemon=True).start()
        self._pump(link, False)

    def _pump(self, link: _Link, upstream: bool) -> None:
        """Client to server (``upstream``) or back, until either side closes."""
        while not self._closed.is_set():
            self._flowing.wait()
            source = link.client if upstream else link.server
            if source is None or (not upstream and link.server_lost):
                return
            try:
                readable, _, _ = select.select([source], [], [], 0.2)
                if not readable:
                    continue
                if not self._flowing.is_set():
                    continue  # cut while waiting: leave the bytes where they are
                data = source.recv(65536)
            except (OSError, ValueError):
                data = b""
            if not data:
                if link.server_lost:  # the client hears nothing of the lost server side
                    if upstream:
                        self._close(link)
                    return
                self._close(link)
                return
            if upstream:
                if len(link.sent) < 65536:
                    link.sent += data
                if link.server_lost:
                    continue  # acknowledged, never answered
            target = link.server if upstream else link.client
            try:
                assert target is not None
                target.sendall(data)
            except OSError:
                if not (upstream and link.server_lost):
                    self._close(link)
                    return

    def _close(self, link: _Link) -> None:
        for sock in (link.client, link.server):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
