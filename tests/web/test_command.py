"""``umt web`` as people run it: a subprocess serving on loopback, or beyond it with the token."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.cli.conftest import UMT
from tests.support.qbittorrent import free_port, wait_until
from umt.cli.application import Application


@contextmanager
def umt_web(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    process = subprocess.Popen([UMT, "web", "--port", str(port), *args], env=dict(os.environ),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            assert process.poll() is None, process.communicate()
            return False
        return True

    try:
        wait_until(answers, timeout=20, what="umt web to answer")
        yield url, process
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_serves_on_loopback_without_a_token(configured: Application) -> None:
    with umt_web() as (url, process):
        page = httpx.get(f"{url}/")
        assert page.status_code == 200 and "Start an acquisition" in page.text
    assert process.returncode == 0
    assert f"serving {url}/" in process.stderr.read()  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_beyond_loopback_every_request_needs_the_token(configured: Application) -> None:
    with umt_web("--host", "0.0.0.0") as (url, _):
        assert httpx.get(f"{url}/").status_code == 401
        shown = subprocess.run([UMT, "web", "--show-token"], capture_output=True, text=True,
                               check=True, env=dict(os.environ))
        token = shown.stdout.strip()
        opened = httpx.get(f"{url}/", headers={"authorization": f"Bearer {token}"})
        assert opened.status_code == 200
