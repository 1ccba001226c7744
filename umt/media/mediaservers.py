"""Media servers told to scan what umt imported: Jellyfin and Emby (one API), and Plex.

Plain HTTP through the standard library: Jellyfin/Emby's ``POST /Library/Media/Updated`` with
the imported files, Plex's partial scan ``GET /library/sections/{id}/refresh?path=<folder>`` of
the section whose folder holds them. The token goes in a header only, never in a URL or a
message, so no error text can carry it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal
from urllib.parse import quote, urlencode

from umt.textsafe import printable, redact_url

MediaServerKind = Literal["jellyfin", "emby", "plex"]
#: A server's answer is read up to this many bytes (the sections list is small).
_MAX_ANSWER = 4 * 1024 * 1024


class MediaServerError(Exception):
    """A media server did not do what it was asked; the message never holds the token."""


@dataclass(frozen=True)
class MediaServer:
    kind: MediaServerKind
    name: str
    url: str
    token: str = field(repr=False)
    #: Where this server sees the library root (None: the same path as umt).
    library_path: str | None = None
    library_dir: str = ""
    timeout: float = 10.0

    def scan(self, paths: Sequence[str]) -> list[str]:
        """Asks the server to scan ``paths`` (files umt imported); returns what it was sent."""
        seen = [self._as_server_sees(path) for path in paths]
        if self.kind == "plex":
            return self._plex_scan(seen)
        self._request("POST", "/Library/Media/Updated", body={
            "Updates": [{"Path": path, "UpdateType": "Created"} for path in seen],
        })
        return seen

    def check(self) -> str:
        """A request that needs the token: what the server says about itself."""
        if self.kind == "plex":
            sections = self._plex_sections()
            return f"token accepted, {len(sections)} library section(s)"
        info = json.loads(self._request("GET", "/System/Info") or b"{}")
        version = info.get("Version") if isinstance(info, dict) else None
        return f"token accepted, version {printable(version or '?')}"

    @property
    def shown_url(self) -> str:
        return redact_url(self.url)

    def _as_server_sees(self, path: str) -> str:
        if self.library_path is None or not self.library_dir:
            return path
        relative = PurePosixPath(path).relative_to(self.library_dir)
        return str(PurePosixPath(self.library_path) / relative)

    # ------------------------------------------------------------------ Plex

    def _plex_scan(self, paths: Sequence[str]) -> list[str]:
        sections = self._plex_sections()
        folders = sorted({str(PurePosixPath(path).parent) for path in paths})
        scanned: list[str] = []
        for folder in folders:
            section = _section_of(sections, folder)
            if section is None:
                raise MediaServerError(
                    f"{self.name}: no Plex library section holds {printable(folder)}"
                )
            query = urlencode({"path": folder})
            self._request("GET", f"/library/sections/{quote(section, safe='')}/refresh?{query}")
            scanned.append(folder)
        return scanned

    def _plex_sections(self) -> dict[str, list[str]]:
        """Section key -> its folders, from ``GET /library/sections`` (XML, as documented)."""
        answer = self._request("GET", "/library/sections")
        try:
            root = ElementTree.fromstring(answer)
        except ElementTree.ParseError as exc:
            raise MediaServerError(
                f"{self.name}: unreadable answer to /library/sections: {exc}"
            ) from None
        return {
            str(directory.get("key")): [str(location.get("path"))
                                        for location in directory.iter("Location")]
            for directory in root.iter("Directory") if directory.get("key")
        }

    # ------------------------------------------------------------------ HTTP

    def _request(self, method: str, path: str, body: object = None) -> bytes:
        headers = {"Accept": "application/json" if self.kind != "plex" else "application/xml"}
        if self.kind == "plex":
            headers["X-Plex-Token"] = self.token
        else:
            headers["X-Emby-Token"] = self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            self.url.rstrip("/") + path, data=data, method=method, headers=headers,
        )
        where = f"{self.name} ({self.shown_url})"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return bytes(response.read(_MAX_ANSWER))
        except urllib.error.HTTPError as exc:
            refusal = "the token was refused" if exc.code in (401, 403) else exc.reason
            raise MediaServerError(
                f"{where}: {method} {path.partition('?')[0]} answered {exc.code} "
                f"({printable(refusal)})"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise MediaServerError(f"{where} is not reachable: {printable(reason)}") from None


def _section_of(sections: dict[str, list[str]], folder: str) -> str | None:
    """The section whose folder holds ``folder`` (the deepest, if several do)."""
    best: tuple[int, str] | None = None
    target = PurePosixPath(folder)
    for key, locations in sections.items():
        for location in locations:
            root = PurePosixPath(location)
            if (target == root or target.is_relative_to(root)) and (
                best is None or len(root.parts) > best[0]
            ):
                best = (len(root.parts), key)
    return best[1] if best else None
