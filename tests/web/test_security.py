"""The dashboard's defences: the token (401 on everything without it), CSRF refusals, the host
check on loopback, headers on every response, escaping of hostile text, no secret shown."""

from __future__ import annotations

import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.conftest import INFO_HASH, OTHER_HASH, magnet
from tests.web.conftest import BASE_URL, QBT_PASSWORD, Site, TestClient, make_site
from umt.cli.application import Application
from umt.cli.main import app as cli_app
from umt.engine.jsonvalues import canonical_json
from umt.media.sources import parse_source
from umt.records import PACKAGE
from umt.web.guard import CONTENT_SECURITY_POLICY
from umt.web.token import load_or_create_token

TOKEN = "t" * 43
GUARDED = ["/", "/catalog", "/health", "/events", "/static/app.js",
           "/runs/0b7c5a1e-4f7d-4a53-9a38-2c8f1d4e6b90"]


@pytest.fixture
def guarded(configured: Application) -> TestClient:
    return TestClient(make_site(configured, token=TOKEN), base_url="http://192.0.2.1:8080")


@pytest.mark.parametrize("path", GUARDED)
def test_every_request_without_the_token_is_401(guarded: TestClient, path: str) -> None:
    refused = guarded.get(path)
    assert refused.status_code == 401
    assert refused.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert guarded.get(path, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert guarded.get(path, params={"token": "wrong"}).status_code == 401
    assert guarded.post("/runs", data={"source": magnet()}).status_code == 401


def test_the_token_opens_every_page(guarded: TestClient) -> None:
    assert guarded.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    entered = guarded.get("/catalog", params={"token": TOKEN, "q": "x"},
                          follow_redirects=False)
    assert entered.status_code == 303 and entered.headers["location"] == "/catalog?q=x"
    cookie = entered.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert guarded.get("/health").status_code == 200  # the cookie from now on


def test_loopback_refuses_other_host_names(configured: Application) -> None:
    client = TestClient(make_site(configured), base_url=BASE_URL)
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"host": "localhost:8080"}).status_code == 200
    rebound = client.get("/", headers={"host": "attacker.example:8080"})
    assert rebound.status_code == 400


def test_actions_without_a_valid_csrf_token_are_refused(site: Site) -> None:
    site.csrf()  # the browser has its cookie
    for data in ({"source": magnet()}, {"source": magnet(), "csrf": "x" * 43}):
        refused = site.client.post("/runs", data=data, follow_redirects=False)
        assert refused.status_code == 403
    foreign = site.client.post("/runs", data={"source": magnet(), "csrf": site.csrf()},
                               headers={"origin": "http://attacker.example"})
    assert foreign.status_code == 403
    fresh = TestClient(site.client.app, base_url=BASE_URL)  # no cookie at all
    assert fresh.post("/runs", data={"source": magnet(), "csrf": site.csrf()}).status_code == 403
    run_id = site.app.start_acquire(parse_source(magnet())).run.id
    assert site.client.post(f"/runs/{run_id}/cancel").status_code == 403
    assert site.client.post("/signal", data={"name": "x"}).status_code == 403
    assert [run.status for run in site.engine.list_runs()] == ["pending"]


HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "javascript:alert(3)",
    "\x1b]0;owned\x07\x1b[2J film\u202eVKM.exe",
]


def test_hostile_titles_and_file_names_are_shown_as_text(site: Site) -> None:
    runs = []
    for number, text in enumerate(HOSTILE):
        source = parse_source(f"magnet:?xt=urn:btih:{number + 1:040x}")
        runs.append(site.app.start_acquire(source, title=text).run.id)
    database = site.engine.database
    with database.transaction() as session:
        session.execute(database.query_set(PACKAGE)["insert_catalog_item"], {
            "run_id": runs[0], "title": HOSTILE[1], "info_hash": INFO_HASH,
            "library_paths": canonical_json([f"/library/{text}.mkv" for text in HOSTILE]),
            "size": 1, "content_hash": None, "import_method": "copy",
            "imported_at": datetime.now(UTC)})
    pages = [site.client.get(path).text for path in (
        "/", "/catalog", f"/runs/{runs[0]}", f"/runs/{runs[1]}", f"/runs/{runs[3]}",
        "/?q=" + "%3Cscript%3E")]
    refused = site.post("/runs", {"source": "magnet:?xt=urn:btih:<script>alert(4)</script>",
                                  "name": HOSTILE[1]})
    assert refused.status_code == 400
    pages.append(refused.text)
    for page in pages:
        assert "<script>alert" not in page
        assert "<img" not in page and "onerror=alert(2)>" not in page
        assert not re.search(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", page, re.I)
        assert "\x1b" not in page and "\x07" not in page and "\u202e" not in page
        # every script the page loads is our own file
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/app.js" defer>']
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0]
    assert "\\x1b]0;owned\\x07\\x1b[2J film\\u202eVKM.exe" in pages[0]
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in pages[1]


def test_no_secret_reaches_a_page(site: Site) -> None:
    site.app.start_acquire(parse_source(magnet(OTHER_HASH)))
    secrets = [QBT_PASSWORD]
    password = re.search(r"://[^:/@]+:([^@]+)@", site.app.settings.database_url())
    if password:
        secrets.append(password.group(1))
    for path in ("/", "/catalog", "/health", "/static/app.js", "/runs/nope"):
        response = site.client.get(path)
        for secret in secrets:
            assert secret not in response.text
            assert all(secret not in value for value in response.headers.values())


def test_the_token_file_is_private_and_shown_by_show_token(tmp_path: Path) -> None:
    path = tmp_path / "config" / "umt" / "web-token"
    token, created = load_or_create_token(path)
    assert created and len(token) >= 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_token(path) == (token, False)
    os.chmod(path, 0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        load_or_create_token(path)


def test_show_token_prints_the_same_token_each_time(
    configured: Application, tmp_path: Path
) -> None:
    first = CliRunner().invoke(cli_app, ["web", "--show-token"])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli_app, ["web", "--show-token"])
    assert first.stdout == again.stdout and len(first.stdout.strip()) >= 43
    stored = tmp_path / "xdg-config" / "umt" / "web-token"
    assert stored.read_text().strip() == first.stdout.strip()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
