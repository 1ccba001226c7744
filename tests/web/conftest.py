"""Fixtures for the dashboard: ``umt web``'s application on an SQLite file and on a fresh
PostgreSQL database (parametrized like the engine's suite), driven by Starlette's TestClient."""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

with warnings.catch_warnings():  # Starlette now prefers httpx2, which is not packaged here yet
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from tests.cli.conftest import isolated_env
from tests.support.qbittorrent import free_port, wait_until
from umt.app import App
from umt.cli.application import Application
from umt.cli.commands.doctor import run_checks
from umt.engine import Engine
from umt.web.guard import LOOPBACK_HOSTS
from umt.web.server import create_app

BACKENDS = ["sqlite", "postgresql"]
BASE_URL = "http://127.0.0.1:8080"
QBT_PASSWORD = "web-test-qbt-password-1234"


@dataclass
class Site:
    client: TestClient
    application: Application

    @property
    def app(self) -> App:
        return self.application.app

    @property
    def engine(self) -> Engine:
        return self.app.engine()

    def csrf(self) -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', self.client.get("/").text)
        assert found is not None
        return found.group(1)

    def post(
        self, path: str, data: dict[str, str] | None = None,
        files: dict[str, tuple[str, bytes]] | None = None,
    ) -> httpx.Response:
        """A form posted from the page, with the page's CSRF token."""
        return self.client.post(path, data={"csrf": self.csrf(), **(data or {})},
                                files=files, follow_redirects=False)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def configured(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Application:
    """The environment of a CLI test (tests/cli/conftest.py) on the parametrized backend,
    migrated, with a qBittorrent password that no page may show."""
    for name, value in isolated_env(tmp_path).items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("UMT_QBITTORRENT_PASSWORD", QBT_PASSWORD)
    if backend == "postgresql":
        monkeypatch.setenv("UMT_DATABASE_URL", request.getfixturevalue("pg_url"))
    application = Application()
    application.app.engine(migrate_embedded=False, check_schema=False).migrate()
    return application


def make_site(application: Application, *, token: str | None = None) -> Starlette:
    """As ``umt web`` makes it: on loopback without a token, elsewhere with one."""
    return create_app(application.app, checks=lambda: run_checks(application), token=token,
                      allowed_hosts=LOOPBACK_HOSTS if token is None else None)


@contextmanager
def served(site: Starlette) -> Iterator[str]:
    """``site`` served by a real uvicorn on a free loopback port; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(site, host="127.0.0.1", port=port,
                                           log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=10, what="uvicorn to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def site(configured: Application) -> Iterator[Site]:
    with TestClient(make_site(configured), base_url=BASE_URL) as client:
        yield Site(client, configured)
    configured.close()
