"""An HTTP server of the spikes' own on 127.0.0.1, served from a daemon thread."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Mixin for a dataclass with a ``port`` field (0: any free port) and ``_server``."""

    port: int
    _server: ThreadingHTTPServer | None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        server.daemon_threads = True
        self.port = int(server.server_address[1])
        self._server = server
        threading.Thread(target=server.serve_forever, name=name, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
